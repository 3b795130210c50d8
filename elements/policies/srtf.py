"""Shortest remaining time first (an oracle: it knows every job's remaining work)."""

from __future__ import annotations

import numpy as np

from runtime.element import Element, In, Out, element
from runtime.types import Active, Ranking


@element
class Srtf(Element):
    """Rank jobs by remaining run time, shortest first (an oracle policy).

    Remaining time is the job's remaining work at its reference throughput (isolated,
    consolidated, on the reference GPU type). Ties go to the job admitted first.

    Ports:
        active: admitted, unfinished jobs.
        ranking: the jobs, shortest remaining time first.
    Arguments:
        backfill: let lower-ranked jobs run when a higher one does not fit.
    Counters:
        none
    See also: Las, Fifo, Srsf
    Paper: Tiresias (NSDI'19) §6 (SRTF baseline); Blox (EuroSys'24) schedulers/srtf.py.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)

    backfill: bool = True

    def tick(self, ctx, active: Active) -> Ranking:
        order = np.argsort(active.remaining_s, kind="stable")
        return Ranking(active.rows[order], active.gpus[order], backfill=self.backfill)
