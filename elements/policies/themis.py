"""Themis (NSDI'20): finish-time fairness, as Blox implements it (Table 7)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.elements.policies.base import Policy
from roundhouse.runtime.element import element
from roundhouse.runtime.types import Active, Ranking
from roundhouse.traces.jobs import FINISHED

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element
class Themis(Policy):
    """Themis' order as Blox builds it: rank jobs by finish-time fairness, worst first: rho =
    shared finish time / finish time with an equal 1/N share of the cluster.

    Each round the element records every active job's fair share: with N jobs in the pool, an
    equal share is 1/N of the cluster's GPUs, i.e. min(1, GPUs / (N x the job's GPUs)) of what the
    job asks for. The ideal finish time is the job's isolated run time divided by its average
    fair share since it arrived (Themis' T_id = T_indep x N_avg, capped by the job's demand).
    The shared finish time is the time since it arrived plus its remaining work at full speed
    (T_sh, if it got its GPUs from now on). A waiting job's rho grows every round it waits, so
    every job is eventually served. Ties go to the job admitted first. At the end it reports
    rho = JCT / ideal finish time for the jobs that finished (Themis' fairness metric).

    Ports:
        ranking: the jobs, largest rho first.
    Arguments:
        none
    Counters:
        max_rho: the largest rho among the pool's jobs this round (x1000, rounded).
    Cost: O(n log n) over the pool's jobs n (finish-time fairness of each, then a sort).
    See also: MinMaxRho, FinishTimeFairnessMetrics, Las, Optimus
    Paper: Themis (NSDI'20) §3; Blox (EuroSys'24) Table 7 (finish-time fair policy, fair share collected per round).
    """

    state = ("_ideal", "_seen", "_share", "_share_s", "_since")

    def start(self, ctx: RoundContext) -> None:
        # Per job row: the integral of its fair share over its time in the pool, up to
        # `_since`, and the share it had from then on; its ideal finish time, once known.
        self._share_s = np.zeros(0)
        self._since = np.zeros(0)
        self._share = np.zeros(0)
        self._ideal = np.zeros(0)
        self._seen = np.zeros(0, dtype=bool)
        self.counters["max_rho"] = 0

    def _grow(self, ctx: RoundContext) -> None:
        extra = len(ctx.jobs) - len(self._seen)
        if extra > 0:
            self._share_s = np.concatenate([self._share_s, np.zeros(extra)])
            self._since = np.concatenate([self._since, np.zeros(extra)])
            self._share = np.concatenate([self._share, np.zeros(extra)])
            self._ideal = np.concatenate([self._ideal, np.full(extra, np.nan)])
            self._seen = np.concatenate([self._seen, np.zeros(extra, dtype=bool)])

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        self._grow(ctx)
        n = len(active)
        if n == 0:
            return Ranking.empty()
        rows = active.rows
        arrival = active.arrival_s
        share = np.minimum(1.0, ctx.cluster.n_gpus / (n * active.gpus))
        new = ~self._seen[rows]
        self._seen[rows[new]] = True
        self._since[rows[new]] = arrival[new]
        self._share[rows[new]] = share[new]  # from its arrival to its first round: this round's share
        self._share_s[rows] += self._share[rows] * np.maximum(ctx.now - self._since[rows], 0.0)
        self._since[rows] = ctx.now
        self._share[rows] = share
        elapsed = np.maximum(ctx.now - arrival, 0.0)
        gained = self._share_s[rows]
        average = np.where(elapsed > 0, gained / np.where(elapsed > 0, elapsed, 1.0), share)
        isolated = active.work / active.reference_rate
        ideal = isolated / average
        self._ideal[rows] = ideal
        rho = (elapsed + active.remaining_s) / ideal
        self.counters["max_rho"] = int(round(1000 * float(rho.max())))
        order = np.lexsort((np.arange(n), -rho))
        return Ranking(rows[order], active.gpus[order], backfill=True)

    def finish(self, ctx: RoundContext) -> dict:
        status = ctx.jobs.column("status")[: len(self._ideal)]
        done = np.flatnonzero((status == FINISHED) & ~np.isnan(self._ideal))
        if not len(done):
            return {}
        jct = ctx.jobs.column("finish_s")[done] - ctx.jobs.column("arrival_s")[done]
        rho = jct / self._ideal[done]
        return {"fairness": {"jobs": len(done), "max_rho": float(rho.max()), "avg_rho": float(rho.mean())}}
