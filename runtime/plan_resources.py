"""Checking a plan's CPU and memory allocations (`check_resources`), and the rule both the
check and the allocators spread a job's cores and memory over its GPUs by (`share_weights`).

PlanCheck binds `check_resources` as its method (runtime/plans.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.allocation import shared_halves
from roundhouse.runtime.plan_errors import PlanError
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan

if TYPE_CHECKING:
    from roundhouse.runtime.plans import PlanCheck


def share_weights(job: np.ndarray, gpus: np.ndarray, share: np.ndarray) -> np.ndarray:
    """How a job's CPU cores and memory, all its machines together, are spread over its GPUs: by
    each machine's GPU-proportional share per GPU, so that the job's proportional share fits on
    every machine even where machines differ. The allocators (elements/placement/synergy.py)
    spread what they give this way, and the plan check below spreads what it checks this way.

    The parts are pieces of jobs: a GPU each (the plan check) or a job's GPUs on one machine
    (the allocators). `job`: each piece's job, an index 0, 1, ...; `gpus`: its GPUs; `share`:
    (pieces, 2), the cores and GB per GPU of its machine. Returns (pieces, 2): each piece's part
    of its job's cores and of its memory (a job's parts add up to 1)."""
    n = int(job.max()) + 1 if len(job) else 0
    weighted = gpus[:, None] * share
    total = np.stack([np.bincount(job, weights=weighted[:, k], minlength=n) for k in (0, 1)], axis=1)[job]
    weighted = weighted / np.where(total > 0, total, 1.0)
    # Where all of a job's machines give the same share per GPU, the split by GPU count is the
    # same spread; its arithmetic is kept there, so that results on such clusters do not move
    # by a rounding. (Summed piece by piece in order, as a sum over machines in machine order.)
    by_count = gpus / np.maximum(np.bincount(job, weights=gpus, minlength=n), 1)[job]
    some = np.zeros((n, 2))
    some[job] = share  # (one piece's share per job, whichever: its machines are alike if all have it)
    unlike = np.stack([np.bincount(job, weights=share[:, k] != some[job, k], minlength=n) for k in (0, 1)], axis=1)
    return np.where((unlike == 0)[job], by_count[:, None], weighted)


def _per_gpu_weights(owner: np.ndarray, cpu: np.ndarray, memory: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`share_weights` of GPUs, from the job holding each and its share of cores and of memory."""
    _, job = np.unique(owner, return_inverse=True)
    w = share_weights(job, np.ones(len(owner)), np.stack([cpu, memory], axis=1))
    return w[:, 0], w[:, 1]


