"""Themis (NSDI'20): finish-time fairness, as Blox implements it (Table 7)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.elements.policies.base import Policy
from roundhouse.runtime.element import element
from roundhouse.runtime.types import Active, Ranking
from roundhouse.traces.jobs import FINISHED

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


# Event skipping looks this many rounds ahead (first, last offsets of each batch), stopping at
# the first batch with a swap: most quiet stretches end within a few rounds, at an arrival, and
# a longer one is asked again when its rounds are passed (looking further cost more than it saved).
_BATCHES = ((1, 4), (5, 16))

# What the report's rho covers, in the report itself.
_COVERS = (
    "finished jobs this element ranked at least once, but for those that failed or did no work"
    " (N as it last saw it over rounds it was not ticked)"
)


@element
class Themis(Policy):
    """Themis' order as Blox builds it: rank jobs by finish-time fairness, worst first: rho =
    shared finish time / finish time with an equal 1/N share of the cluster.

    N is the contention: the number of jobs in the pool, counted at each of the element's ticks
    and held until the next (a job arriving between ticks counts from the next). A job's N_avg
    is the average of N since the job arrived (the integral of N over that time, over that
    time; at least 1). Its ideal finish
    time is Themis' T_id = T_indep x N_avg, capped by the job's demand: its work at the speed
    it would have with a 1/N_avg share of each GPU type, at most the GPUs it asks for, at its
    profiled throughput on each type (nothing on a type with fewer GPUs than it asks for), as
    FinishTimeFairnessMetrics and MinMaxRho's X_iso count it. On one GPU type that is its
    isolated run time x max(1, N_avg x its GPUs / the cluster's GPUs). The shared finish time is
    the time since it arrived plus its remaining work at its reference speed (T_sh, if it got
    its GPUs from now on). A waiting job's rho grows every round it waits, so every job is
    eventually served. Ties go to the job admitted first. At the end it reports, for the
    finished jobs it ranked at least once, rho = JCT / ideal finish time with N averaged up to
    each job's finish, the ideal time being that of the work the job did: all it declared, or
    less for a job ended early (a plan's `complete`, as LossTermination's). That is Themis'
    fairness metric; with the pool holding every job in the system, FinishTimeFairnessMetrics'
    rho. A job that failed for good (live runs) or ended before doing any work has no rho. The
    report says how many finished jobs it covers of all that finished: under a ChoosePolicy the
    element is ticked only while it is selected, so it covers the jobs it ranked, and takes N as
    it last saw it over the rounds it did not tick.

    Differs from the paper: no partial-allocation auction among apps and no fairness knob f
    (every job competes in every round, and a job is one app); no leases: every job is ranked
    again every round, so jobs whose rho stays close take turns round by round (two equal jobs
    that each fill the cluster swap every round, a preemption each time, which a suspend or
    restore cost makes expensive); lower-ranked jobs always backfill GPUs a higher one cannot
    use.

    Ports:
        ranking: the jobs, largest rho first.
    Arguments:
        none
    Counters:
        max_rho: the largest rho among the pool's jobs this round (x1000, rounded; 0 with an
            empty pool).
    Cost: O(n log n) over the pool's jobs n (finish-time fairness of each, then a sort), plus
        O(a (t + log r)) over the jobs a it sees for the first time, GPU types t and rounds r.
        Event skipping: between events each job's rho moves only with time (its N_avg, its time
        since arrival, a running job's progress at its rate), so the element works out each
        job's rho at the boundaries ahead (O(n k) for k rounds, 4 and then up to 16)
        and answers until the first at which two neighbours in its order could swap (a relative
        margin of 1e-9 plus the rounding of the clock's and the integral's sums); the integral
        of N gets a point for each round passed, at the next tick, as its ticks would have added
        them. max_rho is then that of the last round ticked (the run's last round is ticked).
        Not declared with a checkpoint or restore cost (a launched job's first round is partly
        paused).
    See also: MinMaxRho, FinishTimeFairnessMetrics, Las, Optimus
    Paper: Themis (NSDI'20) §3; Blox (EuroSys'24) Table 7 (finish-time fair policy, fair share collected per round).
    """

    state = ("_area", "_area0", "_asked", "_last", "_n", "_points", "_rates", "_seen", "_times")

    def start(self, ctx: RoundContext) -> None:
        # The integral over time of N (`_area`) at each tick (`_times`; the first `_points` of
        # each buffer), and N from the last tick on. Per job row: that integral at its arrival
        # and its isolated rate on each GPU type, from the round it is first ranked.
        self._times = np.full(64, ctx.now)
        self._area = np.zeros(64)
        self._points = 1
        self._n = 0
        self._area0 = np.zeros(0)
        self._rates = np.zeros((0, len(ctx.cluster.gpu_types)))
        self._seen = np.zeros(0, dtype=bool)
        # Event skipping: the jobs of the last tick in their order, with each one's integral of N
        # since it arrived (None with an empty pool); and the round asked at, with the rounds
        # declared quiet from it (None: not asked since).
        self._last: tuple[np.ndarray, np.ndarray] | None = None
        self._asked: tuple[int, int] | None = None
        self.counters["max_rho"] = 0

    def _grow(self, ctx: RoundContext) -> None:
        extra = len(ctx.jobs) - len(self._seen)
        if extra > 0:
            self._area0 = np.concatenate([self._area0, np.zeros(extra)])
            self._rates = np.concatenate([self._rates, np.zeros((extra, self._rates.shape[1]))])
            self._seen = np.concatenate([self._seen, np.zeros(extra, dtype=bool)])

    def stopped_acting(self, ctx: RoundContext) -> None:
        """Under a ChoosePolicy, this round another policy acts, and this one is not ticked until
        selected again: the rounds skipping passed before this one were its (its ticks would
        have added their points), those from this one on are not (its next tick adds one point
        for them all, as without skipping)."""
        self._settle(ctx)

    def _settle(self, ctx: RoundContext) -> None:
        """The points of the rounds event skipping passed since the last tick, at the clock's
        readings (the backend adds a round to its clock each round), as their ticks would have
        added them; at most the rounds this element declared quiet. Settled at its next tick,
        or, under a switch, in the round it stops acting (`stopped_acting`)."""
        asked, self._asked = self._asked, None
        if asked is None or not self._n:  # (with N = 0 the integral stays flat)
            return
        index, quiet = asked
        for _ in range(min(ctx.round_index - index - 1, quiet)):
            self._record(self._times[self._points - 1] + ctx.round_s, self._n)

    def _record(self, now: float, n: int) -> None:
        """Add the integral of N up to `now` (N as held since the last tick); N is `n` from now."""
        p = self._points
        last = self._times[p - 1]
        if now > last:
            if p == len(self._times):
                self._times = np.concatenate([self._times, np.zeros(p)])
                self._area = np.concatenate([self._area, np.zeros(p)])
            self._times[p] = now
            self._area[p] = self._area[p - 1] + (now - last) * self._n
            self._points = p + 1
        self._n = n

    def _area_at(self, t: np.ndarray) -> np.ndarray:
        """The integral of N up to each time t, N held from the last tick on past it."""
        p = self._points
        times, area = self._times[:p], self._area[:p]
        after = np.maximum(t - times[-1], 0.0) * self._n
        return np.interp(t, times, area) + after

    def _ideal(self, ctx: RoundContext, rows: np.ndarray, n_avg: np.ndarray, work: np.ndarray) -> np.ndarray:
        """Each job's time to do `work` alone on a 1/n_avg share of each GPU type (at most its GPUs)."""
        capacity = np.asarray(ctx.cluster.gpus_by_type, dtype=np.float64)
        asks = ctx.jobs.column("gpus")[rows].astype(np.float64)
        share = capacity[None, :] / n_avg[:, None] / asks[:, None]
        share = share / np.maximum(share.sum(axis=1, keepdims=True), 1.0)
        rate = (self._rates[rows] * share).sum(axis=1)
        return work / np.maximum(rate, 1e-300)

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        self._grow(ctx)
        self._settle(ctx)
        n = len(active)
        self._record(ctx.now, n)
        if n == 0:
            self.counters["max_rho"] = 0
            self._last = None
            return Ranking.empty()
        rows = active.rows
        arrival = active.arrival_s
        new = rows[~self._seen[rows]]
        if len(new):
            # (the isolated rates as FinishTimeFairnessMetrics and the Gavel solvers see them)
            from roundhouse.elements.policies.gavel.formulation import Columns, job_throughputs

            self._seen[new] = True
            self._area0[new] = self._area_at(ctx.jobs.column("arrival_s")[new])
            self._rates[new] = job_throughputs(ctx, new, Columns.of(ctx.cluster))
        elapsed = np.maximum(ctx.now - arrival, 0.0)
        gained = self._area[self._points - 1] - self._area0[rows]
        n_avg = np.where(elapsed > 0, np.maximum(gained / np.where(elapsed > 0, elapsed, 1.0), 1.0), float(n))
        rho = (elapsed + active.remaining_s) / self._ideal(ctx, rows, n_avg, ctx.jobs.column("work")[rows])
        self.counters["max_rho"] = int(round(1000 * float(rho.max())))
        order = np.lexsort((np.arange(n), -rho))
        self._last = (rows[order], gained[order])
        return Ranking(rows[order], active.gpus[order], backfill=True)

    quiet_after_change = True  # (its answer reads the world the round's plan left: who runs, at what rate)

    def quiet_until(self, ctx: RoundContext) -> float | None:
        s = ctx.settings
        if float(s.checkpoint) > 0 or float(s.checkpoint_per_gpu) > 0 or float(s.restore) > 0:
            return None  # (a job launched this round may be paused for part of the next: progress unknown)
        if self._last is None:
            return math.inf  # an empty pool: an empty ranking until a job arrives
        quiet = 0
        ahead = _Ahead(self, ctx)
        for first, last in _BATCHES:
            steady = ahead.in_order(np.arange(first, last + 1, dtype=np.float64))
            quiet += steady
            if steady <= last - first:
                break
        if not quiet:
            return ctx.now
        self._asked = (ctx.round_index, quiet)
        return ctx.now + (quiet + 0.5) * ctx.round_s  # (the boundary of the round after them is ticked)

    def finish(self, ctx: RoundContext) -> dict:
        status = ctx.jobs.column("status")
        finished = int(np.count_nonzero(status == FINISHED))
        if not finished:
            return {}
        # The work each did (less than declared for one ended early); a failed job has no
        # completion time, and one ended before it did any work no time alone to compare with.
        n = len(self._seen)
        work = ctx.jobs.column("done")[:n]
        done = np.flatnonzero((status[:n] == FINISHED) & self._seen & ~ctx.jobs.column("failed")[:n] & (work > 0))
        fairness: dict = {"jobs": len(done), "jobs_finished": finished, "covers": _COVERS}
        if not len(done):
            return {"fairness": {**fairness, "max_rho": None, "avg_rho": None}}
        end = ctx.jobs.column("finish_s")[done]
        jct = end - ctx.jobs.column("arrival_s")[done]
        n_avg = np.maximum((self._area_at(end) - self._area0[done]) / np.maximum(jct, 1e-9), 1.0)
        rho = jct / self._ideal(ctx, done, n_avg, work[done])
        return {"fairness": {**fairness, "max_rho": float(rho.max()), "avg_rho": float(rho.mean())}}


class _Ahead:
    """Themis' rho at the boundaries ahead, while nothing happens: time, the integral of N and
    running jobs' work done move on; N, the pool and who runs at what rate stay as they are."""

    def __init__(self, themis: Themis, ctx: RoundContext):
        assert themis._last is not None
        rows, self.gained = themis._last
        jobs = ctx.jobs
        self.now, self.round_s, self.n = ctx.now, ctx.round_s, themis._n
        self.area = themis._area[themis._points - 1]
        self.arrival = jobs.column("arrival_s")[rows]
        self.done, self.rate = jobs.column("done")[rows], jobs.column("rate")[rows]
        self.work, self.reference = jobs.column("work")[rows], jobs.column("reference_rate")[rows]
        # The ideal time in closed form (`Themis._ideal`, the same up to rounding): the job's work
        # at sum over types of rate x GPUs, over the larger of the cluster's GPUs and N_avg x its own.
        capacity = np.asarray(ctx.cluster.gpus_by_type, dtype=np.float64)
        self.capacity = float(capacity.sum())
        self.asks = jobs.column("gpus")[rows].astype(np.float64)
        self.full = (themis._rates[rows] * capacity).sum(axis=1) / self.work

    def in_order(self, ks: np.ndarray) -> int:
        """How many of the rounds `ks` ahead (consecutive offsets from this boundary), from the
        first, would rank the pool in this tick's order: each neighbour's rho ahead of the
        next's by more than a margin for rounding."""
        step = ks * self.round_s
        t = self.now + step
        elapsed = np.maximum(t[:, None] - self.arrival, 0.0)
        got = self.gained + self.n * step[:, None]
        n_avg = np.where(elapsed > 0, np.maximum(got / np.where(elapsed > 0, elapsed, 1.0), 1.0), float(self.n))
        left = (self.work - (self.done + self.rate * step[:, None])) / self.reference
        rho = (elapsed + left) * self.full / np.maximum(self.capacity, n_avg * self.asks)
        # The ticks' clock, integral and work done are sums of a round's worth, k times over: a
        # few units in the last place each, relative to the time since arrival and the integral.
        area = self.area + self.n * step[:, None]
        sums = 1e-15 * (ks[:, None] + 2) * (t[:, None] / np.maximum(elapsed, self.round_s) + area / np.maximum(got, self.round_s))
        slack = np.abs(rho) * (1e-9 + sums)
        apart = (rho[:, :-1] - rho[:, 1:] > slack[:, :-1] + slack[:, 1:]).all(axis=1) & np.isfinite(rho).all(axis=1)
        return len(ks) if apart.all() else int(apart.argmin())
