"""A placer that does not weigh what each job gains from one GPU type over another (the `Placer`
family: step 1 gives each job, in ranking order, its fastest type with room) on a cluster of
several GPU types whose throughputs differ for the jobs' models: warned of before the run,
naming the element, its line, the cluster's types and GavelPlacer. Not on a cluster of one type,
not for GavelPlacer, not when no job's model runs at different speeds on the types."""

from __future__ import annotations

import textwrap

from roundhouse.runtime.cluster_warnings import heterogeneity_warnings
from roundhouse.tools.results import compile_with_trace
from tests.conftest import REPO, write_trace

PHYSICAL = str(REPO / "clusters" / "gavel-physical.toml")

THEMIS = """
round = 5min;
cluster = "{cluster}";
arrivals :: TraceSource(path="trace.csv");
arrivals -> AcceptAll -> pool :: JobPool -> Themis -> place :: {placer} -> Launch -> JobMetrics;
"""

GAVEL = """
round = 6min;
cluster = "{cluster}";
arrivals :: TraceSource(path="trace.csv");
pool     :: JobPool;
solve    :: MaxMinFairness;
rounds   :: GavelRounds;
place    :: GavelPlacer;
arrivals -> AcceptAll -> pool -> solve -> rounds -> place -> Launch -> JobMetrics;
"""


def _jobs(model: str | None) -> list[dict]:
    return [
        {"job_id": i, "arrival_s": 60.0 * i, "gpus": 1, "duration_s": 600.0} | ({} if model is None else {"model": model})
        for i in range(4)
    ]


def _warnings(tmp_path, text: str, cluster: str = PHYSICAL, model: str | None = "ResNet-50", **fields) -> list[str]:
    write_trace(tmp_path / "trace.csv", _jobs(model))
    path = tmp_path / "graph.sched"
    path.write_text(textwrap.dedent(text.format(cluster=cluster, **fields)))
    return heterogeneity_warnings(compile_with_trace(str(path), [], None))


def test_first_free_on_gavel_s_physical_cluster_is_warned_of(tmp_path):
    said = _warnings(tmp_path, THEMIS, placer="FirstFree")
    assert len(said) == 1
    assert said[0].startswith(f"{tmp_path / 'graph.sched'}:5:")
    assert "warning: element 'place' (FirstFree)" in said[0]
    assert "GPU types V100, P100, K80" in said[0]
    assert "ResNet-50 runs" in said[0] and "GavelPlacer" in said[0]


def test_each_placer_of_the_family_is_named_and_the_run_s_cluster_counts(tmp_path):
    # Consolidated alike; the graph's own cluster is of one type, the run's (--cluster) of three.
    assert not _warnings(tmp_path, THEMIS, cluster="8x4:V100", placer="Consolidated")
    graph = compile_with_trace(str(tmp_path / "graph.sched"), [], None)
    said = heterogeneity_warnings(graph, PHYSICAL)
    assert len(said) == 1 and "element 'place' (Consolidated)" in said[0]


def test_no_warning_on_a_cluster_of_one_gpu_type(tmp_path):
    assert not _warnings(tmp_path, THEMIS, cluster="12x4:V100", placer="FirstFree")


def test_no_warning_for_gavel_s_placer(tmp_path):
    assert not _warnings(tmp_path, GAVEL)


def test_no_warning_when_no_job_s_model_runs_faster_on_one_type(tmp_path):
    # Jobs known only by their duration run alike on every type.
    assert not _warnings(tmp_path, THEMIS, placer="FirstFree", model=None)


def test_a_generator_s_drawn_models_count(tmp_path):
    path = tmp_path / "graph.sched"
    path.write_text(
        textwrap.dedent(f"""
        round = 5min;
        cluster = "{PHYSICAL}";
        arrivals :: PoissonSource(rate=4/h, jobs=40, gpus=philly, models=blox, seed=0);
        arrivals -> AcceptAll -> pool :: JobPool -> Themis -> FirstFree -> Launch -> JobMetrics;
        """)
    )
    said = heterogeneity_warnings(compile_with_trace(str(path), [], None))
    assert len(said) == 1 and "(FirstFree)" in said[0]


def test_check_run_and_a_sweep_varying_the_cluster_print_it(tmp_path, capsys):
    from roundhouse.tools.cli import main

    write_trace(tmp_path / "trace.csv", _jobs("ResNet-50"))
    graph = tmp_path / "graph.sched"
    graph.write_text(textwrap.dedent(THEMIS.format(cluster=PHYSICAL, placer="FirstFree")))
    main(["check", str(graph)])
    assert "warning: element 'place' (FirstFree)" in capsys.readouterr().err
    assert main(["run", str(graph), "--until", "1h", "--out", str(tmp_path / "run")]) == 0
    assert "warning: element 'place' (FirstFree)" in capsys.readouterr().err
    # A sweep over clusters warns of the run on several types only (its look is not shared with
    # the run on one type, which the warning does not concern).
    out = tmp_path / "sweep"
    assert main(["sweep", str(graph), "--vary", f"cluster={PHYSICAL},4x4:V100", "--until", "1h", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("(FirstFree) places jobs without weighing") == 1


def test_ones_which_takes_gpus_whatever_their_type_is_warned_of(tmp_path):
    ones = """
    round = 10s;
    cluster = "{cluster}";
    arrivals :: TraceSource(path="trace.csv");
    arrivals -> AcceptAll -> pool :: JobPool -> Ones(population=4, seed=0) -> Launch -> JobMetrics;
    """
    said = _warnings(tmp_path, ones)
    assert len(said) == 1 and "(Ones)" in said[0] and "whatever their type" in said[0]
    assert not _warnings(tmp_path, ones, cluster="12x4:V100")
