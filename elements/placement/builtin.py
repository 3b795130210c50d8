"""The placers that use the built-in choice: first free GPUs anywhere, or as few nodes as possible."""

from __future__ import annotations

import attrs

from roundhouse.elements.placement.placer import Placer
from roundhouse.runtime.element import element


@element
class FirstFree(Placer):
    """Place each job on the lowest-numbered free GPUs, wherever they are.

    Arguments:
        none
    Cost: O(n + G) over ranked jobs n and GPUs G (the available mask), plus O(l) for the l jobs it
        launches; O(n) when every ranked job already runs.
    See also: Consolidated, Launch
    Paper: Blox (EuroSys'24) placement/first-gpu.py and §7 (the fidelity experiment).
    """

    state = ()

    consolidate_by_default = False

    def quiet_until(self, ctx) -> float:
        return float("inf")  # the same ranking on the same GPUs gets the same plan


@element
class Consolidated(Placer):
    """Place each job on as few nodes as possible: one node whenever it fits in one.

    Jobs are packed largest first, each on the node with the fewest free GPUs that can hold it
    (best fit), as Gavel's placement does. With `strict=true` a job that cannot be
    consolidated waits (and may preempt lower-ranked jobs to make room); with `strict=false`
    it is spread over free GPUs instead. A ranking entry that says whether to consolidate
    overrides the default.

    Arguments:
        strict: wait for a consolidated placement rather than spread the job.
    Cost: O(n + G) over ranked jobs n and GPUs G (the available mask), plus O(N log N) over nodes N
        for each GPU count it places; O(n) when every ranked job already runs.
    See also: FirstFree, Launch
    Paper: Blox (EuroSys'24) placement/consolidated.py; Gavel (OSDI'20) §5 (placement).
    """

    state = ()

    consolidate_by_default = True

    strict: bool = attrs.field(default=True)

    def spreads_when_stuck(self) -> bool:
        return not self.strict

    def quiet_until(self, ctx) -> float:
        return float("inf")  # the same ranking on the same GPUs gets the same plan
