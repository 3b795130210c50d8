"""CPU and memory with the GPUs: Synergy's allocators (Mohan et al., OSDI 2022).

They take a placer's plan (which GPUs each job gets) and say how many CPU cores and how much
memory come with those GPUs, for the jobs the plan launches (SynergyTune and SynergyOpt: and
resizes, on their new GPUs) and, when that changes, for the jobs it keeps. A job's allocation
is spread over its machines like its GPU-proportional share (like its GPUs where its machines
are alike: runtime/plan_resources.py `share_weights`, the rule plans are checked by, through
`machine_weights`). How fast a job
runs on its allocation is the throughput model's business (traces/throughput.py, with the
sensitivity profile of traces/resources.py); the runtime checks that no machine hands out more
than it has (runtime/plans.py).

SynergyOpt states Synergy-Opt's first program once per round, for all running jobs, with each
machine's cores and memory as constraints, over the placer's GPUs (its docstring and
docs/reproductions.md say how that differs from Synergy's simulator).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.runtime.allocation import proportional_resources, shared_halves
from roundhouse.runtime.element import Element, In, Out, element, element_family
from roundhouse.runtime.plans import share_weights
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan
from roundhouse.runtime.values import Duration, at_most, one_of, positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element_family
class _Allocator(Element):
    """The shared ports of the CPU and memory allocators.

    Ports:
        plan: a placer's plan (which GPUs each job gets).
        allocated: the same plan, with each launched job's CPU cores and memory (SynergyTune and
            SynergyOpt: each resized job's too, and new ones for kept jobs whose share changes).
    Counters:
        allocated: launches (SynergyTune and SynergyOpt: and resizes) given CPU and memory so far.
    """

    category = "placement"
    inputs = (In("plan", Plan),)
    outputs = (Out("allocated", Plan),)

    def start(self, ctx: RoundContext) -> None:
        self.counters.update(allocated=0)

    def quiet_until(self, ctx: RoundContext) -> float | None:
        # Asked after a round whose plan changed nothing. Until an arrival or a completion, each
        # round's plan changes nothing either, and an allocator hands such a plan on as it is.
        return math.inf


@element
class Proportional(_Allocator):
    """Give every launched job the CPU cores and memory that come with its GPUs in proportion:
    on a machine of 8 GPUs, 24 cores and 500 GB, 3 cores and 62.5 GB per GPU (two jobs that
    share their GPUs, space sharing, half of that each).

    This is what every plan gets when no allocator says otherwise (the GPU-proportional
    baseline of Synergy's evaluation); the element makes it explicit in a graph.

    Arguments:
        none
    Cost: O(l) over the jobs l the plan launches. Not ticked in rounds in which nothing starts or
        stops (event skipping).
    See also: SynergyTune, Launch
    Paper: Synergy (OSDI'22) §2 and §6 (GPU-proportional allocation); Blox (EuroSys'24) Fig. 5.
    """

    state = ()

    def tick(self, ctx: RoundContext, plan: Plan) -> Plan:
        if not len(plan.launch_rows):
            return plan
        cpus, memory = proportional_resources(ctx.throughput, plan)
        self.counters["allocated"] += len(plan.launch_rows)
        return attrs.evolve(plan, alloc_rows=plan.launch_rows, alloc_cpus=cpus, alloc_memory_gb=memory)


@element
class SynergyTune(_Allocator):
    """Give jobs their best-case CPU cores and memory where their machines have room, and
    never less than they need of the GPU-proportional share.

    Each job's demand is its model's best-case vector in the sensitivity profile (the fewest
    cores, then the least memory, at which it reaches its top speed; traces/resources.py), times
    its GPUs; a job whose model has no profile asks for its trace's `cpus` and `memory_gb` per
    GPU of its trace's `gpus`, times its GPUs (so a job resized, or launched on another GPU
    count, asks for as much per GPU), else for the proportional share. A job's demand is capped,
    per resource, at the largest total whose spread over its machines fits each of them (a
    machine that takes a quarter of a job's allocation caps it at four times the machine's cores
    and memory). Its fallback is the proportional share when it demands more than that of either
    resource, else its demand (a job that needs less than its share leaves the rest to others:
    the spare Synergy hands on).

    Every round in which jobs start, stop or move, all running jobs first get their fallbacks, which always fit
    (the fallbacks never exceed the proportional shares). The spare left on each machine then
    goes, whole demands only, to jobs in this order: kept jobs that already had their demand
    (so that running jobs keep what they got when they can), jobs the plan resizes (on their
    new GPUs, like launches), launches in the plan's order, then the other kept jobs. A job
    whose demand does not fit on all its machines stays at its fallback. This reaches the states Synergy-Tune's three steps reach (demand; else the
    proportional share; else peers reduced to their proportional shares) without its
    failure path, and also lets a kept job grow again when room frees up.

    Unlike Synergy's simulator, the GPUs come from the placer before the CPU and memory are
    handed out (Synergy picks the first GPUs whose server has room for the demand), and
    SynergyOpt chooses all allocations together instead.

    Arguments:
        none
    Cost: O(1) in a round where no job starts, stops or moves (and such rounds are not ticked:
        event skipping); else O(r N) over the running jobs r and machines N (one greedy pass over
        the jobs that want more than their fallback).
    See also: Proportional, SynergyOpt, FirstFree, Fifo
    Paper: Synergy (OSDI'22) §4.2 (Synergy-Tune); Blox (EuroSys'24) Table 3 and Fig. 5.
    """

    state = ()

    def tick(self, ctx: RoundContext, plan: Plan) -> Plan:
        if not _needs_allocation(ctx, plan):
            return plan  # nothing freed or taken: every job keeps what it has
        r = RoundJobs.of(ctx, plan)
        spare = r.capacity - np.einsum("jnr,jr->nr", r.spread, r.fallback)
        given = r.fallback.copy()
        had_demand = np.zeros(r.n, dtype=bool)
        had_demand[: r.n_keep] = np.isclose(r.held, r.demand[: r.n_keep]).all(axis=1)
        wants = (r.demand > r.fallback + 1e-9).any(axis=1)
        kept = np.arange(r.n) < r.n_keep
        sequence = np.concatenate(
            [(wants & had_demand).nonzero()[0], (wants & ~kept).nonzero()[0], (wants & kept & ~had_demand).nonzero()[0]]
        )
        for j in sequence.tolist():  # greedy in order: each grant changes what is left for the next
            extra = r.spread[j] * (r.demand[j] - r.fallback[j])[None, :]
            if (extra <= spare + 1e-9).all():
                spare -= extra
                given[j] = r.demand[j]
        self.counters["allocated"] += len(plan.launch_rows) + len(plan.resize_rows)
        return r.with_allocations(plan, given)


@element
class SynergyOpt(_Allocator):
    """Choose every running job's CPU cores and memory together, to maximise their summed
    speed, no job slower than on its GPU-proportional share: Synergy-Opt's first program as a
    mixed-integer program on OR-Tools, over the placer's GPUs.

    Each job with a sensitivity profile picks one point of its profile's grid (cores and GB per
    GPU), or its proportional share; its speed there, over its speed at that share, is what the
    objective adds up, and must be at least 1. Jobs without a profile keep SynergyTune's
    fallback (their demand, or the proportional share). Every machine gives its jobs no more
    cores or memory than it has. Ties go to the smaller allocation (a small penalty on what is
    held), and a solve that finds nothing within its limits leaves every job at its fallback.

    A solve is bounded by `node_limit` branch-and-bound nodes, a count of work that is the same
    on every machine, so the same inputs give the same allocations (SCIP, single-threaded);
    the best allocation found by then is used. `time_limit`, off by default, bounds a solve by
    the wall clock instead: where it cuts a solve short, what was found by then depends on the
    machine's speed and load, and results are no longer reproducible. OR-Tools passes no node
    limit to CBC, so with `solver=CBC` a solve is bounded only by `time_limit`, if given.

    Synergy's simulator (opt_algo/synergy_opt.py) states the same first program with the
    cluster's totals instead of each machine's, then splits jobs over servers with a second,
    fractional program that it does not round (its round-robin rounding is not called); here the
    placer has already put each job's GPUs on machines, so the one program a round solves has
    each machine's cores and memory as constraints instead of the cluster's totals, and needs no
    second. The paper describes the rounding only in outline.

    Arguments:
        node_limit: the branch-and-bound nodes one SCIP solve may explore (default 10000;
            deterministic). Not with CBC.
        time_limit: how long one solve may take by the wall clock, at most 1h (default: no limit);
            results depend on the machine when it is reached.
        solver: the OR-Tools MIP solver: SCIP (default) or CBC.
    Counters:
        solves: programs solved so far.
        fallbacks: solves that found no allocation within their limits (every job kept at its
            fallback).
    Cost: O(1) in a round where no job starts, stops or moves (and such rounds are not ticked:
        event skipping); else one mixed-integer program per round, over the running jobs times the
        points of their profiles' grids, with two constraints per machine (bounded by
        `node_limit`, or `time_limit`).
    See also: SynergyTune, Proportional
    Paper: Synergy (OSDI'22) §4.1 (Synergy-Opt); Blox (EuroSys'24) Table 3.
    """

    state = ()

    node_limit: int | None = attrs.field(default=None, validator=[positive, at_most(10**9)])
    time_limit: Duration | None = attrs.field(default=None, validator=[positive, at_most(Duration(3600.0))])
    solver: str = attrs.field(default="SCIP", validator=one_of("SCIP", "CBC"))

    def __attrs_post_init__(self) -> None:
        if self.solver == "CBC" and self.node_limit is not None:
            raise ValueError(
                "node_limit applies to SCIP only: OR-Tools passes no node limit to CBC "
                "(bound CBC's solves with time_limit, which makes results depend on the machine)"
            )

    def start(self, ctx: RoundContext) -> None:
        self.counters.update(allocated=0, solves=0, fallbacks=0)

    def tick(self, ctx: RoundContext, plan: Plan) -> Plan:
        if not _needs_allocation(ctx, plan):
            return plan
        r = RoundJobs.of(ctx, plan)
        given = self._solve(ctx, r)
        self.counters["allocated"] += len(plan.launch_rows) + len(plan.resize_rows)
        return r.with_allocations(plan, given)

    def _solve(self, ctx: RoundContext, r: RoundJobs) -> np.ndarray:
        from ortools.linear_solver import pywraplp

        given = r.fallback.copy()
        sensitive = (r.model >= 0).nonzero()[0]
        if not len(sensitive):
            return given
        points, gain, useful = _candidates(ctx.throughput.resources, r, sensitive)
        engine = pywraplp.Solver.CreateSolver(self.solver)
        if self.solver == "SCIP":
            nodes = _NODE_LIMIT if self.node_limit is None else self.node_limit
            engine.SetSolverSpecificParametersAsString(f"limits/totalnodes = {nodes}\n")
        if self.time_limit is not None:
            engine.SetTimeLimit(max(1, int(self.time_limit * 1000)))
        self.counters["solves"] += 1
        # Each machine's room for the jobs with a profile (the others hold their fallbacks).
        fixed = np.ones(r.n, dtype=bool)
        fixed[sensitive] = False
        room = r.capacity - np.einsum("jnr,jr->nr", r.spread[fixed], r.fallback[fixed]) + 1e-6
        limits = [[engine.Constraint(-engine.infinity(), float(room[n, k])) for n in range(len(room))] for k in range(2)]
        objective = engine.Objective()
        choices: list[tuple[int, list, np.ndarray]] = []
        for k, j in enumerate(sensitive.tolist()):
            at = useful[k].nonzero()[0]
            job_points = points[k, at]
            machines = r.spread[j, :, 0].nonzero()[0]
            # (the coefficients as Python floats, worked out for all the job's candidates at once)
            cpus = (job_points[:, 0, None] * r.spread[j, machines, 0]).tolist()
            memory = (job_points[:, 1, None] * r.spread[j, machines, 1]).tolist()
            xs = [engine.BoolVar("") for _ in range(len(at))]
            one = engine.Constraint(1.0, 1.0)
            for x, value, cpu_row, memory_row in zip(xs, gain[k, at].tolist(), cpus, memory):
                one.SetCoefficient(x, 1.0)
                objective.SetCoefficient(x, value)
                for n, c, m in zip(machines.tolist(), cpu_row, memory_row):
                    limits[0][n].SetCoefficient(x, c)
                    limits[1][n].SetCoefficient(x, m)
            choices.append((j, xs, job_points))
        objective.SetMaximization()
        status = engine.Solve()
        if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
            self.counters["fallbacks"] += 1
            return given
        for j, xs, job_points in choices:
            given[j] = job_points[int(np.argmax([x.solution_value() for x in xs]))]
        return given


_NODE_LIMIT = 10_000  # (SCIP's nodes per solve by default: the programs here take a few)
_CHUNK = 256  # (jobs whose candidates are compared at once: some 2 MB of comparisons each)


def _candidates(table, r: RoundJobs, jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of `jobs` (rows of `r` with a sensitivity profile), all at once: its candidate
    allocations (jobs x candidates x (cores, GB), totals over its GPUs: first its proportional
    share, then each point of the profile's grid), each one's term of the objective (its speed
    over its speed at the share, less a small penalty on what it holds), and which are worth a
    variable (`_useful`)."""
    grid = np.array([(c, m) for c in table.cpu_grid for m in table.memory_grid])
    g = r.counts[jobs]
    points = np.concatenate([r.fair[jobs][:, None, :], grid[None, :, :] * g[:, None, None]], axis=1)
    shape = points.shape[:2]
    per_gpu = points / g[:, None, None]
    models = np.repeat(r.model[jobs], shape[1])
    speed = table.relative_speed(models, per_gpu[:, :, 0].ravel(), per_gpu[:, :, 1].ravel()).reshape(shape)
    # Does each candidate fit on every machine of the job (a machine it is not on takes none of it)?
    fits = np.ones(shape, dtype=bool)
    job, node = r.spread[jobs, :, 0].nonzero()
    on_node = r.spread[jobs[job], node][:, None, :] * points[job]
    short, at = (~(on_node <= r.capacity[node][:, None, :] + 1e-9).all(axis=2)).nonzero()
    fits[job[short], at] = False
    useful = np.concatenate(
        [_useful(points[c : c + _CHUNK], speed[c : c + _CHUNK], fits[c : c + _CHUNK]) for c in range(0, len(jobs), _CHUNK)]
    )
    total = r.capacity.sum(axis=0)
    gain = speed / speed[:, :1] - 1e-3 * (points[:, :, 0] / total[0] + points[:, :, 1] / total[1])
    return points, gain, useful


