"""GavelRounds(order="cluster"): the GPU types visited in the order the cluster lists them (Gavel's
scheduler's fixed v100, p100, k80 on its clusters), where "fastest" works the order out from the
allocated jobs; the shipped Gavel graphs use it; bad orders are refused by name."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.conftest import REPO
from tests.test_paper_fidelity_review import _PROFILE as PROFILE  # (Recoder's shape: fastest on a P100)


def _first_round(tmp_path, order: str, cluster: str, models: list[str]):
    """MaxMinFairness -> GavelRounds(order) on one-GPU servers of `cluster`, every job arrived at 0:
    the graph, the type (name) each job was placed on in the first round, and the cluster's types."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "profile.csv").write_text(PROFILE)
    batch = {"jp": 512, "jv": 64}
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model=m, batch_size=batch[m], iterations=1e9) for i, m in enumerate(models)]
    pl.DataFrame(jobs).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        f'round = 6min;\ncluster = "{cluster}";\nprofile = "profile.csv";\nsrc :: TraceSource(path="trace.csv");\n'
        f'src -> AcceptAll -> JobPool -> solve :: MaxMinFairness -> mech :: GavelRounds(order="{order}") '
        "-> GavelPlacer -> Launch -> JobMetrics;\n"
    )
    graph = compile_file(tmp_path / "g.sched")
    first = []

    def watch(ctx):
        if not first:  # (the round at time 0: every time received is still half a round)
            names = ctx.cluster.gpu_types
            first.extend([[names[t] for t in ctx.jobs.column("placed_type").tolist()], names])

    simulate(graph, until=1.0, on_round=watch)
    return graph, first[0], first[1]


def _algorithm_1(X: np.ndarray, type_order: list[int]) -> list[int]:
    """Algorithm 1's first round for single-GPU jobs on one GPU per type, written out: every time
    received is half a round, so the priority is X; each type in `type_order` takes the job with
    the largest X on it not yet taken (ties: the first job). Returns each job's type."""
    placed = [-1] * len(X)
    for t in type_order:
        free = [j for j in range(len(X)) if placed[j] < 0]
        if free:
            placed[max(free, key=lambda j: (X[j, t], -j))] = t
    return placed


@pytest.mark.parametrize("cluster", ["1x1:V100,1x1:P100,1x1:K80", "1x1:K80,1x1:V100,1x1:P100"])
def test_cluster_order_visits_the_types_as_listed_where_fastest_puts_p100_first(tmp_path, cluster):
    """Jobs faster on a P100: "fastest" visits the P100 first, "cluster" the cluster's first type,
    whatever it is; each run's picks are Algorithm 1's in its own order, and the two differ."""
    models = ["jp", "jp", "jp"]
    picks = {}
    for order in ("fastest", "cluster"):
        graph, placed, names = _first_round(tmp_path / order, order, cluster, models)
        mech = graph.elements["mech"]
        visited = [names[t] for t in mech._type_order.tolist()]
        listed = [part.split(":")[1] for part in cluster.split(",")]
        if order == "cluster":
            assert visited == listed
        else:
            assert visited[0] == "P100"  # (the jobs' mean relative speed is highest there)
        shares = graph.elements["solve"].allocation
        X = np.zeros((len(models), len(names)))  # (a column per type, in the cluster's codes)
        X[np.ix_(shares.rows, [names.index(t) for t in shares.gpu_types])] = shares.fractions
        expected = _algorithm_1(X, mech._type_order.tolist())
        assert placed == [names[t] for t in expected], order
        picks[order] = placed
    assert picks["fastest"] != picks["cluster"]


def test_cluster_order_follows_the_spec_not_the_type_names(tmp_path):
    """The order is the cluster's, read from it: the same jobs on the same GPUs listed the other
    way round are visited the other way round."""
    for cluster, expected in (
        ("1x1:V100,1x1:P100,1x1:K80", ["V100", "P100", "K80"]),
        ("1x1:K80,1x1:P100,1x1:V100", ["K80", "P100", "V100"]),
    ):
        graph, _, names = _first_round(tmp_path / expected[0], "cluster", cluster, ["jv", "jv", "jv"])
        assert [names[t] for t in graph.elements["mech"]._type_order.tolist()] == expected


CHOICES = "must be one of 'fastest', 'cluster', 'shuffled'"


@pytest.mark.parametrize(
    "bad, words", [('"slowest"', CHOICES), ("Cluster", CHOICES), ("3", "expects a word or a string, got 3 (a number)")]
)
def test_a_bad_order_is_refused_naming_the_argument_and_the_choices(tmp_path, bad, words):
    (tmp_path / "g.sched").write_text(
        'round = 6min;\ncluster = "1x1:V100,1x1:P100";\n'
        "src :: PoissonSource(rate=6/h, jobs=4, gpus=single, models=blox, seed=0);\n"
        f"src -> AcceptAll -> JobPool -> MaxMinFairness -> GavelRounds(order={bad}) -> GavelPlacer -> Launch -> JobMetrics;\n"
    )
    with pytest.raises(RoundhouseError) as caught:
        compile_file(tmp_path / "g.sched")
    text = str(caught.value)
    assert "g.sched:4:" in text
    assert f"argument 'order' of GavelRounds {words}" in text


HETEROGENEITY_AWARE = ["gavel-cost-slo", "gavel-fifo", "gavel-ftf", "gavel-hierarchical", "gavel-las", "gavel-makespan"]


def test_the_shipped_gavel_graphs_visit_types_as_gavels_scheduler_does():
    """Gavel's heterogeneity-aware policies' graphs name the cluster's order; its agnostic
    baseline shuffles; every Gavel graph names one (none falls back on the default)."""
    orders = {}
    for path in sorted((REPO / "graphs").glob("gavel-*.sched")):
        graph = compile_file(path)
        (mech,) = [e for e in graph.elements.values() if type(e).__name__ == "GavelRounds"]
        orders[path.stem] = mech.order
        assert re.search(r"GavelRounds\(order=", path.read_text()), path.stem
    assert orders == {**dict.fromkeys(HETEROGENEITY_AWARE, "cluster"), "gavel-las-agnostic": "shuffled"}


def test_the_reproductions_and_the_benchmark_run_gavels_order():
    """What gavel-fidelity and benchmarks/gavel_msr.py run for Gavel's heterogeneity-aware
    policies visits the types in the cluster's order, as the shipped graphs do."""
    import sys

    from roundhouse.tools.reproductions import gavel

    for policy, (_, order, _) in {**gavel.FIDELITY_POLICIES, "fifo_perf": gavel.FIFO_PERF}.items():
        assert order == ("cluster" if policy.endswith("_perf") else "shuffled"), policy
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import gavel_msr
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    for case, chain in gavel_msr.CASES.items():
        expected = 'order="shuffled"' if case == "FIFO" else 'order="cluster"'
        assert expected in chain, case
