"""What-if from a simulation as a user forks it: a projection given the simulation's own
compiled graph leaves that simulation as it was, a compiled graph serves several projections
alike, and a `--graph` that is missing or a folder is named by its option."""

from __future__ import annotations

import pytest

from roundhouse import Simulation
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.whatif import simulate_ahead
from tests.conftest import fails

# Five jobs known by their duration on two GPUs, 100 s rounds; two arrive after the fork point.
TRACE = """job_id,arrival_s,gpus,duration_s,model,batch_size
0,0,1,1000,ResNet-18,16
1,0,2,500,ResNet-18,16
2,50,1,300,ResNet-18,16
3,2000,1,200,ResNet-18,16
4,2500,2,400,ResNet-18,16
"""
GRAPH = """round = 100s;
cluster = "1x2:V100";
arrivals :: TraceSource(path="t.csv", timing=duration);
arrivals -> AcceptAll -> pool :: JobPool -> {policy} -> Consolidated -> Launch -> m :: JobMetrics;
"""
DAY = 86400.0


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "t.csv").write_text(TRACE)
    (tmp_path / "las.sched").write_text(GRAPH.format(policy="Las"))
    (tmp_path / "srtf.sched").write_text(GRAPH.format(policy="Srtf"))
    return tmp_path


def test_a_projection_of_a_simulations_own_graph_leaves_the_simulation_as_it_was(folder):
    """`simulate_ahead(sim.world_now(), sim.graph, ...)` starts copies of the graph's elements:
    the simulation's own (its trace's place, its policy's and sink's state) are not started again
    nor run to the horizon, so running it on gives what it gives untouched."""
    untouched = Simulation(folder / "las.sched").run_until(300)
    untouched.run()
    sim = Simulation(folder / "las.sched").run_until(300)
    own = simulate_ahead(sim.world_now(), sim.graph, sim.now, DAY)
    sim.run()
    assert sim.jobs().equals(untouched.jobs())
    assert sim.summary() == untouched.summary()
    # The projection is the one a graph compiled apart gives: the jobs still to come included.
    fresh = Simulation(folder / "las.sched").run_until(300)
    assert own == simulate_ahead(fresh.world_now(), compile_file(folder / "las.sched"), fresh.now, DAY)
    assert own.metrics["jobs"] == own.metrics["jobs_finished"] == 5


def test_one_compiled_graph_gives_the_same_projection_each_time(folder):
    sim = Simulation(folder / "las.sched").run_until(300)
    srtf = compile_file(folder / "srtf.sched")
    first = simulate_ahead(sim.world_now(), srtf, sim.now, DAY)
    again = simulate_ahead(sim.world_now(), srtf, sim.now, DAY)
    assert first == again and first.metrics["jobs"] == 5
    assert not any("counters" in el.__dict__ for el in srtf.elements.values())  # (its elements never ran)


@pytest.mark.parametrize("make, words", [(lambda f: f / "none.sched", "no such file"), (lambda f: f, "is a folder")])
def test_a_missing_or_folder_graph_is_named_by_its_option(folder, capsys, make, words):
    snap = Simulation(folder / "las.sched").run_until(300).save(folder / "s.snap")
    capsys.readouterr()
    err = fails(capsys, "whatif", snap, "--graph", make(folder))
    assert f"--graph {make(folder)}: {words}" in err and "Traceback" not in err
