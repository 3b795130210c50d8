"""Admission: gates between arrivals and the job pool."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.explain import Reason
from roundhouse.runtime.types import Jobs
from roundhouse.runtime.values import Multiplier, positive
from roundhouse.traces.jobs import FINISHED

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element
class AcceptAll(Element):
    """Admit every arriving job at once.

    Ports:
        jobs: arriving jobs (several sources may connect).
        admitted: the same jobs.
    Arguments:
        none
    Counters:
        admitted: jobs admitted so far.
    Cost: O(k) over the jobs k arriving this round.
    See also: AcceptThreshold
    Paper: Blox (EuroSys'24) §3, admission_control/accept_all.py.
    """

    state = ()

    category = "admission"
    inputs = (In("jobs", Jobs, multi=True),)
    outputs = (Out("admitted", Jobs),)

    def start(self, ctx: RoundContext) -> None:
        self.counters["admitted"] = 0

    def tick(self, ctx: RoundContext, jobs: Jobs) -> Jobs:
        self.counters["admitted"] += len(jobs)
        if len(jobs):
            ctx.explain(Reason.ADMITTED, jobs.rows)
        return jobs

    quiet_after_change = True

    def completions_wait(self, ctx: RoundContext) -> bool:
        return True  # (it does not see completions)

    def quiet_until(self, ctx: RoundContext) -> float:
        return float("inf")  # without new jobs it admits nothing

    def arrivals_wait(self, ctx: RoundContext) -> bool:
        return True  # (ticked in a round carried out in passing, as in any other)

    def holding(self) -> int:
        """Jobs it holds back now (ChooseAdmission): none."""
        return 0

    def hand_over(self) -> np.ndarray:
        """The jobs it holds, to another gate taking its place (ChooseAdmission): none."""
        return np.zeros(0, dtype=np.int64)

    def take_over(self, admitted: np.ndarray) -> None:
        """Take another gate's place, with the jobs admitted and not finished so far."""


@element
class AcceptThreshold(Element):
    """Admit jobs while the GPU demand of admitted, unfinished jobs is within a load factor.

    Blox's load-based admission, rule for rule: arriving jobs join a first-in first-out queue
    in order of arrival (whichever source they come from; ties in the order delivered), and
    each round the queue's head is admitted, oldest first, while the GPUs asked for by the
    admitted, unfinished jobs (those admitted this round included) are at or below `factor`
    times the cluster's GPUs. The test is made before each job is added, so the last job
    admitted may take the demand past the limit, and a job larger than the limit is admitted
    whenever the demand is within it (so it cannot block the queue forever). The rest wait
    until admitted jobs finish.

    Ports:
        jobs: arriving jobs (several sources may connect).
        admitted: jobs admitted this round.
    Arguments:
        factor: the load limit, as a multiple of the cluster's GPUs (Blox's "Accept 1.2x").
    Counters:
        admitted: jobs admitted so far.
        queued: jobs waiting in the admission queue now.
        demand: GPUs asked for by admitted, unfinished jobs now.
    Cost: O(k log k + a + q) over arriving jobs k (put in order of arrival), admitted
        unfinished jobs a (summing their demand) and the queue q; O(a) in a round without
        arrivals or completions.
    See also: AcceptAll, JobPool
    Paper: Blox (EuroSys'24) §5.1, admission_control/load_based_accept.py.
    """

    state = ("_admitted", "_queue")

    category = "admission"
    inputs = (In("jobs", Jobs, multi=True),)
    outputs = (Out("admitted", Jobs),)

    factor: Multiplier = attrs.field(validator=positive)

    def start(self, ctx: RoundContext) -> None:
        self._queue = np.zeros(0, dtype=np.int64)
        self._admitted = np.zeros(0, dtype=np.int64)
        self.counters.update(admitted=0, queued=0, demand=0)

    def tick(self, ctx: RoundContext, jobs: Jobs) -> Jobs:
        gpus = ctx.jobs.column("gpus")
        if len(ctx.events.finished) and len(self._admitted):
            self._admitted = self._admitted[ctx.jobs.column("status")[self._admitted] != FINISHED]
        if len(jobs):
            rows = jobs.rows
            if len(rows) > 1:
                # Several sources (and a gate handing over its queue) deliver one after another,
                # not by arrival: the queue is. (Every job queued before arrived earlier.)
                rows = rows[np.argsort(ctx.jobs.column("arrival_s")[rows], kind="stable")]
            self._queue = np.concatenate([self._queue, rows])
        demand = int(gpus[self._admitted].sum())
        release = 0
        limit = float(self.factor) * ctx.cluster.n_gpus
        if len(self._queue) and demand <= limit + 1e-9:
            # Blox's test, made before each queued job is taken: the demand so far, this round's
            # admissions included, against the limit. Non-decreasing along the queue, so the jobs
            # that pass are a prefix of it. (A demand past the limit refuses the queue's head, and
            # so every job behind it: a long queue is not summed in a round that admits nothing.)
            sizes = gpus[self._queue]
            before = np.cumsum(sizes) - sizes + demand
            release = int(np.searchsorted(before, limit + 1e-9, side="right"))
        out = self._queue[:release]
        if release:
            self._queue = self._queue[release:]
            self._admitted = np.concatenate([self._admitted, out])
            demand += int(gpus[out].sum())
        self.counters["admitted"] += release
        self.counters["queued"] = len(self._queue)
        self.counters["demand"] = demand
        if ctx.explaining:
            ctx.explain(Reason.ADMITTED, out)
            if len(jobs) and len(self._queue):
                # Held since arriving (a job still held costs nothing new): its place in the
                # queue, the GPUs admitted jobs ask for, and the limit.
                held = self._queue[-min(len(jobs), len(self._queue)) :]
                place = len(self._queue) - len(held) + np.arange(1, len(held) + 1)
                ctx.explain(Reason.HELD, held, place, demand, int(limit))
        return ctx.jobs.view(out, Jobs)

    def quiet_until(self, ctx: RoundContext) -> float:
        # A job still queued after a tick found the demand past the limit; without completions
        # or new jobs the demand stays there, and it releases nothing.
        return float("inf")

    def holding(self) -> int:
        """Jobs it holds back now, in its queue (ChooseAdmission)."""
        return len(self._queue)

    def hand_over(self) -> np.ndarray:
        """The jobs it holds, oldest first, to another gate taking its place (ChooseAdmission);
        it holds none after, and counts no demand."""
        queue, self._queue = self._queue, self._queue[:0]
        # Not acting any more, it admits nothing and tracks no demand until it takes over again.
        self._admitted = self._admitted[:0]
        self.counters["queued"] = 0
        self.counters["demand"] = 0
        return queue

    def take_over(self, admitted: np.ndarray) -> None:
        """Take another gate's place, with the jobs admitted and not finished so far: they
        count against the load limit."""
        self._admitted = np.array(admitted, dtype=np.int64)
