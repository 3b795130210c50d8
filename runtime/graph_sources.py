"""A graph's sources as a whole: whether any will bring another job, and that no two bring one
job id (checked before the first round, where the job table would refuse the id only when that
job arrived)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.errors import SchedError

if TYPE_CHECKING:
    from roundhouse.runtime.element import Element


def exhausted(sources: list[Element]) -> bool:
    """Whether no source will bring another job."""
    return all(s.exhausted() for s in sources)


def refuse_shared_ids(sources: list[Element]) -> None:
    """Two sources that would emit one job id are refused before the first round, naming the
    later source and the id (the job table would refuse it only when that job arrived)."""
    known = [(el, np.unique(ids)) for el in sources if (ids := el.coming_job_ids()) is not None and len(ids)]
    if len(known) < 2:
        return
    # Every source's ids at once, sorted by id then source (not source against source: a graph
    # of thousands of sources would take minutes). An id held again is held by a later source;
    # the one named is the first such source, with the first earlier source it shares an id with.
    ids = np.concatenate([i for _, i in known])
    owner = np.repeat(np.arange(len(known)), [len(i) for _, i in known])
    order = np.lexsort((owner, ids))
    ids, owner = ids[order], owner[order]
    again = np.flatnonzero(ids[1:] == ids[:-1]) + 1
    if not len(again):
        return
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    first_owner = owner[starts[np.searchsorted(starts, again, side="right") - 1]]
    k = int(owner[again].min())
    j = int(first_owner[owner[again] == k].min())
    (el, mine), (other, earlier) = known[k], known[j]
    shared = np.intersect1d(mine, earlier, assume_unique=True)
    raise SchedError(
        f"element '{el.name}' ({type(el).__name__}): job id {int(shared[0])} is also one of "
        f"element '{other.name}'s jobs (job ids must be unique in a run)",
        el.declared_at,
        hint=_parting_hint(el, other, int(ids[-1]) + 1),
    )


def _parting_hint(el: Element, other: Element, past: int) -> str:
    """How to give two sources' jobs different ids: a generated source numbers its jobs from its
    `start_id` (a trace's ids are its own), which `past` (one past every id known) is free for."""
    for source in (el, other):
        if attrs.has(type(source)) and "start_id" in attrs.fields_dict(type(source)):
            return f"give '{source.name}' a start_id past the other source's ids, e.g. start_id={past}"
    return (
        "give the traces' jobs different ids; a generated source (PoissonSource, BurstSource, CostWorkload) "
        "numbers its jobs from its start_id"
    )
