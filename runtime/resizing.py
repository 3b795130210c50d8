"""Resizing running jobs (elastic jobs): the world's side of a plan's resizes. A resized job
keeps its identity and its progress and goes on running on its new GPUs, at its new batch size
and rate; what the change costs in time is the backend's (runtime/backends/sim.py), and which
changes can be made in place is `in_place_order`'s rule. Checks are in runtime/plans.py with the
rest of plan checking."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.allocation import close_allocations
from roundhouse.runtime.plans import PlanError
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import LR_ADASCALE, LR_KEEP, LR_LINEAR, LR_SQRT, Plan
from roundhouse.traces.throughput import Placement

if TYPE_CHECKING:
    from roundhouse.runtime.world import World
    from roundhouse.traces.jobs import JobTable


def rates(world: World, plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The batch size, rate and compute rate each resized job will run at (computed before
    anything changes, so that a job that cannot run there leaves the books untouched)."""
    cols, rows = world.jobs.writable, plan.resize_rows
    batch = cols["batch_used"][rows].copy()
    if plan.resize_batch is not None:
        batch = np.where(plan.resize_batch > 0, plan.resize_batch, batch)
    placement = Placement(plan.resize_gpus, plan.resize_counts, plan.resize_starts, batch)
    compute = np.empty(len(rows))
    got = world._rates(rows, placement, compute)
    if got.min() <= 0:
        bad = int((got <= 0).nonzero()[0][0])
        raise PlanError(
            f"plan resizes job {cols['job_id'][rows[bad]]} ({cols['model'][rows[bad]]}) to "
            f"{plan.resize_counts[bad]} GPU(s) with batch size {batch[bad]}, where it cannot run"
        )
    return batch, got, compute


def apply(
    world: World, cols: dict[str, np.ndarray], plan: Plan, batch: np.ndarray, rate: np.ndarray, compute: np.ndarray
) -> None:
    """Resized jobs keep running (same identity, same progress) on their new GPUs, at their
    new batch size and rate; their learning-rate factor follows the plan's rule."""
    rows, counts, gpus = plan.resize_rows, plan.resize_counts, plan.resize_gpus
    # A resized job's allocation ends with its old GPUs: it holds its new GPUs' share (as a
    # launch does) unless the plan names amounts for it (the world books those after this).
    close_allocations(cols, rows)
    share_cpu, share_memory = world.throughput.gpu_shares()
    cols["cpus_held"][rows] = np.add.reduceat(share_cpu[gpus], plan.resize_starts)
    cols["memory_held_gb"][rows] = np.add.reduceat(share_memory[gpus], plan.resize_starts)
    world.holder[isin_rows(world.holder, rows)] = -1
    world.holder[gpus] = rows.repeat(counts)
    cols["held"][rows] = counts
    cols["rate"][rows] = rate
    cols["compute_rate"][rows] = compute
    cluster = world.cluster
    cols["placed_type"][rows] = cluster.gpu_type[gpus[plan.resize_starts]] if len(cluster.gpu_types) > 1 else 0
    cols["resizes"][rows] += 1
    rule = plan.resize_lr if plan.resize_lr is not None else np.full(len(rows), LR_LINEAR)
    cols["lr_rule"][rows] = rule
    cols["lr_scale"][rows] = lr_scale(rule, batch / lr_base(world.jobs, rows))
    if world.batch_jump_penalty > 0 and "epoch_size" in cols:
        cols["work"][rows] += jump_penalty(world.batch_jump_penalty, cols["batch_used"][rows], batch, cols["epoch_size"][rows])
    cols["batch_used"][rows] = batch
    note_goodput(world, cols, rows, rate, batch)


def note_goodput(world: World, cols: dict[str, np.ndarray], rows: np.ndarray, rate: np.ndarray, batch: np.ndarray) -> None:
    """Jobs launched or resized: their goodput (their rate) and the efficiency of their batch."""
    cols["goodput"][rows] = rate
    throughput = world.throughput
    cols["efficiency"][rows] = 1.0 if throughput.elastic is None else throughput.efficiency(world.jobs.reader, rows, batch)


