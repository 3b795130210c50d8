"""Tiresias (NSDI'19): discretized two-dimensional attained service, and its baselines.

Attained service is two-dimensional: GPUs x time held, i.e. the GPU-seconds a job has received
(the job table's `service`). Tiresias splits it into K queues by thresholds, serves the queues
in order, and inside a queue first-in first-out by the time a job first started (not when it
was submitted: that would preempt running jobs for new ones), a promoted job by its promotion. Admission is greedy and
all-or-nothing: a job that does not fit is skipped and lower jobs fill in behind it (the
Ranking's backfill). The baselines of its evaluation live here too: SRSF (oracle shortest
remaining service) and YARN-CS (first-in first-out, non-preemptive, consolidated).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.elements.policies.base import KeyOrder, Policy
from roundhouse.elements.policies.srtf import REMAINING_DECIMALS
from roundhouse.runtime.element import element, element_family
from roundhouse.runtime.explain import Reason
from roundhouse.runtime.types import Active, Ranking
from roundhouse.runtime.values import Duration, FilePath, at_least, describe, file_read_by, positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


def _thresholds_ok(instance, attribute, value) -> None:
    # (the compiler puts "argument 'thresholds' of <class>" before the problem)
    if any(not t > 0 for t in value):
        raise ValueError(f"must be greater than 0 (GPU-time, e.g. 3200s or 1h), got {describe(value)}")
    if any(b <= a for a, b in zip(value, value[1:])):
        raise ValueError(f"must increase from one queue to the next, got {describe(value)}")


def _history_services(path) -> np.ndarray:
    """The services (duration x GPUs) of a Gittins history's jobs; a TraceError if it has none,
    or a job without a duration."""
    from roundhouse.errors import TraceError
    from roundhouse.traces.formats import read_trace

    trace = read_trace(path)
    if not trace.height:
        # (no samples would make every index 0: the queues would run first-come, first-served)
        raise TraceError(str(path), "a Gittins history needs at least one job; this one has none")
    if trace["duration_s"].null_count():
        raise TraceError(str(path), "every job of a Gittins history needs a duration_s", column="duration_s")
    return trace["duration_s"].to_numpy() * trace["gpus"].to_numpy()


@element_family
class _Queues(Policy):
    """K queues by attained service since a job last entered the first queue, with
    Tiresias' starvation promotion. Subclasses order jobs inside a queue.

    Arguments:
        queues: the number of queues K.
        thresholds: the K-1 queue limits in GPU-time (GPU-seconds), increasing.
        promote_knob: promote a waiting job once waiting >= knob x running time since entering the top queue (default: never; needs two queues or more).
    Counters:
        promoted: starving jobs put back in the first queue so far.
        demoted: moves to a lower queue seen so far.
    """

    queues: int = attrs.field(default=2, validator=at_least(1))
    thresholds: list[Duration] = attrs.field(factory=lambda: [Duration(3600.0)], validator=_thresholds_ok)
    promote_knob: float | None = attrs.field(default=None, validator=positive)

    def __attrs_post_init__(self) -> None:
        if len(self.thresholds) != self.queues - 1:
            raise ValueError(
                f"{self.queues} queue(s) need {self.queues - 1} threshold(s), got {len(self.thresholds)} "
                f"(the last queue has no upper limit: {len(self.thresholds)} threshold(s) go with "
                f"queues={len(self.thresholds) + 1}; the default thresholds, [1h], are two queues' limit)"
            )
        if self.promote_knob is not None and self.queues == 1:
            # (a job is promoted from a lower queue to the first: with one queue, never)
            raise ValueError("promote_knob needs two queues or more: with queues=1 no job is ever promoted")

    def start(self, ctx: RoundContext) -> None:
        self._limits = np.asarray(self.thresholds, dtype=np.float64)
        # Per job row: when it was last promoted (NaN if never: it entered the first queue when it
        # first started, Tiresias §3.2's lifecycle), and its service and running time then (a
        # promotion resets both clocks).
        self._entered = np.zeros(0)
        self._base_service = np.zeros(0)
        self._base_run = np.zeros(0)
        self._known = np.zeros(0, dtype=bool)
        self._queue = np.zeros(0, dtype=np.int64)
        self.counters.update(promoted=0, demoted=0)

    def _grow(self, ctx: RoundContext, rows: np.ndarray) -> None:
        n = len(ctx.jobs)
        if len(self._known) < n:
            extra = n - len(self._known)
            self._entered = np.concatenate([self._entered, np.full(extra, np.nan)])
            self._base_service = np.concatenate([self._base_service, np.zeros(extra)])
            self._base_run = np.concatenate([self._base_run, np.zeros(extra)])
            self._known = np.concatenate([self._known, np.zeros(extra, dtype=bool)])
            self._queue = np.concatenate([self._queue, np.zeros(extra, dtype=np.int64)])
        self._known[rows] = True

    def entered(self, active: Active) -> np.ndarray:
        """When each active job last entered the first queue: its latest promotion, else its first
        start (NaN if it never ran). Waiting before a job's first start is not starvation."""
        promoted = self._entered[active.rows]
        return np.where(np.isnan(promoted), active.first_start_s, promoted)

    def queues_of(self, ctx: RoundContext, active: Active) -> tuple[np.ndarray, np.ndarray]:
        """(queue index, attained service since entering the first queue) per active job,
        after promoting starved jobs."""
        rows = active.rows
        self._grow(ctx, rows)
        service = active.service - self._base_service[rows]
        queue = np.searchsorted(self._limits, service, side="right")
        if self.promote_knob is not None and self.queues > 1:
            ran = active.run_s - self._base_run[rows]
            waited = (ctx.now - self.entered(active)) - ran
            starved = (queue > 0) & ~active.running & (waited >= float(self.promote_knob) * ran)
            if starved.any():
                who = rows[starved]
                self._entered[who] = ctx.now
                self._base_service[who] = active.service[starved]
                self._base_run[who] = active.run_s[starved]
                service = np.where(starved, 0.0, service)
                queue = np.where(starved, 0, queue)
                self.counters["promoted"] += int(starved.sum())
                ctx.explain(Reason.PROMOTED, who, 0, waited[starved])
        demoted = queue > self._queue[rows]
        if demoted.any():
            self.counters["demoted"] += int(np.count_nonzero(demoted))
            ctx.explain(Reason.DEMOTED, rows[demoted], queue[demoted], service[demoted])
        self._queue[rows] = queue
        return queue, service

    def next_move(self, ctx: RoundContext, active: Active, queue: np.ndarray, service: np.ndarray) -> float:
        """For event skipping: a time before which no job changes queue while nothing happens but
        running jobs' progress (a running job's service grows by at most its GPUs a second, a
        waiting one's stays), less a round, so that the round that would see the move is ticked,
        and less a relative margin of 1e-9 for the rounding of service added round by round."""
        now, margin = ctx.now, 1e-9
        held = active.held.astype(np.float64)
        times = [math.inf]
        rising = (held > 0) & (queue < self.queues - 1)
        if rising.any():
            gap = self._limits[queue[rising]] - service[rising]
            times.append(now + float((gap / held[rising]).min()) * (1.0 - margin))
        if self.promote_knob is not None and self.queues > 1:
            starving = (held == 0) & (queue > 0)
            if starving.any():
                rows = active.rows[starving]
                ran = active.run_s[starving] - self._base_run[rows]
                due = float((self.entered(active)[starving] + ran * (1.0 + float(self.promote_knob))).min())
                times.append(due - abs(due) * margin)
        return min(times) - ctx.round_s

    def fifo_key(self, active: Active) -> tuple[np.ndarray, np.ndarray]:
        """First-in first-out by first start, or by the latest promotion for a promoted job (it
        joins the first queue behind the jobs already there); jobs that never ran after, by
        arrival."""
        first = self.entered(active)
        return np.where(np.isnan(first), np.inf, first), active.arrival_s


