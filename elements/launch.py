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
    and passes the round's events on (the graph's one exit). The runtime checks the plan first:
    every running job is kept, suspended or completed, launches go to free GPUs. Kept jobs cost
    nothing (their lease is renewed without a message). Jobs arriving on the optional `finish`
    port (from LossTermination, say) are completed now with the work they have done, whatever
    the placer decided for them; their GPUs are free at once, but they are reported as finished
    only in the next round's events, so the elements that ticked before in the round (admission
    gates such as AcceptThreshold) count them as unfinished until then: one round longer than a
    job that completes its work at that boundary.

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
    """The plan with `rows` completed: taken out of its launches, resizes, keeps and suspensions
    (whatever the placer decided for them), and given no CPU or memory."""
    complete = np.unique(np.concatenate([plan.complete, rows]))
    changes: dict = {}
    if len(plan.launch_rows):
        changes |= _launches_kept(plan, ~isin_rows(plan.launch_rows, complete), complete)
    if len(plan.resize_rows):
        changes |= _resizes_kept(plan, ~isin_rows(plan.resize_rows, complete))
    if plan.alloc_rows is not None and plan.alloc_cpus is not None and plan.alloc_memory_gb is not None:
        stays = ~isin_rows(plan.alloc_rows, complete)  # a completed job gets no CPU or memory
        changes |= dict(
            alloc_rows=plan.alloc_rows[stays], alloc_cpus=plan.alloc_cpus[stays], alloc_memory_gb=plan.alloc_memory_gb[stays]
        )
    return attrs.evolve(
        plan,
        keep=plan.keep[~isin_rows(plan.keep, complete)],
        suspend=plan.suspend[~isin_rows(plan.suspend, complete)],
        complete=complete,
        **changes,
    )


def _kept(kind: str, plan: Plan, stays: np.ndarray) -> dict:
    """The plan's rows, GPUs and counts of `kind` ("launch" or "resize") that `stays` marks."""
    counts = getattr(plan, f"{kind}_counts")
    return {
        f"{kind}_rows": getattr(plan, f"{kind}_rows")[stays],
        f"{kind}_gpus": getattr(plan, f"{kind}_gpus")[np.repeat(stays, counts)],
        f"{kind}_counts": counts[stays],
    }


def _launches_kept(plan: Plan, stays: np.ndarray, complete: np.ndarray) -> dict:
    """The plan's launch fields with only the launches `stays` marks; a launch whose partner on
    shared GPUs is completed has its GPUs to itself."""
    if stays.all():
        return {}
    changes: dict = _kept("launch", plan, stays)
    if plan.launch_batch is not None:
        changes["launch_batch"] = plan.launch_batch[stays]
    if plan.launch_partner is not None:
        partner = plan.launch_partner[stays]
        changes["launch_partner"] = np.where(isin_rows(partner, complete), -1, partner)
    return changes


def _resizes_kept(plan: Plan, stays: np.ndarray) -> dict:
    """The plan's resize fields with only the resizes `stays` marks."""
    if stays.all():
        return {}
    changes: dict = _kept("resize", plan, stays)
    for name in ("resize_batch", "resize_lr", "resize_in_place"):
        value = getattr(plan, name)
        if value is not None:
            changes[name] = value[stays]
    return changes
