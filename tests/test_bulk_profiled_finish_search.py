"""The round each job at a fixed rate finishes in, found for all jobs at once (the simulator's
test at four rounds around the work left over the step, `bulk_profiled._tested_around`), is
the one ticking every round finds and the one the search one job at a time finds, to the bit:
on awkward throughputs, round lengths and works (on, just above and just below the sums the
rounds reach), from a launch and from work done, far into a run, past the table of sums kept
from 0 and past the horizon."""

import math

import numpy as np
import pytest

from roundhouse.runtime import bulk_profiled
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.repeated_sums import SumsFromZero
from tests.test_bulk_profiled import AWKWARD, simulator_finish_round

DEADLINE = Simulator.finish_deadline


def loop_sums(x: float, s: float, k: int) -> list[float]:
    """x, x + s, ... k additions, one at a time."""
    sums = [x]
    for _ in range(k):
        x += s
        sums.append(x)
    return sums


def awkward_jobs(rng: np.random.Generator, n: int, round_s: float, rounds: int, from_launch: bool):
    """Jobs whose work is a sum the rounds reach, one step past it, or a float or a hair
    either side of those: where one rounding decides the round."""
    rate = np.concatenate([np.array(AWKWARD).repeat(n // (2 * len(AWKWARD)) + 1), 10 ** rng.uniform(-5, 2, n)])[:n]
    done = np.zeros(n) if from_launch else np.where(rng.random(n) < 0.2, 0.0, rng.uniform(0, 50, n) * rate * round_s)
    work = np.empty(n)
    for i in range(n):
        s = float(rate[i] * round_s)
        k = int(rng.integers(0, rounds))
        target = loop_sums(float(done[i]), s, k)[-1] + s * float(rng.choice([0.0, 1.0, 0.5, 1 + 1e-12, 1 - 1e-12, 2.0]))
        nudge = int(rng.choice([-2, -1, 0, 0, 1, 2]))
        work[i] = max(float(done[i]), target + nudge * math.ulp(target))
    return done, work, rate


def chain(done, work, rate, now, round_s, horizon):
    """The search one job at a time (the binade sums' chain), for every job."""
    return bulk_profiled._one_by_one(done, work, rate * round_s, rate, float(now), round_s, DEADLINE, horizon)


@pytest.mark.parametrize("round_s", [1.0, 7.0, 97.0, 300.0, 360.0, 3600.0])
@pytest.mark.parametrize("from_launch", [True, False])
def test_the_rounds_found_at_once_are_those_of_every_round_ticked(round_s, from_launch):
    rng = np.random.default_rng(int(round_s) + from_launch)
    n, horizon = 150, 400
    done, work, rate = awkward_jobs(rng, n, round_s, horizon + 20, from_launch)
    for now in (0.0, 3000 * round_s, round(7.3e8 / round_s) * round_s):
        offset, at = bulk_profiled.finish_rounds(done, work, rate, now, round_s, DEADLINE, horizon)
        for i in range(n):
            expected = simulator_finish_round(done[i], work[i], rate[i], now, round_s, horizon)
            assert (int(offset[i]), float(at[i])) == expected, (i, now)
        assert (offset == horizon).any() and (offset < horizon).sum() > n // 2  # (both sides of the horizon)


@pytest.mark.parametrize("round_s", [1.0, 97.0, 300.0])
def test_the_rounds_found_at_once_are_the_one_by_one_searchs_over_the_whole_horizon(round_s):
    # Many jobs with work done (tested at once from `_MANY`), jobs from their launch, finishes
    # past the table kept from 0 (`_LONGEST` rounds), and a clock far enough for the deadline's
    # tolerance to be several rounds (where the four rounds tested do not decide).
    rng = np.random.default_rng(int(round_s) + 40)
    n = 3 * bulk_profiled._MANY
    done, work, rate = awkward_jobs(rng, n, round_s, 3 * bulk_profiled._LONGEST, from_launch=False)
    launch = rng.random(n) < 0.4
    done[launch] = 0.0
    work[launch] *= rng.uniform(0.2, 1.0, int(launch.sum()))
    for now in (0.0, 11 * round_s, 1e10):
        offset, at = bulk_profiled.finish_rounds(done, work, rate, now, round_s, DEADLINE)
        expected_offset, expected_at = chain(done, work, rate, now, round_s, bulk_profiled.HORIZON)
        assert offset.tolist() == expected_offset.tolist(), now
        assert at.tobytes() == expected_at.tobytes(), now
        assert (offset > bulk_profiled._LONGEST).any()
    # From their launch alone (the common case's path), past the table's sums too.
    fresh = done == 0.0
    for now in (0.0, 1e10):
        offset, at = bulk_profiled.finish_rounds(done[fresh], work[fresh], rate[fresh], now, round_s, DEADLINE)
        expected_offset, expected_at = chain(done[fresh], work[fresh], rate[fresh], now, round_s, bulk_profiled.HORIZON)
        assert offset.tolist() == expected_offset.tolist() and at.tobytes() == expected_at.tobytes(), now


def test_a_finish_a_round_off_is_found_where_it_is():
    # Works a hair either side of the sum that decides, from a launch: the test holds in the
    # round after the one it fails in, and each of them is found, not its neighbour.
    round_s, now = 300.0, 300.0 * 5000
    rate = np.array(AWKWARD)
    step = rate * round_s
    for k in (0, 1, 2, 3, 57, 1999):
        edge = np.array([loop_sums(0.0, s, k + 1)[-1] for s in step.tolist()])  # (the sum after k + 1 rounds)
        for work in (edge, np.nextafter(edge, np.inf), np.nextafter(edge, 0.0), edge + step * 1e-6):
            offset, at = bulk_profiled.finish_rounds(np.zeros(len(rate)), work, rate, now, round_s, DEADLINE, 3000)
            for i in range(len(rate)):
                expected = simulator_finish_round(0.0, work[i], rate[i], now, round_s, 3000)
                assert (int(offset[i]), float(at[i])) == expected, (k, i)


def test_running_sums_from_zero_kept_by_step_are_the_loop():
    rng = np.random.default_rng(5)
    table = SumsFromZero(3000)
    steps = [*AWKWARD, *(10 ** rng.uniform(-300, 300, 20)).tolist(), 5e-324, 1e308]
    rows = table.rows_of(steps[:10])
    table.reach(100)
    rows = np.concatenate([rows, table.rows_of(steps[10:])])
    assert rows.tolist() == list(range(len(steps)))
    assert table.rows_of([steps[3], steps[0]]).tolist() == [3, 0]  # (kept, not added again)
    table.reach(2500)
    for row, s in zip(rows.tolist(), steps, strict=True):
        assert table.sums[row, :2500].tobytes() == np.array(loop_sums(0.0, s, 2499)).tobytes(), s
    table.reach(5000)
    assert table.sums.shape[1] == 3000  # (grown at most to the longest)
    assert table.sums[rows[0]].tobytes() == np.array(loop_sums(0.0, steps[0], 2999)).tobytes()
