"""An element for the sweep tests (required by their graphs): ranks jobs first come, first
served, and notes each run it takes part in, so that a test can count executions per point."""

import os
import time

import attrs

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking


@element
class SweepProbe(Element):
    """Rank jobs in pool order, noting each run in a log file.

    Each run appends "start POINT SEED PID" to `log` when it starts and "end POINT SEED PID"
    when it finishes, sleeps `delay` seconds at its start, and fails at its start if its point
    is `fail_at` (or ends its process if it is `exit_at`).

    Ports:
        active: admitted, unfinished jobs.
        ranking: the jobs in pool order.
    Arguments:
        point: the grid point, as the sweep varies it.
        log: the file to append to ("" for none).
        delay: seconds to sleep at the start of a run.
        fail_at: the point whose runs fail (-1 for none).
        exit_at: the point whose runs end their process at once (-1 for none).
    Counters:
        none
    See also: Fifo
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)

    point: int = attrs.field(default=0)
    log: str = attrs.field(default="")
    delay: float = attrs.field(default=0.0)
    fail_at: int = attrs.field(default=-1)
    exit_at: int = attrs.field(default=-1)

    def _note(self, ctx, what: str) -> None:
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"{what} {self.point} {ctx.settings.seed} {os.getpid()}\n")

    def start(self, ctx):
        self._note(ctx, "start")
        # Short sleeps: a run's timeout stops it between two Python steps, not inside one.
        until = time.monotonic() + self.delay
        while time.monotonic() < until:
            time.sleep(0.02)
        if self.point == self.exit_at:
            os._exit(3)
        if self.point == self.fail_at:
            raise RuntimeError(f"point {self.point} fails on purpose")

    def tick(self, ctx, active):
        return Ranking(active.rows, active.gpus, backfill=False)

    def finish(self, ctx):
        self._note(ctx, "end")
        return {}