def jump_penalty(epochs: float, before: np.ndarray, after: np.ndarray, epoch_size: np.ndarray) -> np.ndarray:
    """Work a resize adds under ONES' convergence caveat: `epochs` epochs for each doubling of
    the batch size beyond 2x in one step (none for growth within 2x, a shrink, or a job without
    an epoch size). ONES' linear scaling rule keeps epochs to target otherwise unchanged."""
    doublings = np.log2(np.maximum(after, 1) / np.maximum(before, 1)) - 1.0
    extra = epochs * np.maximum(doublings, 0.0) * epoch_size
    return np.where(np.isnan(extra), 0.0, extra)


def in_place_order(old: np.ndarray, new: np.ndarray, gpu_node: np.ndarray) -> tuple[np.ndarray, bool]:
    """Whether a resize from `old` (the job's GPUs in rank order) to the GPUs `new` can be done in
    place, and the new GPUs in rank order: the job keeps its first k ranks on the GPUs they hold
    (k the smaller of its old and new sizes), and new ranks go only to machines it already runs
    on (`gpu_node`: each GPU's machine). Otherwise, a move, or a grow onto another machine, it
    is a checkpoint and restart; the order is then `new`'s. The live backend carries a resize
    out in place only under this rule (runtime/backends/live/resizes.py); a scheduler that
    asks for an in-place resize follows it to be charged as the live run would be."""
    old, new = np.asarray(old, dtype=np.int64), np.asarray(new, dtype=np.int64)
    k = min(len(old), len(new))
    kept = old[:k]
    if not np.isin(kept, new).all():
        return new, False  # the GPUs of some of the first k ranks go: not a grow or a shrink
    extra = new[~np.isin(new, kept)]
    if len(new) < len(old) or not len(extra):
        return kept, True
    ok = bool(np.isin(gpu_node[extra], gpu_node[old]).all())
    return np.concatenate([kept, extra]), ok


def note_launch_lr(world: World, cols: dict[str, np.ndarray], rows: np.ndarray, batch: np.ndarray) -> None:
    """Jobs launched at global batch `batch`: the factor their learning rate takes there, by the
    rule of their latest resize (a relaunch keeps it), linear for a job never resized (its
    `lr_rule` stays -1)."""
    rule = cols["lr_rule"][rows]
    cols["lr_scale"][rows] = lr_scale(np.where(rule >= 0, rule, LR_LINEAR), batch / lr_base(world.jobs, rows))


def lr_base(jobs: JobTable, rows: np.ndarray) -> np.ndarray:
    """B0 of each job at `rows`: the batch size its own learning rate (the trace's) is for, which
    a learning-rate rule scales from. Its `local_batch` where it has one (ONES' traces give the
    learning rate of the batch per GPU, and ONES' rule is lr x GPUs: B / local batch), else its
    `batch_size`; an empty `local_batch` (NaN), or none at all, is no local batch. At least 1.
    The simulator and the live backend both take B0 from here."""
    own = np.asarray(jobs.column("batch_size")[rows], dtype=np.float64)
    if jobs.has_column("local_batch"):
        local = np.asarray(jobs.column("local_batch")[rows], dtype=np.float64)
        own = np.where(local >= 1, local, own)  # (NaN >= 1 is False)
    return np.maximum(own, 1.0)


def lr_scale(rule: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """The factor a learning-rate rule gives the job's own learning rate when its batch size is
    `ratio` times its own, B / B0 (`lr_base`; NaN: the job adapts it itself)."""
    return np.select(
        [rule == LR_KEEP, rule == LR_LINEAR, rule == LR_SQRT, rule == LR_ADASCALE], [1.0, ratio, np.sqrt(ratio), np.nan]
    )
