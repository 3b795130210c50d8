"""Rounds carried out in bulk (runtime/bulk.py) for jobs whose progress over a round is a fixed
float: a profiled model's throughput times the round's seconds (or a job slowed down when
spread), the same every round while the job runs on the same GPUs.

Such progress does not add up to whole numbers: k rounds of it are k roundings, not one, and
`k * step` is not what round by round books. So the arithmetic here is the simulator's own,
round for round, worked out binade by binade (runtime/binade_sums.py: the additions inside one
binade add whole numbers of its unit, exactly; the one crossing into the next is done in float):

- a job's work done at the start of each round is the running sum of its steps from where it
  was, and the round it finishes in is the first whose test, as `Simulator.advance` makes it
  (the clock plus the remaining work over the rate, against `finish_deadline` of the round's
  end), says so, made at a few rounds around the estimate (`finish_rounds`): for all jobs at
  once in numpy, at four rounds around the work left over the step, with the sums from 0 of a
  table kept by step (`SumsFromZero`, runtime/repeated_sums.py) for jobs from their launch;
  one job at a time where those four do not decide; the clock is a whole number of seconds,
  so its sums are exact;
- its books over the whole rounds it ran are the same running sums of the same four steps
  (`Simulator._full_round`'s), each column apart, as the world adds them round by round
  (`add_progress`); the last part of the round it finishes in is `bulk.last_part`, as before.
  A book or step outside the binade sums' domain (negative, -0.0, not finite) is summed
  round by round in running sums (`np.add.accumulate`, runtime/repeated_sums.py).

A job's finish is looked for at most `HORIZON` rounds ahead of its launch (the cost of the
search is a few operations per binade its sums pass); a run carried out in bulk ends before
the first round whose completions are not known (`finish_rounds`' `horizon`), and the
simulator takes up from there round by round.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from roundhouse.runtime.binade_sums import Segments, add_repeatedly_exact, in_domain
from roundhouse.runtime.repeated_sums import SumsFromZero, add_repeatedly_each
from roundhouse.runtime.world import compute_seconds

_EXACT = 2.0**52  # (whole numbers below it add exactly, and their sums below 2**53 too)
HORIZON = 1 << 16  # rounds ahead of a launch that its finish is looked for in
_BLOCK = 1 << 20  # numbers in a block of running sums (8 MB an array at most)
_KEPT = 4096  # running sums from 0 kept, by step (a few kB each)
_FROM_ZERO: dict[tuple[float, int], Segments] = {}
_LONGEST = 1 << 13  # running sums from 0 kept by step, in a table (64 kB a step at most) ...
_SUMS_KEPT = 512  # (... of this many steps at most: 32 MB)
_SUMS = SumsFromZero(_LONGEST)
_MANY = 64  # jobs with work done tested at once from this many (one by one costs less below)
# The rounds tested at once, from the first (two before the work left over the step).
_AROUND = np.arange(4.0)


def finish_rounds(
    done: np.ndarray, work: np.ndarray, rate: np.ndarray, now: float, round_s: float, deadline: Callable, horizon: int = HORIZON
) -> tuple[np.ndarray, np.ndarray]:
    """Jobs running from the boundary `now` with `done` work done, at `rate` units a second: the
    round each finishes in (by offset from now's, `horizon` where none up to `horizon` rounds
    ahead) and its finish time (inf: none found). `deadline`: `Simulator.finish_deadline`.

    The work done at each round's start is the running sum of the job's steps, the loop's own,
    and the simulator's test is made with it exactly as `Simulator.advance` makes it. All jobs
    at once, it is made at the four rounds around the work left over the step (`_tested_around`):
    the finish it computes is about the clock plus the work left over the rate, and the deadline
    a round later each round. Jobs for which those rounds do not decide, and jobs with work done
    when they are few, are searched one at a time (`_first_round`), with their sums worked out
    binade by binade (runtime/binade_sums.py): first at the round whose sum first reaches the
    work less a step (the estimate) and the round before, a window then widened (twice as wide
    each time) until it fails at its first round (or that is the first) and holds at its last.
    Assumed, as the simulator's `_SURE` margin assumes: the test is monotone in the round (the
    finish it computes nearly constant, the deadline a round later each round), so the first
    round it holds in is the round after one it fails in, where bisection finds it."""
    n = len(done)
    step = rate * round_s  # (`_full_round`'s step: the same multiplication)
    now = float(now)
    if horizon >= len(_AROUND) and n and not done.view(np.int64).any() and step.min() > 0.0 and math.isfinite(work @ step):
        # (the common case: every job from its launch, its work done 0.0 bit for bit, every step
        # positive, and every work and step finite, as the sum of their products is)
        offset, at, sure = _from_launch(done, work, step, rate, now, round_s, deadline, horizon - 1)
        if sure is not None and not sure.all():
            rows = (~sure).nonzero()[0]
            offset[rows], at[rows] = _one_by_one(done[rows], work[rows], step[rows], rate[rows], now, round_s, deadline, horizon)
        return offset, at
    offset, at = np.full(n, horizon, dtype=np.int64), np.full(n, np.inf)
    plain = in_domain(done, step) & np.isfinite(work)
    plain &= horizon > 0
    if horizon >= len(_AROUND):
        jobs, moving = (done, work, step, rate), (step > 0.0) & (step < np.inf)
        plain &= ~_tested(offset, at, plain & moving & (done == 0.0), _from_launch, jobs, now, round_s, deadline, horizon)
        if np.count_nonzero(plain) >= _MANY:
            plain &= ~_tested(offset, at, plain & moving, _from_along, jobs, now, round_s, deadline, horizon)
    if plain.any():
        rows = plain.nonzero()[0]
        offset[rows], at[rows] = _one_by_one(done[rows], work[rows], step[rows], rate[rows], now, round_s, deadline, horizon)
    rest = ~in_domain(done, step) | ~np.isfinite(work)
    if horizon > 0 and rest.any():
        rest = rest.nonzero()[0]
        offset[rest], at[rest] = _finish_rounds_summing(done[rest], work[rest], rate[rest], now, round_s, deadline, horizon)
    return offset, at


def _tested(offset, at, which, how: Callable, jobs: tuple, now: float, round_s: float, deadline: Callable, horizon: int):
    """Jobs `which` (a mask) of `jobs` (work done, work, step, rate) tested at once by `how`:
    their rounds and finish times put in `offset` and `at` where sure; returns the mask of those."""
    rows = which.nonzero()[0]
    if not len(rows):
        return which
    found, f, sure = how(*(a[rows] for a in jobs), now, round_s, deadline, horizon - 1)
    if sure is not None:
        rows, found, f = rows[sure], found[sure], f[sure]
    offset[rows], at[rows] = found, f
    which = np.zeros_like(which)
    which[rows] = True
    return which


def _from_launch(done, w, s, r, now: float, round_s: float, deadline: Callable, last: int):
    """`_tested_around` for jobs from their launch (no work done; steps positive and finite),
    their sums from 0 from `_SUMS`, a table kept by step (the loop's sums, up to `_LONGEST`)."""
    global _SUMS
    if len(_SUMS) >= _SUMS_KEPT:
        _SUMS = SumsFromZero(_LONGEST)
    rows = _SUMS.rows_of(s.tolist())
    first = _first_tested(w / s, last)
    top = int(first.max()) + len(_AROUND)
    if top > _LONGEST:  # (some past the table: tested from where they are, one by one if few)
        return _from_along(done, w, s, r, now, round_s, deadline, last)
    _SUMS.reach(top)
    return _tested_around(first, lambda k: _SUMS.sums[rows[:, None], k], w, r, now, round_s, deadline, last)


def _from_along(done, w, s, r, now: float, round_s: float, deadline: Callable, last: int):
    """`_tested_around` for jobs in the binade sums' domain with steps positive and finite,
    their sums worked out binade by binade for all at once (`add_repeatedly_exact`)."""

    def sums(k: np.ndarray) -> np.ndarray:
        total = np.repeat(done, k.shape[1])
        add_repeatedly_exact(total, np.repeat(s, k.shape[1]), k.ravel())
        return total.reshape(k.shape)

    return _tested_around(_first_tested((w - done) / s, last), sums, w, r, now, round_s, deadline, last)


def _first_tested(left: np.ndarray, last: int) -> np.ndarray:
    """The first of the rounds tested for jobs with `left` steps of work left (a float each):
    two rounds before its floor, within 0 .. `last` for all four."""
    first = np.floor(left)
    first -= 2.0
    np.maximum(first, 0.0, out=first)  # (work and steps finite, steps positive: never NaN)
    np.minimum(first, float(last + 1 - len(_AROUND)), out=first)
    return first


def _tested_around(first: np.ndarray, sums: Callable, w, r, now: float, round_s: float, deadline: Callable, last: int):
    """The simulator's test at the rounds `first` + `_AROUND` (floats, within 0 .. `last`) for
    jobs with work `w` at rate `r`; `sums(k)`: their work done after rounds `k` (an array of
    them per job). Returns each job's round (by offset from now's) and finish time, and
    whether they are sure (None: all are): the first round tested in which the test holds,
    after one in which it fails or at round 0, or (last + 1, inf) where it fails at `last`,
    the horizon's last."""
    k = first[:, None] + _AROUND
    rounds = k.astype(np.int64)
    start = now + k * round_s  # (whole numbers: the clock's own sums)
    f = start + (w[:, None] - sums(rounds)) / r[:, None]
    holds = f <= deadline(start + round_s)
    which = holds.argmax(axis=1)
    found = rounds[:, 0] + which
    if holds[:, -1].all() and not (holds[:, 0] & (first > 0.0)).any():  # (mostly: all sure)
        return found, f.ravel()[np.arange(0, f.size, len(_AROUND)) + which], None
    each = np.arange(len(w))
    hit = holds[each, which]
    sure = np.where(hit, (which > 0) | (first == 0.0), rounds[:, -1] == last)
    return np.where(hit, found, last + 1), np.where(hit, f[each, which], np.inf), sure


def _one_by_one(done, work, step, rate, now: float, round_s: float, deadline: Callable, horizon: int):
    """`finish_rounds` for jobs in the binade sums' domain, one at a time (`_first_round`)."""
    found = [
        _first_round(_segments(x0, s, horizon), w, s, r, now, round_s, deadline, horizon - 1)
        for x0, s, w, r in zip(done.tolist(), step.tolist(), work.tolist(), rate.tolist(), strict=True)
    ]
    offset, at = zip(*found, strict=True)
    return np.array(offset, dtype=np.int64), np.array(at)


def _first_round(sums: Segments, w: float, s: float, r: float, now: float, round_s: float, deadline: Callable, last: int):
    """`finish_rounds` for one job, its sums from `sums`: the round (`last` + 1 where none up
    to `last`) and the finish time."""
    guess, before, upto = sums.around(w - s, last)
    start = now + guess * round_s  # (whole numbers: the clock's own sums)
    f = start + (w - upto) / r
    if f <= deadline(start + round_s):  # (the estimate's round and the round before: mostly the answer)
        if guess == 0:
            return 0, f
        earlier = now + (guess - 1) * round_s
        if not earlier + (w - before) / r <= deadline(earlier + round_s):
            return guess, f

    def finish(k: int) -> float:
        """The job's finish as the test at round k computes it, or inf where it fails."""
        start = now + k * round_s
        f = start + (w - sums.at(k)) / r
        return f if f <= deadline(start + round_s) else np.inf

    lo, hi, wide = max(guess - 1, 0), guess, 1
    while (f := finish(lo)) != np.inf and lo > 0:  # (the window widened until its first round fails ...)
        lo, wide = max(lo - 2 * wide, 0), 2 * wide
    if f != np.inf:
        return lo, f
    while (f := finish(hi)) == np.inf and hi < last:  # (... and its last holds)
        hi, wide = min(hi + 2 * wide, last), 2 * wide
    if f == np.inf:
        return last + 1, f  # (not within the horizon)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (g := finish(mid)) != np.inf:
            hi, f = mid, g
        else:
            lo = mid
    return hi, f


def _segments(x0: float, s: float, most: int) -> Segments:
    """The running sums of `s` from `x0`: those from 0 (a job's launch) kept by step."""
    if x0 != 0.0:
        return Segments(x0, s, most)
    key = (s, most)
    sums = _FROM_ZERO.get(key)
    if sums is None:
        if len(_FROM_ZERO) >= _KEPT:
            _FROM_ZERO.clear()
        sums = _FROM_ZERO[key] = Segments(0.0, s, most)
    return sums


def _finish_rounds_summing(
    done: np.ndarray, work: np.ndarray, rate: np.ndarray, now: float, round_s: float, deadline: Callable, horizon: int
) -> tuple[np.ndarray, np.ndarray]:
    """`finish_rounds` for jobs outside the binade sums' domain (a negative or non-finite
    number): running sums of every round's step, tested round by round."""
    n = len(done)
    offset, at = np.full(n, horizon, dtype=np.int64), np.full(n, np.inf)
    step = rate * round_s
    live = np.arange(n)
    last = done.astype(float, copy=True)  # work done at the start of round `first`
    first, size = 0, 8
    while len(live) and first < horizon:
        m = min(size, horizon - first, max(1, _BLOCK // len(live)))
        block = np.empty((m, len(live)))
        block[0] = last
        block[1:] = step[live]
        np.add.accumulate(block, axis=0, out=block)  # work done at the start of each round
        starts = now + np.arange(first, first + m) * round_s  # (whole numbers: the clock's own sums)
        finish = starts[:, None] + (work[live] - block) / rate[live]
        hit = finish <= deadline(starts + round_s)[:, None]
        found = hit.any(axis=0)
        where = hit.argmax(axis=0)[found]
        offset[live[found]] = first + where
        at[live[found]] = finish[where, found.nonzero()[0]]
        stay = ~found
        live = live[stay]
        last = block[-1, stay] + step[live]
        first += m
        size *= 2
    return offset, at


def finishes(backend, cols: dict[str, np.ndarray], rows: np.ndarray, rate: np.ndarray, b: float, j: int, horizon: int):
    """Jobs at fixed rates running from round j of a run (at the boundary b): the rounds they
    finish in, by offset from the run's first (`never` past the search's horizon), their finish
    times, and the run's horizon (`horizon`, or the first round past this search's)."""
    found, at = finish_rounds(cols["done"][rows], cols["work"][rows], rate, b, backend.round_s, backend.finish_deadline)
    if not len(found) or found.max() < HORIZON:  # (mostly: every finish found)
        return found + j, at, horizon
    far = found >= HORIZON
    return np.where(far, np.iinfo(np.int64).max, found + j), at, min(horizon, j + HORIZON)


def book_whole_rounds(cols: dict[str, np.ndarray], rows: np.ndarray, rounds: np.ndarray, round_s: float) -> None:
    """Add to the books of running jobs (distinct `rows`) the progress of `rounds` whole rounds
    each, as the simulator gives it and the world adds it, one round at a time."""
    if not len(rows):
        return
    rate, held = cols["rate"][rows], cols["held"][rows]
    steps = np.empty((2, len(rows)))
    np.multiply(rate, round_s, out=steps[0])
    compute_seconds(steps[0], cols["compute_rate"][rows], out=steps[1])
    for name, step in (("done", steps[0]), ("compute_s", steps[1])):
        cols[name][rows] = _added(cols[name][rows], step, rounds)
    # Run time and service grow by whole numbers (a whole round, whole GPUs): from whole
    # numbers, k rounds of them are k times one, exactly; else they are added as the rest.
    run_s, service = cols["run_s"][rows], cols["service"][rows]
    if _whole(run_s) and _whole(service):
        cols["run_s"][rows] = run_s + rounds * round_s
        cols["service"][rows] = service + held * (rounds * round_s)
    else:
        cols["run_s"][rows] = _added(run_s, np.full(len(rows), round_s), rounds)
        cols["service"][rows] = _added(service, held * round_s, rounds)


def _added(total: np.ndarray, step: np.ndarray, rounds: np.ndarray) -> np.ndarray:
    """`total` with `step` added `rounds` times over (each its own), as the loop adds them:
    binade by binade (runtime/binade_sums.py), running sums outside that domain."""
    total = total.copy()
    plain = in_domain(total, step)
    if plain.all():
        add_repeatedly_exact(total, step, rounds)
        return total
    rest = ~plain
    part = total[plain]
    add_repeatedly_exact(part, step[plain], rounds[plain])
    total[plain] = part
    others = total[rest][None, :]
    add_repeatedly_each(others, step[rest][None, :], rounds[rest])
    total[rest] = others[0]
    return total


def _whole(x: np.ndarray) -> bool:
    """Whether every number is a whole number small enough that sums of such are exact."""
    return bool((np.floor(x) == x).all() and (np.abs(x) < _EXACT).all())
