"""Checking a plan's resizes of running jobs: each names a running job, once, that the plan
does not also keep or suspend (`resizes_named_once`, asked only when the plan's accounting of
running jobs fails), and gives it GPUs it may take, within the job's limits (`check_resizes`).
How a resize is carried out is runtime/resizing.py.

PlanCheck binds these functions as its methods (runtime/plans.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.plan_errors import PlanError
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan
from roundhouse.traces.jobs import FINISHED, RUNNING

if TYPE_CHECKING:
    from roundhouse.runtime.plans import PlanCheck


def _largest(a: np.ndarray):
    """The largest entry of a non-empty array (an index lookup: cheaper than `a.max()`)."""
    return a[a.argmax()]


def resizes_named_once(check: PlanCheck, plan: Plan, keep: np.ndarray, suspend: np.ndarray) -> None:
    """A resize of a job that is not running, or of one the plan also keeps or suspends."""
    rows = plan.resize_rows
    if rows.min() < 0 or rows.max() >= len(check.world.jobs):
        raise PlanError("plan resizes a job row that does not exist")
    status = check.world.jobs.writable["status"][rows]
    if (status != RUNNING).any():
        bad = rows[status != RUNNING][0]
        what = "has finished" if status[status != RUNNING][0] == FINISHED else "is waiting (launch it instead)"
        raise PlanError(f"plan resizes job {check._job(bad)}, which is not running: it {what}")
    twice = rows[isin_rows(rows, np.sort(np.concatenate((keep, suspend))))]
    if len(twice):
        raise PlanError(f"plan resizes job {check._job(twice[0])} and also keeps or suspends it")
    ordered = np.sort(rows)
    if np.count_nonzero(ordered[1:] == ordered[:-1]):
        raise PlanError(f"plan resizes job {check._job(ordered[1:][ordered[1:] == ordered[:-1]][0])} twice")


def check_resizes(check: PlanCheck, plan: Plan, suspend: np.ndarray) -> None:
    """Resizes name running jobs (`PlanCheck`'s accounting saw to that) and give each at least
    one existing, online GPU that is free, its own, or given up in this plan, within the
    job's limits (`max_gpus`, `max_batch_size` columns, where the job has them)."""
    world, cols = check.world, check.world.jobs.writable
    rows, gpus, counts = plan.resize_rows, plan.resize_gpus, plan.resize_counts
    if counts[counts.argmin()] < 1:
        raise PlanError(f"plan resizes job {check._job(rows[counts < 1][0])} to no GPU")
    n_gpus = world.cluster.n_gpus
    if _largest(gpus.view(np.uint64)) >= n_gpus:
        raise PlanError(f"plan resizes onto GPU {gpus[(gpus < 0) | (gpus >= n_gpus)][0]}, which does not exist")
    owner = rows.repeat(counts)
    per_gpu = np.bincount(gpus, minlength=n_gpus)
    if _largest(per_gpu) > 1:
        gpu = int(np.argmax(per_gpu))
        raise PlanError(f"plan resizes job {check._job(owner[gpus == gpu][-1])} onto GPU {gpu}, which it gives another job too")
    if not world.all_online and not world.online[gpus].all():
        off = ~world.online[gpus]
        raise PlanError(f"plan resizes job {check._job(owner[off][0])} onto GPU {gpus[off][0]}, which is offline")
    for holder in (world.holder, world.co_holder):
        if holder is None:
            continue
        holders = holder[gpus]
        # Free, the job's own, or a GPU that a suspended or another resized job gives up.
        ok = (holders < 0) | (holders == owner) | isin_rows(holders, suspend) | isin_rows(holders, rows)
        if np.count_nonzero(ok) < len(ok):
            raise PlanError(
                f"plan resizes job {check._job(owner[~ok][0])} onto GPU {gpus[~ok][0]}, "
                f"which job {check._job(holders[~ok][0])} holds (busy)"
            )
    if "max_gpus" in cols:
        limit = cols["max_gpus"][rows].astype(np.float64)
        over = counts > np.where(np.isnan(limit) | (limit <= 0), np.inf, limit)
        if over.any():
            i = int(over.nonzero()[0][0])
            raise PlanError(f"plan resizes job {check._job(rows[i])} to {counts[i]} GPUs, past its limit of {int(limit[i])}")
    if plan.resize_batch is not None:
        batch = plan.resize_batch
        if (batch < 0).any():
            raise PlanError(f"plan resizes job {check._job(rows[batch < 0][0])} to a negative batch size")
        if "max_batch_size" in cols:
            limit = cols["max_batch_size"][rows].astype(np.float64)
            over = batch > np.where(np.isnan(limit) | (limit <= 0), np.inf, limit)
            if over.any():
                i = int(over.nonzero()[0][0])
                raise PlanError(
                    f"plan resizes job {check._job(rows[i])} to batch size {batch[i]}, past its limit of {int(limit[i])}"
                )
        small = (batch > 0) & (batch < counts)
        if small.any():
            i = int(small.nonzero()[0][0])
            raise PlanError(
                f"plan resizes job {check._job(rows[i])} to batch size {batch[i]} on {counts[i]} GPUs (under one sample per GPU)"
            )