def _useful(points: np.ndarray, speed: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """Which of each job's candidate allocations (jobs x candidates; the first: its proportional
    share) are worth a variable: they fit its machines, are no slower than its share, and no
    other candidate is as fast with no more of either resource (on a strict tie, the earlier
    wins)."""
    ok = fits & (speed >= speed[:, :1] - 1e-9)
    ok[:, 0] = True
    n = points.shape[1]
    # (the two resources compared one by one: reducing a trailing axis of two costs far more)
    cores, memory = points[:, :, 0], points[:, :, 1]
    c_low, c_high, m_low, m_high = cores[:, :, None], cores[:, None, :], memory[:, :, None], memory[:, None, :]
    faster, slower = speed[:, :, None], speed[:, None, :]
    covers = (c_low <= c_high + 1e-9) & (m_low <= m_high + 1e-9) & (faster >= slower - 1e-9)
    # i dominates k: i covers k and (i is strictly better somewhere, or equal and earlier)
    strictly = (c_low < c_high - 1e-9) | (m_low < m_high - 1e-9) | (faster > slower + 1e-9)
    earlier = np.arange(n)[:, None] < np.arange(n)[None, :]
    dominated = np.any(covers & (strictly | earlier) & ok[:, :, None], axis=1)  # (i never dominates itself)
    dominated[:, 0] = False
    return ok & ~dominated


def _needs_allocation(ctx: RoundContext, plan: Plan) -> bool:
    """Whether this round can change what jobs should hold: something started, stopped or
    moved, and some job runs after the plan."""
    events = ctx.events
    busy = plan.changes or len(events.finished) or len(events.requeued)
    return bool(busy) and bool(len(plan.keep) + len(plan.resize_rows) + len(plan.launch_rows))


@attrs.frozen
class RoundJobs:
    """The jobs running once a plan is carried out, as the allocators see them: rows (kept
    first, then resized, then launched), the part of each job's allocation on each machine
    (`spread`, jobs x machines x (cores, GB): `machine_weights`), GPU counts, GPU-proportional
    shares (`fair`, jobs x (cores, GB); a GPU two jobs share gives each half its share),
    best-case demands capped so that their spread fits every machine, fallbacks, what kept jobs
    hold now, and machine capacities."""

    rows: np.ndarray
    n_keep: int
    spread: np.ndarray
    counts: np.ndarray
    fair: np.ndarray
    demand: np.ndarray
    fallback: np.ndarray
    held: np.ndarray
    capacity: np.ndarray
    model: np.ndarray

    @property
    def n(self) -> int:
        return len(self.rows)

    @classmethod
    def of(cls, ctx: RoundContext, plan: Plan) -> RoundJobs:
        cluster, jobs, keep = ctx.cluster, ctx.jobs, plan.keep
        rows = np.concatenate([keep, plan.resize_rows, plan.launch_rows])
        # Who holds which GPU once the plan is carried out (a space-sharing pair: both): kept
        # jobs where they are, resized jobs on their new GPUs (not on those they give up, which
        # the plan may hand to its launches), launches on theirs.
        holders = [np.asarray(ctx.holder)] + ([np.asarray(ctx.co_holder)] if ctx.co_holder is not None else [])
        gpus = [isin_rows(h, keep).nonzero()[0] for h in holders] + [plan.resize_gpus, plan.launch_gpus]
        owner = [h[isin_rows(h, keep)] for h in holders] + [
            plan.resize_rows.repeat(plan.resize_counts),
            plan.launch_rows.repeat(plan.launch_counts),
        ]
        gpus_all, owner_all = np.concatenate(gpus), np.concatenate(owner)
        order = np.argsort(rows, kind="stable")
        job_of_gpu = order[np.searchsorted(rows[order], owner_all)]  # index into `rows` of each GPU's job
        per_node = np.zeros((len(rows), cluster.n_nodes))
        np.add.at(per_node, (job_of_gpu, cluster.gpu_node[gpus_all]), 1.0)
        counts = per_node.sum(axis=1)
        # A GPU's share, split half and half where two jobs hold it (space sharing).
        shared = np.bincount(gpus_all, minlength=cluster.n_gpus)[gpus_all] > 1
        share_cpu, share_memory = ctx.throughput.gpu_shares()
        share_cpu, share_memory = shared_halves((share_cpu[gpus_all], share_memory[gpus_all]), shared)
        fair = np.zeros((len(rows), 2))
        np.add.at(fair, job_of_gpu, np.stack([share_cpu, share_memory], axis=1))
        capacity = np.stack([np.asarray(cluster.node_cpus, float), np.asarray(cluster.node_memory_gb, float)], axis=1)
        spread = machine_weights(per_node, capacity / np.asarray(cluster.node_gpus, float)[:, None])
        # A job's demand is capped at the largest total whose spread fits every one of its
        # machines: on each, what the machine has over the machine's part.
        on = spread > 0
        room = np.where(on, capacity[None, :, :] / np.where(on, spread, 1.0), np.inf).min(axis=1)
        demand = np.minimum(best_case(ctx, rows, counts, fair), room)
        fallback = np.where((demand > fair + 1e-9).any(axis=1)[:, None], fair, demand)
        held = np.stack([jobs.column("cpus_held")[keep], jobs.column("memory_held_gb")[keep]], axis=1)
        model = jobs.column("resource_model")[rows] if jobs.has_column("resource_model") else np.full(len(rows), -1)
        return cls(rows, len(keep), spread, counts, fair, demand, fallback, held, capacity, model)

    def with_allocations(self, plan: Plan, given: np.ndarray) -> Plan:
        """The plan with `given` (jobs x (cores, GB)) for its launches and resizes, and for the
        kept jobs whose allocation changes."""
        changed = np.ones(self.n, dtype=bool)
        changed[: self.n_keep] = ~np.isclose(self.held, given[: self.n_keep]).all(axis=1)
        rows = self.rows[changed]
        return attrs.evolve(plan, alloc_rows=rows, alloc_cpus=given[changed, 0], alloc_memory_gb=given[changed, 1])


def machine_weights(per_node: np.ndarray, node_share: np.ndarray) -> np.ndarray:
    """(jobs, machines, 2): the part of each job's CPU cores and of its memory that each machine
    gives, from its GPUs per machine (`per_node`, jobs x machines) and each machine's
    GPU-proportional share per GPU (`node_share`, machines x (cores, GB)): the runtime's one
    rule (runtime/plan_resources.py `share_weights`, by which plans are checked), a job's GPUs on one
    machine taken together."""
    job, node = per_node.nonzero()  # (by job, then machine: the order the rule sums in)
    weights = np.zeros((*per_node.shape, 2))
    weights[job, node] = share_weights(job, per_node[job, node], node_share[node])
    return weights


def best_case(ctx: RoundContext, rows: np.ndarray, counts: np.ndarray, fair: np.ndarray) -> np.ndarray:
    """(jobs, 2): each job's best-case CPU cores and GB of memory, all its GPUs together
    (`counts`, the GPUs it holds once the plan is carried out): its model's from the
    sensitivity profile, else its trace's `cpus` and `memory_gb` per GPU it asked for (its
    `gpus`) times its GPUs, else `fair`. (A job resized, or launched on another GPU count than
    it asked for, asks for as much per GPU as its trace says, not for the trace's total.)"""
    jobs = ctx.jobs
    demand = fair.copy()
    scale = counts / np.maximum(jobs.column("gpus")[rows], 1)
    for column, k in (("cpus", 0), ("memory_gb", 1)):
        if jobs.has_column(column):
            asked = jobs.column(column)[rows] * scale
            demand[:, k] = np.where(np.isnan(asked), demand[:, k], asked)
    model = jobs.column("resource_model")[rows] if jobs.has_column("resource_model") else np.full(len(rows), -1)
    known = model >= 0
    if known.any():
        table = ctx.throughput.resources
        demand[known, 0] = table.best_cpus[model[known]] * counts[known]
        demand[known, 1] = table.best_memory_gb[model[known]] * counts[known]
    return demand
