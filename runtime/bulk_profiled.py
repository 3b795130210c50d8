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
  end), says so, made at a few rounds around the estimate (`finish_rounds`); the clock is a
  whole number of seconds, so its sums are exact;
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

from collections.abc import Callable

import numpy as np

from roundhouse.runtime.binade_sums import Segments, add_repeatedly_exact, in_domain
from roundhouse.runtime.repeated_sums import add_repeatedly_each
from roundhouse.runtime.world import compute_seconds

_EXACT = 2.0**52  # (whole numbers below it add exactly, and their sums below 2**53 too)
HORIZON = 1 << 16  # rounds ahead of a launch that its finish is looked for in
_BLOCK = 1 << 20  # numbers in a block of running sums (8 MB an array at most)
_KEPT = 4096  # running sums from 0 kept, by step (a few kB each)
_FROM_ZERO: dict[tuple[float, int], Segments] = {}


def finish_rounds(
    done: np.ndarray, work: np.ndarray, rate: np.ndarray, now: float, round_s: float, deadline: Callable, horizon: int = HORIZON
) -> tuple[np.ndarray, np.ndarray]:
    """Jobs running from the boundary `now` with `done` work done, at `rate` units a second: the
    round each finishes in (by offset from now's, `horizon` where none up to `horizon` rounds
    ahead) and its finish time (inf: none found). `deadline`: `Simulator.finish_deadline`.

    The work done at each round's start is the running sum of the job's steps, worked out
    binade by binade (runtime/binade_sums.py), and the simulator's test is made with it exactly
    as `Simulator.advance` makes it, first at the round whose sum first reaches the work less
    a step (the estimate) and the round before, a window then widened (twice as wide each
    time) until it fails at its first round (or that is the first) and holds at its last.
    Assumed, as the simulator's `_SURE` margin assumes: the test is monotone in the round (the
    finish it computes nearly constant, the deadline a round later each round), so the first
    round it holds in is the one bisection finds between a round it fails in and one it holds
    in."""
    n = len(done)
    offset, at = np.full(n, horizon, dtype=np.int64), np.full(n, np.inf)
    step = rate * round_s  # (`_full_round`'s step: the same multiplication)
    plain = in_domain(done, step) & np.isfinite(work)
    plain &= horizon > 0
    now, rows = float(now), plain.nonzero()[0]
    found = [
        _first_round(_segments(x0, s, horizon), w, s, r, now, round_s, deadline, horizon - 1)
        for x0, s, w, r in zip(*(a[rows].tolist() for a in (done, step, work, rate)), strict=True)
    ]
    if found:
        offset[rows], at[rows] = zip(*found, strict=True)
    if not plain.all():
        rest = (~plain).nonzero()[0]
        offset[rest], at[rest] = _finish_rounds_summing(done[rest], work[rest], rate[rest], now, round_s, deadline, horizon)
    return offset, at


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
    far = found >= HORIZON
    never = np.iinfo(np.int64).max
    if far.any():
        horizon = min(horizon, j + HORIZON)
    return np.where(far, never, found + j), at, horizon


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
