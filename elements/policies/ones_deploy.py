"""Deploying the schedule ONES' search found best (elements/policies/ones.py), against the one in
force: launches, resizes (in place where the live backend can do them) and suspensions, with each
job's global batch; or, while the epoch gate holds it back (a running job it changes has not
trained `gate_epochs` epochs since its last change), only the launches of waiting jobs whose GPUs
in it are free. A job it preempts or leaves waiting has its batch limit R cut (§3.3.2).

Ones binds `deploy` as its method `_deploy`: called so, it costs what a method of its own would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.elements.policies import ones_search as search
from roundhouse.elements.policies.base import job_column as _column
from roundhouse.runtime import resizing
from roundhouse.runtime.explain import Reason
from roundhouse.runtime.types import LR_LINEAR, Active, Assignment, Plan, Resize

if TYPE_CHECKING:
    from roundhouse.elements.policies.ones import Ones
    from roundhouse.runtime.context import RoundContext


def local_batch(ctx: RoundContext, active: Active) -> np.ndarray:
    """Each job's batch per GPU: its `local_batch`, or else its batch size."""
    local = _column(ctx, "local_batch", active.rows, np.nan)
    return np.where(np.isnan(local), active.column("batch_size"), local)


def deploy(ones: Ones, ctx, active, best, current, epochs, held, limit, local=None, rank=None, node=None) -> Plan:
    """Deploy `best`, or only its launches on free GPUs while the epoch gate holds it back.
    `local` is each job's batch per GPU (0 for a fixed-size job: it keeps its own; not
    given: every job's local batch); `rank`, each GPU's rank in the job holding it in
    `current` (not given: in GPU order); `node`, each GPU's machine (not given: one). A
    resize lists the GPUs a job keeps first, in rank order, and is in place (with
    `in_place`) only where the live backend's rule allows it (resizing.in_place_order):
    else it is a checkpoint and restart."""
    rows, n = active.rows, len(active)
    if local is None:
        local = local_batch(ctx, active).astype(np.int64)
    if rank is None:
        rank = search.occurrence(current[None, :])[0]
    if node is None:
        node = np.zeros(len(current), dtype=np.int64)
    # A job's global batch stays within its limit: one GPU at a local batch past the limit
    # (all a job may have then) trains at the limit instead.
    most = np.nan_to_num(_column(ctx, "max_batch_size", rows, np.inf), nan=np.inf)

    def batch(j: int, gpus: int) -> int:
        return int(min(local[j] * gpus, max(most[j], 1))) if local[j] > 0 else 0

    changed = np.zeros(n, dtype=bool)
    diff = best != current
    changed[best[diff & (best >= 0)]] = True
    changed[current[diff & (current >= 0)]] = True
    running = held > 0
    affected = changed & running
    ready = epochs - ones._epoch_mark[rows] >= ones.gate_epochs
    if not (affected & ~ready).any():
        ones.counters["deployed"] += int(changed.any())
        gpus_of = [np.flatnonzero(best == j) for j in range(n)]
        launches, resizes, keep, suspend = [], [], [], []
        for j in np.flatnonzero(changed | running).tolist():
            g = gpus_of[j]
            if not running[j]:
                launches.append(Assignment(int(rows[j]), g.tolist(), batch(j, len(g))))
            elif not len(g):
                suspend.append(int(rows[j]))
                # Resume (§3.3.2): a preempted job may ask again for at most what it had.
                ones._limit[rows[j]] = max(min(int(limit[j]), int(held[j])), 1)
            elif changed[j]:
                old = np.flatnonzero(current == j)
                ordered, can = resizing.in_place_order(old[np.argsort(rank[old])], g, node)
                resizes.append(Resize(int(rows[j]), ordered.tolist(), batch(j, len(g)), LR_LINEAR, ones.in_place and can))
            else:
                keep.append(int(rows[j]))
        ones._epoch_mark[rows[changed]] = epochs[changed]
        # A job that ran, still waiting under the schedule deployed, is rejected: R halves.
        unscheduled = ~np.isin(np.arange(n), best)
        rejected = ~running & (active.run_s > 0) & unscheduled
        ones._limit[rows[rejected]] = search.resume_limit(limit, rejected)[rejected]
        if ctx.explaining:
            _explain_waits(ctx, rows[~running & unscheduled], best)
        return Plan.of(
            launches, keep=np.asarray(keep, dtype=np.int64), suspend=np.asarray(suspend, dtype=np.int64), resizes=resizes
        )
    ones.counters["held_back"] += 1
    launches, started = _start_free(ctx, rows, running, best, current, batch)
    ones._epoch_mark[rows[started]] = epochs[started]
    return Plan.of(launches, keep=rows[running])


def _start_free(ctx: RoundContext, rows, running, best, current, batch) -> tuple[list[Assignment], list[int]]:
    """While the epoch gate holds `best` back: the launches of the waiting jobs whose GPUs in it
    are all free now (`batch(j, gpus)`: job j's global batch on that many) and their indices;
    and why the others wait."""
    free = current < 0
    standing = current.copy()  # the allocation in force, with this round's launches
    launches, started, gated, gated_gpus = [], [], [], []
    for j in np.flatnonzero(~running).tolist():
        g = np.flatnonzero(best == j)
        if len(g) and free[g].all():
            launches.append(Assignment(int(rows[j]), g.tolist(), batch(j, len(g))))
            started.append(j)
            standing[g] = j
        elif len(g):
            gated.append(int(rows[j]))
            gated_gpus.append(len(g))
    if ctx.explaining:
        _explain_held_back(ctx, rows[~running & ~np.isin(np.arange(len(rows)), best)], 0, standing)
        _explain_held_back(ctx, np.asarray(gated, dtype=np.int64), np.asarray(gated_gpus, dtype=np.int64), standing)
    return launches, started


def _explain_held_back(ctx: RoundContext, rows: np.ndarray, gpus: np.ndarray | int, standing: np.ndarray) -> None:
    """Waiting jobs while the epoch gate holds the best schedule back, with the GPUs that
    schedule gives each (0: none); the allocation that stands instead (`standing`: the one in
    force, with this round's launches) with the jobs it runs and the GPUs it leaves idle."""
    if len(rows):
        held = standing[standing >= 0]
        ctx.explain(Reason.GATED, rows, gpus, len(np.unique(held)), int(len(standing) - len(held)))


def _explain_waits(ctx: RoundContext, rows: np.ndarray, schedule: np.ndarray) -> None:
    """Waiting jobs the schedule gives no GPU: with how many jobs it runs and GPUs it leaves idle."""
    if len(rows):
        scheduled = schedule[schedule >= 0]
        ctx.explain(Reason.NOT_SCHEDULED, rows, len(np.unique(scheduled)), int(len(schedule) - len(scheduled)))
