"""CPU and memory with the GPUs: Synergy's allocators (Mohan et al., OSDI 2022).

They take a placer's plan (which GPUs each job gets) and say how many CPU cores and how much
memory come with those GPUs, for the jobs the plan launches and, when that changes, for the
jobs it keeps. A job's allocation is spread over its machines like its GPUs. How fast a job
runs on its allocation is the throughput model's business (traces/throughput.py, with the
sensitivity profile of traces/resources.py); the runtime checks that no machine hands out more
than it has (runtime/plans.py).

Synergy-Opt (the paper's LP and its rounding) is not built: see SynergyTune's docstring and
docs/reproductions.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.runtime.element import Element, In, Out, element, element_family
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element_family
class _Allocator(Element):
    """The shared ports of the CPU and memory allocators.

    Ports:
        plan: a placer's plan (which GPUs each job gets).
        allocated: the same plan, with each launched job's CPU cores and memory (and new ones
            for kept jobs whose share changes).
    Counters:
        allocated: launches given CPU and memory so far.
    """

    category = "placement"
    inputs = (In("plan", Plan),)
    outputs = (Out("allocated", Plan),)

    def start(self, ctx: RoundContext) -> None:
        self.counters.update(allocated=0)


@element
class Proportional(_Allocator):
    """Give every launched job the CPU cores and memory that come with its GPUs in proportion:
    on a machine of 8 GPUs, 24 cores and 500 GB, 3 cores and 62.5 GB per GPU.

    This is what every plan gets when no allocator says otherwise (the GPU-proportional
    baseline of Synergy's evaluation); the element makes it explicit in a graph.

    Arguments:
        none
    See also: SynergyTune, Launch
    Paper: Synergy (OSDI'22) §2 and §6 (GPU-proportional allocation); Blox (EuroSys'24) Fig. 5.
    """

    def tick(self, ctx: RoundContext, plan: Plan) -> Plan:
        if not len(plan.launch_rows):
            return plan
        cpus, memory = ctx.throughput.proportional(_placement(plan))
        self.counters["allocated"] += len(plan.launch_rows)
        return attrs.evolve(plan, alloc_rows=plan.launch_rows, alloc_cpus=cpus, alloc_memory_gb=memory)


@element
class SynergyTune(_Allocator):
    """Give jobs their best-case CPU cores and memory where their machines have room, and
    never less than they need of the GPU-proportional share.

    Each job's demand is its model's best-case vector in the sensitivity profile (the fewest
    cores, then the least memory, at which it reaches its top speed; traces/resources.py),
    times its GPUs; a job whose model has no profile asks for its trace's `cpus` and
    `memory_gb`, else for the proportional share. On a machine, a job's share of its demand is
    capped at what the machine has. Its fallback is the proportional share when it demands
    more than that of either resource, else its demand (a job that needs less than its share
    leaves the rest to others: the spare Synergy hands on).

    Every round in which jobs start, stop or move, all running jobs first get their fallbacks, which always fit
    (the fallbacks never exceed the proportional shares). The spare left on each machine then
    goes, whole demands only, to jobs in this order: kept jobs that already had their demand
    (so that running jobs keep what they got when they can), launches in the plan's order,
    then the other kept jobs. A job whose demand does not fit on all its machines stays at its
    fallback. This reaches the states Synergy-Tune's three steps reach (demand; else the
    proportional share; else peers reduced to their proportional shares) without its
    failure path, and also lets a kept job grow again when room frees up.

    Unlike Synergy's simulator, the GPUs come from the placer before the CPU and memory are
    handed out (Synergy picks the first GPUs whose server has room for the demand), and
    Synergy-Opt's LP is not built: its formulation allocates fractional servers and relies on
    a rounding step the paper describes only informally (docs/reproductions.md).

    Arguments:
        none
    See also: Proportional, FirstFree, Fifo
    Paper: Synergy (OSDI'22) §4.2 (Synergy-Tune); Blox (EuroSys'24) Table 3 and Fig. 5.
    """

    def tick(self, ctx: RoundContext, plan: Plan) -> Plan:
        events = ctx.events
        if not (plan.changes or len(events.finished) or len(events.requeued)) or not len(plan.keep) + len(plan.launch_rows):
            return plan  # nothing freed or taken: every job keeps what it has
        cluster, jobs = ctx.cluster, ctx.jobs
        # Who holds which GPU once the plan is carried out (a space-sharing pair: both).
        keep = plan.keep
        rows = np.concatenate([keep, plan.launch_rows])
        gpu_owner = [np.asarray(ctx.holder)]
        if ctx.co_holder is not None:
            gpu_owner.append(np.asarray(ctx.co_holder))
        gpus, owner = [], []
        for h in gpu_owner:
            mine = isin_rows(h, keep)
            gpus.append(mine.nonzero()[0])
            owner.append(h[mine])
        gpus.append(plan.launch_gpus)
        owner.append(plan.launch_rows.repeat(plan.launch_counts))
        gpus_all, owner_all = np.concatenate(gpus), np.concatenate(owner)
        position = np.searchsorted(np.sort(rows), owner_all)
        order = np.argsort(rows, kind="stable")
        job_of_gpu = order[position]  # index into `rows` of each GPU's job
        n_jobs, n_nodes = len(rows), cluster.n_nodes
        # GPUs of each job on each machine (jobs x machines), and each job's GPUs.
        per_node = np.zeros((n_jobs, n_nodes))
        np.add.at(per_node, (job_of_gpu, cluster.gpu_node[gpus_all]), 1.0)
        counts = per_node.sum(axis=1)
        spread = per_node / counts[:, None]
        share_cpu, share_memory = ctx.throughput.gpu_shares()
        fair = np.zeros((n_jobs, 2))
        np.add.at(fair, job_of_gpu, np.stack([share_cpu[gpus_all], share_memory[gpus_all]], axis=1))
        demand = best_case(ctx, rows, counts, fair)
        capacity = np.stack([np.asarray(cluster.node_cpus, float), np.asarray(cluster.node_memory_gb, float)], axis=1)
        # Per machine, a job's demand is capped at what the machine has.
        portion = np.minimum(spread[:, :, None] * demand[:, None, :], capacity[None, :, :])
        demand = portion.sum(axis=1)
        fallback = np.where((demand > fair + 1e-9).any(axis=1)[:, None], fair, demand)
        spare = capacity - np.einsum("jn,jr->nr", spread, fallback)
        given = fallback.copy()
        n_keep = len(keep)
        held = np.stack([jobs.column("cpus_held")[keep], jobs.column("memory_held_gb")[keep]], axis=1)
        had_demand = np.zeros(n_jobs, dtype=bool)
        had_demand[:n_keep] = np.isclose(held, demand[:n_keep]).all(axis=1)
        wants = (demand > fallback + 1e-9).any(axis=1)
        kept = np.arange(n_jobs) < n_keep
        sequence = np.concatenate(
            [(wants & had_demand).nonzero()[0], (wants & ~kept).nonzero()[0], (wants & kept & ~had_demand).nonzero()[0]]
        )
        for j in sequence.tolist():  # greedy in order: each grant changes what is left for the next
            extra = spread[j][:, None] * (demand[j] - fallback[j])[None, :]
            if (extra <= spare + 1e-9).all():
                spare -= extra
                given[j] = demand[j]
        # Launches, and kept jobs whose allocation changes.
        changed = np.ones(n_jobs, dtype=bool)
        changed[:n_keep] = ~np.isclose(held, given[:n_keep]).all(axis=1)
        self.counters["allocated"] += len(plan.launch_rows)
        return attrs.evolve(plan, alloc_rows=rows[changed], alloc_cpus=given[changed, 0], alloc_memory_gb=given[changed, 1])


def best_case(ctx: RoundContext, rows: np.ndarray, counts: np.ndarray, fair: np.ndarray) -> np.ndarray:
    """(jobs, 2): each job's best-case CPU cores and GB of memory, all its GPUs together: its
    model's from the sensitivity profile, else its trace's `cpus` and `memory_gb`, else `fair`."""
    jobs = ctx.jobs
    demand = fair.copy()
    for column, k in (("cpus", 0), ("memory_gb", 1)):
        if jobs.has_column(column):
            asked = jobs.column(column)[rows]
            demand[:, k] = np.where(np.isnan(asked), demand[:, k], asked)
    model = jobs.column("resource_model")[rows] if jobs.has_column("resource_model") else np.full(len(rows), -1)
    known = model >= 0
    if known.any():
        table = ctx.throughput.resources
        demand[known, 0] = table.best_cpus[model[known]] * counts[known]
        demand[known, 1] = table.best_memory_gb[model[known]] * counts[known]
    return demand


def _placement(plan: Plan):
    from roundhouse.traces.throughput import Placement

    return Placement(plan.launch_gpus, plan.launch_counts, plan.launch_starts)
