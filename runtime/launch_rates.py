"""How fast the world's launches run: the rate of each launch of a plan, or of jobs placed anew,
from the throughput model (traces/throughput.py), with a fast path for runs where every job
runs at one unit of work per second wherever it is placed.

The fast path rests on three flags the world keeps, set as jobs arrive (`flags`): whether any
job so far has a profiled model, whether any slows down when spread over machines, and whether
any runs under the communication model. Once set, a flag stays set. While none is set, a launch
needs no call into the throughput model at all.

World binds these functions as its methods (runtime/world.py), so that a call costs no more
than a method of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.allocation import launch_resources
from roundhouse.runtime.plans import PlanError
from roundhouse.runtime.types import Plan
from roundhouse.traces.throughput import Placement, PlacementError

if TYPE_CHECKING:
    from roundhouse.runtime.world import World


def launch_rates(world: World, plan: Plan, compute: np.ndarray | None = None) -> np.ndarray:
    """Throughput of each launch of a plan (traces/throughput.py); `compute`, if given, is
    filled with the rates without communication."""
    if plan.launch_partner is None and plan.alloc_rows is None and plain(world):
        return plain_rates(len(plan.launch_rows), compute)
    cpus, memory = launch_resources(world.throughput, plan) if plan.alloc_rows is not None else (None, None)
    placement = Placement(
        plan.launch_gpus, plan.launch_counts, plan.launch_starts, plan.launch_batch, plan.launch_partner, cpus, memory
    )
    return rates(world, plan.launch_rows, placement, compute)


def plain(world: World) -> bool:
    """Every job so far is known by its duration, and nothing slows any of them down."""
    return not (world._any_model or world._any_slowdown or world._any_comm)


def plain_rates(n: int, compute: np.ndarray | None) -> np.ndarray:
    """One unit of work per second for each of `n` launches, wherever it runs."""
    if compute is not None:
        compute[:] = 1.0
    return np.ones(n)


def rates(world: World, rows: np.ndarray, placement: Placement, compute: np.ndarray | None = None) -> np.ndarray:
    """Throughput of these jobs placed so; `compute`, if given, is filled with the rates
    without communication. A placement the model refuses is the plan's error."""
    if placement.partner is None and placement.cpus is None and plain(world):
        return plain_rates(len(rows), compute)
    try:
        return world.throughput.rates(world.jobs.reader, rows, placement, world._any_model, compute)
    except PlacementError as err:
        raise PlanError(str(err)) from None


def cannot_run(world: World, plan: Plan, rates: np.ndarray) -> str:
    """Why the first launch the profile gives no rate cannot run."""
    cols, cluster = world._cols, world.cluster
    rows, gpus, counts, starts = plan.launch_rows, plan.launch_gpus, plan.launch_counts, plan.launch_starts
    bad = int((rates <= 0).nonzero()[0][0])
    gpu_type = cluster.gpu_types[cluster.gpu_type[gpus[starts[bad]]]]
    why = ""
    if world.profile.canonical_gpu_type(gpu_type) is None:  # a cluster spec the profile cannot serve
        why = f" (the throughput profile has no GPU type '{gpu_type}'; it knows {', '.join(world.profile.gpu_types)})"
    return f"plan puts job {cols['job_id'][rows[bad]]} ({cols['model'][rows[bad]]}) on {counts[bad]} {gpu_type} GPU(s), where it cannot run{why}"


# --- the flags, set as jobs arrive (runtime/world_events.py, `add_jobs`) ---
NO_FLAGS = (False, False, False)


def flags(columns: Mapping[str, np.ndarray], model: bool, slowdown: bool, comm: bool) -> tuple[bool, bool, bool]:
    """The world's flags (any job with a profiled model, any slowed down when spread, any under
    the communication model), as they are or as these jobs' columns set them. A flag already
    set is not looked up again."""
    model = model or bool(np.count_nonzero(columns["has_model"]))
    spread = None if slowdown else columns.get("spread_slowdown")
    slowdown = slowdown or (spread is not None and bool(np.count_nonzero(spread > 1.0)))
    comm_model = None if comm else columns.get("comm_model")
    comm = comm or (comm_model is not None and bool(np.count_nonzero(comm_model >= 0)))
    return model, slowdown, comm