@element
class TiresiasLas(_Queues):
    """Tiresias' discretized 2D least attained service (Tiresias-L).

    Attained service is GPUs x running time. A job is in queue i while its service since it
    last entered the first queue lies between thresholds i-1 and i; queues are served in
    order, each first-in first-out by the time its jobs first started, a promoted job by the time
    of its promotion (it joins the first queue behind the jobs already there; jobs that never ran
    come after, by arrival). The ranking lets a job that does not fit be skipped so that lower
    ones fill in (greedy all-or-nothing admission). With `promote_knob` a job that has waited at
    least that many times as long as it has run since it last entered the first queue (when it
    first started, or at its latest promotion: waiting before a first start does not count) is
    put back there, both clocks reset (off by default, as on Tiresias' testbed).

    Ports:
        ranking: the jobs, first queue first, first-in first-out inside a queue.
    Cost: O(n log n) over the pool's jobs n (queue of each, then a lexicographic sort). Not
        ticked in rounds before a running job's service reaches its queue's limit or a waiting
        job is due for promotion, while no job arrives or finishes (event skipping).
    See also: Las, TiresiasGittins, SkewAwarePlacer, YarnCS
    Paper: Tiresias (NSDI'19) §3.2-3.3 and Pseudocode 2; testbed K=2 at 3200 GPU-seconds.
    """

    state = ("_base_run", "_base_service", "_entered", "_known", "_moves_at", "_queue")
    fixed = ("_limits",)

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        queue, service = self.queues_of(ctx, active)
        started, arrival = self.fifo_key(active)
        order = np.lexsort((np.arange(len(queue)), arrival, started, queue))
        self._moves_at = self.next_move(ctx, active, queue, service)
        return Ranking(active.rows[order], active.gpus[order], backfill=True)

    def quiet_until(self, ctx: RoundContext) -> float | None:
        # Inside a queue the order is by first start and arrival, which only a launch or an
        # arrival changes: the ranking stays the same until some job changes queue.
        return self._moves_at


