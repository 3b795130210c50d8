"""Event skipping on the shipped graphs that tests/test_event_skipping.py does not run as shipped:
with skipping off and on, every job's times, the counters and every report are the same, bit for
bit. Each stretch is long enough for rounds to be skipped (a graph that skipped none would
compare nothing) and for jobs to start, finish and, where the graph preempts, be preempted.

Graphs not here tick every round whatever the setting (Dally's leases, Gavel's shuffled
mechanism, the elastic searches, Tiresias-G's index), or are
compared elsewhere (the synthesizer, in tests/test_synth_fork_fixes.py)."""

import pytest

from tests.test_event_skipping import GRAPHS, assert_same, assert_same_reports, run_both

# (graph, hours simulated): a few seconds each, both runs.
STRETCHES = [
    ("blox-accept.sched", 72),  # thousands of preemptions behind the admission gate
    ("gandiva.sched", 48),
    ("gavel-fifo.sched", 100),  # into the tracked ids (100..300)
    ("gavel-ftf.sched", 90),  # into the tracked ids, so that rho is reported
    ("gavel-makespan.sched", 30),
    ("loss-termination.sched", 72),  # jobs ended by their loss
    ("synergy-opt.sched", 8),
]


@pytest.mark.parametrize(("name", "hours"), STRETCHES)
def test_shipped_graph_gives_the_same_results_with_and_without_skipping(name, hours):
    off, on = run_both(GRAPHS / name, until=hours * 3600.0)
    assert on.skipped_rounds > 0
    assert (on.world.jobs.column("status") == 2).any()  # (some job finished)
    assert_same(off, on)
    assert_same_reports(off.reports, on.reports)
