"""The job pool: the set of admitted, unfinished jobs that policies choose from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Jobs
from roundhouse.traces.jobs import FINISHED

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element
class JobPool(Element):
    """Hold every admitted, unfinished job; emit them, running and waiting, each round.

    Jobs join when admitted and leave when they finish. The view it emits reads live fields
    (attained service, progress, whether the job runs, where) from the world state.

    Ports:
        jobs: jobs admitted this round (several admission gates may connect).
        active: all admitted, unfinished jobs, in admission order, with what changed since its last
            view (`Active.lineage`: which of those jobs stayed, and the jobs that joined after them).
    Arguments:
        none
    Counters:
        active: jobs in the pool now.
        running: jobs of the world that hold GPUs now (in a graph of one pool, its own).
    Cost: O(n + k) over its jobs n and the jobs k joining, in a round in which jobs join or
        finish (its list of jobs is made anew); O(1) in other rounds. Not ticked in rounds
        carried out in passing (their arrivals join at its next tick).
    See also: AcceptAll, AcceptThreshold, Las
    Paper: Blox (EuroSys'24) §6.4, JobState.
    """

    state = ("_rows", "_later", "_token", "_views")

    category = "pool"
    inputs = (In("jobs", Jobs, multi=True),)
    outputs = (Out("active", Active),)

    def start(self, ctx: RoundContext) -> None:
        self._rows = np.zeros(0, dtype=np.int64)
        self._later: list[np.ndarray] = []  # jobs admitted in rounds carried out in passing
        # The views' lineage (`Active.lineage`): this pool's token (an object of its own, which
        # a fork copies with the policies that hold it), and the number of views made.
        self._token = object()
        self._views = 0
        self.counters.update(active=0, running=0)

    def tick(self, ctx: RoundContext, jobs: Jobs) -> Active:
        before = len(self._rows)
        if self._later:  # (in admission order, before this round's)
            self._rows = np.concatenate([self._rows, *self._later])
            self._later = []
        stayed = None  # (which of the last view's jobs are still here; None: all)
        if len(ctx.events.finished) and len(self._rows):
            unfinished = ctx.jobs.column("status")[self._rows] != FINISHED
            self._rows = self._rows[unfinished]
            stayed = unfinished[:before]
        if len(jobs):
            self._rows = np.concatenate([self._rows, jobs.rows])
        self.counters["active"] = len(self._rows)
        self.counters["running"] = len(ctx.running_rows)
        self._views += 1
        active = ctx.jobs.view(self._rows, Active)
        active.lineage = (self._token, self._views, stayed)
        return active

    quiet_after_change = True

    def completions_wait(self, ctx: RoundContext) -> bool:
        return True  # (finished jobs leave at its next tick, in order)

    def quiet_until(self, ctx: RoundContext) -> float:
        return float("inf")  # its jobs change only when jobs arrive or finish

    def arrivals_wait(self, ctx: RoundContext) -> bool:
        return True  # (they join at its next tick, `join_later`, in order)

    def join_later(self, jobs: Jobs) -> None:
        """Jobs admitted in a round carried out in passing (runtime/passing.py): they join at
        the next tick, before that round's arrivals, as they would have joined round by round."""
        self._later.append(jobs.rows)
