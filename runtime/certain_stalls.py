"""A stall that is certain at once: in a simulation in which jobs wait, none runs and no more
will arrive, every waiting job asks more GPUs than it could ever be given. The simulated cluster
does not change, so no round to come places one, and the run stops at its first idle round
rather than after STALL_ROUNDS of them (runtime/stalls.py, `count_idle`).

What a job asks is what each placer was asked for it in that round (a policy may choose the
count, as Optimus does), or, where no placer was asked, the count its trace asks for. What it
could be given: the cluster's GPUs of the types it can run on (its throughput is above 0 there,
which is what the placers read: a trace's `gpu_type` leaves one type), or of the one type a
ranking asks for it; an elastic job's scheduler picks its GPUs from the whole cluster. A trace
job asking for more than that is refused as the run starts (traces/prepare.py); a ranking may
still ask it (a policy of one's own, Optimus on a cluster of several types). A policy's count is
taken as it stands: with nothing running and nothing arriving, what it is given does not change.
A run whose time limit comes before STALL_ROUNDS idle rounds ends at its limit, as before."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from roundhouse.runtime.element import Element
    from roundhouse.runtime.types import Ranking
    from roundhouse.runtime.world import World


def never_fit(world: World, asked: Sequence[tuple[Element, Ranking]]) -> bool:
    """Whether no waiting job of `world` can ever be placed: each placer of `asked` (each
    placer and the ranking it was given in the round) asks more GPUs for it than it could be
    given, and a job no placer was asked to place asks more by its trace."""
    jobs = world.jobs
    waiting = np.flatnonzero(jobs.column("status") == 0)
    if not len(waiting):
        return False
    runs_on = types_of(world)
    by_type = np.asarray(world.cluster.gpus_by_type, dtype=np.int64)
    room = runs_on.astype(np.int64) @ by_type
    n = len(room)
    fits = np.zeros(n, dtype=bool)
    ranked = np.zeros(n, dtype=bool)
    for _, ranking in asked:
        rows, gpus = np.asarray(ranking.rows, dtype=np.int64), np.asarray(ranking.gpus, dtype=np.int64)
        inside = (rows >= 0) & (rows < n)
        rows, gpus = rows[inside], gpus[inside]
        there = room[rows]
        if ranking.gpu_type is not None:  # (a placer keeps such a job to that type)
            wanted = np.asarray(ranking.gpu_type, dtype=np.int64)[inside]
            typed = wanted >= 0
            one = np.clip(wanted, 0, len(by_type) - 1)
            there = np.where(typed, by_type[one] * runs_on[rows, one], there)
        fits[rows] |= gpus <= there
        ranked[rows] = True
    unranked = waiting[~ranked[waiting]]
    fits[unranked] = jobs.column("gpus")[unranked] <= room[unranked]
    return not fits[waiting].any()


def measured_against(world: World, row: int, ranking: Ranking | None) -> str:
    """What the job at `row` is measured against in the message of a certain stall: the GPUs
    of the one type `ranking` (the one that asked the most for it) asks for it, else those of
    the types it can run on."""
    cluster = world.cluster
    runs_on = types_of(world)[row]
    by_type = np.asarray(cluster.gpus_by_type, dtype=np.int64)
    typed = -1
    if ranking is not None and ranking.gpu_type is not None:
        typed = int(np.asarray(ranking.gpu_type)[np.flatnonzero(np.asarray(ranking.rows) == row)[0]])
    if typed >= 0:
        can = int(by_type[typed]) if runs_on[typed] else 0
        return f"of type {cluster.gpu_types[typed]}, as its ranking asks, and the cluster has {can} it can run on"
    if runs_on.all():
        return f"and the cluster has {cluster.n_gpus} in all"
    names = ", ".join(cluster.gpu_types[t] for t in np.flatnonzero(runs_on))
    return f"and the cluster has {int(by_type[runs_on].sum())} of the types it can run on ({names})"


def types_of(world: World) -> np.ndarray:
    """For each job of `world`'s table, the GPU types it can run on: those its throughput is
    above 0 on (the placers' `allowed_types`), or every type for an elastic job (Pollux and
    ONES choose its GPUs from the whole cluster, whatever their type)."""
    jobs = world.jobs
    runs_on = jobs.type_rates > 0
    if jobs.has_column("elastic_model"):
        runs_on[jobs.column("elastic_model") >= 0] = True
    return runs_on
