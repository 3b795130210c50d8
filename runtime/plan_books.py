"""Carrying out a checked plan on the world's books: the jobs it completes, suspends, resizes and
launches, who holds which GPU after it, the set of running jobs, and the CPU and memory it
allocates. Checking comes first and changes nothing (runtime/plans.py); the launch rates are
worked out before anything changes too, so that a launch that cannot run leaves the books as
they were.

World binds these functions as its methods (runtime/world.py), so that the engine's calls,
every round a plan changes something, cost no more than methods of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime import resizing
from roundhouse.runtime.allocation import launch_resources, reallocate
from roundhouse.runtime.launch_rates import cannot_run
from roundhouse.runtime.plans import PlanError
from roundhouse.runtime.types import Events, Plan
from roundhouse.traces.jobs import PENDING, RUNNING, read_only

if TYPE_CHECKING:
    from roundhouse.runtime.world import World


def check_plan(world: World, plan: Plan) -> None:
    """Raise PlanError unless the plan can be carried out (runtime/plans.py)."""
    world._check(plan)


def complete(world: World, rows: np.ndarray, now: float) -> None:
    """Finish these unfinished jobs now, keeping the work they have done (a plan's
    `complete`): their GPUs are free at once."""
    world._leave(rows, np.full(len(rows), float(now)))


def apply_plan(world: World, plan: Plan, now: float) -> Events | None:
    """Carry out a checked plan on the world's books; returns the launch/suspend events
    (None when the plan only renews leases)."""
    if not plan.changes:
        return None
    cols = world._cols
    rows, gpus, counts = plan.launch_rows, plan.launch_gpus, plan.launch_counts
    # Everything that can refuse the plan comes before anything changes. The rates without
    # communication differ from the rates only under the communication model.
    compute = np.empty(len(rows)) if world.throughput.communication is not None else None
    rates = world.launch_rates(plan, compute) if len(rows) else np.zeros(0)
    if world._any_model and len(rates) and rates.min() <= 0:  # only a profile says "cannot run"
        raise PlanError(cannot_run(world, plan, rates))
    resize = resizing.rates(world, plan) if len(plan.resize_rows) else None
    suspend = plan.suspend
    if len(plan.complete):
        complete(world, plan.complete, now)
    paired = plan.launch_partner is not None and bool((plan.launch_partner >= 0).any())
    if paired and world.co_holder is None:
        # The first pair of the run: from now on, jobs that stop running (the suspensions
        # below included) leave shared GPUs to their partners (runtime/space_sharing.py).
        world.co_holder = np.full(world.cluster.n_gpus, -1, dtype=np.int64)
        world.co_holder_face = read_only(world.co_holder)
    if len(suspend):
        cols["status"][suspend] = PENDING
        cols["preemptions"][suspend] += 1
        world._release(suspend, leave_running_rows=True)
    if resize is not None:
        resizing.apply(world, cols, plan, *resize)
    if paired:
        # The launch that comes first in its pair (as does every launch without a partner)
        # holds its GPUs in `holder`; the other in `co_holder`.
        second = ~world._check.partners(plan)
        per_gpu = second.repeat(counts)
        assert world.co_holder is not None  # made above for this plan's pairs
        world.holder[gpus[~per_gpu]] = rows[~second].repeat(counts[~second])
        world.co_holder[gpus[per_gpu]] = rows[second].repeat(counts[second])
        cols["partner"][rows] = plan.launch_partner
    elif len(rows):
        world.holder[gpus] = rows.repeat(counts)
    if len(rows):
        book_launches(world, plan, rates, compute, now)
    # The checked plan's keeps and resizes are the running jobs that go on running. Each of the
    # three is sorted, and a stable sort merges sorted runs rather than sorting afresh.
    running = np.concatenate((plan.keep, plan.resize_rows, rows)) if len(rows) or len(plan.resize_rows) else plan.keep.copy()
    running.sort(kind="stable")
    world._set_running(running)
    if plan.alloc_rows is not None and len(plan.alloc_rows):
        reallocate(world, plan)
    return Events(
        time=now, launched=rows, launched_gpus=gpus, launched_counts=counts, suspended=suspend, resized=plan.resize_rows
    )


def book_launches(world: World, plan: Plan, rates: np.ndarray, compute: np.ndarray | None, now: float) -> None:
    """A checked plan's launches, into the job table (the holder arrays are the caller's)."""
    cols, cluster = world._cols, world.cluster
    rows, gpus, counts = plan.launch_rows, plan.launch_gpus, plan.launch_counts
    cols["status"][rows] = RUNNING
    cols["rate"][rows] = rates
    cols["compute_rate"][rows] = rates if compute is None else compute
    cols["held"][rows] = counts
    cols["cpus_held"][rows], cols["memory_held_gb"][rows] = launch_resources(world.throughput, plan)
    cols["held_since_run_s"][rows] = cols["run_s"][rows]
    cols["placed_type"][rows] = cluster.gpu_type[gpus[plan.launch_starts]] if len(cluster.gpu_types) > 1 else 0
    batch = cols["batch_size"][rows]
    if plan.launch_batch is not None:
        batch = np.where(plan.launch_batch > 0, plan.launch_batch, batch)
        # Only launches that carry a batch size set the learning-rate factor: a launch without
        # one (the hot path of large runs) leaves it as the job's latest resize or launch set it.
        resizing.note_launch_lr(world, cols, rows, batch)
    cols["batch_used"][rows] = batch
    cols["launches"][rows] += 1
    cols["first_start_s"][rows] = np.fmin(cols["first_start_s"][rows], now)  # NaN: not started before
    resizing.note_goodput(world, cols, rows, rates, batch)
