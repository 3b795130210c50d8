"""Pollux (Qiao et al., OSDI 2021): the cluster-wide allocation search (PolluxSched) and the
per-job batch-size tuning for an allocation (PolluxAgent), as two elements."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from roundhouse.elements.policies import pollux_search as search
from roundhouse.elements.policies.base import job_column as _column
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.explain import Reason
from roundhouse.runtime.types import LR_ADASCALE, LR_LINEAR, Active, Assignment, Plan, Resize
from roundhouse.runtime.values import Duration, at_least, at_most, non_negative, positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


def goodput_table(
    elastic, app: np.ndarray, batch: np.ndarray, machines: int, gpus: int, phi: np.ndarray | None = None
) -> np.ndarray:
    """(J, machines+1, gpus+1): each job's goodput on r GPUs over k machines (0 where k = 0 or
    k > r), at its goodput-best batch size, or at `batch` where that is positive (a fixed one);
    `phi`: each job's measured gradient noise scale (NaN or absent: its application's)."""
    k, r = np.meshgrid(np.arange(1, machines + 1), np.arange(1, gpus + 1), indexing="ij")
    ok = k <= r
    kk, rr = k[ok].astype(np.float64), r[ok].astype(np.float64)
    out = np.zeros((len(app), machines + 1, gpus + 1))
    for i in range(len(app)):  # one row of the table per distinct (application, fixed batch)
        a = np.full(len(kk), app[i])
        noise = None if phi is None else np.full(len(kk), phi[i])
        if batch[i] > 0:
            good = elastic.rates(a, kk, rr, np.full(len(kk), float(batch[i])), noise)
        else:
            _, good = elastic.best_batch(a, kk, rr, phi=noise)
        out[i, 1:, 1:][ok] = good
    return out


# The smallest |p| but 0. Each job's term of the power mean is (s + 0.001)^p = 1 + p ln(s + 0.001)
# + ...: below about 1e-16 it rounds to 1 for every speedup and every candidate ties (the search
# stops telling allocations apart); near it the fitness keeps only a few digits (its rounding
# error is about 2e-16 / |p|). From 1e-6 on it keeps about ten, and the mean is already close to
# its limit as p goes to 0, the geometric mean, which p = 0 computes exactly (relatively, they
# differ by about p x the variance of ln(s + 0.001) / 2: under 2e-5 at 1e-6).
P_SMALLEST = 1e-6


def _not_near_zero(instance, attribute, value) -> None:
    if value is not None and value != 0 and abs(value) < P_SMALLEST:
        raise ValueError(
            f"must be 0 (the geometric mean) or at least {P_SMALLEST:g} in size, got {value:g}: "
            "so small an exponent rounds every job's term of the mean to 1 and every allocation ties"
        )


@element
class Pollux(Element):
    """PolluxSched: a genetic search for the allocation that maximises the jobs' mean speedup.

    Every `interval` (default: every round) it runs `generations` generations of a genetic
    algorithm over allocations (GPUs per job per machine), seeded with the current allocation
    and the last search's population: binary tournaments, single-point crossover over jobs,
    Pollux's three mutations, a repair that keeps at most one distributed job per machine
    (interference avoidance), each job within its GPU limit and 16 machines, and machines within
    their size (jobs with less attained service first, then earlier arrivals), and elitist
    selection. Fitness is the generalised mean (exponent `p`) of each job's speedup, its goodput
    at its best batch size over its goodput on a fair share (ceil(GPUs / jobs) GPUs, within
    the job's `max_gpus` and batch range but not the `explore` cap), with Pollux's restart
    penalty on jobs whose allocation changes, a first start included: its factor,
    max(age - restart_delay x restarts, 0) / (age + restart_delay), is 0 for a job searched the
    moment it arrives (age 0: one arriving on a round's boundary, such as at time 0), so such a
    job gains nothing from GPUs and waits for the next search, an `interval` later, even on an
    idle cluster (`restart_delay=0` starts it at once). The best allocation is deployed: unchanged jobs are kept,
    others launched, resized by checkpoint and restart (the simulator's `resize_restart`;
    Pollux's simulator charges 30 s) or suspended. Launches and resizes carry batch size 0 (the
    job's own): put PolluxAgent after it to tune them. Only elastic jobs (their model in the
    elastic profile) are scheduled; others keep what they hold and are not started (counted in
    `unschedulable` while they wait: a simulation left with only those stalls). Machines are
    chosen whatever their GPU type: an elastic profile is measured on one GPU type, so an
    elastic job's rate does not depend on the types it runs on.

    A job may hold at most its `max_gpus`, the largest validated batch over the smallest
    per-GPU batch, and (with `explore`, as Pollux's simulator) twice the most GPUs it has run
    on (one before it first runs).

    Ports:
        active: admitted, unfinished jobs (elastic ones: their model in the elastic profile).
        plan: launches, resizes, suspensions.
    Arguments:
        population: candidates kept (Pollux: 100).
        generations: generations per search (Pollux: 100).
        patience: stop a search early once its best has not improved for this many generations (default: never; Pollux runs all).
        p: exponent of the generalised mean (Pollux: -1; 0 is the geometric mean, 1 the arithmetic); from -10 to 10, and 0 or at least 1e-6 in size (a smaller one rounds every term to 1).
        restart_delay: the delay in the restart penalty (Pollux: 30 s; 0 turns it off).
        interference: allow at most one distributed job per machine (Pollux's interference avoidance).
        explore: cap each job at twice the most GPUs it has run on.
        interval: search at most this often (default: every round; Blox Fig. 3 sweeps 30 s to 8 min).
        seed: the element's own random seed.
    Counters:
        searches: searches run.
        changed: jobs whose allocation the last search changed.
        fitness: the best candidate's fitness in the last search (x 1000, whole).
        unschedulable: waiting jobs it was given that it cannot start (their model not in the elastic profile).
    Cost: O(G P J K) per search over G generations, P candidates, J jobs and K machines (array
        operations, no per-job loop), plus a goodput table over machine and GPU counts per
        application and fixed batch size, computed once (each round for jobs that report the
        gradient noise scale they measure, as live ones do).
    See also: PolluxAgent, Ones, Optimus
    Paper: Pollux (OSDI'21) §3.2, §4.2 (PolluxSched), Eq. 13-14; Blox (EuroSys'24) §4, Fig. 3.
    """

    category = "placement"
    inputs = (In("active", Active),)
    outputs = (Out("plan", Plan),)

    state = ("_last", "_most", "_pop", "_pop_rows", "_rng", "_tables")
    # It never starts a job whose model is no application of the elastic profile: `check` and
    # `run` warn of sources that bring such jobs, and the run's end counts those left waiting.
    elastic_only: ClassVar[bool] = True

    population: int = attrs.field(default=100, validator=[positive, at_most(4096)])
    generations: int = attrs.field(default=100, validator=[positive, at_most(100000)])
    patience: int | None = attrs.field(default=None, validator=attrs.validators.optional([positive, at_most(100000)]))
    # (0.001)^p overflows a float past p = -100; -10 already weighs the slowest job almost alone.
    p: float = attrs.field(default=-1.0, validator=[at_least(-10.0), at_most(10.0), _not_near_zero])
    restart_delay: Duration = attrs.field(default=Duration(search.RESTART_DELAY_S), validator=non_negative)
    interference: bool = True
    explore: bool = True
    interval: Duration | None = attrs.field(default=None, validator=non_negative)
    seed: int | None = attrs.field(default=None, validator=non_negative)

    def start(self, ctx: RoundContext) -> None:
        self._rng = ctx.rng(self.seed)
        self._pop = np.zeros((0, 0, ctx.cluster.n_nodes), dtype=np.int8)
        self._pop_rows = np.zeros(0, dtype=np.int64)
        self._most = np.zeros(len(ctx.jobs), dtype=np.int64)
        self._tables: dict[tuple[int, int, float], np.ndarray] = {}  # (application, fixed batch, noise scale) -> goodput table
        self._last = -np.inf
        self.counters.update(searches=0, changed=0, fitness=0, unschedulable=0)

    def tick(self, ctx: RoundContext, active: Active) -> Plan:
        plan, fresh = self._decide(ctx, active)
        if ctx.explaining:
            waiting = active.rows[~active.running]
            waits = waiting[~np.isin(waiting, plan.launch_rows)]
            # Jobs admitted since the last search wait for the next (an `interval` apart); the
            # others wait under the allocation this round leaves (deployed now or in force).
            new = np.isin(waits, fresh)
            _explain_waits(ctx, waits[~new], plan)
            if new.any():
                ctx.explain(Reason.NO_ALLOCATION, waits[new], self._last, self._last + float(self.interval or 0.0))
        return plan

    def _decide(self, ctx: RoundContext, active: Active) -> tuple[Plan, np.ndarray]:
        """This round's plan, and the elastic jobs admitted since the search in force (none
        when this round searched)."""
        none = active.rows[:0]
        if len(self._most) < len(ctx.jobs):
            self._most = np.r_[self._most, np.zeros(len(ctx.jobs) - len(self._most), dtype=np.int64)]
        self._most[active.rows] = np.maximum(self._most[active.rows], active.held)
        elastic = ctx.throughput.elastic
        app = _column(ctx, "elastic_model", active.rows, -1).astype(np.int64)
        running = active.running
        if elastic is None:
            app = np.full(len(app), -1, dtype=np.int64)
        self.counters["unschedulable"] = int(np.count_nonzero(~running & (app < 0)))
        if elastic is None or not (app >= 0).any():
            return Plan(keep=active.rows[running]), none
        if self.interval is not None and ctx.now - self._last < self.interval - 1e-9:
            mine = active.rows[app >= 0]
            return Plan(keep=active.rows[running]), mine[~np.isin(mine, self._pop_rows)]
        self._last = ctx.now
        mine = app >= 0
        jobs = active.select(mine)
        # Pollux's job order (repair's priority): least attained service, then earliest arrival.
        order = np.lexsort((jobs.arrival_s, jobs.service))
        jobs, app = jobs.select(order), app[mine][order]
        best, base = self._search(ctx, jobs, app, elastic)
        plan = self._deploy(ctx, jobs, best, base)
        others = active.rows[~mine & running]
        return (attrs.evolve(plan, keep=np.r_[plan.keep, others]) if len(others) else plan), none

    def _limits(self, ctx: RoundContext, jobs: Active, app: np.ndarray, elastic, explore: bool = True) -> np.ndarray:
        """Each job's GPU limit: its `max_gpus`, the cluster, the largest validated batch over
        the smallest per-GPU batch and, with `explore` (and the argument on), twice the most
        GPUs it has run on."""
        c = ctx.cluster.n_gpus
        cap = np.nan_to_num(_column(ctx, "max_gpus", jobs.rows, c), nan=c)
        top = np.array([elastic.apps[a].max_batch // max(elastic.apps[a].min_local, 1) for a in app.tolist()])
        limit = np.minimum(np.minimum(cap, c), top)
        if self.explore and explore:
            limit = np.minimum(limit, np.maximum(2 * self._most[jobs.rows], 1))
        return np.maximum(limit, 1).astype(np.int64)

    def _table(self, ctx: RoundContext, jobs: Active, app: np.ndarray, elastic) -> np.ndarray:
        fixed = _column(ctx, "batch_fixed", jobs.rows, 0.0) > 0
        batch = np.where(fixed, jobs.column("batch_size"), 0).astype(np.int64)
        # A live job reports the gradient noise scale it measures; a simulated one has none
        # (-1: its application's fitted one), so its table is computed once per run.
        measured = _column(ctx, "grad_noise_scale", jobs.rows, np.nan)
        phi = np.where(np.isfinite(measured) & (measured > 0), measured, -1.0)
        keys = list(zip(app.tolist(), batch.tolist(), phi.tolist(), strict=True))
        todo = sorted({key for key in keys if key not in self._tables})
        if todo:
            a, b = np.array([t[0] for t in todo]), np.array([t[1] for t in todo])
            noise = np.array([t[2] if t[2] > 0 else np.nan for t in todo])
            for key, rows in zip(todo, goodput_table(elastic, a, b, ctx.cluster.n_nodes, ctx.cluster.n_gpus, noise), strict=True):
                self._tables[key] = rows
        tables = np.stack([self._tables[key] for key in keys])
        if (phi > 0).any():  # measured noise scales change every round: keep only this round's
            used = set(keys)
            self._tables = {key: t for key, t in self._tables.items() if key[2] < 0 or key in used}
        return tables

    def _search(self, ctx: RoundContext, jobs: Active, app: np.ndarray, elastic) -> tuple[np.ndarray, np.ndarray]:
        cluster = ctx.cluster
        n, k, c = len(jobs), cluster.n_nodes, cluster.n_gpus
        holder = np.asarray(ctx.holder)
        index = np.full(len(ctx.jobs), -1, dtype=np.int64)
        index[jobs.rows] = np.arange(n)
        held_by = np.where(holder >= 0, index[np.maximum(holder, 0)], -1)
        base = np.zeros((n, k), dtype=np.int8)
        np.add.at(base, (held_by[held_by >= 0], cluster.gpu_node[held_by >= 0]), 1)
        usable = (holder < 0) | (held_by >= 0)  # GPUs of jobs outside the search stay theirs
        if ctx.online is not None:
            usable &= np.asarray(ctx.online)
        capacity = np.bincount(cluster.gpu_node[usable], minlength=k)
        limit = self._limits(ctx, jobs, app, elastic)
        goodput = self._table(ctx, jobs, app, elastic)
        # Speedup over a fair share (ceil(C / J) GPUs, within the job's own limit but not the
        # exploration cap, which Pollux's fair share ignores: a job allowed few GPUs so far
        # would otherwise count its own small allocation as fair) on ceil(K / C) machines, as
        # Pollux's simulator takes it; scaled so that a machine's worth is 1.
        fair_r = np.minimum(np.ceil(c / n), self._limits(ctx, jobs, app, elastic, explore=False)).astype(np.int64)
        fair_k = np.minimum(int(np.ceil(k / c)), fair_r)
        fair = goodput[np.arange(n), fair_k, fair_r]
        table = goodput / np.maximum(fair, 1e-12)[:, None, None]
        restarts = np.maximum(jobs.column("launches") - 1, 0) + jobs.column("resizes")
        age = ctx.now - jobs.arrival_s
        factor = search.restart_factor(age, restarts, self.restart_delay) if self.restart_delay > 0 else np.ones(n)
        scale, p = k / c, self.p

        evaluate = search.scorer(table, base, factor, scale, p)

        # The last population, its jobs mapped onto this round's (new jobs get nothing).
        old = np.zeros((len(self._pop), n, k), dtype=np.int8)
        at = index[self._pop_rows]
        old[:, at[at >= 0]] = self._pop[:, at >= 0]
        pop, score = search.search(
            np.concatenate([base[None], old]),
            self._rng,
            base=base,
            capacity=capacity,
            max_replicas=limit,
            evaluate=evaluate,
            keep=self.population,
            generations=self.generations,
            interference=self.interference,
            patience=self.patience,
        )
        self._pop, self._pop_rows = pop, jobs.rows.copy()
        self.counters["searches"] += 1
        self.counters["fitness"] = int(round(float(score[0]) * 1000))
        return pop[0], base

    def _deploy(self, ctx: RoundContext, jobs: Active, best: np.ndarray, base: np.ndarray) -> Plan:
        """The plan that turns the current allocation into `best`: unchanged jobs keep their
        GPUs; changed ones take, machine by machine, the GPUs nobody kept there."""
        cluster = ctx.cluster
        holder = np.asarray(ctx.holder)
        running = jobs.running
        changed = (best != base).any(axis=1)
        kept = running & ~changed
        self.counters["changed"] = int(changed.sum())
        free = (holder < 0) | np.isin(holder, jobs.rows[changed])
        if ctx.online is not None:
            free &= np.asarray(ctx.online)
        pool = [list(np.flatnonzero(free & (cluster.gpu_node == m))) for m in range(cluster.n_nodes)]
        launches, resizes, suspend = [], [], []
        for j in np.flatnonzero(changed).tolist():
            gpus: list[int] = []
            for m in np.flatnonzero(best[j]).tolist():
                gpus += [int(g) for g in pool[m][: best[j, m]]]
                del pool[m][: best[j, m]]
            row = int(jobs.rows[j])
            if not gpus:
                if running[j]:
                    suspend.append(row)
            elif running[j]:
                resizes.append(Resize(row, gpus, 0, LR_ADASCALE, False))
            else:
                launches.append(Assignment(row, gpus, 0))
        return Plan.of(launches, keep=jobs.rows[kept], suspend=np.asarray(suspend, dtype=np.int64), resizes=resizes)


def _explain_waits(ctx: RoundContext, rows: np.ndarray, plan: Plan) -> None:
    """Waiting jobs the plan gives no GPU, with the jobs the allocation it leaves runs and the
    GPUs that allocation leaves idle: `not_elastic` for those of no application of the elastic
    profile (never started, whatever is idle; with the profile's applications, 0 when the run
    has none), `not_scheduled` for the others."""
    if not len(rows):
        return
    holder = np.asarray(ctx.holder)
    kept = np.isin(holder, plan.keep)
    if ctx.online is not None:
        kept &= np.asarray(ctx.online)
    used = int(kept.sum()) + len(plan.launch_gpus) + len(plan.resize_gpus)
    usable = len(holder) if ctx.online is None else int(np.count_nonzero(ctx.online))
    jobs = len(plan.keep) + len(plan.launch_rows) + len(plan.resize_rows)
    idle = max(usable - used, 0)
    elastic = ctx.throughput.elastic
    foreign = np.ones(len(rows), dtype=bool) if elastic is None else _column(ctx, "elastic_model", rows, -1) < 0
    if foreign.any():
        apps = 0 if elastic is None else len(elastic.apps)
        ctx.explain(Reason.NOT_ELASTIC, rows[foreign], jobs, idle, apps)
    if not foreign.all():
        ctx.explain(Reason.NOT_SCHEDULED, rows[~foreign], jobs, idle)


@element
class PolluxAgent(Element):
    """PolluxAgent: each launched or resized elastic job trains at its goodput-best batch size.

    For every launch and resize in the plan of a job whose model is in the elastic profile, it
    sets the global batch size that maximises the job's goodput (samples/s x statistical
    efficiency) on the GPUs and machines the plan gives it, among batch sizes from
    max(M0, smallest per-GPU batch x GPUs) to the largest validated one (50 sizes spaced
    geometrically, as Pollux's agent searches them), and AdaScale's learning-rate rule for
    resizes. Jobs with a fixed batch (`batch_fixed` column: Pollux's NCF jobs) keep theirs;
    other jobs' batch sizes are left as the plan has them.

    Ports:
        plan: the allocation's plan.
        plan: the same plan, with batch sizes.
    Arguments:
        candidates: batch sizes tried per job (Pollux: 50).
    Counters:
        tuned: launches and resizes given a batch size in the last round.
    Cost: O(n b) per round over the n launched or resized jobs and b candidate batch sizes
        (array operations).
    See also: Pollux
    Paper: Pollux (OSDI'21) §3.1-3.2, §4.1 (PolluxAgent), Eq. 12.
    """

    category = "placement"
    inputs = (In("plan", Plan),)
    outputs = (Out("plan", Plan),)

    state = ()

    candidates: int = attrs.field(default=50, validator=[positive, at_most(10000)])

    def start(self, ctx: RoundContext) -> None:
        self.counters["tuned"] = 0

    def _batch(self, ctx: RoundContext, rows, gpus, counts, given) -> tuple[np.ndarray, np.ndarray]:
        """The batch size of each (row, its GPUs), and which of them it tuned."""
        elastic = ctx.throughput.elastic
        n = len(rows)
        given = np.zeros(n, dtype=np.int64) if given is None else np.asarray(given, dtype=np.int64)
        if elastic is None or not n:
            return given, np.zeros(n, dtype=bool)
        app = _column(ctx, "elastic_model", rows, -1).astype(np.int64)
        fixed = _column(ctx, "batch_fixed", rows, 0.0) > 0
        tune = (app >= 0) & ~fixed
        node = ctx.cluster.gpu_node[gpus]
        owner = np.repeat(np.arange(n), counts)
        # Machines a job spans: distinct (job, machine) pairs.
        pairs = np.unique(owner * ctx.cluster.n_nodes + node)
        machines = np.bincount(pairs // ctx.cluster.n_nodes, minlength=n)
        out = given.copy()
        if tune.any():
            phi = _column(ctx, "grad_noise_scale", rows, np.nan)[tune]  # measured live, else NaN
            batch, _ = elastic.best_batch(app[tune], machines[tune], counts[tune], self.candidates, phi)
            out[tune] = batch
        return out, tune

    def tick(self, ctx: RoundContext, plan: Plan) -> Plan:
        launch, tuned_l = self._batch(ctx, plan.launch_rows, plan.launch_gpus, plan.launch_counts, plan.launch_batch)
        resize, tuned_r = self._batch(ctx, plan.resize_rows, plan.resize_gpus, plan.resize_counts, plan.resize_batch)
        self.counters["tuned"] = int(tuned_l.sum() + tuned_r.sum())
        if not (tuned_l.any() or tuned_r.any()):
            return plan
        lr = plan.resize_lr if plan.resize_lr is not None else np.full(len(resize), LR_LINEAR, dtype=np.int64)
        lr = np.where(tuned_r, LR_ADASCALE, lr)
        return attrs.evolve(
            plan,
            launch_batch=launch if len(launch) else plan.launch_batch,
            resize_batch=resize if len(resize) else plan.resize_batch,
            resize_lr=lr if len(resize) else plan.resize_lr,
        )