@element
class TiresiasGittins(_Queues):
    """Tiresias' discretized 2D-Gittins index (Tiresias-G): serve the job most likely to finish
    within its next quantum of service, per unit of service spent.

    Queues are as in TiresiasLas. Inside queue i < K, jobs are ordered by the Gittins index
    G(a) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a], where S is a job's total service
    drawn from the history, a its attained service and the quantum D the queue's upper limit
    (Tiresias §3.2 sets D_i = Q_i^hi; we read it as a length of service). The last queue is
    first-in first-out by first start. The history is a trace of past jobs (service = duration x
    GPUs), as Tiresias draws the distribution from history logs (its simulator reads a separate
    sample of past jobs' GPU-time). Without one, every job that has arrived so far stands in,
    those being ranked included, each with its exact service (duration at the reference rate x
    GPUs): not past jobs and not the whole trace (later arrivals join as they come), and,
    unlike Tiresias' history, it holds the ranked jobs' own services. A job whose service
    exceeds every sample gets index 0.

    Ports:
        ranking: the jobs, first queue first, highest index first inside a queue.
    Arguments:
        history: a trace of past jobs whose service distribution to use (default: the jobs arrived so far; needs two queues or more).
    Cost: O(n log s) over the pool's jobs n and service samples s (Gittins indices by binary
        search), plus a sort, O(n log n).
    See also: TiresiasLas, Las
    Paper: Tiresias (NSDI'19) §3.2 (2D-Gittins, Pseudocode 1), Fig 7.
    """

    state = ("_base_run", "_base_service", "_entered", "_known", "_prefix", "_queue", "_samples", "_seen")
    fixed = ("_limits",)

    history: FilePath | None = attrs.field(
        default=None, validator=file_read_by(_history_services, "history of past jobs to draw services from")
    )

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.history is not None and self.queues == 1:
            # (the one queue is the last, first-in first-out: no index is read)
            raise ValueError("history needs two queues or more: with queues=1 every job is served first-in first-out")

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self._set_samples(np.zeros(0))  # replaced before the first tick
        self._seen = -1
        if self.history is not None:
            self._set_samples(_history_services(self.history))

    def _set_samples(self, services: np.ndarray) -> None:
        samples = np.sort(np.asarray(services, dtype=np.float64))
        self._samples = samples
        self._prefix = np.concatenate([[0.0], np.cumsum(samples)])

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        if self.history is None and len(ctx.jobs) != self._seen:
            self._seen = len(ctx.jobs)
            work, rate = ctx.jobs.column("work"), ctx.jobs.column("reference_rate")
            self._set_samples(work / rate * ctx.jobs.column("gpus"))
        queue, service = self.queues_of(ctx, active)
        quantum = self._limits[np.minimum(queue, len(self._limits) - 1)] if len(self._limits) else np.zeros(len(queue))
        index = gittins_index(self._samples, self._prefix, service, quantum)
        index = np.where(queue < self.queues - 1, index, 0.0)  # last queue: FIFO
        started, arrival = self.fifo_key(active)
        order = np.lexsort((np.arange(len(queue)), arrival, started, -index, queue))
        return Ranking(active.rows[order], active.gpus[order], backfill=True)


