"""Launch: the graph's exit towards whatever runs the jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Events, Jobs, Plan

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element
class Launch(Element):
    """Hand the round's plan to the backend (simulator or live agents) and report what happened.

    It emits the round's final plan; the engine checks it, hands it to the backend, applies it
    and passes the round's events on (the graph's one exit). The runtime checks the plan first: every running job is kept, suspended or completed,
    launches go to free GPUs. Kept jobs cost nothing (their lease is renewed without a
    message). Jobs arriving on the optional `finish` port (from LossTermination, say) are
    completed now with the work they have done, whatever the placer decided for them; they are
    reported as finished in the next round's events.

    Ports:
        plan: the round's launches, keeps and suspensions.
        finish: jobs to complete now (optional; several elements may connect).
        events: completions seen at this round's start, plus this round's launches and suspensions.
    Arguments:
        none
    Counters:
        launched: launches so far (first starts and restarts).
        suspended: suspensions so far.
        completed: jobs completed on request so far.
    Cost: O(1) (the plan passes through); O(r + f) over running jobs r when f jobs on `finish` are
        completed.
    See also: Consolidated, FirstFree, JobMetrics, LossTermination
    Paper: Blox (EuroSys'24) §3, job launch and preemption; §5.3, loss-based termination.
    """

    state = ()

    category = "launch"
    inputs = (In("plan", Plan), In("finish", Jobs, required=False, multi=True))
    outputs = (Out("events", Events),)

    def start(self, ctx: RoundContext) -> None:
        self.counters.update(launched=0, suspended=0, completed=0)

    def tick(self, ctx: RoundContext, plan: Plan, finish: Jobs | None = None) -> Plan:
        if finish is not None and len(finish):
            plan = with_completions(plan, np.unique(finish.rows))
            self.counters["completed"] += len(plan.complete)
        self.counters["launched"] += len(plan.launch_rows)
        self.counters["suspended"] += len(plan.suspend)
        return plan

    quiet_after_change = True

    def completions_wait(self, ctx: RoundContext) -> bool:
        return True  # (it passes the plan on)

    def quiet_until(self, ctx: RoundContext) -> float:
        return float("inf")  # it passes the plan on

    def arrivals_wait(self, ctx: RoundContext) -> bool:
        return True  # (ticked with the placer's plan in a round carried out in passing)


def with_completions(plan: Plan, rows: np.ndarray) -> Plan:
    """The plan with `rows` completed: taken out of its keeps and suspensions."""
    complete = np.unique(np.concatenate([plan.complete, rows]))
    if plan.alloc_rows is not None and plan.alloc_cpus is not None and plan.alloc_memory_gb is not None:
        stays = ~isin_rows(plan.alloc_rows, complete)  # a completed job gets no CPU or memory
        plan = attrs.evolve(
            plan,
            alloc_rows=plan.alloc_rows[stays],
            alloc_cpus=plan.alloc_cpus[stays],
            alloc_memory_gb=plan.alloc_memory_gb[stays],
        )
    return attrs.evolve(
        plan,
        keep=plan.keep[~isin_rows(plan.keep, complete)],
        suspend=plan.suspend[~isin_rows(plan.suspend, complete)],
        complete=complete,
    )
