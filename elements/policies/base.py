"""What ordering policies share: the pool's jobs in, a Ranking out; and, for most of them, a rank
by one per-job key, smallest first."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from roundhouse.runtime.element import Element, In, Out, element_family
from roundhouse.runtime.types import Active, Ranking

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element_family
class Policy(Element):
    """An ordering policy: turns the pool's jobs into a Ranking.

    Ports:
        active: admitted, unfinished jobs.
        ranking: the jobs in the order to serve them.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)


@element_family
class KeyOrder(Policy):
    """Ranks jobs by `key(active)`, smallest first, each wanting the GPUs it asked for. The sort
    is stable over the pool's admission order, so ties go to the job admitted first.

    Arguments:
        backfill: let lower-ranked jobs run when a higher one does not fit.
    """

    backfill: bool = True
    # Whether jobs whose keys are equal and move at the same speed stay equal (the key is
    # accumulated by the same additions), so that their order cannot flip by rounding.
    exact_ties: ClassVar[bool] = False

    def key(self, active: Active) -> np.ndarray:
        raise NotImplementedError

    def key_speed(self, active: Active) -> np.ndarray | None:
        """How fast each job's key changes, per second, while nothing happens but running jobs'
        progress; None: not declared (the policy is then ticked every round)."""
        return None

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        keys = self.key(active)
        order = keys.argsort(kind="stable")
        self._ranked = (active, keys[order], order)  # (for quiet_until)
        rows = active.rows[order]
        return Ranking(rows, ctx.jobs.column("gpus")[rows], backfill=self.backfill)

    quiet_after_change = True

    def completions_wait(self, ctx: RoundContext) -> bool:
        return True  # (its ranking depends on the pool it is given, not on past ticks)

    def quiet_until(self, ctx: RoundContext) -> float | None:
        active, keys, order = self._ranked
        speed = self.key_speed(active)
        if speed is None:
            return None
        # A round before the first moment two neighbours in the order could swap: the round
        # that ticks then sees the swap coming, and ticks each round until it has happened.
        return ctx.now + first_swap_s(keys, speed[order], self.exact_ties) - ctx.round_s


def first_swap_s(keys: np.ndarray, speed: np.ndarray, exact_ties: bool) -> float:
    """Seconds until two neighbours of a sorted key array could change places, each key moving
    at its speed (0: they could now; inf: never). The order of a sorted array changes first
    between neighbours. A margin covers the rounding of keys accumulated round by round."""
    if len(keys) < 2:
        return np.inf
    if not np.isfinite(keys).all():
        return 0.0
    gap = keys[1:] - keys[:-1]
    closing = speed[:-1] - speed[1:]
    margin = 1e-9 * (np.abs(keys[1:]) + np.abs(keys[:-1]))
    # Neighbours at the same speed keep their gap, but rounding could close a tiny one.
    level = (closing == 0) & (gap <= margin) & (speed[:-1] != 0)
    if exact_ties:
        level &= gap > 0
    if level.any():
        return 0.0
    near = closing > 0
    if not near.any():
        return np.inf
    return max(0.0, float(((gap[near] - margin[near]) / closing[near]).min()))


def job_column(ctx: RoundContext, name: str, rows: np.ndarray, default: float) -> np.ndarray:
    """A job-table column at `rows` as floats, or `default` for each row if the table has no
    such column (a trace's optional extras: `max_gpus`, `epoch_size`, ...)."""
    if ctx.jobs.has_column(name):
        return np.asarray(ctx.jobs.column(name)[rows], dtype=np.float64)
    return np.full(len(rows), default, dtype=np.float64)
