"""`simulate_ahead` of a graph whose rounds are of another length than the world's run: the jobs
arriving between the world's last round and its clock are still to come, not passed over (the
world's copy from `Simulation.world_now` says where its last round began)."""

from __future__ import annotations

import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.whatif import simulate_ahead

# Job 3 arrives at 1080 s, two minutes before the clock (1200 s) and after the world's last
# round (at 900 s, rounds of 5 min): the world has not seen it yet.
TRACE = "job_id,arrival_s,gpus,duration_s\n0,0,1,3000\n1,10,1,3000\n2,600,1,3000\n3,1080,1,3000\n"
GRAPH = """round = {round};
cluster = "2x4:V100";
arrivals :: TraceSource(path="jobs.csv");
arrivals -> AcceptAll -> pool :: JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;
"""


@pytest.fixture()
def graphs(tmp_path):
    (tmp_path / "jobs.csv").write_text(TRACE)
    world_graph, other = tmp_path / "five_minutes.sched", tmp_path / "one_minute.sched"
    world_graph.write_text(GRAPH.format(round="5min"))
    other.write_text(GRAPH.format(round="60s"))
    return world_graph, other


@pytest.fixture()
def sim(graphs):
    sim = Simulation(graphs[0])
    sim.run_until(1100)
    assert sim.now == 1200  # (the next boundary after 1100 s: the last round ran at 900 s)
    assert 3 not in sim.world_now().jobs.column("job_id").tolist()
    return sim


def test_a_graph_of_shorter_rounds_brings_the_jobs_the_world_has_not_seen(sim, graphs):
    other = compile_file(graphs[1])
    projection = simulate_ahead(sim.world_now(), other, sim.now, 86400.0)
    assert projection.metrics["jobs"] == 4  # (job 3 among them, arriving at 1080 s)
    assert projection.metrics["jobs_finished"] == 4


def test_the_default_is_the_boundary_the_world_gives(sim, graphs):
    other = compile_file(graphs[1])
    world = sim.world_now()
    assert world.last_round_s == 900
    given = simulate_ahead(sim.world_now(), other, sim.now, 86400.0, seen_s=900.0)
    assert simulate_ahead(world, other, sim.now, 86400.0) == given


def test_an_explicit_boundary_still_wins(sim, graphs):
    other = compile_file(graphs[1])
    # (Given as 1140 s, job 3 at 1080 s is taken for one the world has seen: passed over.)
    projection = simulate_ahead(sim.world_now(), other, sim.now, 86400.0, seen_s=1140.0)
    assert projection.metrics["jobs"] == 3


def test_the_same_graph_projects_as_before(sim, graphs):
    # (Rounds of the world's length: the default boundary is the one it always was.)
    own = compile_file(graphs[0])
    assert simulate_ahead(sim.world_now(), own, sim.now, 86400.0).metrics["jobs"] == 4


def test_a_loaded_run_says_the_same_boundary(sim, graphs, tmp_path):
    sim.save(tmp_path / "run.snap")
    loaded = Simulation.load(tmp_path / "run.snap")
    assert loaded.world_now().last_round_s == 900
    other = compile_file(graphs[1])
    assert simulate_ahead(loaded.world_now(), other, loaded.now, 86400.0).metrics["jobs"] == 4


@pytest.mark.parametrize("bad", [1260.0, float("nan"), "900"])
def test_a_world_whose_last_round_is_not_a_boundary_before_its_time_is_refused(sim, graphs, bad):
    world = sim.world_now()
    world.last_round_s = bad
    with pytest.raises(UsageError, match=r"^world: its last_round_s, the boundary of its last round, is .*at most .* 1200"):
        simulate_ahead(world, compile_file(graphs[1]), sim.now, 86400.0)
