"""The Simulation API and `roundhouse whatif` used as a new user would: a dict given as
`overrides`, and the other graph's jobs refused for what the world holds, whose error must not
blame the other graph's own cluster."""

from __future__ import annotations

import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from tests.conftest import fails

# Long jobs on a small cluster, so that some are unfinished at the fork point.
GRAPH = (
    'round = 5min;\ncluster = "{cluster}";\n'
    "src :: {source};\n"
    "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
)
TRACE = "job_id,arrival_s,gpus,duration_s,model\n" + "".join(f"{i},{i * 600},1,{20000 + 100 * i},ResNet-18\n" for i in range(12))


def test_overrides_given_as_a_dict_are_refused_naming_the_argument_and_the_form_it_takes(tmp_path):
    """Iterating a dict gives its keys alone ("src.jobs"), which the compiler would refuse as a
    `--set` without a value: the error says what `overrides` takes instead."""
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(cluster="1x2:V100", source="PoissonSource(rate=6/h, jobs=4, seed=1)"))
    with pytest.raises(UsageError, match=r"overrides: expected a list of --set texts.*got a dict.*\['src\.jobs=3'\]"):
        Simulation(graph, overrides={"src.jobs": 3})
    # The texts it stands for are taken.
    sim = Simulation(graph, overrides=["src.jobs=3"])
    sim.run()
    assert sim.jobs().height == 3


@pytest.fixture
def snapshot(tmp_path):
    """A snapshot of Fifo on 2 GPUs at 2 h, from a trace of jobs 0 to 11 (a job each 10 min)."""
    (tmp_path / "t.csv").write_text(TRACE)
    graph = tmp_path / "fifo.sched"
    graph.write_text(GRAPH.format(cluster="1x2:V100", source='TraceSource(path="t.csv")'))
    return Simulation(graph).run_until(7200).save(tmp_path / "f.snap")


def test_jobs_whose_ids_the_world_has_are_refused_without_blaming_the_other_graphs_cluster(tmp_path, capsys, snapshot):
    """A PoissonSource numbering its jobs from 0 brings, after the fork point, ids the trace's
    jobs already have: that is the error, and the other graph's own cluster (not used, but not
    why it failed) is not put forward as its cause."""
    other = tmp_path / "poisson.sched"
    other.write_text(GRAPH.format(cluster="4x8:V100", source="PoissonSource(rate=2/h, jobs=40, seed=1, gpus=single)"))
    err = fails(capsys, "whatif", snapshot, "--graph", other)
    assert "give the two sources distinct job ids" in err, err
    # (a warning before it says the cluster is not used, as it says for any such graph)
    error = err[err.index("error:") :]
    assert "hint" not in error and "is not used" not in error, err
    # Given distinct ids, it runs on the snapshot's world.
    other.write_text(
        GRAPH.format(cluster="4x8:V100", source="PoissonSource(rate=2/h, jobs=40, seed=1, gpus=single, start_id=100)")
    )
    from roundhouse.tools.cli import main

    assert main(["whatif", str(snapshot), "--graph", str(other), "--json"]) == 0


def test_a_trace_changed_since_the_snapshot_is_refused_without_blaming_the_cluster(tmp_path, capsys):
    """The run's own graph with a `--set`, run on a cluster given apart from its graph: its trace
    changed since the save is the error, and the graph's own cluster is not its cause."""
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    graph = tmp_path / "fifo.sched"
    graph.write_text(GRAPH.format(cluster="4x8:V100", source='TraceSource(path="t.csv")'))
    snap = Simulation(graph, cluster="1x2:V100").run_until(3600).save(tmp_path / "f.snap")
    trace.write_text(TRACE.replace("11,6600,1,", "11,6600,2,"))
    err = fails(capsys, "whatif", snap, "--set", "round=10min")
    assert "job 11 has gpus 2, and 1 in the run's state" in err and "put the file back as it was" in err, err
    assert "hint" not in err and "is not used" not in err, err
