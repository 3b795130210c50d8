"""Launch: the graph's exit towards whatever runs the jobs."""

from __future__ import annotations

from runtime.element import Element, In, Out, element
from runtime.types import Events, Plan


@element
class Launch(Element):
    """Hand the round's plan to the backend (simulator or live agents) and report what happened.

    The runtime checks the plan first: every running job is kept or suspended, launches go to
    free GPUs. Kept jobs cost nothing (their lease is renewed without a message).

    Ports:
        plan: the round's launches, keeps and suspensions.
        events: completions seen at this round's start, plus this round's launches and suspensions.
    Arguments:
        none
    Counters:
        launched: launches so far (first starts and restarts).
        suspended: suspensions so far.
    See also: Consolidated, FirstFree, JobMetrics
    Paper: Blox (EuroSys'24) §3, job launch and preemption.
    """

    category = "launch"
    inputs = (In("plan", Plan),)
    outputs = (Out("events", Events),)

    def start(self, ctx) -> None:
        self.counters.update(launched=0, suspended=0)

    def tick(self, ctx, plan: Plan) -> Events:
        events = ctx.submit(plan)
        self.counters["launched"] += len(events.launched)
        self.counters["suspended"] += len(events.suspended)
        return events
