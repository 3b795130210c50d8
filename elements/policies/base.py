"""What ordering policies share: rank the pool's jobs by one per-job key, smallest first."""

from __future__ import annotations

import numpy as np

from roundhouse.runtime.element import Element, In, Out
from roundhouse.runtime.types import Active, Ranking


class KeyOrder(Element):
    """Ranks jobs by `key(active)`, smallest first, each wanting the GPUs it asked for. The sort
    is stable over the pool's admission order, so ties go to the job admitted first. Subclasses
    declare the `backfill: bool` argument with their own default."""

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)

    def key(self, active: Active) -> np.ndarray:
        raise NotImplementedError

    def tick(self, ctx, active: Active) -> Ranking:
        rows = active.rows[self.key(active).argsort(kind="stable")]
        return Ranking(rows, ctx.jobs.column("gpus")[rows], backfill=self.backfill)
