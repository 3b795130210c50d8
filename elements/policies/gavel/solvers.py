"""Gavel's scheduling policies as optimisation problems over the allocation matrix X (§4, Table 1).

Each solver turns the pool's active jobs into Shares: the fraction of time each job (and, with
space sharing, each pair of jobs) should spend on each GPU type. The LPs are solved with
OR-Tools' GLOP (or PDLP), the bottleneck MILP of water filling with SCIP. Every solver has a
heterogeneity-aware mode and the agnostic baseline the paper compares against (every GPU type
as fast as the reference type), and re-solves when jobs arrive or finish, at most once per
`interval` (Gavel's 1,920 s in simulation; as in Gavel's simulator, a solve at time zero does not
count); in between it hands on the same Shares, less the jobs that have left its input since
(finished, or ended early by LossTermination), and the mechanism (GavelRounds) realizes them
round by round.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from roundhouse.elements.objectives import GCP_2020_PRICES, parse_prices, refuse_unknown_types, slo_deadlines, type_prices
from roundhouse.elements.policies.gavel.estimator import PairEstimates
from roundhouse.elements.policies.gavel.formulation import (
    Columns,
    Formulation,
    KeptThroughputs,
    classes,
    equal_share,
    job_throughputs,
    pair_block,
    relative_weights,
)
from roundhouse.elements.policies.gavel.lp import LinearProgram, with_column
from roundhouse.elements.policies.gavel.waterfill import water_fill
from roundhouse.errors import SchedError
from roundhouse.runtime.element import Element, In, Out, element, element_family
from roundhouse.runtime.explain import Reason
from roundhouse.runtime.rowsets import isin_rows, without
from roundhouse.runtime.types import Active, Shares
from roundhouse.runtime.values import Duration, IdRange, at_least, at_most, non_negative, one_of

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


_NO_PAIRS = (np.zeros((0, 2), dtype=np.int64), None)
_MAX_BISECTIONS = 200  # each halves the bracket: far more than any tolerance >= 1e-9 needs


@attrs.frozen
class Problem:
    """What a solver needs to know about the active jobs, one entry per job (in pool order)."""

    rows: np.ndarray
    columns: Columns
    T: np.ndarray  # the policy's view of throughput on each column (aware: measured; agnostic: reference)
    sf: np.ndarray  # GPUs each job asks for (Gavel's scale factor)
    weight: np.ndarray
    reference: np.ndarray  # isolated throughput on the reference GPU type
    remaining: np.ndarray  # iterations left
    arrival: np.ndarray
    now: float

    def __len__(self) -> int:
        return len(self.rows)


class SolveTime:
    """Wall time a solver spent solving, in milliseconds: a measurement of this machine, no part
    of the run's state. A fork in memory goes on from the original's (a result before the end
    reports the run's time so far); a snapshot keeps none (pickled as a fresh count, as the
    engine's WallClock is), so that two snapshots of one state are the same bytes."""

    __slots__ = ("ms",)

    def __init__(self, ms: float = 0.0) -> None:
        self.ms = ms

    def __reduce__(self):
        return SolveTime, ()

    def __deepcopy__(self, memo: dict) -> SolveTime:
        return SolveTime(self.ms)


@element_family
class GavelSolver(Element):
    """Shared machinery: when to re-solve, the throughput matrix, classes, space-sharing pairs.

    Ports:
        active: admitted, unfinished jobs.
        pairs: estimated throughputs of job pairs nobody measured, from a PairEstimator (optional; space sharing).
        shares: time fractions per job and GPU type (and per pair, with space sharing).
    Arguments:
        aware: use measured throughputs per GPU type (false: all types as fast as the reference).
        interval: minimum time between re-solves (a re-solve follows a job arrival or completion; in between, the last allocation is handed on without the jobs that have left). A solve at time 0 does not start it, as in Gavel's simulator.
        space_sharing: add pair rows (two jobs on the same GPUs) from the pair table.
        placement_sensitive: give each type a consolidated and a spread column.
        lp: the LP solver: GLOP (simplex) or PDLP (first-order; a program whose numbers PDLP would warn about, such as coefficients more than 1e20 apart, is solved by GLOP).
    Counters:
        solves: allocations computed.
        solve_ms: wall time spent computing them, in milliseconds, at the run's end (a measurement of this machine, not kept in snapshots: a run loaded from one counts from its load).
        classes: rows of the last program (jobs that no policy could tell apart share one).
    """

    category = "solver"
    inputs = (In("active", Active), In("pairs", PairEstimates, required=False))
    outputs = (Out("shares", Shares),)

    aware: bool = True
    interval: Duration = attrs.field(default=Duration(1920.0), validator=non_negative)
    space_sharing: bool = False
    placement_sensitive: bool = False
    lp: str = attrs.field(default="GLOP", validator=one_of("GLOP", "PDLP"))

    # Space sharing: keep a pair on a type only if together the two do more than time slicing.
    pair_threshold = 1.0

    def __attrs_post_init__(self) -> None:
        # (checked with the arguments, so that the error points at them and `check` finds it)
        if self.space_sharing and not self.aware:
            raise ValueError("space_sharing=true needs the heterogeneity-aware mode (aware=true)")

    def start(self, ctx: RoundContext) -> None:
        self._columns = Columns.of(ctx.cluster, self.placement_sensitive)
        self._shares: Shares | None = None
        self._solved_rows = np.zeros(0, dtype=np.int64)
        self._last_solve = -math.inf
        self._estimates: PairEstimates | None = None
        self._pending = False  # the job set changed since the last solve (the interval holds it back)
        self._solve_time = SolveTime()
        self._throughputs = KeptThroughputs()  # (the jobs' throughputs worked out for earlier solves)
        self.counters.update(solves=0, classes=0)

    def tick(self, ctx: RoundContext, active: Active, pairs: PairEstimates | None = None) -> Shares:
        # (Attributes are set only when they change: an element's attribute assignment goes
        # through attrs' hook, and most rounds change none of these.)
        if pairs is not self._estimates:
            self._estimates = pairs
        rows = active.rows
        if self._shares is not None:
            unchanged = len(rows) == len(self._solved_rows) and bool((rows == self._solved_rows).all())
            if self._pending != (not unchanged):
                self._pending = not unchanged
            if unchanged or ctx.now - self._last_solve < float(self.interval) - 1e-9:
                if self._pending and ctx.explaining:
                    # Jobs admitted since the last solve wait for the next, at the interval's end.
                    made, next_solve = int(self._last_solve), int(self._last_solve + float(self.interval))
                    ctx.explain(Reason.NO_ALLOCATION, without(rows, self._solved_rows), made, next_solve)
                kept = _kept(self._shares, rows, unchanged)
                if kept is not self._shares:
                    self._shares = kept
                return kept
        self._pending = False
        started = time.perf_counter()
        if len(rows):
            fractions, pair_rows, pair_fractions = self.allocate(ctx, self.problem(ctx, active))
        else:
            fractions, pair_rows, pair_fractions = np.zeros((0, self._columns.k)), None, None
        names = tuple(ctx.cluster.gpu_types[t] for t in self._columns.gpu_type)
        if pair_rows is not None and not len(pair_rows):
            pair_rows = pair_fractions = None
        self._shares = Shares(rows, names, fractions, self._columns.placement, pair_rows, pair_fractions)
        self._solved_rows = rows
        # Gavel's simulator takes a last reset at time zero for "no reset yet", so a solve at
        # time zero does not start the interval: the next change is solved at the next round.
        self._last_solve = ctx.now if ctx.now > 0 else -math.inf
        self.counters["solves"] += 1
        self._solving_took((time.perf_counter() - started) * 1e3)
        return self._shares

    def finish(self, ctx: RoundContext) -> dict:
        # (Wall time is no part of the run's state: counted beside it, reported at the end.)
        self.counters["solve_ms"] = self._solving_took(0.0)
        return super().finish(ctx)

    def _solving_took(self, ms: float) -> float:
        """Add to the solve time; its total."""
        if "_solve_time" not in self.__dict__:  # (a snapshot saved when it was a counter: count from the load)
            self.counters.pop("solve_ms", None)
            self._solve_time = SolveTime()
        self._solve_time.ms += ms
        return self._solve_time.ms

    # Event skipping: the same Shares until the job set changes (an arrival or completion), or,
    # when it changed within the interval, until the interval ends.
    quiet_after_change = True

    def quiet_until(self, ctx: RoundContext) -> float | None:
        if self._estimates is not None:
            return None  # (a pair estimator's estimates may change between events)
        if self._pending:
            return self._last_solve + float(self.interval) - 1e-6
        return math.inf

    @property
    def allocation(self) -> Shares | None:
        """The Shares of the last solve (for tools and tests)."""
        return solved_shares(self._shares)

    def allocate(self, ctx: RoundContext, problem: Problem):
        """(fractions per job and column, job pairs (p, 2) or None, pair fractions or None)."""
        raise NotImplementedError

    # --- helpers for the policies ---
    def problem(self, ctx: RoundContext, active: Active) -> Problem:
        rows = active.rows
        kept = getattr(self, "_throughputs", None)  # (none in a snapshot saved before they were kept)
        T = job_throughputs(ctx, rows, self._columns) if kept is None else kept.of(ctx, rows, self._columns, job_throughputs)
        reference = active.reference_rate
        if not self.aware:
            # The agnostic baseline (Gavel's max_min_fairness, fifo, ...): every type where the
            # job can run is taken to be as fast as the reference type.
            T = np.where(T > 0, reference[:, None], 0.0)
        return Problem(
            rows=rows,
            columns=self._columns,
            T=T,
            sf=active.gpus.astype(np.float64),
            weight=relative_weights(active.weight.astype(np.float64)),
            reference=reference,
            remaining=np.maximum(active.work - active.done, 0.0),
            arrival=active.arrival_s,
            now=ctx.now,
        )

    def formulation(self, ctx: RoundContext, problem: Problem, *keys: np.ndarray):
        """Classes of jobs alike in T, GPU count and `keys`, and their Formulation (with pair
        variables when space sharing). Returns (formulation, class of each job, representatives)."""
        extra = list(keys)
        if self.space_sharing and self._estimates is not None:
            extra.append(self._estimates.reference_of(problem.rows))
        class_of, reps, counts = classes(problem.T, problem.sf, *extra)
        self.counters["classes"] = len(reps)
        T, sf = problem.T[reps], problem.sf[reps]
        pairs = None
        if self.space_sharing:
            rates = lambda a, b: self._pair_rates(ctx, problem.rows[reps[a]], problem.rows[reps[b]], sf[a])  # noqa: E731
            pairs = pair_block(T, sf, counts, rates, self.pair_threshold, limit=max(64, 16 * len(reps)))
        return Formulation(T, sf, counts, problem.columns, pairs), class_of, reps

    def _pair_rates(self, ctx: RoundContext, rows_a: np.ndarray, rows_b: np.ndarray, gpus: np.ndarray):
        """Each side's throughput when the two jobs share GPUs, per column (NaN: unknown)."""
        columns = self._columns
        k = columns.k
        ra, rb = np.full((len(rows_a), k), np.nan), np.full((len(rows_a), k), np.nan)
        names = ctx.cluster.gpu_types
        estimates = self._estimates
        models, batch = ctx.jobs.column("model"), ctx.jobs.column("batch_size")
        for j in range(k):
            if columns.placement is not None and columns.placement[j] != "consolidated":
                continue  # pairs were measured on one node only
            gpu = names[columns.gpu_type[j]]
            real_a, real_b = ctx.pairs.rates(
                models[rows_a], batch[rows_a], models[rows_b], batch[rows_b], gpu, gpus.astype(np.int64)
            )
            if estimates is None:
                ra[:, j], rb[:, j] = real_a, real_b
                continue
            # Estimates guess how fast a pair runs, not whether it can share at all: two jobs
            # that do not fit in the GPUs' memory together (0 in the cluster's pair table), or
            # that the cluster has no speeds for, would fail at launch, so they are not paired.
            est_a, est_b = estimates.pair_rates(rows_a, rows_b, gpu, gpus.astype(np.int64))
            runs = real_a > 0
            ra[:, j], rb[:, j] = np.where(runs, est_a, np.nan), np.where(runs, est_b, np.nan)
        return ra, rb

    def solution(self, form: Formulation, values: np.ndarray, class_of: np.ndarray, rows: np.ndarray):
        fractions = form.class_fractions(values)[class_of]
        if form.pairs is None:
            return fractions, None, None
        pairs, pair_fractions = form.job_pairs(values, class_of, rows)
        return fractions, pairs, pair_fractions


@attrs.frozen
class KeptShares(Shares):
    """A solve's Shares kept within the solver interval, limited to the jobs still active: a job
    that left the solver's input since (finished, or ended early by LossTermination in this
    round) is taken out, with its pairs. `solved` is the allocation it was cut from, so that the
    mechanism carries on with that allocation (no reset) and only stops choosing the jobs gone."""

    solved: Shares = attrs.field(kw_only=True, eq=False)


def solved_shares(shares: Shares | None) -> Shares | None:
    """The solve's own Shares behind `shares` (itself, unless it is a KeptShares)."""
    return shares.solved if isinstance(shares, KeptShares) else shares


def _kept(current: Shares, rows: np.ndarray, unchanged: bool) -> Shares:
    """The last solve's Shares limited to the active `rows`: the solve itself while none of its
    jobs has left, `current` while the same ones have (the same object: nothing changed)."""
    solved = current.solved if isinstance(current, KeptShares) else current
    if unchanged:
        return solved
    keep = isin_rows(solved.rows, rows)
    pairs, pair_fractions = solved.pairs, solved.pair_fractions
    keep_pair = None
    if pairs is not None and pair_fractions is not None:
        keep_pair = isin_rows(pairs[:, 0], rows) & isin_rows(pairs[:, 1], rows)
    if keep.all() and (keep_pair is None or keep_pair.all()):
        return solved
    if current is not solved and np.array_equal(current.rows, solved.rows[keep]):
        return current  # (the same jobs: the same pairs, each kept only with both its jobs)
    if keep_pair is not None and pairs is not None and pair_fractions is not None and keep_pair.any():
        pairs, pair_fractions = pairs[keep_pair], pair_fractions[keep_pair]
    else:
        pairs = pair_fractions = None
    gpu_types: Any = solved.gpu_types  # (a tuple already: attrs' converter types the argument loosely)
    return KeptShares(
        solved.rows[keep],
        gpu_types,
        solved.fractions[keep],
        solved.placement,
        pairs,
        pair_fractions,
        solved=solved,
    )


def _empty(problem: Problem):
    return np.zeros((len(problem), problem.columns.k)), None, None


def _water_filling_failed(name: str, filled, problem: Problem):
    """No job was raised: nothing to raise gives the empty allocation; a failed LP is an error
    (an empty allocation would silently run nothing)."""
    if filled.failed is not None:
        raise RuntimeError(f"{name}: the water-filling LP solver returned {filled.failed}, so there is no allocation")
    return _empty(problem)


def _solve_or_fail(lp: LinearProgram, solver: str, name: str):
    got = lp.solve(solver)
    if not got.optimal:
        raise RuntimeError(f"{name}: the LP solver returned {got.status}")
    return got


@element
class MaxMinFairness(GavelSolver):
    """Weighted max-min fairness over normalized effective throughput (Gavel's LAS policy).

    Maximizes the smallest `scale_factor_m / w_m * throughput(m, X) / throughput(m, X_equal)`,
    where X_equal gives a job equal time on every GPU type in proportion to its count (§4.1).
    With `aware=false` every type is taken to be as fast as the reference type, which is Gavel's
    heterogeneity-agnostic LAS. With `water_filling=true` the allocation is water-filled (§4.3):
    after the max-min level, every job that can still gain keeps gaining, so the result is
    Pareto efficient. Job weights come from the trace's `weight` column (Gavel's priorities);
    only their ratios matter, and a weight below a millionth of the largest counts as that.

    Arguments:
        water_filling: keep raising jobs that are not bottlenecked (LP plus bottleneck MILP per level).
    Counters:
        objective: the last allocation's smallest weighted normalized throughput (its first level, with water filling), its weights over their mean among the jobs solved for, so that scaling every weight alike leaves it as it is (equal weights: the smallest normalized throughput).
        levels: water-filling levels solved (with water_filling=true).
        milp_stopped: bottleneck MILPs stopped at their node limit, their best solution used (with water_filling=true).
    Cost: A linear program over job classes C x GPU types when the job set changes (solver time);
        O(n) over the pool's jobs n otherwise, and not ticked between events (event skipping).
    See also: GavelRounds, Hierarchical, MinMaxRho
    Paper: Gavel (OSDI'20) §4.1 (heterogeneity-aware LAS), §4.3 (water filling).
    """

    state = ("_estimates", "_last_solve", "_pending", "_shares", "_solved_rows", "_solve_time", "_throughputs")
    fixed = ("_columns",)

    water_filling: bool = False

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self.counters["objective"] = 0.0
        if self.water_filling:
            self.counters.update(levels=0, milp_stopped=0)

    def allocate(self, ctx: RoundContext, problem: Problem):
        form, class_of, reps = self.formulation(ctx, problem, problem.weight)
        if not form.runnable.any():
            return _empty(problem)
        scale = form.sf / (problem.weight[reps] * np.maximum(equal_share(form.T, problem.columns), 1e-300))
        # The objective counter's weights are over their mean among the jobs the minimum runs
        # over (the program's own are not: only their ratios matter to the allocation), so that
        # scaling every weight alike leaves the figure as it is.
        run_counts = np.where(form.runnable, form.counts, 0)
        mean_weight = float((problem.weight[reps] * run_counts).sum() / max(int(run_counts.sum()), 1))
        if self.water_filling:
            weights = problem.weight[reps]
            filled = water_fill(
                form,
                1.0 / np.maximum(equal_share(form.T, problem.columns), 1e-300),
                lambda frozen: np.where(frozen, 0.0, weights),
                self.lp,
            )
            self.counters["levels"] += len(filled.levels)
            self.counters["milp_stopped"] += filled.milp_stopped
            if filled.values is None:
                return _water_filling_failed(self.name, filled, problem)
            first = filled.levels[0] * form.sf / weights
            self.counters["objective"] = float(first[form.runnable].min()) * mean_weight
            return self.solution(form, filled.values, class_of, problem.rows)
        lp = LinearProgram()
        form.add_variables(lp)
        z = int(lp.variables(1, lb=-np.inf, obj=1.0)[0])
        run = form.runnable
        rows = form.throughput_rows(scale, np.flatnonzero(run), z, -1.0)
        if rows is None:
            throughput = form.throughput(scale)
            rows = with_column(throughput if run.all() else throughput[run], z, -1.0)
        lp.constraints(rows, lb=0.0)
        form.validity(lp)
        got = _solve_or_fail(lp, self.lp, self.name)
        self.counters["objective"] = got.objective * mean_weight
        return self.solution(form, got.values, class_of, problem.rows)


@element
class MinMaxRho(GavelSolver):
    """Finish-time fairness as Gavel solves it: the allocation that minimizes the largest rho.

    `rho_m = (t_m + steps_m / throughput(m, X)) / (t_iso_m + steps_m / throughput(m, X_iso))`:
    the job's expected finish time under X over the one it would have with 1/n of the cluster
    (X_iso: each type's GPUs split equally among the n active jobs). t_m is the time since the
    job arrived and t_iso_m the time it would have needed, alone on its 1/n share, for the work
    it has done (grown at each solve by the work done since the last one, at the isolated
    throughput of then). Each bisection step is an LP: is there an X with throughput(m, X) >=
    steps_m / (rho D_m - t_m) for every job? Ties at the optimum go to more total throughput.

    Arguments:
        tolerance: stop the bisection when the bracket on rho is this narrow (relative).
    Counters:
        bisection_steps: feasibility LPs solved.
        rho: the largest expected rho of the last allocation.
    Cost: A linear program over job classes C x GPU types when the job set changes (solver time);
        O(n) over the pool's jobs n otherwise.
    See also: MaxMinFairness, MinMakespan, FinishTimeFairnessMetrics
    Paper: Gavel (OSDI'20) §4.2 (Minimize Finish-Time Fairness); Themis (NSDI'20).
    """

    state = (
        "_estimates",
        "_last_done",
        "_last_iso",
        "_last_solve",
        "_pending",
        "_shares",
        "_solved_rows",
        "_t_iso",
        "_solve_time",
        "_throughputs",
    )
    fixed = ("_columns",)

    # Below about 1e-9 the bracket [low, high] cannot narrow further in floating point (the
    # bisection would never end); at 1 or more it would not bisect at all.
    tolerance: float = attrs.field(default=1e-3, validator=[at_least(1e-9), at_most(0.5)])

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self._t_iso: dict[int, float] = {}
        self._last_done: dict[int, float] = {}
        self._last_iso: dict[int, float] = {}
        self.counters.update(bisection_steps=0, rho=0.0)

    def allocate(self, ctx: RoundContext, problem: Problem):
        rows = problem.rows
        n = len(rows)
        columns = problem.columns
        done = ctx.jobs.column("done")[rows]
        # X_iso: each type's GPUs split equally among the n jobs, in units of the job's GPUs.
        share = columns.capacity[None, :] / n / problem.sf[:, None]
        share = share / np.maximum(share.sum(axis=1, keepdims=True), 1.0)
        per_type = np.zeros((n, len(columns.capacity)))
        np.maximum.at(per_type.T, columns.gpu_type, problem.T.T)
        iso = (per_type * share).sum(axis=1)
        t_iso = np.array([self._t_iso.get(r, 0.0) for r in rows.tolist()])
        gained = np.array([done[i] - self._last_done.get(r, done[i]) for i, r in enumerate(rows.tolist())])
        last_iso = np.array([self._last_iso.get(r, iso[i]) for i, r in enumerate(rows.tolist())])
        t_iso = t_iso + np.where(last_iso > 0, gained / np.maximum(last_iso, 1e-300), 0.0)
        self._t_iso = dict(zip(rows.tolist(), t_iso.tolist()))
        self._last_done = dict(zip(rows.tolist(), done.tolist()))
        self._last_iso = dict(zip(rows.tolist(), iso.tolist()))

        steps = problem.remaining
        elapsed = problem.now - problem.arrival
        runnable = (problem.T > 0).any(axis=1) & (iso > 0) & (steps > 0)
        if not runnable.any():
            return _empty(problem)
        denominator = t_iso + steps / np.where(iso > 0, iso, 1.0)  # (read only where the job can run)
        form, class_of, reps = self.formulation(ctx, problem, steps, elapsed, t_iso)
        c_run = runnable[reps]
        scale = 1.0 / np.maximum(iso[reps], 1e-300)
        lp = LinearProgram(warm=True)  # each bisection step only moves row bounds
        form.add_variables(lp)
        normalized = form.throughput(scale)
        need_rows = lp.constraints(normalized, lb=-np.inf)
        form.validity(lp)
        lp.build()
        lp.set_objective(np.arange(form.n_vars), np.asarray(normalized.multiply(form.counts[:, None]).sum(axis=0)).ravel())

        D, t, s, iso_c = denominator[reps], elapsed[reps], steps[reps], iso[reps]

        def feasible(rho: float):
            gap = rho * D - t
            if (gap[c_run] <= 0).any():
                return None
            # (divided only where the class can run: elsewhere its isolated throughput is 0)
            need = np.full(len(gap), -np.inf)
            need[c_run] = s[c_run] / (iso_c[c_run] * gap[c_run])
            lp.set_row_bounds(need_rows, lb=need)
            self.counters["bisection_steps"] += 1
            got = lp.solve(self.lp)
            if not got.optimal:
                statuses.add(got.status)
            return got if got.optimal else None

        statuses: set[str] = set()  # what the LP solver said when a step found no allocation

        low = float(np.max(t[c_run] / D[c_run]))
        high = max(2.0 * low, 1.0)
        best = feasible(high)
        while best is None:
            low, high = high, 2.0 * high
            if high > 1e12:
                said = ", ".join(sorted(statuses))
                raise RuntimeError(
                    f"{self.name}: no allocation met even rho = 1e12 (the LP solver returned {said}), so there is no allocation"
                )
            best = feasible(high)
        for _ in range(_MAX_BISECTIONS):  # a bound besides the tolerance, in case rounding stalls the bracket
            if high - low <= self.tolerance * high:
                break
            middle = 0.5 * (low + high)
            got = feasible(middle)
            if got is None:
                low = middle
            else:
                high, best = middle, got
        self.counters["rho"] = high
        return self.solution(form, best.values, class_of, problem.rows)


@element
class MinMakespan(GavelSolver):
    """Minimize the makespan of the active jobs: one LP.

    `Minimize_X max_m steps_m / throughput(m, X)` is the LP `maximize tau` subject to
    `throughput(m, X) >= steps_m * tau` (tau is 1 / makespan); Gavel bisects on the makespan
    instead. Ties at the optimum go to more total throughput (a second solve of the same model
    with tau held at its optimum). The agnostic baseline takes every type to be a V100.

    Counters:
        makespan_s: the makespan the last allocation promises, in seconds.
    Cost: A linear program over job classes C x GPU types when the job set changes (solver time);
        O(n) over the pool's jobs n otherwise.
    See also: MinMaxRho, FifoHet, JobMetrics
    Paper: Gavel (OSDI'20) §4.2 (Minimize Makespan) and Appendix A.1.
    """

    state = ("_estimates", "_last_solve", "_pending", "_shares", "_solved_rows", "_solve_time", "_throughputs")
    fixed = ("_columns",)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self.counters["makespan_s"] = 0.0

    def allocate(self, ctx: RoundContext, problem: Problem):
        form, class_of, reps = self.formulation(ctx, problem, problem.remaining)
        steps = problem.remaining[reps]
        run = form.runnable & (steps > 0)
        if not run.any():
            return _empty(problem)
        eq = np.maximum(equal_share(form.T, problem.columns), 1e-300)
        unit = float(np.median((steps / eq)[run]))  # tau in units of 1 / (typical equal-share time)
        lp = LinearProgram(warm=True)
        form.add_variables(lp)
        tau = int(lp.variables(1, lb=0.0, obj=1.0)[0])
        normalized = form.throughput(1.0 / eq)
        lp.constraints(with_column(normalized[run], tau, -(steps / eq)[run] / unit), lb=0.0)
        form.validity(lp)
        first = _solve_or_fail(lp, self.lp, self.name)
        best = first.values[tau]
        self.counters["makespan_s"] = unit / best if best > 0 else math.inf
        # Second stage: same model, tau held at its optimum, most total normalized throughput.
        lp.set_var_bounds(np.array([tau]), lb=best * (1 - 1e-7))
        lp.set_objective(np.arange(form.n_vars), np.asarray(normalized.multiply(form.counts[:, None]).sum(axis=0)).ravel())
        second = lp.solve(self.lp)
        values = second.values if second.optimal else first.values
        return self.solution(form, values, class_of, problem.rows)


@element
class MaxThroughput(GavelSolver):
    """Maximize total effective throughput, in reference-GPU equivalents.

    Maximizes `sum_m scale_factor_m * throughput(m, X) / throughput_ref_m`: the work the cluster
    does per second, measured in jobs running at full speed on the reference GPU type (raw
    iterations/s are not comparable across models). Jobs that gain little from any type may get
    nothing; that is the policy. The cost experiments' baseline.

    Cost: A linear program over job classes C x GPU types when the job set changes (solver time);
        O(n) over the pool's jobs n otherwise.
    See also: MinCost, MinCostSLO, EffectiveThroughput
    Paper: Gavel (OSDI'20) §4.2 (maximize total throughput).
    """

    state = ("_estimates", "_last_solve", "_pending", "_shares", "_solved_rows", "_solve_time", "_throughputs")
    fixed = ("_columns",)

    def allocate(self, ctx: RoundContext, problem: Problem):
        form, class_of, reps = self.formulation(ctx, problem, problem.reference)
        if not form.runnable.any():
            return _empty(problem)
        lp = LinearProgram()
        form.add_variables(lp)
        work = form.throughput(form.sf / problem.reference[reps])
        form.validity(lp)
        lp.build()
        lp.set_objective(np.arange(form.n_vars), np.asarray(work.multiply(form.counts[:, None]).sum(axis=0)).ravel())
        got = _solve_or_fail(lp, self.lp, self.name)
        return self.solution(form, got.values, class_of, problem.rows)


_DEFAULT_PRICES = GCP_2020_PRICES
# The cost programs depend on prices only through their ratios: scaling every price by one
# factor scales every spend alike, and the ratio LP's solution (scaled variables over its
# scale t) does not move. So prices enter a program divided by the largest, whatever their
# unit (1e-300 or 1e300 dollars a GPU-hour alike). How far apart they are is what an LP solver
# sees: beyond this factor between the dearest and the cheapest type not free, PDLP no longer
# finds GLOP's allocation (it stops at a tolerance relative to the largest coefficient), and
# far beyond it the cheap type's spend is lost in rounding; such prices are refused.
_PRICE_SPREAD = 1e6


def _prices_argument(instance, attribute, value) -> None:
    """The `prices` argument: parse_prices's form and checks (no price so small that it reads
    as 0), and positive prices at most _PRICE_SPREAD apart."""
    prices = parse_prices(value)
    positive = {name: price for name, price in prices.items() if price > 0}
    if len(positive) > 1:
        dear, cheap = max(positive, key=positive.__getitem__), min(positive, key=positive.__getitem__)
        if positive[dear] > _PRICE_SPREAD * positive[cheap]:
            raise ValueError(
                f"{dear}'s price {positive[dear]:g} and {cheap}'s {positive[cheap]:g} are "
                f"{positive[dear] / positive[cheap]:.3g} times apart; the cost program is solved reliably only "
                f"for prices at most {_PRICE_SPREAD:g} times apart (only their ratios matter, not their scale; "
                f"price a type that costs nothing at 0)"
            )


def _price_columns(prices: dict, ctx: RoundContext, columns: Columns, who: str, given: bool = True) -> np.ndarray:
    """The price of each column's GPU type (every type of the cluster must have one). Prices
    `given` (not the defaults, which price Gavel's three types for any of its clusters) for a
    type the cluster lacks are refused: a misspelt or wrong type would otherwise go unseen."""
    names = ctx.cluster.gpu_types
    if given:
        refuse_unknown_types(prices, names, who)
    used = sorted(set(columns.gpu_type.tolist()))
    per_type = dict(zip(used, type_prices(prices, [names[t] for t in used], who).tolist()))
    return np.array([per_type[t] for t in columns.gpu_type.tolist()], dtype=np.float64)


def _scaled(price: np.ndarray) -> np.ndarray:
    """Prices divided by the largest (the cost programs see only their ratios)."""
    top = float(price.max()) if len(price) else 0.0
    return price / top if top > 0 else price


@element_family
class _CostSolver(GavelSolver):
    """Cost policies: the ratio of throughput to spend as one LP (Charnes-Cooper).

    Arguments:
        prices: hourly price per GPU of each type, as "TYPE:DOLLARS" (default: 2020 GCP on-demand); only their ratios matter, and prices above 0 may be at most 1e6 times apart.
    Counters:
        floor_relaxed: solves where the equal share of the cluster's time did not fit the GPU types (jobs that can run only on a small type) or, with SLOs, the SLO rows, so every job was held to the largest common share that fits instead.
        unsolved: solves where the cost program had no optimum even so (e.g. every usable type priced at 0); each job then gets that largest common share, without regard to cost.
    """

    prices: list[str] = attrs.field(factory=lambda: list(_DEFAULT_PRICES), validator=_prices_argument)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        who = f"{self.name} ({type(self).__name__})"
        self._price = _price_columns(parse_prices(self.prices), ctx, self._columns, who, self.prices != _DEFAULT_PRICES)
        self.counters.update(floor_relaxed=0, unsolved=0)

    def _ratio_program(self, ctx: RoundContext, problem: Problem, slo_need: np.ndarray | None):
        """Maximize total normalized throughput over total spend (§4.2), as the LP of
        Charnes and Cooper: scaled variables v = t * X with spend(v) = 1. Every job is also given
        at least an equal share of the cluster's time (the ratio alone is scale-free and would
        run only the most cost-effective job); when that share does not fit the GPU types, the
        largest share every job can have at once, with the SLO rows met. Returns (formulation,
        classes, reps, X or None (no job can run, or the SLO rows alone cannot be met))."""
        form, class_of, reps = self.formulation(
            ctx, problem, problem.reference, slo_need if slo_need is not None else problem.reference
        )
        if not form.runnable.any():
            return form, class_of, reps, None
        need = None
        if slo_need is not None:
            need = np.where(form.runnable, slo_need[reps], np.inf)
            if not np.isfinite(need).any():
                need = None
        equal = min(1.0, float(problem.columns.capacity.sum()) / float(problem.sf.sum())) * (1 - 1e-6)
        values = self._ratio(form, problem, reps, need, equal)
        if values is not None:
            return form, class_of, reps, values
        # The equal share may not fit the types (two jobs that run only on a single V100 cannot
        # each have time 1 of it), or may conflict with the SLO rows: find the largest common
        # share that fits. Nothing fits only when the SLO rows themselves cannot all be met.
        share, fallback = self._largest_share(form, need)
        if share is None:
            return form, class_of, reps, None
        floor = share * (1 - 1e-6)
        if floor < equal:
            self.counters["floor_relaxed"] += 1
            values = self._ratio(form, problem, reps, need, floor)
        if values is None:
            self.counters["unsolved"] += 1
            values = fallback
        return form, class_of, reps, values

    def _ratio(self, form: Formulation, problem: Problem, reps: np.ndarray, need: np.ndarray | None, floor: float):
        """The most throughput per dollar with every runnable class's time at least `floor` (and,
        with `need`, each class's throughput at least its need): X, or None if it has no optimum.

        A GPU type priced at 0 makes the ratio unbounded whenever the jobs fit on free GPUs
        alone: then every allocation that spends nothing is best, and the one with the most
        throughput is taken. Only when they do not fit does the ratio LP decide (bounded then,
        as every allocation that fits spends something)."""
        usable = (form.T[form.runnable] > 0).any(axis=0)
        if (usable & (self._price == 0)).any() and (usable & (self._price > 0)).any():
            values = self._ratio_lp(form, problem, reps, need, floor, free_only=True)
            if values is not None:
                return values
        return self._ratio_lp(form, problem, reps, need, floor)

    def _ratio_lp(self, form: Formulation, problem: Problem, reps, need, floor: float, free_only: bool = False):
        """The Charnes-Cooper LP (scaled variables v = t * X with spend(v) = 1), or, `free_only`,
        the same rows with t = 1 and nothing spent: the most throughput on free GPUs alone."""
        lp = LinearProgram()
        form.add_variables(lp, scaled=True)
        t = int(lp.variables(1, lb=1.0 if free_only else 0.0, ub=1.0 if free_only else np.inf)[0])
        time_m = form.time()
        run = form.runnable
        lp.constraints(with_column(time_m, t, -1.0), ub=0.0)
        lp.constraints(with_column(time_m[run], t, -floor), lb=0.0)
        lp.constraints(with_column(form.capacity(), t, -problem.columns.capacity), ub=0.0)
        nodes = form.node_capacity()
        if nodes is not None:
            lp.constraints(with_column(nodes[0], t, -nodes[1]), ub=0.0)
        spend = 0.0 if free_only else 1.0
        lp.constraints(form.cost(_scaled(self._price)), lb=spend, ub=spend)
        work = form.throughput(form.sf / problem.reference[reps])
        if need is not None:
            has = np.isfinite(need)
            lp.constraints(with_column(form.throughput()[has], t, -need[has]), lb=0.0)
        lp.build()
        lp.set_objective(np.arange(form.n_vars), np.asarray(work.multiply(form.counts[:, None]).sum(axis=0)).ravel())
        got = lp.solve(self.lp)
        if not got.optimal or got.values[t] <= 0:
            return None
        values = got.values.copy()
        values[: form.n_vars] /= values[t]
        return values

    def _largest_share(self, form: Formulation, need: np.ndarray | None):
        """The largest time share every runnable class can have at once (with `need`, while
        each meets its need), and an allocation that gives it; (None, None) if none can."""
        lp = LinearProgram()
        form.add_variables(lp)
        share = int(lp.variables(1, lb=0.0, ub=1.0, obj=1.0)[0])
        lp.constraints(with_column(form.time()[form.runnable], share, -1.0), lb=0.0)
        form.validity(lp)
        if need is not None:
            has = np.isfinite(need)
            lp.constraints(form.throughput()[has], lb=need[has])
            got = lp.solve(self.lp)
            if got.status == "INFEASIBLE":  # (the SLO rows cannot all be met: the caller drops them)
                return None, None
            if not got.optimal:  # (solver trouble is no missed SLO)
                raise RuntimeError(f"{self.name}: the LP solver returned {got.status}")
        else:
            got = _solve_or_fail(lp, self.lp, self.name)  # (a share of 0 always fits)
        return max(float(got.values[share]), 0.0), got.values


@element
class MinCost(_CostSolver):
    """Minimize cost: the most effective throughput per dollar, as one LP (Charnes-Cooper).

    Maximizes `sum_m throughput(m, X) / sum_m sum_j cost_j X_mj` (§4.2), with throughput in
    reference-GPU equivalents and each GPU charged at its type's hourly price (a shared GPU once).
    The linear-fractional program becomes one LP by the Charnes-Cooper transformation. Because
    the ratio is unchanged when every allocation is scaled down, every job is also held to at
    least an equal share of the cluster's time (the cluster's GPUs over all the GPUs the jobs ask
    for, at most 1); within that, the program picks the GPU types. When that share does not fit
    (jobs that can run only on a small type), every job is held to the largest share all can have at once,
    found by one more LP, and that is counted (floor_relaxed). A type priced at 0 is free:
    when the jobs' shares fit on free GPUs alone, nothing is spent (the allocation with the most
    throughput among those is taken); otherwise the ratio decides. With every usable type free
    the ratio has no optimum (unsolved).

    Cost: A linear program over job classes C x GPU types when the job set changes (two more when
        the equal share does not fit, one more with both free and priced types; solver time);
        O(n) over the pool's jobs n otherwise.
    See also: MinCostSLO, MaxThroughput, CostMetrics
    Paper: Gavel (OSDI'20) §4.2 (Minimizing Total Cost); Charnes and Cooper (1962).
    """

    state = ("_estimates", "_last_solve", "_pending", "_shares", "_solved_rows", "_solve_time", "_throughputs")
    fixed = ("_columns", "_price")

    def allocate(self, ctx: RoundContext, problem: Problem):
        form, class_of, reps, values = self._ratio_program(ctx, problem, None)
        if values is None:
            return _empty(problem)  # (no job can run)
        return self.solution(form, values, class_of, problem.rows)


@element
class MinCostSLO(_CostSolver):
    """Minimize cost subject to every job meeting its SLO; without SLOs when they cannot all be met.

    MinCost plus `throughput(m, X) >= steps_m / (deadline_m - now)` for each job with an SLO
    (§4.2). The deadline is arrival plus the trace's `slo_s`, or plus `slo_factor` times the
    job's isolated duration on the reference type (Gavel's SLO factor). A job that could not
    meet its deadline even alone on its fastest type asks for that type's throughput instead.
    When the SLO rows conflict with MinCost's equal share of time, the share is lowered to the
    largest that fits with them (floor_relaxed); only when no allocation at all meets the SLO
    rows is the program solved again without SLOs (as Gavel does), and the fallback is counted.

    Counters:
        slo_fallbacks: solves where no allocation could meet every SLO, so the SLOs were dropped (never without a job with an SLO).
        slo_unattainable: jobs (at solves) whose deadline was out of reach even alone on the fastest type.
    Cost: A linear program over job classes C x GPU types when the job set changes (two more when
        the equal share does not fit; solver time); O(n) over the pool's jobs n otherwise.
    See also: MinCost, SloMetrics, CostMetrics
    Paper: Gavel (OSDI'20) §4.2 (Minimize cost subject to SLOs) and §7.3 (cost experiment).
    """

    state = ("_estimates", "_last_solve", "_pending", "_shares", "_solved_rows", "_solve_time", "_throughputs")
    fixed = ("_columns", "_price")

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self.counters.update(slo_fallbacks=0, slo_unattainable=0)

    def allocate(self, ctx: RoundContext, problem: Problem):
        deadline = slo_deadlines(ctx, problem.rows)
        left = deadline - problem.now
        best = problem.T.max(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(np.isfinite(deadline), problem.remaining / np.where(left > 0, left, np.nan), np.nan)
        out_of_reach = np.isfinite(deadline) & ~(need <= best)
        self.counters["slo_unattainable"] += int(out_of_reach.sum())
        need = np.where(out_of_reach, best * (1 - 1e-6), need)
        need = np.where(np.isfinite(deadline), need, np.inf)
        form, class_of, reps, values = self._ratio_program(ctx, problem, need)
        if values is None and form.runnable.any():
            # Only the SLO rows themselves can leave the program without a solution, and then
            # some runnable job has an SLO.
            self.counters["slo_fallbacks"] += 1
            form, class_of, reps, values = self._ratio_program(ctx, problem, None)
        if values is None:
            return _empty(problem)  # (no job can run)
        return self.solution(form, values, class_of, problem.rows)


@element
class FifoHet(GavelSolver):
    """First in, first out across GPU types: earlier jobs get whole GPUs first, on the fastest type.

    `method=greedy` is Gavel's implementation: jobs, in arrival order, each take `scale_factor`
    whole GPUs of one type (the fastest type with room when aware; a random one with room when
    agnostic) until a job finds no type with room; a job that finds room only on types where it
    cannot run is passed over. Allocations are 0 or 1. Agnostic allocations
    stay with a job until it finishes (Gavel's base FIFO); aware ones are redone at each solve.
    `method=lp` solves the paper's formulation instead: maximize `sum_m throughput(m, X) /
    throughput(m, X_fastest) * (M - m)` over arrival order m.

    Arguments:
        space_sharing: add pair rows (two jobs on the same GPUs) from the pair table (method=lp).
        method: greedy (Gavel's implementation) or lp (the paper's objective).
        seed: seed for the agnostic mode's random type choice (default: derived from the graph's seed).
    Cost: O(n log n) over the pool's jobs n, plus a linear program over classes when the job set
        changes.
    See also: Fifo, MinMakespan, GavelRounds
    Paper: Gavel (OSDI'20) §4.2 (FIFO) and its policies/fifo.py.
    """

    state = ("_estimates", "_held", "_last_solve", "_pending", "_rng", "_shares", "_solved_rows", "_solve_time", "_throughputs")
    fixed = ("_columns",)

    method: str = attrs.field(default="greedy", validator=one_of("greedy", "lp"))
    seed: int | None = attrs.field(default=None, validator=non_negative)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.method == "greedy" and self.space_sharing:
            raise ValueError("space sharing needs method=lp")

    def start(self, ctx) -> None:
        super().start(ctx)
        self._rng = ctx.rng(self.seed)
        self._held: dict[int, int] = {}  # job row -> column (agnostic: sticky until it finishes)

    def allocate(self, ctx, problem: Problem):
        order = np.lexsort((problem.rows, problem.arrival))
        if self.method == "lp":
            return self._lp(ctx, problem, order)
        columns = problem.columns
        k = columns.k
        rows = problem.rows
        alive = set(rows.tolist())
        held = {r: c for r, c in self._held.items() if r in alive} if not self.aware else {}
        left = columns.capacity.astype(np.float64).copy()
        position = {r: i for i, r in enumerate(rows.tolist())}
        for r, c in held.items():
            left[columns.gpu_type[c]] -= problem.sf[position[r]]
        for i in order.tolist():
            r = int(rows[i])
            if r in held:
                continue
            room = problem.sf[i] <= left[columns.gpu_type]
            if not room.any():
                break  # strict FIFO: no job jumps ahead of one that does not fit
            fits = np.flatnonzero(room & (problem.T[i] > 0))
            if not len(fits):
                # There is room, but only on types where the job cannot run (e.g. too little
                # memory): Gavel passes over it and the queue goes on.
                continue
            if self.aware:
                c = int(fits[np.argmax(problem.T[i, fits])])
            else:
                c = int(fits[self._rng.integers(len(fits))])
            held[r] = c
            left[columns.gpu_type[c]] -= problem.sf[i]
        self._held = held
        fractions = np.zeros((len(rows), k))
        for r, c in held.items():
            fractions[position[r], c] = 1.0
        self.counters["classes"] = len(rows)
        return fractions, None, None

    def _lp(self, ctx, problem: Problem, order: np.ndarray):
        n = len(problem)
        rank = np.empty(n)
        rank[order] = np.arange(n)
        form, class_of, reps = self.formulation(ctx, problem, rank)
        if not form.runnable.any():
            return _empty(problem)
        fastest = np.maximum(form.T.max(axis=1), 1e-300)
        lp = LinearProgram()
        form.add_variables(lp)
        gain = form.throughput((n - rank[reps]) / fastest)
        form.validity(lp)
        lp.build()
        lp.set_objective(np.arange(form.n_vars), np.asarray(gain.multiply(form.counts[:, None]).sum(axis=0)).ravel())
        got = _solve_or_fail(lp, self.lp, self.name)
        return self.solution(form, got.values, class_of, problem.rows)


@element
class Hierarchical(GavelSolver):
    """Hierarchical fairness: weighted fairness across entities, fairness or FIFO inside each.

    Each job belongs to an entity: the first listed entity that is a range holding its job id,
    or a name equal to its entity column (by default the trace's `user`). Entity s has weight
    w_s, shared by its jobs: in proportion to their own weights under fairness, all to the
    earliest unfrozen job under FIFO. The allocation is water-filled (§4.3): levels of
    weighted max-min LPs, a bottleneck MILP after each; a bottlenecked job is frozen and its
    weight passes to the rest of its entity. Entities not listed get weight 1 and the first
    listed policy; jobs with no entity (their column empty, and no listed range holding them)
    are one more such entity, of their own. Weights are relative: a weight below a millionth of the largest (among the
    entities with jobs, and among jobs) counts as that.

    Arguments:
        entities: entities, each a name (a value of the entity column) or a range of job ids.
        weights: each listed entity's weight.
        policies: each listed entity's inner policy, fairness or fifo (one value applies to all).
        entity_column: the job column naming each job's entity: any column of its trace.
    Counters:
        levels: water-filling levels solved.
        milp_stopped: bottleneck MILPs stopped at their node limit, their best solution used.
    Cost: Water filling: a sequence of linear programs (and at most one MILP) over entities and job
        classes when the job set changes (solver time); O(n) over the pool's jobs n otherwise.
    See also: MaxMinFairness, GavelRounds, EffectiveThroughput
    Paper: Gavel (OSDI'20) §4.3 and Appendix A.1 (water filling, bottleneck MILP).
    """

    state = ("_estimates", "_last_solve", "_pending", "_shares", "_solved_rows", "_solve_time", "_throughputs")
    fixed = ("_columns",)

    entities: list[IdRange | str] = attrs.field(factory=list)
    weights: list[float] = attrs.field(factory=list, validator=lambda i, a, v: _all_positive(v))
    policies: list[str] = attrs.field(factory=lambda: ["fairness"], validator=lambda i, a, v: _policies(v))
    entity_column: str = "user"

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if len(self.weights) != len(self.entities):
            raise ValueError(f"{len(self.entities)} entities but {len(self.weights)} weights")
        if len(self.policies) not in (1, len(self.entities)):
            raise ValueError("give one inner policy for all entities or one per entity")
        seen = set()
        for e in self.entities:
            key = (e.start, e.stop) if isinstance(e, IdRange) else e
            if key in seen:
                shown = str(e) if isinstance(e, IdRange) else repr(e)
                raise ValueError(f"entity {shown} is listed twice (give each entity once, with one weight)")
            seen.add(key)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self.counters.update(levels=0, milp_stopped=0)

    def _entity_column(self, ctx: RoundContext) -> np.ndarray:
        # A trace's own columns join the job table with its first job: looked for once jobs have come.
        try:
            return ctx.jobs.column(self.entity_column)
        except KeyError as err:  # (its message names the column and the nearest ones)
            # (at the element's line: raised in a round, the engine passes it on as it is)
            raise SchedError(
                f"{self.name} (Hierarchical): entity_column={self.entity_column!r}: {err.args[0]}", self.declared_at
            ) from None

    def _entities(self, ctx: RoundContext, rows: np.ndarray):
        """Each job's entity index, and the names of entities not listed (weight 1; None: the
        jobs with no entity)."""
        n = len(self.entities)
        entity = np.full(len(rows), -1, dtype=np.int64)
        ids = ctx.jobs.column("job_id")[rows]
        # (a missing value: None in a text column, NaN in a number column, or an empty text)
        labels = np.array(
            [None if v is None or v != v or v == "" else str(v) for v in self._entity_column(ctx)[rows].tolist()],
            dtype=object,
        )
        for i, e in reversed(list(enumerate(self.entities))):  # the first listed match wins
            hit = (ids >= e.start) & (ids < e.stop) if isinstance(e, IdRange) else labels == e
            entity[hit] = i
        extra: list[str | None] = sorted({v for v in labels[entity < 0].tolist() if v is not None})
        for j, name in enumerate(extra):
            entity[(entity < 0) & (labels == name)] = n + j
        if (entity < 0).any():  # (apart from any entity whose name is spelt "None" or "nan")
            entity[entity < 0] = n + len(extra)
            extra.append(None)
        return entity, extra

    def allocate(self, ctx: RoundContext, problem: Problem):
        entity, extra = self._entities(ctx, problem.rows)
        entity_weight = np.array(list(self.weights) + [1.0] * len(extra), dtype=np.float64)
        present = np.unique(entity)
        entity_weight[present] = relative_weights(entity_weight[present])
        inner = [self.policies[i if len(self.policies) > 1 else 0] for i in range(len(self.entities))]
        inner += [self.policies[0]] * len(extra)
        fifo_entity = np.array([p == "fifo" for p in inner])
        # FIFO entities hand their weight job by job, so their jobs are never alike.
        rank = np.lexsort((problem.rows, problem.arrival)).argsort()
        alone = np.where(fifo_entity[entity], rank, -1)
        form, class_of, reps = self.formulation(ctx, problem, entity, problem.weight, alone)
        if not form.runnable.any():
            return _empty(problem)
        c_entity, c_weight, c_rank = entity[reps], problem.weight[reps], rank[reps]
        counts = form.counts
        run = form.runnable

        def weights_for(frozen: np.ndarray) -> np.ndarray:
            out = np.zeros(form.c)
            live = ~frozen & run
            for s in np.unique(c_entity[live]).tolist():
                members = live & (c_entity == s)
                if fifo_entity[s]:
                    first = np.flatnonzero(members)[np.argmin(c_rank[members])]
                    out[first] = entity_weight[s]
                else:
                    out[members] = entity_weight[s] * c_weight[members] / float((c_weight[members] * counts[members]).sum())
            return out

        filled = water_fill(form, 1.0 / np.maximum(equal_share(form.T, problem.columns), 1e-300), weights_for, self.lp)
        self.counters["levels"] += len(filled.levels)
        self.counters["milp_stopped"] += filled.milp_stopped
        if filled.values is None:
            return _water_filling_failed(self.name, filled, problem)
        return self.solution(form, filled.values, class_of, problem.rows)


def _all_positive(values) -> None:
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError(f"weights must all be finite and greater than 0, got {values}")


def _policies(values) -> None:
    bad = [v for v in values if v not in ("fairness", "fifo")]
    if bad or not values:
        raise ValueError(f"each inner policy must be 'fairness' or 'fifo', got {values}")
