"""An emulated GPU's pace: a step waits until it is due at the emulated speed, in slices that
look at the lease, so that a speed too slow for a number of seconds, or a step longer than a
revoke's grace, ends when the lease is revoked instead of sleeping for ever or crashing."""

from __future__ import annotations

import time

from roundhouse.agents.client import Pace


def test_a_step_waits_until_it_is_due():
    pace = Pace(4.0)  # 4 steps a second: each due 0.25 s after the last
    pace.due = start = time.perf_counter()
    pace.hold()
    pace.hold()
    assert time.perf_counter() - start >= 0.5


def test_a_speed_too_slow_for_seconds_waits_until_the_lease_is_revoked():
    # Before: time.sleep(inf) raised OverflowError and the job was reported as a crash.
    pace = Pace(1e-320)
    pace.due = time.perf_counter()
    looks = []
    started = time.perf_counter()
    pace.hold(stop=lambda: looks.append(1) or len(looks) >= 3)
    assert len(looks) == 3 and time.perf_counter() - started < 5.0


def test_a_long_step_ends_its_wait_when_the_lease_is_revoked():
    pace = Pace(1 / 3600)  # an hour a step
    pace.due = time.perf_counter()
    started = time.perf_counter()
    pace.hold(stop=lambda: time.perf_counter() - started > 0.3)
    assert time.perf_counter() - started < 5.0
