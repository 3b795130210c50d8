"""Quiet rounds passed in blocks: the running sums of the clock's rounds and of the running
jobs' progress are those of adding one round at a time, bit for bit, however many rounds pass;
a run of millisecond rounds (thousands of quiet rounds between events) is the same with event
skipping on and off, and passes its quiet rounds in blocks."""

import numpy as np
import pytest

from roundhouse.runtime.repeated_sums import add_repeatedly, repeated_sum, running_sums
from tests.test_event_skipping import assert_same, assert_same_reports
from tests.test_skipping_differential import edge_trace, run_both

TIMES = [0, 1, 16, 17, 100, 5_000, 70_001]


@pytest.mark.parametrize("times", TIMES)
def test_the_clocks_running_sums_are_the_loops(times):
    rng = np.random.default_rng(times)
    for start, step in ((0.0, 0.001), (float(rng.uniform(0, 1e6)), float(rng.uniform(1e-4, 400))), (1e9, 0.1)):
        sums, now = [], start
        for _ in range(times):
            now += step
            sums.append(now)
        blocks = list(running_sums(start, step, times))
        got = np.concatenate(blocks) if blocks else np.zeros(0)
        assert np.array_equal(got, np.array(sums)), (start, step)
        assert repeated_sum(start, step, times) == now  # (the float, not a close one)


@pytest.mark.parametrize("times", TIMES)
@pytest.mark.parametrize("jobs", [1, 7, 3000])
def test_progress_added_many_times_over_is_the_loops(times, jobs):
    rng = np.random.default_rng(jobs)
    total = rng.uniform(0, 1e5, size=(4, jobs))
    step = rng.uniform(1e-3, 300, size=(4, jobs))
    expected = total.copy()
    for _ in range(times):
        expected += step
    add_repeatedly(total, step, times)
    assert np.array_equal(total, expected)


def test_millisecond_rounds_are_the_same_with_skipping_on_and_off_and_pass_in_blocks(tmp_path, monkeypatch):
    from roundhouse.runtime import world_events
    from roundhouse.runtime.backends import sim

    round_s = 0.01
    edge_trace(tmp_path / "trace.csv", 11, round_s * 100, 40)  # (jobs of up to 30,000 rounds, arriving over some 4,000)
    path = tmp_path / "graph.sched"
    path.write_text(
        f'round = {round_s}s;\ncluster = "2x4:V100";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    clock_blocks, progress_times = [], []
    monkeypatch.setattr(sim, "running_sums", lambda *a: clock_blocks.append(a[2]) or running_sums(*a))
    monkeypatch.setattr(world_events, "add_repeatedly", lambda t, s, n: progress_times.append(n) or add_repeatedly(t, s, n))
    off, on = run_both(path, None)
    assert_same(off, on)
    assert_same_reports(off.reports, on.reports)
    assert on.skipped_rounds > 1000
    assert max(clock_blocks) > 100 and max(progress_times) > 100  # (long stretches, passed in blocks)
