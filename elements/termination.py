"""Termination: ending jobs before the work they declared is done."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.errors import SchedError
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Jobs
from roundhouse.runtime.values import positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element
class LossTermination(Element):
    """Finish a job once its reported loss is within a relative threshold of its converged value.

    Each round the jobs whose latest loss satisfies (loss - loss_final) / |loss_final| <=
    `threshold` leave the pool's view and go out on `converged`; connect that to Launch's
    `finish` port, which completes them now with the work they have done. `loss_final` is the
    value the job's owner declared (a trace column, with the job's loss curve: see
    traces/losscurves.py; in a live run, a metric the job reports beside its loss; a loss_final
    of 0 is met only by a loss of 0 or less). Jobs without a loss report, and jobs that have not
    run yet, are never ended early. Suspended jobs are looked at too: one whose loss is within
    the threshold (a live job's last report may come after its suspension) is ended.

    The ended job's GPUs are free to the placer in the same round, but it still counts as
    unfinished for the elements that ticked before this one in that round (admission gates): it
    is reported as finished in the next round's events. So AcceptThreshold counts its GPUs
    against the load limit for one more round, and a job waiting in the gate's queue for them is
    admitted a round later than if the ended job had completed its work at that boundary.

    In a simulation, a running job's loss follows its curve as it progresses, so the element
    tells event skipping when the first one can come within the threshold (at its current
    speed); jobs without a curve never move.

    Ports:
        active: admitted, unfinished jobs, with their latest loss.
        remaining: the same jobs without the converged ones.
        converged: jobs to finish now (to Launch's finish port).
    Arguments:
        threshold: relative distance to the converged loss at which a job is finished (0.001 = 0.1%).
    Counters:
        terminated: jobs finished early so far.
    Cost: O(n) over the pool's jobs n (each job's loss against its threshold); O(r) over the
        running jobs r for its quiet time.
    See also: Launch, Optimus
    Paper: Blox (EuroSys'24) §5.3 (loss-based termination, Fig 16); Jeon et al. (ATC'19) §5.
    """

    state = ()

    category = "mechanism"
    inputs = (In("active", Active),)
    outputs = (Out("remaining", Active), Out("converged", Jobs))

    threshold: float = attrs.field(default=0.001, validator=positive)

    def start(self, ctx: RoundContext) -> None:
        self.counters["terminated"] = 0

    def tick(self, ctx: RoundContext, active: Active) -> dict:
        if not ctx.jobs.has_column("loss") or not len(active):
            return {"remaining": active, "converged": ctx.jobs.view(active.rows[:0], Jobs)}
        if not ctx.jobs.has_column("loss_final"):
            # Jobs report a loss (a trace's `loss` column, or live metrics), but no job says what
            # loss it is after, so none could ever converge: a configuration mistake, not a wait.
            # (At the element's line: a tick's error carries no place of its own.)
            raise SchedError(
                f"{self.name} (LossTermination): the jobs have a loss but no loss_final (the loss each job "
                "is after); give the jobs loss curves (trace columns loss_start, loss_final and loss_speed), "
                "or, in a live run, have each job report loss_final with its loss",
                self.declared_at,
            )
        done = self._within(active.column("loss"), active.column("loss_final"))
        # A job that has not trained has reported no loss yet (its column holds where its curve
        # starts): however loose the threshold, it is not ended before it runs.
        done &= active.column("run_s") > 0
        if not done.any():
            return {"remaining": active, "converged": ctx.jobs.view(active.rows[:0], Jobs)}
        self.counters["terminated"] += int(done.sum())
        return {"remaining": active.select(~done), "converged": ctx.jobs.view(active.rows[done], Jobs)}

    def _within(self, loss: np.ndarray, final: np.ndarray) -> np.ndarray:
        """Whether each loss is within the threshold of its final value (NaN: no)."""
        with np.errstate(invalid="ignore"):
            # (|loss_final|: a live job may report a final loss of 0 or below; a curve's is above 0.)
            return (loss - final) <= self.threshold * np.abs(final)

    def quiet_until(self, ctx: RoundContext) -> float:
        """For event skipping: a time before which no running job's loss comes within the
        threshold while nothing happens but running jobs' progress (work grows by at most a
        job's rate a second; a job without a curve keeps its loss), less a relative margin of
        1e-9 for the rounding of work added round by round, and less a round, so that the round
        that sees the job converge is ticked. Waiting jobs' losses do not move."""
        jobs, now = ctx.jobs, float(ctx.now)
        running = ctx.running_rows
        if not len(running) or not jobs.has_column("loss") or not jobs.has_column("loss_final"):
            return math.inf  # (no job can ever be ended: the tick says so as soon as one could)
        final = jobs.column("loss_final")[running]
        if self._within(jobs.column("loss")[running], final).any():
            return now  # (ended at the next tick, once it has run: ticked)
        if not jobs.has_column("loss_speed"):
            return math.inf  # (losses without curves move only in a live run)
        start, speed = jobs.column("loss_start")[running], jobs.column("loss_speed")[running]
        rate = jobs.column("rate")[running]
        moving = ~np.isnan(speed) & (rate > 0)
        if not moving.any():
            return math.inf
        from roundhouse.traces.losscurves import fraction_to_converge

        with np.errstate(over="ignore", invalid="ignore"):  # (a tiny threshold: never, inf)
            target = fraction_to_converge(start[moving], final[moving], speed[moving], self.threshold)
            gap = target * jobs.column("work")[running][moving] - jobs.column("done")[running][moving]
            ahead = float((gap / rate[moving]).min())
        if not ahead > 0.0:  # (NaN: a curve that cannot say)
            return now
        return now + ahead * (1.0 - 1e-9) - float(ctx.round_s)
