"""Gavel's kept allocation leaves out jobs ended early (LossTermination), and
Simulation.run_until takes infinity as "to the end"."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from test_event_skipping import assert_same, run_both

from roundhouse import Simulation
from roundhouse.elements import launch
from roundhouse.elements.policies.gavel.solvers import KeptShares, _kept, solved_shares
from roundhouse.errors import UsageError
from roundhouse.runtime.types import Shares

TRACE = Path(__file__).resolve().parents[1] / "traces" / "samples" / "philly-single-loss-1000.csv"
LOSS_GRAPH = f"""round = 6min;
cluster = "2x4:V100,2x4:P100,2x4:K80";
arrivals :: TraceSource(path="{TRACE}", rate=20/h, jobs=40, seed=0);
pool     :: JobPool;
stop     :: LossTermination(threshold=0.001);
solve    :: MaxMinFairness;
rounds   :: GavelRounds;
place    :: GavelPlacer;
run      :: Launch;
arrivals -> AcceptAll -> pool -> stop -> solve -> rounds -> place -> run -> JobMetrics;
stop [converged] -> [finish] run;
"""


def _placed_while_ended(monkeypatch) -> list[int]:
    """Rows that the placer launched or kept in the round Launch completed them on `finish`."""
    seen: list[int] = []
    tick = launch.Launch.tick

    def recording(self, ctx, plan, finish=None):
        if finish is not None and len(finish):
            placed = np.concatenate([plan.launch_rows, plan.keep])
            seen.extend(np.intersect1d(placed, finish.rows).tolist())
        return tick(self, ctx, plan, finish)

    monkeypatch.setattr(launch.Launch, "tick", recording)
    return seen


def test_jobs_ended_early_are_not_chosen_in_their_last_round(monkeypatch):
    placed = _placed_while_ended(monkeypatch)
    sim = Simulation(LOSS_GRAPH)
    result = sim.run()
    assert result.counters["stop"]["terminated"] > 5  # (jobs were ended early, within the interval)
    assert placed == []  # none of their GPUs held back for them in the round they ended


def test_jobs_ended_early_give_the_same_times_with_and_without_skipping(tmp_path):
    path = tmp_path / "g.sched"
    path.write_text(LOSS_GRAPH)
    off, on = run_both(path)
    assert_same(off, on)


def _shares(rows, pairs=None) -> Shares:
    rows = np.asarray(rows, dtype=np.int64)
    fractions = np.arange(len(rows) * 2, dtype=np.float64).reshape(len(rows), 2) / 10
    pair_fractions = None if pairs is None else np.full((len(pairs), 2), 0.05)
    return Shares(rows, ("V100", "K80"), fractions, None, pairs, pair_fractions)


def test_the_kept_allocation_is_limited_to_the_active_jobs():
    solved = _shares([0, 1, 2, 3], pairs=np.array([[0, 1], [2, 3]]))
    active = np.array([0, 1, 2, 3, 7])  # (an arrival: waits for the next solve, the allocation unchanged)
    assert _kept(solved, active, unchanged=False) is solved
    cut = _kept(solved, np.array([0, 1, 3]), unchanged=False)
    assert isinstance(cut, KeptShares) and solved_shares(cut) is solved
    assert cut.rows.tolist() == [0, 1, 3]
    np.testing.assert_array_equal(cut.fractions, solved.fractions[[0, 1, 3]])
    assert cut.pairs is not None and cut.pairs.tolist() == [[0, 1]]  # (a pair goes with either job)
    assert _kept(cut, np.array([0, 1, 3]), unchanged=False) is cut  # (nothing changed: the same object)
    again = _kept(cut, np.array([0, 3]), unchanged=False)
    assert again.rows.tolist() == [0, 3] and again.pairs is None and solved_shares(again) is solved
    assert _kept(again, np.array([0, 1, 2, 3]), unchanged=True) is solved  # (a job back: its share too)


GAP_GRAPH = """round = 5min;
cluster = "4x4:V100";
a :: TraceSource(path="{trace}");
a -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;
"""


@pytest.fixture
def gap_graph(tmp_path) -> str:
    """A trace with an empty system between its two jobs (the clock jumps to the second)."""
    trace = tmp_path / "gap.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,600\n1,100000,1,600\n")
    return GAP_GRAPH.format(trace=trace)


@pytest.mark.parametrize("t", [math.inf, np.float64("inf")])
def test_run_until_infinity_runs_to_the_end(gap_graph, t):
    straight = Simulation(gap_graph)
    straight.run()
    sim = Simulation(gap_graph)
    assert sim.run_until(t) is sim
    assert sim.done and sim.stop_reason == straight.stop_reason
    assert sim.jobs().equals(straight.jobs())
    assert sim.fork().done  # (left open: not ended, so it still forks)


def test_an_infinite_time_limit_is_no_limit(gap_graph):
    sim = Simulation(gap_graph, until=math.inf)
    sim.run()
    straight = Simulation(gap_graph)
    straight.run()
    assert sim.jobs().equals(straight.jobs()) and sim.stop_reason == straight.stop_reason


@pytest.mark.parametrize("t", [math.nan, -math.inf, -1.0, np.float64("nan"), np.bool_(True), "60"])
def test_run_until_refuses_what_is_not_a_time(gap_graph, t):
    sim = Simulation(gap_graph)
    with pytest.raises(UsageError, match="t: expected seconds, a number of 0 or more"):
        sim.run_until(t)
    assert sim.rounds == 0


def test_run_until_takes_numpy_integers(gap_graph):
    sim = Simulation(gap_graph)
    sim.run_until(np.int64(600))
    assert sim.now == 600.0
