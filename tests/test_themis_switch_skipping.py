"""Themis under a ChoosePolicy switch, with event skipping on and off: the integral of N it
keeps (its finish-time fairness' N_avg) is the one its ticks give, bit for bit, when it stops
acting after rounds it declared quiet and acts again later."""

from __future__ import annotations

import numpy as np

# Rounds of 37.3 s: clock readings and sums of them that are not whole numbers, whose last bits
# depend on how the integral is cut into pieces.
GRAPH = """round = 37.3s;
cluster = "2x4:V100";
src :: PoissonSource(rate=6/h, jobs=30, seed=0);
th :: Themis;
fifo :: Fifo;
order :: ChoosePolicy(candidates=[th, fifo]);
src -> AcceptAll -> JobPool -> order -> Consolidated -> Launch -> m :: JobMetrics;
"""
# When the switch changes hands: Themis from the start, then FIFO, Themis, FIFO, Themis, FIFO.
SWITCHES = (3000.0, 9000.0, 15000.0, 30000.0, 40000.0)


def _run(skip: bool):
    from roundhouse import Simulation

    sim = Simulation(GRAPH, skip_rounds=skip)
    for k, t in enumerate(SWITCHES):
        sim.run_until(t)
        sim.graph.elements["order"].select((k + 1) % 2)
    return sim, sim.run()


def test_themis_integral_of_n_is_its_ticks_under_a_switch_with_skipping():
    (off, off_result), (on, on_result) = _run(False), _run(True)
    assert on_result.skipped_rounds > on_result.rounds // 2 and off_result.skipped_rounds == 0
    assert on_result.counters["order"]["switches"] == off_result.counters["order"]["switches"] == len(SWITCHES)
    assert on.jobs().equals(off.jobs())  # every job's times, bit for bit
    assert on_result.reports["th"] == off_result.reports["th"]
    # The integral itself: the points its ticks recorded (none for rounds it did not act in),
    # and each job's integral at its arrival.
    mine, theirs = on.graph.elements["th"], off.graph.elements["th"]
    assert mine._points == theirs._points
    np.testing.assert_array_equal(mine._times[: mine._points], theirs._times[: theirs._points])
    np.testing.assert_array_equal(mine._area[: mine._points], theirs._area[: theirs._points])
    np.testing.assert_array_equal(mine._area0, theirs._area0)
