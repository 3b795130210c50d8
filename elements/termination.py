"""Termination: ending jobs before the work they declared is done."""

from __future__ import annotations

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

    Each round the jobs whose latest loss satisfies (loss - loss_final) / loss_final <=
    `threshold` leave the pool's view and go out on `converged`; connect that to Launch's
    `finish` port, which completes them now with the work they have done. `loss_final` is the
    value the job's owner declared (a trace column, with the job's loss curve: see
    traces/losscurves.py); jobs without a loss report, and jobs that have not run yet, are never
    ended early.

    Ports:
        active: admitted, unfinished jobs, with their latest loss.
        remaining: the same jobs without the converged ones.
        converged: jobs to finish now (to Launch's finish port).
    Arguments:
        threshold: relative distance to the converged loss at which a job is finished (0.001 = 0.1%).
    Counters:
        terminated: jobs finished early so far.
    Cost: O(n) over the pool's jobs n (each job's loss against its threshold).
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
                "is after); give the jobs loss curves (trace columns loss_start, loss_final and loss_speed)",
                self.declared_at,
            )
        loss, final = active.column("loss"), active.column("loss_final")
        with np.errstate(invalid="ignore"):
            done = (loss - final) <= self.threshold * final  # NaN (no curve) compares False
        # A job that has not trained has reported no loss yet (its column holds where its curve
        # starts): however loose the threshold, it is not ended before it runs.
        done &= active.column("run_s") > 0
        if not done.any():
            return {"remaining": active, "converged": ctx.jobs.view(active.rows[:0], Jobs)}
        self.counters["terminated"] += int(done.sum())
        return {"remaining": active.select(~done), "converged": ctx.jobs.view(active.rows[done], Jobs)}
