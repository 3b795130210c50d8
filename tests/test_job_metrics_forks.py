"""JobMetrics' launches not yet counted by tier are a few arrays, whatever the rounds since the
last count (a fork copies them at every look-ahead), and counting them in batches of any size,
forked or saved mid-batch, gives the same starts by tier as one run straight through."""

from __future__ import annotations

import numpy as np
import pytest
from polars.testing import assert_frame_equal

from roundhouse import Simulation
from roundhouse.elements import sinks

# Many rounds of launches on a cluster of racks, placed on the first free GPUs (spread over
# machines and racks): starts of every tier but the network's.
SPREAD = """
round = 5min;
cluster = "dally:2";
src :: PoissonSource(rate=30/h, jobs=200, seed=5);
src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> m :: JobMetrics;
"""
MID_S = 60_000.0  # (all have arrived; many run still)


def arrays_in(value: object) -> int:
    """The numpy arrays a state value holds, through lists, tuples and dicts."""
    if isinstance(value, np.ndarray):
        return 1
    if isinstance(value, list | tuple):
        return sum(arrays_in(v) for v in value)
    if isinstance(value, dict):
        return sum(arrays_in(v) for v in value.values())
    return 0


def metrics(sim: Simulation) -> sinks.JobMetrics:
    element = sim._engine.graph.elements["m"]
    assert isinstance(element, sinks.JobMetrics)
    return element


def test_launches_not_yet_counted_are_a_few_arrays_whatever_the_rounds():
    sim = Simulation(SPREAD)
    sim.run_until(MID_S)
    m = metrics(sim)
    assert m._pending_launches > 1000  # (over a hundred rounds' launches, none counted yet)
    held = sum(arrays_in(getattr(m, name)) for name in type(m).state)
    assert held <= 8, f"JobMetrics' state holds {held} arrays"


def test_a_fork_and_a_loaded_snapshot_mid_batch_finish_as_the_run_does(tmp_path):
    straight = Simulation(SPREAD).run()
    sim = Simulation(SPREAD)
    sim.run_until(MID_S)
    sim.save(tmp_path / "run.snap")
    fork = sim.fork()
    loaded = Simulation.load(tmp_path / "run.snap")
    tiers = [f"{tier}_starts" for tier in sinks.START_TIERS]
    assert straight.reports["m"]["summary"]["machine_starts"] > 0 and straight.reports["m"]["summary"]["rack_starts"] > 0
    for each in (sim.run(), fork.run(), loaded.run()):
        assert_frame_equal(each.reports["m"]["jobs"], straight.reports["m"]["jobs"])
        assert each.reports["m"]["summary"] == straight.reports["m"]["summary"]
        assert [each.counters["m"][t] for t in tiers] == [straight.reports["m"]["summary"][t] for t in tiers]


@pytest.mark.parametrize("batch", [1, 7, 500])
def test_counting_in_batches_of_any_size_gives_the_same_starts(batch, monkeypatch):
    straight = Simulation(SPREAD).run()
    monkeypatch.setattr(sinks, "START_BATCH", batch)
    sim = Simulation(SPREAD)
    sim.run_until(MID_S)
    m = metrics(sim)
    assert m._pending_launches < batch  # (counted as batches filled)
    counted = sum(m.counters[f"{tier}_starts"] for tier in sinks.START_TIERS)
    assert counted + m._pending_launches == m.counters["launched"]
    fork = sim.fork()
    for each in (sim.run(), fork.run()):
        assert_frame_equal(each.reports["m"]["jobs"], straight.reports["m"]["jobs"])
        assert each.reports["m"]["summary"] == straight.reports["m"]["summary"]
