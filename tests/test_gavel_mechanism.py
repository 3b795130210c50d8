"""Gavel's round-based mechanism (GavelRounds) and its placer (GavelPlacer)."""

from __future__ import annotations

import numpy as np
import polars as pl

from roundhouse.elements.policies.gavel.mechanism import _greedy
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.test_gavel_solvers import EXAMPLE_PROFILE


def _graph(tmp_path, jobs, cluster, solver="MaxMinFairness", rounds="GavelRounds", profile=EXAMPLE_PROFILE, extra_settings=""):
    (tmp_path / "profile.csv").write_text(profile)
    pl.DataFrame(jobs).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        # (every round ticked: the tests watch the world round by round)
        f'round = 6min;\ncluster = "{cluster}";\nprofile = "profile.csv";\nskip_rounds = false;\n{extra_settings}'
        f'src :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> JobPool -> solve :: {solver} -> mech :: {rounds} -> place :: GavelPlacer -> Launch -> m :: JobMetrics;\n"
    )
    return compile_file(tmp_path / "g.sched")


def _time_on_types(graph, rounds: int, cluster: str | None = None):
    """Rounds each job spent on each GPU type (from the world, round by round)."""
    seen = {}

    def watch(ctx):
        rows = ctx.running_rows
        for r, t in zip(rows.tolist(), ctx.jobs.column("placed_type")[rows].tolist()):
            seen[(r, t)] = seen.get((r, t), 0) + 1

    simulate(graph, cluster, until=(rounds - 1) * 360.0, on_round=watch)  # ticks at 0, 360, ...: `rounds` of them
    return seen


def test_time_fractions_converge_to_the_allocation(tmp_path):
    """§5: priorities X / f make the realized time fractions track X (claim 13)."""
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model=m, iterations=1e9) for i, m in enumerate(["ja", "jb", "jc"])]
    graph = _graph(tmp_path, jobs, "1x1:V100,1x1:K80")
    seen = _time_on_types(graph, 400)
    X = graph.elements["solve"].allocation.fractions  # [[.455, 0], [.455, .091], [.091, .909]]
    got = np.array([[seen.get((r, t), 0) / 400 for t in range(2)] for r in range(3)])
    assert np.abs(got - X).max() < 0.02
    assert graph.elements["mech"].counters["resets"] == 1  # no arrivals or completions: one allocation


def test_equal_shares_alternate_round_by_round(tmp_path):
    profile = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nja,1,V100,1,consolidated,1.0\n"
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="ja", iterations=1e9) for i in range(3)]
    graph = _graph(tmp_path, jobs, "2x1:V100", profile=profile)
    seen = _time_on_types(graph, 30)
    assert sorted(seen.values()) == [20, 20, 20]  # 2 GPUs x 30 rounds shared evenly by 3 jobs


def test_greedy_selection_skips_entries_that_do_not_fit():
    """Algorithm 1: an entry too large for what is left is skipped; later, smaller ones still run."""
    sf = np.array([1, 2, 1])
    rows = np.array([10, 11, 12])
    taken = np.zeros(3, dtype=bool)  # (without pairs, marks by entry)
    picked, left = _greedy(np.array([0, 1, 2]), sf, np.full(3, -1), rows, taken, 2, False)
    assert picked.tolist() == [0, 2] and left == 0 and taken[[0, 2]].all() and not taken[1]
    taken[:] = False
    picked, left = _greedy(np.array([1, 0, 2]), sf, np.full(3, -1), rows, taken, 3, False)
    assert picked.tolist() == [1, 0] and left == 0
    # With pairs, marks by job row; an entry whose partner is taken is skipped too.
    taken = np.zeros(20, dtype=bool)
    partner = np.array([12, -1, -1])
    picked, left = _greedy(np.array([0, 2, 1]), np.array([1, 1, 1]), partner, rows, taken, 3, True)
    assert picked.tolist() == [0, 1] and left == 1


def test_fastest_type_first(tmp_path):
    """Aware order: a job allocated on both types is first offered the V100."""
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=1e9)]
    graph = _graph(tmp_path, jobs, "1x1:V100,1x1:K80")
    seen = _time_on_types(graph, 5)
    assert seen == {(0, 0): 5}


