"""Event skipping for Optimus (elements/policies/optimus.py): until when its ticks would decide
as its last one did, while nothing happens."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.elements.policies.base import first_swap_s

if TYPE_CHECKING:
    from roundhouse.elements.policies.optimus import Optimus
    from roundhouse.runtime.context import RoundContext
    from roundhouse.runtime.types import Active

_MARGIN = 1e-9  # (relative: the rounding of work done accumulated round by round, and of the gains)
_MOST_ROUNDS = 4096  # (the longest stretch declared at once: the margin covers that much rounding)
# A greedy path this long is not checked (not quiet): on graphs/optimus.sched over 600 hours, 13 of
# 305 such paths held for two rounds, and checking one costs about a tick.
_MOST_STEPS = 32


class Ahead:
    """What a tick of Optimus decided, kept to tell until when its ticks would decide the same.

    Between events only the running jobs' remaining work moves, each at its rate: linearly in
    time. The order is by remaining time, so it holds until two neighbours could meet
    (`first_swap_s`, as Srtf's). The first allocations follow the order alone. The extra GPUs
    follow a greedy path of choices among gains that are affine in each job's remaining work
    (the time a step saves, and for a running job the hysteresis' share of its time left), so
    each comparison along the path (the step chosen against every other step open then, and
    whether a step saves more than its restart) is affine in time too: worked out from this
    round's gains and those of the round after, it holds until the first comes within a
    relative margin of 1e-9. The same path gives the same counts, the same ranking and the
    same counters."""

    def __init__(self, active: Active | None, remaining, order, grow, free: int, speed, usable, first):
        self.rows = None if active is None else active.rows
        self.remaining, self.order, self.grow, self.free = remaining, order, grow, free
        self.held = None if active is None else active.held[grow]
        self.speed, self.usable = speed[grow], usable[grow]
        self.first = first[grow]  # (a copy: the greedy moves its own)
        self.trace: list[tuple[int, int, int]] = []  # the greedy's steps: job index, count index, GPUs

    @classmethod
    def empty(cls) -> Ahead:
        """An empty pool's: an empty ranking until a job arrives."""
        none = np.zeros(0, dtype=np.int64)
        return cls(None, none, none, none, 0, np.zeros((0, 1)), np.zeros((0, 1), dtype=bool), none)

    def quiet_until(self, ctx: RoundContext, optimus: Optimus) -> float | None:
        if self.rows is None:
            return math.inf
        r = ctx.round_s
        if float(ctx.settings.resize_in_place) >= r or float(ctx.settings.resize_restart) >= r:
            return None  # (a resize's pause may outlast the round: progress unknown)
        jobs = ctx.jobs
        rate, reference = jobs.column("rate")[self.rows], jobs.column("reference_rate")[self.rows]
        order = self.order
        swap = first_swap_s((self.remaining / reference)[order], (-rate / reference)[order], False)
        if swap < 2 * r:
            return ctx.now  # (not a round to pass: the greedy need not be asked)
        rounds = min(self._greedy_rounds(ctx, optimus, rate[self.grow] * r), _MOST_ROUNDS)
        # (a round before: the round that ticks then sees the change coming)
        return ctx.now + min(swap, rounds * r) - r

    def _greedy_rounds(self, ctx: RoundContext, optimus: Optimus, per_round: np.ndarray) -> float:
        """Rounds ahead (a real number) for which the greedy of extra GPUs takes the same path;
        under 2 as soon as it is known to be (no round would pass)."""
        from roundhouse.elements.policies.optimus import _row_gains, gains

        if self.free <= 0 or not len(self.grow):
            return math.inf  # (no extra GPUs were handed out: the counts follow the order alone)
        if len(self.trace) >= _MOST_STEPS:
            return 0.0
        counts, listed = optimus._counts, optimus._counts_list
        speed, usable, level, free = self.speed, self.usable, self.first.copy(), self.free
        now = self.remaining[self.grow]
        then = now - per_round
        keep_now = optimus._keep(ctx, self.held, speed, usable, now)
        keep_then = optimus._keep(ctx, self.held, speed, usable, then)
        gain0, real0 = gains(counts, speed, usable, level, now, keep_now)
        gain1, real1 = gains(counts, speed, usable, level, then, keep_then)
        limit = math.inf
        steps = iter(self.trace)
        while free > 0:
            step = counts[None, :] - counts[level][:, None]
            restart = keep_now[1][:, None] / np.maximum(step, 1)
            limit = min(limit, _holds(gain0, real0, gain1, real1, step <= free, restart))
            taken = next(steps, None)
            if limit < 2 or taken is None:
                break
            j, to, added = taken
            level[j] = to
            free -= added
            gain0[j], real0[j] = _row_gains(listed, speed[j], usable[j], to, float(now[j]), keep_now, j)
            gain1[j], real1[j] = _row_gains(listed, speed[j], usable[j], to, float(then[j]), keep_then, j)
        return max(limit, 0.0)


def _holds(gain0, real0, gain1, real1, fits, restart) -> float:
    """Rounds ahead for which one choice of the greedy stays the same: the steps open now (a
    larger count that fits, `real` > 0) stay open and the others closed, and the best step's
    gain stays ahead of every other open step's (0: it may change now). Gains and `real` move
    linearly from this round's (0) to the next's (1)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        cand = fits & np.isfinite(gain0)
        if not cand.any():
            return math.inf
        if not (np.isfinite(gain1[cand]).all() and np.isfinite(real0[cand]).all() and np.isfinite(real1[cand]).all()):
            return 0.0
        r0, dr = real0[cand], real1[cand] - real0[cand]
        scale = _MARGIN * (np.abs(r0) + restart[cand])
        open_ = r0 > 0
        if (open_ & (r0 <= scale)).any() or (~open_ & (dr != 0) & (r0 > -scale)).any():
            return 0.0  # (a step about to open or close: rounding could decide it)
        limit = math.inf
        closing = open_ & (dr < 0)
        if closing.any():
            limit = min(limit, float(((r0 - scale) / -dr)[closing].min()))
        opening = ~open_ & (dr > 0)
        if opening.any():
            limit = min(limit, float(((-r0 - scale) / dr)[opening].min()))
        g0, g1 = gain0[cand][open_], gain1[cand][open_]
        if len(g0) < 2:
            return limit
        best = int(np.argmax(g0))  # (the greedy's choice: the first largest, row by row)
        gap = g0[best] - g0
        closing_in = (g1[best] - g1) - gap
        margin = _MARGIN * (np.abs(g0[best]) + np.abs(g0))
        others = np.arange(len(g0)) != best
        if (gap[others] <= margin[others]).any():
            return 0.0
        near = others & (closing_in < 0)
        if near.any():
            limit = min(limit, float(((gap - margin) / -closing_in)[near].min()))
        return limit
