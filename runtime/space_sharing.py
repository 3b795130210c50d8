"""Space sharing on the world's books: two jobs on the same GPUs (a pair), as Gavel's policies
place them. The world's second holder array (`co_holder`) is made when a plan first launches a
pair, and until then none of this runs: a run without pairs never pays for it.

Two things follow from a pair. Its two jobs each count the GPUs they share in their attained
service, so the world keeps the GPU-seconds both counted (`shared_gpu_s`) to count each GPU
once in its busy time. And when one of the two stops running, the other gets the GPUs to
itself, with the CPU cores and memory its partner held, and runs at its own rate from then on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.allocation import regain_shared, rerated
from roundhouse.runtime.repeated_sums import repeated_sum
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.traces.jobs import RUNNING
from roundhouse.traces.throughput import Placement

if TYPE_CHECKING:
    from roundhouse.runtime.world import World


def count_shared(world: World, rows: np.ndarray, service: np.ndarray, rounds: int) -> None:
    """Add to the world's `shared_gpu_s` what pairs of jobs sharing GPUs both count in a round's
    `service` (by row of `rows`), `rounds` times over (round by round, as the service is added);
    nothing until a plan has launched a pair."""
    if world.co_holder is None:
        return
    shared = shared_service(world.jobs.column("partner"), rows, service)
    if shared:
        world.shared_gpu_s = repeated_sum(world.shared_gpu_s, shared, rounds)


def shared_service(partner: np.ndarray, rows: np.ndarray, service: np.ndarray) -> float:
    """The GPU-seconds that pairs of jobs sharing GPUs both count in a round's `service` (by
    row of `rows`): for each pair, the lesser of the two, the time both held their GPUs (the
    two hold the same GPUs, each from the round's start until it stops). A job whose partner
    has no progress in it counts alone."""
    mates = partner[rows]
    paired = np.flatnonzero(mates >= 0)
    if not len(paired):
        return 0.0
    own, mates = rows[paired], mates[paired]
    order = own.argsort(kind="stable")
    at = order[np.minimum(own.searchsorted(mates, sorter=order), len(own) - 1)]
    first = (own[at] == mates) & (own < mates)  # each pair once
    return float(np.minimum(service[paired[first]], service[paired[at[first]]]).sum())


def leave_shared_gpus(world: World, rows: np.ndarray, freed: tuple[np.ndarray, np.ndarray]) -> None:
    """Jobs that stop running (finished or suspended) leave their GPUs: a partner that
    stays gets its GPUs to itself, at its own throughput from the next round on, and the CPU
    cores and memory the leaver held (`freed`, by row of `rows`) up to its GPUs' whole share."""
    cols = world._cols
    co = world.co_holder
    assert co is not None  # called only once a pair has run
    co[isin_rows(co, rows)] = -1
    lone = (world.holder < 0) & (co >= 0)
    world.holder[lone] = co[lone]
    co[lone] = -1
    mates = cols["partner"][rows]
    cols["partner"][rows] = -1
    stays = mates >= 0
    stays[stays] = (cols["status"][mates[stays]] == RUNNING) & (cols["partner"][mates[stays]] >= 0)
    survivors = mates[stays]
    if len(survivors):
        cols["partner"][survivors] = -1
        gpus = [world.gpus_of(int(r)) for r in survivors]
        regain_shared(cols, world.throughput, survivors, gpus, (freed[0][stays], freed[1][stays]))
        held = {"cpus": cols["cpus_held"][survivors], "memory_gb": cols["memory_held_gb"][survivors]}
        alone = Placement.of(np.concatenate(gpus), [len(g) for g in gpus], batch=cols["batch_used"][survivors], **held)
        compute = np.empty(len(survivors))
        rerated(cols, survivors, world._rates(survivors, alone, compute), compute)
