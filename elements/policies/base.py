"""What ordering policies share: the pool's jobs in, a Ranking out; and, for most of them, a rank
by one per-job key, smallest first."""

from __future__ import annotations

from typing import TYPE_CHECKING

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

    def key(self, active: Active) -> np.ndarray:
        raise NotImplementedError

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        rows = active.rows[self.key(active).argsort(kind="stable")]
        return Ranking(rows, ctx.jobs.column("gpus")[rows], backfill=self.backfill)