def check_resources(check: PlanCheck, plan: Plan, suspend: np.ndarray) -> None:
    """A plan's CPU and memory allocations: each names a job it launches or keeps, once,
    with amounts of 0 or more; and no machine gives its jobs more cores or memory than it
    has once the plan is carried out (a job's allocation spread over its GPUs like its
    GPU-proportional share; launches the plan names no allocation for at that share, which
    the two launches of a space-sharing pair split half and half)."""
    rows, cpus, memory = plan.alloc_rows, plan.alloc_cpus, plan.alloc_memory_gb
    assert rows is not None and cpus is not None and memory is not None  # (Plan checks they come together)
    if not len(rows):
        return
    world = check.world
    cols = world.jobs.writable
    if rows.min() < 0 or rows.max() >= len(world.jobs):
        raise PlanError("plan gives CPU and memory to a job row that does not exist")
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    if np.count_nonzero(ordered[1:] == ordered[:-1]):
        raise PlanError(f"plan gives CPU and memory to job {check._job(ordered[1:][ordered[1:] == ordered[:-1]][0])} twice")
    bad = ~(np.isfinite(cpus) & (cpus >= 0) & np.isfinite(memory) & (memory >= 0))
    if bad.any():
        i = int(bad.nonzero()[0][0])
        raise PlanError(
            f"plan gives job {check._job(rows[i])} {cpus[i]:g} CPU cores and {memory[i]:g} GB of memory "
            "(each must be a finite number, 0 or more)"
        )
    named_ok = isin_rows(rows, plan.launch_rows) | isin_rows(rows, plan.keep) | isin_rows(rows, plan.resize_rows)
    if not named_ok.all():
        raise PlanError(
            f"plan gives CPU and memory to job {check._job(rows[~named_ok][0])}, which it neither launches, keeps nor resizes"
        )
    cluster = world.cluster
    share_cpu, share_memory = world.throughput.gpu_shares()
    per_cpu, per_memory = np.zeros(cluster.n_gpus), np.zeros(cluster.n_gpus)
    named_cpu, named_memory = cpus[order], memory[order]

    def named(job_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.minimum(np.searchsorted(ordered, job_rows), len(ordered) - 1)
        return ordered[pos] == job_rows, named_cpu[pos], named_memory[pos]

    # Each GPU's part of its job's allocation (`share_weights`, as the allocators spread it),
    # so that a job on machines of different shapes gives each no more than its room allows.
    # Resized jobs count on their new GPUs (below, as launches), not on those they give up.
    leaving = np.concatenate((suspend, plan.resize_rows)) if len(plan.resize_rows) else suspend
    kept_gpus, kept_owner = [], []
    for holder in (world.holder, world.co_holder):  # jobs that keep their GPUs
        if holder is None:
            continue
        on = ((holder >= 0) & ~isin_rows(holder, leaving)).nonzero()[0]
        kept_gpus.append(on)
        kept_owner.append(holder[on])
    if kept_gpus:
        on, h = np.concatenate(kept_gpus), np.concatenate(kept_owner)
        w_cpu, w_memory = _per_gpu_weights(h, share_cpu[on], share_memory[on])
        hit, c, m = named(h)
        np.add.at(per_cpu, on, np.where(hit, c, cols["cpus_held"][h]) * w_cpu)
        np.add.at(per_memory, on, np.where(hit, m, cols["memory_held_gb"][h]) * w_memory)
    # Launches and resizes take new GPUs: what the plan names, else their GPUs' share (half
    # of it each for a space-sharing pair: runtime/allocation.py `proportional_resources`).
    paired = plan.launch_partner >= 0 if plan.launch_partner is not None else np.zeros(len(plan.launch_rows), bool)
    for job_rows, counts, gpus, halved in (
        (plan.launch_rows, plan.launch_counts, plan.launch_gpus, paired),
        (plan.resize_rows, plan.resize_counts, plan.resize_gpus, np.zeros(len(plan.resize_rows), bool)),
    ):
        if len(gpus):
            owner = job_rows.repeat(counts)
            w_cpu, w_memory = _per_gpu_weights(owner, share_cpu[gpus], share_memory[gpus])
            default_cpu, default_memory = shared_halves((share_cpu[gpus], share_memory[gpus]), halved.repeat(counts))
            hit, c, m = named(job_rows)
            hit, c, m = hit.repeat(counts), c.repeat(counts), m.repeat(counts)
            np.add.at(per_cpu, gpus, np.where(hit, c * w_cpu, default_cpu))
            np.add.at(per_memory, gpus, np.where(hit, m * w_memory, default_memory))
    gpus, counts = plan.launch_gpus, plan.launch_counts
    for what, per_gpu, capacity in (
        ("CPU cores", per_cpu, cluster.node_cpus),
        ("GB of memory", per_memory, cluster.node_memory_gb),
    ):
        used = np.bincount(cluster.gpu_node, weights=per_gpu, minlength=cluster.n_nodes)
        over = used > np.asarray(capacity, dtype=np.float64) * (1 + 1e-9) + 1e-9
        if over.any():
            node = int(over.nonzero()[0][0])
            on_node = cluster.gpu_node == node
            jobs = np.unique(
                np.concatenate([h[on_node][h[on_node] >= 0] for h in (world.holder, world.co_holder) if h is not None])
            )
            jobs = np.union1d(jobs[~isin_rows(jobs, leaving)], plan.launch_rows.repeat(counts)[on_node[gpus]])
            jobs = np.union1d(jobs, plan.resize_rows.repeat(plan.resize_counts)[on_node[plan.resize_gpus]])
            names = ", ".join(str(check._job(r)) for r in jobs[:5].tolist())
            raise PlanError(
                f"plan gives the jobs on machine {node} ({names}) {used[node]:g} {what}, more than its {capacity[node]:g}"
            )
