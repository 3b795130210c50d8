"""The placers that use the built-in choice: first free GPUs anywhere, or as few nodes as possible."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.elements.placement.placer import Placer
from roundhouse.runtime.element import element, element_family

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext
    from roundhouse.runtime.types import Plan, Ranking


@element_family
class _Renewing(Placer):
    """A placer whose plan depends only on the ranking and on who holds which GPUs, so that
    event skipping may pass the rounds after it: after a plan that changed nothing (the same
    ranking on the same GPUs gets the same plan), and after one that left every ranked job
    running on what it asks for (the next plan renews every lease, as it does when some of
    those jobs finish: then completions may wait for the next ticked round)."""

    # (the last ranking, and whether its plan changed nothing; whether that ranking renews every
    # lease, and the running rows that answer is for; whether a plan made in passing since then
    # left every job in the system running on what it asks for)
    state = ("_last", "_renews", "_passed")

    quiet_after_change = True

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self._passed = False

    def tick(self, ctx: RoundContext, ranking: Ranking) -> Plan:
        plan = super().tick(ctx, ranking)
        self._last = (ranking, not (len(plan.launch_rows) or len(plan.suspend) or len(plan.resize_rows)))
        self._passed = False
        return plan

    def arrivals_wait(self, ctx: RoundContext) -> bool:
        # Every job in the system runs on what it asks for: then the order of a ranking does not
        # matter to the plan, and arrivals that find room are placed by step 3 alone.
        return self._renews_last(ctx)

    packs_arrivals = True

    def place_arrivals(self, ctx: RoundContext, arrivals: Ranking) -> Plan | None:
        return self._keeping_all(ctx, self.pack_arrivals(ctx, arrivals, ctx.holder < 0))

    def pack_arrivals(self, ctx: RoundContext, arrivals: Ranking, available: np.ndarray):
        if ctx.online is not None or len(ctx.cluster.gpu_types) > 1:
            return None
        if len(arrivals) and min(arrivals.gpus.tolist()) <= 0:
            return None  # (as `_place_newcomers` decides for the whole ranking; one that finds no room is found packing)
        packed = self._pack_newcomers(ctx, arrivals, available)
        if packed is not None and not self._passed:
            self._passed = True
        return packed

    def quiet_until(self, ctx: RoundContext) -> float | None:
        ranking, unchanged = self._last
        if unchanged or self._renews_last(ctx):
            return float("inf")
        return None

    def completions_wait(self, ctx: RoundContext) -> bool:
        # Every ranked job runs: with fewer of them, in any order, every lease is renewed.
        return self._renews_last(ctx)

    def _renews_last(self, ctx: RoundContext) -> bool:
        """`renews_all` for the last ranking, worked out once per running set: event skipping
        asks twice after a tick. The world's running rows are a new array whenever the jobs
        running or the GPUs they hold change, so the same array means the same answer."""
        if self._passed:
            return True
        ranking = self._last[0]
        running = ctx.running_rows.base  # (the world's own array: the view's owner)
        known = getattr(self, "_renews", None)
        if known is not None and known[0] is ranking and known[1] is running and running is not None:
            return known[2]
        answer = self.renews_all(ctx, ranking)
        self._renews = (ranking, running, answer)
        return answer


@element
class FirstFree(_Renewing):
    """Place each job on the lowest-numbered free GPUs, wherever they are.

    A ranking entry that asks for a consolidated placement (YarnCS's and Optimus' entries all
    do) is placed as Consolidated places it: on as few nodes as possible, or, when no node has
    room, it waits (it is not spread).

    Arguments:
        none
    Cost: O(n + G) over ranked jobs n and GPUs G (the available mask), plus O(l) for the l jobs it
        launches; O(n) when every ranked job already runs, and O(n + G + k log k) when every ranked
        job fits (the k not running put in order among themselves, a ranking by key not sorted).
        Not ticked in rounds after a plan that left every ranked job running, until an arrival
        (event skipping); then, in a round in which the arrivals all find room, it places only
        them, O(G + k) (carried out in passing, or in bulk).
    See also: Consolidated, Launch
    Paper: Blox (EuroSys'24) placement/first-gpu.py and §7 (the fidelity experiment).
    """

    consolidate_by_default = False


@element
class Consolidated(_Renewing):
    """Place each job on as few nodes as possible: one node whenever it fits in one.

    Jobs are packed largest first, each on the node with the fewest free GPUs that can hold it
    (best fit), as Gavel's placement does; a job larger than a node on the fewest nodes a job
    of its size spans (a 16-GPU job on four 4-GPU nodes), those with the most free GPUs
    first. With `strict=true` a job that cannot be
    consolidated waits (and may preempt lower-ranked jobs to make room); with `strict=false`
    it is spread over free GPUs instead. A ranking entry that says whether to consolidate
    overrides the default.

    Arguments:
        strict: wait for a consolidated placement rather than spread the job.
    Cost: O(n + G) over ranked jobs n and GPUs G (the available mask), plus O(N log N) over nodes N
        for each GPU count it places (for a few jobs of several counts, once, and O(N) a job at
        worst), and O(N) for each job that preempts to fit or is backfilled
        (the nodes' available counts kept up to date; the running jobs' GPUs grouped by node once
        a round); O(n) when every ranked job already runs, and O(n + G + k log k) plus the packing
        when every ranked job fits (the k not running put in order among themselves, a ranking by
        key not sorted). Not ticked in rounds after a plan that left every ranked job running,
        until an arrival (event skipping); then, in a round in which the arrivals all find room, it
        places only them, O(G) plus the packing (carried out in passing, or in bulk).
    See also: FirstFree, Launch
    Paper: Blox (EuroSys'24) placement/consolidated.py; Gavel (OSDI'20) §5 (placement).
    """

    consolidate_by_default = True

    strict: bool = attrs.field(default=True)

    def spreads_when_stuck(self) -> bool:
        return not self.strict