def test_work_conservation_only_when_asked(tmp_path):
    # FIFO on 2 GPUs: job 0 takes one, job 1 (2 GPUs) is blocked, so job 2 gets no allocation.
    profile = EXAMPLE_PROFILE + "jb,1,V100,2,consolidated,5.0\n"
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=1e9),
        dict(job_id=1, arrival_s=0.0, gpus=2, model="jb", iterations=1e9),
        dict(job_id=2, arrival_s=0.0, gpus=1, model="jc", iterations=1e9),
    ]
    runs = {}
    for wc in ("false", "true"):
        graph = _graph(tmp_path, jobs, "2x1:V100", solver="FifoHet", rounds=f"GavelRounds(work_conserving={wc})", profile=profile)
        runs[wc] = _time_on_types(graph, 3)
    assert runs["false"] == {(0, 0): 3}  # Gavel's FIFO: the idle GPU stays idle
    assert runs["true"] == {(0, 0): 3, (2, 0): 3}


def test_shuffled_order_is_seeded(tmp_path):
    jobs = [dict(job_id=i, arrival_s=float(300 * i), gpus=1, model=["ja", "jb", "jc"][i % 3], iterations=2e4) for i in range(12)]
    results = []
    for seed in (1, 1, 2):
        graph = _graph(
            tmp_path,
            jobs,
            "2x1:V100,2x1:K80",
            solver="MaxMinFairness(aware=false)",
            rounds=f'GavelRounds(order="shuffled", seed={seed})',
        )
        result = simulate(graph)
        results.append(result.reports["m"]["jobs"]["jct_s"].to_list())
    assert results[0] == results[1]
    assert results[0] != results[2]


def test_lease_extension_and_one_server_placement(tmp_path):
    profile = EXAMPLE_PROFILE + "ja,1,V100,4,consolidated,14.0\nja,1,V100,4,spread,8.0\n"
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=4, model="ja", iterations=1e9)] + [
        dict(job_id=i, arrival_s=0.0, gpus=1, model="jb", iterations=1e9) for i in range(1, 5)
    ]
    graph = _graph(tmp_path, jobs, "2x4:V100", profile=profile)
    nodes = []

    def watch(ctx):
        nodes.append(tuple(np.unique(ctx.cluster.gpu_node[ctx.gpus_of(0)]).tolist()))

    result = simulate(graph, until=10 * 360.0 - 1, on_round=watch)
    assert all(len(n) == 1 for n in nodes[1:])  # the 4-GPU job always on one server
    table = result.world.jobs
    assert table.column("launches").tolist() == [1, 1, 1, 1, 1]  # every lease was extended
    assert graph.elements["place"].counters["kept"] > 0
    assert graph.elements["place"].counters["suspended"] == 0


def test_mechanism_and_solver_agree_on_resets(tmp_path):
    jobs = [dict(job_id=i, arrival_s=float(1000 * i), gpus=1, model="ja", iterations=5e3) for i in range(6)]
    graph = _graph(tmp_path, jobs, "1x1:V100,1x1:K80", solver="MaxMinFairness(interval=0)")
    simulate(graph)
    assert graph.elements["mech"].counters["resets"] == graph.elements["solve"].counters["solves"] > 1


def test_every_job_finishes_and_placements_are_valid(tmp_path):
    rng = np.random.default_rng(0)
    profile = EXAMPLE_PROFILE + "".join(
        f"{m},1,{t},2,consolidated,{r}\n" for m in ("ja", "jb") for t, r in (("V100", 5.0), ("K80", 1.5))
    )
    jobs = [
        dict(
            job_id=i,
            arrival_s=float(rng.uniform(0, 20000)),
            gpus=int(g),
            model=("ja" if g == 2 else ["ja", "jb", "jc"][i % 3]),
            iterations=float(rng.uniform(1e3, 3e4)),
        )
        for i, g in enumerate(rng.choice([1, 2], size=30))
    ]
    for solver in ("MaxMinFairness", "MinMaxRho", "MinMakespan", "FifoHet"):
        graph = _graph(tmp_path, jobs, "2x2:V100,2x1:K80", solver=solver, profile=profile)
        result = simulate(graph)
        table = result.reports["m"]["jobs"]
        assert table["status"].to_list() == ["finished"] * 30, solver
        assert (table["jct_s"] > 0).all()