def gittins_index(samples: np.ndarray, prefix: np.ndarray, attained: np.ndarray, quantum: np.ndarray) -> np.ndarray:
    """G(a, D) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a] over the sorted `samples` of S
    (`prefix`: their cumulative sums, starting at 0), for arrays of a and D; 0 where S > a never."""
    n = len(samples)
    lo = np.searchsorted(samples, attained, side="right")
    hi = np.searchsorted(samples, attained + quantum, side="right")
    above = n - lo
    inside = hi - lo
    spent = (prefix[hi] - prefix[lo]) - attained * inside + quantum * (n - hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        index = np.where((above > 0) & (spent > 0), inside / np.where(spent > 0, spent, 1.0), 0.0)
    return index


@element
class Srsf(KeyOrder):
    """Rank jobs by remaining service, least first: remaining time x GPUs (an oracle policy).

    Remaining time is the job's remaining work at its reference throughput, to the millisecond
    (as Srtf's). Weighing it by the GPUs the job asks for makes a short wide job wait behind a
    longer narrow one that costs the cluster less (Tiresias Table 1 and Fig 7). Ties go to the
    job admitted first (two jobs of one duration and GPU count tie whatever their models).

    Ports:
        ranking: the jobs, least remaining service first.
    Counters:
        none
    Cost: O(n + r log n) over the pool's jobs n and the r whose remaining service moved: the last
        round's order kept for the others, those r sorted and merged in. Below 8,192 jobs, O(n): the
        plain O(n log n) sort waits until the order is read, and a placer with room for every job
        reads only the newcomers' order, O(k log k). Skipped while no two can swap (event skipping).
    See also: Srtf, TiresiasLas
    Paper: Tiresias (NSDI'19) §2.2, Table 1 and Fig 7 (SRSF).
    """

    keys_move_with_progress = True  # (remaining work moves only as the job progresses)

    def key(self, active: Active) -> np.ndarray:
        # (rounded as Srtf's: work / rate is a rounding error away from the duration it was made
        # from, which would order two jobs of one duration by their models, not by admission)
        return np.round(active.remaining_s, REMAINING_DECIMALS) * active.gpus

    def key_speed(self, active: Active) -> np.ndarray:
        return -active.column("rate") / active.reference_rate * active.gpus


@element
class YarnCS(Policy):
    """YARN's capacity scheduler as Tiresias compares against: first-in first-out,
    non-preemptive, consolidated.

    Running jobs rank first (in arrival order), so none is ever preempted; waiting jobs follow
    by arrival, and the first that does not fit blocks the rest (head-of-line blocking). Every
    job asks for a consolidated placement (as few nodes as possible).

    Ports:
        ranking: running jobs, then waiting ones, each by arrival.
    Arguments:
        none
    Counters:
        none
    Cost: O(n log n) over the pool's jobs n (a stable sort by arrival). Not ticked after a round
        whose plan changed nothing, until an arrival or a completion (event skipping).
    See also: Fifo, TiresiasLas, Consolidated
    Paper: Tiresias (NSDI'19) §5.1 (YARN-CS baseline).
    """

    state = ()

    def quiet_until(self, ctx: RoundContext) -> float | None:
        # Asked after a round whose plan changed nothing: the same jobs run and wait, in the same
        # order of arrival, until an arrival or a completion.
        return math.inf

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        order = np.lexsort((np.arange(len(active)), active.arrival_s, ~active.running))
        n = len(order)
        return Ranking(active.rows[order], active.gpus[order], consolidate=np.ones(n, dtype=bool), backfill=False)
