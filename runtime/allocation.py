"""CPU and memory allocations as the world books them: what each launch of a plan gets, the
placement of kept jobs a plan gives new amounts (for their rates), and the core-seconds an
allocation that ends has held. The world (runtime/world.py) calls these with its own arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan
from roundhouse.traces.throughput import Placement, ThroughputModel

if TYPE_CHECKING:
    from roundhouse.runtime.world import World


def close_allocations(cols: dict[str, np.ndarray], rows: np.ndarray) -> None:
    """Book, in the world's job-table columns, the core- and GB-seconds of these jobs' current
    allocations, which end now (the world calls this; traces/jobs.py `resource_seconds` adds
    the part of running allocations not booked yet)."""
    run_s, since = cols["run_s"][rows], cols["held_since_run_s"]
    held_s = run_s - since[rows]
    cols["cpu_s"][rows] += cols["cpus_held"][rows] * held_s
    cols["memory_gb_s"][rows] += cols["memory_held_gb"][rows] * held_s
    since[rows] = run_s


def shared_halves(shares: tuple[np.ndarray, np.ndarray], paired: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GPU-proportional shares (cores, GB: per GPU or per launch) with those of holders that
    share their GPUs with a partner (`paired`) halved: the two jobs on a shared GPU split its
    share half and half, so that a machine never hands out more than it has."""
    if not np.count_nonzero(paired):
        return shares
    return np.where(paired, shares[0] * 0.5, shares[0]), np.where(paired, shares[1] * 0.5, shares[1])


def proportional_resources(throughput: ThroughputModel, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """The GPU-proportional CPU cores and GB of memory of each launch of a plan, all its
    machines together: its GPUs' shares, half of them for a launch that shares its GPUs with a
    partner (the partner has the other half)."""
    if not len(plan.launch_rows):
        return np.zeros(0), np.zeros(0)
    share_cpu, share_memory = throughput.gpu_shares()
    gpus, starts = plan.launch_gpus, plan.launch_starts
    if len(gpus) == len(starts):  # one GPU each
        cpus, memory = share_cpu[gpus], share_memory[gpus]
    else:
        cpus, memory = np.add.reduceat(share_cpu[gpus], starts), np.add.reduceat(share_memory[gpus], starts)
    if plan.launch_partner is None:
        return cpus, memory
    return shared_halves((cpus, memory), plan.launch_partner >= 0)


def launch_resources(throughput: ThroughputModel, plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """The CPU cores and GB of memory of each launch of a plan: what the plan gives it, else
    its GPU-proportional share (`proportional_resources`: half of it for a space-sharing pair's
    launches)."""
    if not len(plan.launch_rows):
        return np.zeros(0), np.zeros(0)
    cpus, memory = proportional_resources(throughput, plan)
    rows = plan.alloc_rows
    if rows is None or plan.alloc_cpus is None or plan.alloc_memory_gb is None:
        return cpus, memory
    named = isin_rows(rows, plan.launch_rows)
    if named.any():
        at = {int(r): i for i, r in enumerate(plan.launch_rows.tolist())}
        where = np.array([at[int(r)] for r in rows[named].tolist()], dtype=np.int64)
        cpus[where], memory[where] = plan.alloc_cpus[named], plan.alloc_memory_gb[named]
    return cpus, memory


def regain_shared(
    cols: dict[str, np.ndarray],
    throughput: ThroughputModel,
    survivors: np.ndarray,
    gpus: list,
    freed: tuple[np.ndarray, np.ndarray],
) -> None:
    """Running jobs whose space-sharing partner left (`survivors`; `gpus`, each one's GPUs)
    have their GPUs to themselves, and take the CPU cores and memory their partner held
    (`freed`: each partner's, in the same order) up to their GPUs' whole share; one holding
    more keeps what it holds. Only what the partner held is free: an allocator may have given
    the machine's rest to other jobs. (Books the allocations that end.)"""
    share_cpu, share_memory = throughput.gpu_shares()
    whole_cpu = np.array([share_cpu[g].sum() for g in gpus])
    whole_memory = np.array([share_memory[g].sum() for g in gpus])
    close_allocations(cols, survivors)
    for column, whole, partner in (("cpus_held", whole_cpu, freed[0]), ("memory_held_gb", whole_memory, freed[1])):
        held = cols[column][survivors]
        cols[column][survivors] = np.maximum(held, np.minimum(whole, held + partner))


def kept_allocations(plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kept jobs a plan gives CPU and memory (sorted rows), with their amounts."""
    rows, cpus, memory = plan.alloc_rows, plan.alloc_cpus, plan.alloc_memory_gb
    assert rows is not None and cpus is not None and memory is not None
    kept = ~isin_rows(rows, plan.launch_rows)
    order = np.argsort(rows[kept], kind="stable")
    return rows[kept][order], cpus[kept][order], memory[kept][order]


def held_placement(holders, batch, partner, rows, cpus, memory) -> Placement:
    """Where running jobs `rows` (sorted) are, from the GPU holder arrays (a space-sharing
    partner's shared GPUs included), with these allocations."""
    gpus = np.concatenate([isin_rows(h, rows).nonzero()[0] for h in holders])
    owner = np.concatenate([h[isin_rows(h, rows)] for h in holders])
    sort = np.lexsort((gpus, owner))
    gpus, owner = gpus[sort], owner[sort]
    counts = np.bincount(np.searchsorted(rows, owner), minlength=len(rows))
    return Placement.of(gpus, counts, batch=batch, partner=partner, cpus=cpus, memory_gb=memory)


def reallocate(world: World, plan: Plan) -> None:
    """Kept jobs the plan gives new CPU and memory: their books and rates follow."""
    cols, (rows, cpus, memory) = world._cols, kept_allocations(plan)
    if len(rows):
        close_allocations(world._cols, rows)
        cols["cpus_held"][rows], cols["memory_held_gb"][rows] = cpus, memory
        holders = [h for h in (world.holder, world.co_holder) if h is not None]
        partner = cols["partner"][rows] if world.co_holder is not None else None
        placement = held_placement(holders, cols["batch_used"][rows], partner, rows, cpus, memory)
        compute = np.empty(len(rows))
        rerated(cols, rows, world._rates(rows, placement, compute), compute)


def rerated(cols: dict[str, np.ndarray], rows: np.ndarray, rate: np.ndarray, compute: np.ndarray) -> None:
    """Running jobs whose rate changed on the GPUs and batch they hold (new CPU and memory, a
    space-sharing partner gone): their goodput follows, as a launch or resize books it (their
    batch, so their efficiency, is unchanged)."""
    cols["rate"][rows] = rate
    cols["compute_rate"][rows] = compute
    cols["goodput"][rows] = rate
