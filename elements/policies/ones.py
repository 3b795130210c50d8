"""ONES (Bian et al., SC'21): the online evolutionary search over batch sizes and GPU counts,
with its per-job batch limit and Beta completion predictor, as one element.

The search itself is ones_search.py, the predictor ones_predictor.py, and deploying the schedule
found best (under the epoch gate) ones_deploy.py, whose function Ones binds as its method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from roundhouse.elements.policies import ones_deploy
from roundhouse.elements.policies import ones_search as search
from roundhouse.elements.policies.base import job_column as _column
from roundhouse.elements.policies.ones_deploy import local_batch as _local_batch
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Plan
from roundhouse.runtime.values import FilePath, Rate, at_most, file_read_by, non_negative, one_of, positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


# Bounds on what a trace's epoch size may imply (a tiny one makes a job of billions of epochs):
# the epochs a job is counted as having, and the predictor points one finished job gives.
_MAX_EPOCHS = 1e9
_POINTS_PER_JOB = 1000


def _read_history(path):
    from roundhouse.traces.ones import read_history  # (read only when a history is given)

    return read_history(path)


def _epoch_sizes(ctx: RoundContext, rows: np.ndarray) -> np.ndarray:
    """Samples per epoch of each job; one where the trace gives none (an empty cell, or no
    column), as for a job whose work is not counted in samples."""
    size = _column(ctx, "epoch_size", rows, 1.0)
    return np.where(np.isfinite(size) & (size > 0), size, 1.0)


def _fixed(ctx: RoundContext, rows: np.ndarray) -> np.ndarray:
    """True for each job the elastic profile does not know (or when there is none): it can
    run only on the GPUs it asked for."""
    if ctx.throughput.elastic is None:
        return np.ones(len(rows), dtype=bool)
    return _column(ctx, "elastic_model", rows, -1) < 0


@element
class Ones(Element):
    """ONES: evolve a population of schedules, deploy the best once jobs have trained an epoch.

    Each round runs one generation of the search: refresh (drop finished jobs, trim each job to
    its batch limit R), uniform crossover, uniform mutation, fill (new jobs one GPU each, first
    come first served; then jobs by predicted remaining time on one GPU, up to R), reorder
    (each job's GPUs together, largest jobs first), and elitist selection of the best
    `population` by Eq. 8 (remaining GPU-time, with one completion fraction drawn per job from
    the Beta predictor, shared by all candidates). The best is deployed only when every running
    job it changes has trained `gate_epochs` epochs since its last change; until then only
    waiting jobs whose GPUs are free start. A job's global batch is its local batch times its
    GPUs, up to its `max_batch_size` (past it the local batch shrinks), its learning rate
    scaled linearly. It chooses GPUs from the whole cluster, whatever their type: a job spread
    over several types runs at the pace of the slowest.

    ONES takes every job to be elastic; a job whose model the elastic profile does not know
    (or every job, without one) is treated as fixed-size: it runs on exactly the GPUs it asked
    for, at its own batch size and rate, or waits. Otherwise it takes part like any job: it
    starts first come first served among new jobs (with all its GPUs), is ordered by its
    predicted remaining GPU-time, may be preempted by a mutation, and is scored by Eq. 8. It is
    never resized, nor moved: a schedule that keeps it running keeps it on its GPUs.

    R (GPUs, as the artifact counts it) starts at 1. By default it follows the artifact's rules
    (its ONESScheduler and Monitor). A running job is eligible once it has trained 2 epochs
    since its last change; an eligible job running at its limit doubles R, up to the cluster's
    GPUs and 4 times the GPUs it asked for (the artifact's only caps: its batch cap shrinks
    the local batch, not the GPUs). Then, each round, the single largest eligible job, if it
    holds at least half the cluster (rounded down) and has run longer than the median run time
    of every job started (finished ones included), shrinks to
    max(int(2 size / (run time / median + 1)), 1) GPUs, rounded up to even, if that is fewer
    than it holds; one it would leave at its size (a 1-GPU job, which holds half a cluster of 2
    or 3 GPUs, or a size rounded back up) keeps its R, doubled or not (the artifact's
    scale-down only asks for GPUs back; its limit stays as doubled). With `sigma` given R
    follows the paper's rule instead: after each epoch a job running at its limit asks for
    R' = ceil(2R / ceil(sigma T + 1)) (T its run time; the inner ceiling read as `rounding`
    says). Either way R stays within the job's `max_gpus` (and its
    `max_batch_size`: a GPU trains at least one sample a step); a preempted job's R becomes at
    most the GPUs it held (resume), and halves each time a schedule leaves it waiting (the
    paper's "rejected": still waiting in the next schedule, read as each decision once the gate
    is open).

    The deployed schedule is placed against the one in force (ones_search.place): a running
    job keeps its GPUs, or its first ranks' when it shrinks; a growing one adds GPUs on its own
    machines first; jobs start where they span the fewest machines. A resize is in place (the
    simulator's `resize_in_place` cost) only with `in_place` on and where the live backend can
    do it (the job keeps its first ranks, new ranks go to its machines); any other (a move, a
    grow onto another machine) is a checkpoint and restart (`resize_restart`).

    Ports:
        active: admitted, unfinished jobs (elastic ones: their model in the elastic profile).
        plan: launches, resizes, suspensions.
    Arguments:
        population: K candidates kept (paper: the cluster's GPUs, 64; artifact: 16).
        mutate_rate: theta, the chance a job is preempted in a mutant (paper: not given; artifact: 0.3).
        swap: the per-GPU swap chance in crossover (artifact: 0.5).
        sigma: given, R follows the paper's rule with this scale-down rate (paper: the arrival rate, one job in 30 s, `2/min`; `0/s`: doubling after every epoch, no scale-down); not given (the default), the artifact's rules.
        rounding: with sigma, the paper rule's inner ceiling: "floor" (default: double until 1/sigma, hold until 2/sigma, then shrink) or "ceil", the formula as printed, under which R never grows past its start once a job has run.
        limit: apply the batch limit R (off: any job may take up to max_gpus at once).
        search: run crossover and mutation (off: refresh and fill only, a greedy SRPT-like schedule).
        sample: draw completion fractions from the Beta (off: use their means).
        gate_epochs: epochs a changed job must have trained before the next change.
        in_place: resize in place (about 1 s) where the job keeps its GPUs as the agents need (off: every resize by checkpoint and restart).
        history: job_history.csv of the artifact, to seed the predictor (not given: no seed).
        refit_steps: Adam steps of each refit of the predictor (one refit in each round in which jobs finished, on all of them).
        seed: the element's own random seed.
    Counters:
        generations: generations run.
        deployed: schedules deployed.
        held_back: rounds a better schedule waited for the epoch gate.
        refits: predictor refits.
    Cost: O(K C log C + K n) per generation over K candidates, C GPUs and n jobs (array
        operations, no per-job loop), plus O(g C log C) to place the g jobs the deployed
        schedule starts or grows, and a predictor refit (`refit_steps` small torch steps) in
        each round in which jobs finished.
    See also: Optimus, TiresiasLas, Fifo
    Paper: ONES (SC'21) §3.2-3.3, Algorithm 1, Eqs. 6-8, Figs. 7-10.
    """

    category = "placement"
    inputs = (In("active", Active),)
    outputs = (Out("plan", Plan),)

    # On a cluster of several GPU types whose throughputs differ, `check` and `run` warn of it
    # (runtime/cluster_warnings.py), saying this.
    heterogeneity_agnostic: ClassVar[str] = (
        "it chooses each job's GPUs from the whole cluster, whatever their type, and a job spread over several "
        "types runs at the pace of the slowest"
    )
    state = ("_epoch_mark", "_limit", "_pop", "_pop_rows", "_predictor", "_rank", "_rank_of", "_rng", "_scaled_at", "_seen")

    population: int = attrs.field(default=16, validator=[positive, at_most(1024)])
    mutate_rate: float = attrs.field(default=0.3, validator=[non_negative, at_most(1.0)])
    swap: float = attrs.field(default=0.5, validator=[non_negative, at_most(1.0)])
    # (a rate: a sigma near 1/s shrinks R to 1 within seconds of running)
    sigma: Rate | None = attrs.field(default=None, validator=[non_negative, at_most(Rate(1000.0))])
    rounding: str = attrs.field(default="floor", validator=one_of("ceil", "floor"))
    limit: bool = True
    search: bool = True
    sample: bool = True
    gate_epochs: float = attrs.field(default=1.0, validator=[non_negative, at_most(1e6)])
    in_place: bool = True
    history: FilePath | None = attrs.field(default=None, validator=file_read_by(_read_history, "history the predictor can read"))
    refit_steps: int = attrs.field(default=100, validator=[positive, at_most(100000)])
    seed: int | None = attrs.field(default=None, validator=non_negative)

    def __attrs_post_init__(self) -> None:
        if self.sigma is None and self.rounding != "floor":
            raise ValueError(
                f'rounding="{self.rounding}" reads the paper\'s rule, which needs sigma '
                "(without it R follows the artifact's rules, which have no such ceiling)"
            )

    def start(self, ctx: RoundContext) -> None:
        from roundhouse.elements.policies.ones_predictor import BetaPredictor, history_points

        self._rng = ctx.rng(self.seed)
        self._predictor = BetaPredictor(seed=int(self._rng.integers(2**31)), steps=self.refit_steps)
        if self.history is not None:
            from roundhouse.traces.ones import read_history

            self._predictor.add(*history_points(read_history(self.history)))
            self._predictor.fit()
        c = ctx.cluster.n_gpus
        self._pop = np.full((self.population, c), search.EMPTY, dtype=np.int64)
        self._pop_rows = np.zeros(0, dtype=np.int64)  # job rows the population's indices name
        # Each GPU's rank in the job (row) this element last launched or resized onto it.
        self._rank, self._rank_of = np.zeros(c, dtype=np.int64), np.full(c, -1, dtype=np.int64)
        n = len(ctx.jobs)
        self._limit = np.ones(n, dtype=np.int64)
        self._epoch_mark = np.zeros(n)  # epochs done at the job's last change
        self._scaled_at = np.zeros(n)  # epochs done at the last limit update
        self._seen = np.zeros(n, dtype=bool)
        self.counters.update(generations=0, deployed=0, held_back=0, refits=0)

    def _grow(self, n: int) -> None:
        if len(self._limit) < n:
            extra = n - len(self._limit)
            self._limit = np.r_[self._limit, np.ones(extra, dtype=np.int64)]
            self._epoch_mark = np.r_[self._epoch_mark, np.zeros(extra)]
            self._scaled_at = np.r_[self._scaled_at, np.zeros(extra)]
            self._seen = np.r_[self._seen, np.zeros(extra, dtype=bool)]

    def _learn(self, ctx: RoundContext) -> None:
        """Refit the predictor on the jobs finished since the last round: one point per epoch."""
        if len(ctx.events.finished):
            self._predictor.add(*_finished_points(ctx, ctx.events.finished))
            self._predictor.fit()
            self.counters["refits"] += 1

    def tick(self, ctx: RoundContext, active: Active) -> Plan:
        from roundhouse.elements.policies.ones_predictor import features

        self._grow(len(ctx.jobs))
        self._learn(ctx)
        n, c = len(active), ctx.cluster.n_gpus
        rows = active.rows
        if not n:
            return Plan()
        size = _epoch_sizes(ctx, rows)
        epochs = np.minimum(active.done / size, _MAX_EPOCHS)
        # The artifact's cap on GPUs is the cluster (and, under its R rules, 4 times the GPUs
        # asked for): past the global batch cap the local batch shrinks, it caps no GPUs. A GPU
        # trains at least one sample a step, so a job never has more GPUs than its batch cap.
        max_gpus = np.minimum(np.nan_to_num(_column(ctx, "max_gpus", rows, c), nan=c), c)
        local = _local_batch(ctx, active)
        max_batch = np.nan_to_num(_column(ctx, "max_batch_size", rows, np.inf), nan=np.inf)
        max_gpus = np.maximum(np.minimum(max_gpus, np.floor(max_batch)), 1).astype(np.int64)
        running = active.running
        held = active.held
        asked = np.minimum(active.gpus, c)
        median = lambda: _median_run_s(ctx, rows[running])  # noqa: E731 (asked only when a job may shrink)
        limit = self._update_limits(rows, epochs, running, held, active.run_s, max_gpus, asked=asked, n_gpus=c, median=median)
        fixed = _fixed(ctx, rows)
        allowed = np.where(fixed, asked, np.where(self.limit, limit, max_gpus))
        speed = _speeds(ctx, active, fixed)
        # The old population, its job indices mapped onto this round's jobs.
        index = np.full(len(ctx.jobs), search.EMPTY, dtype=np.int64)
        index[rows] = np.arange(n)
        remap = np.r_[index[self._pop_rows], search.EMPTY]  # the last entry maps EMPTY
        old = remap[self._pop]
        holder = np.asarray(ctx.holder)
        current = np.where(holder >= 0, index[np.maximum(holder, 0)], search.EMPTY)
        new = epochs < 2  # the artifact: jobs under two epochs are neither predicted nor preempted
        x = features(size, np.zeros(n), epochs, np.full(n, np.nan), np.zeros(n))
        factor = np.where(new, 0.0, self._predictor.factor(x, self.sample, self._rng))
        # Fill: new jobs first come first served one GPU each (a fixed-size one all it asked for),
        # then by predicted time on one GPU.
        arrival_order = np.argsort(active.arrival_s, kind="stable")
        # A fixed-size job's rate per GPU on its own GPUs: its remaining GPU-time, as for the rest.
        one_gpu = np.maximum(np.where(fixed, speed[np.arange(n), asked] / asked, speed[:, 1]), 1e-9)
        remaining_1 = np.where(new, active.done, active.done * factor) / one_gpu
        pop, _ = search.generation(
            np.vstack([current[None, :], old]),
            self._rng,
            allowed=allowed,
            new_order=arrival_order[new[arrival_order]],
            fill_order=np.argsort(remaining_1, kind="stable"),
            immune=new & running,
            processed=active.done,
            factor=factor,
            speed=speed,
            keep=self.population,
            swap=self.swap,
            mutate_rate=self.mutate_rate,
            evolve=self.search,
            whole=fixed if fixed.any() else None,
        )
        node = np.asarray(ctx.cluster.gpu_node)
        rank = _ranks(self._rank, self._rank_of, holder, current)
        pop[0] = search.place(search.job_counts(pop[:1], n)[0], current, rank, node)
        self._pop, self._pop_rows = pop, rows.copy()
        self.counters["generations"] += 1
        local = np.where(fixed, 0, local).astype(np.int64)
        plan = self._deploy(ctx, active, pop[0], current, epochs, held, limit, local, rank, node)
        for row, gpus in [(a.row, a.gpus) for a in plan.launch] + [(r.row, r.gpus) for r in plan.resizes]:
            self._rank_of[list(gpus)], self._rank[list(gpus)] = row, np.arange(len(gpus))  # (the plan's order)
        return plan

    def _update_limits(self, rows, epochs, running, held, run_s, max_gpus, asked=None, n_gpus=0, median=None) -> np.ndarray:
        """Each job's R this round (class docstring): the artifact's rules, or the paper's with
        `sigma`. `asked`: the GPUs each job asked for (not given: no cap but `max_gpus`);
        `n_gpus`: the cluster's; `median()`: the median run time of the jobs started (not
        given: the artifact's rules scale nothing down)."""
        limit = self._limit[rows]
        fresh = ~self._seen[rows]
        self._seen[rows] = True
        self._scaled_at[rows[fresh]] = 0.0
        if self.sigma is None:
            cap = max_gpus if asked is None else np.minimum(4 * asked, max_gpus)
            # Epochs since the job's last change: when a scaling was carried out, as the artifact counts.
            since = epochs - self._epoch_mark[rows]
            limit = search.artifact_limits(limit, since, running, held, run_s, cap, n_gpus, median)
        else:
            due = running & (epochs - self._scaled_at[rows] >= 1.0) & (held >= limit)
            if due.any():
                sigma = self.sigma
                limit[due] = search.scale_down(limit[due], run_s[due], sigma, self.rounding) if sigma > 0 else 2 * limit[due]
                self._scaled_at[rows[due]] = epochs[due]
        # A waiting job's R is left alone here: it was set when the job was preempted and is
        # halved by _deploy, once for each decision that leaves it waiting (not twice a round).
        limit = np.clip(limit, 1, max_gpus)
        self._limit[rows] = limit
        return limit

    # Deploying the best schedule, or what the epoch gate lets start of it (ones_deploy.py).
    _deploy = ones_deploy.deploy


def _finished_points(ctx: RoundContext, finished: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The predictor's points (features, fraction done) of the jobs `finished`: one per epoch."""
    from roundhouse.elements.policies.ones_predictor import features

    size = _epoch_sizes(ctx, finished)
    total = ctx.jobs.column("work")[finished]
    epochs = np.maximum(np.round(np.minimum(total / size, _MAX_EPOCHS)), 1)
    # A job of very many (tiny) epochs gives points spread evenly over them, not one each.
    points = np.minimum(epochs, _POINTS_PER_JOB).astype(np.int64)
    job = np.repeat(np.arange(len(finished)), points)
    k = (np.arange(len(job)) - np.repeat(np.cumsum(points) - points, points) + 1) * (epochs / points)[job]
    x = features(size[job], np.zeros(len(job)), k, np.full(len(job), np.nan), np.zeros(len(job)))
    return x, k / epochs[job]


def _ranks(rank: np.ndarray, rank_of: np.ndarray, holder: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Each GPU's rank in the job holding it (`holder`: its row; `current`: its index this
    round), as the element recorded it (`rank`, for the row `rank_of`) when it launched or
    resized the job; in GPU order for a job whose GPUs it has no whole record of."""
    out = search.occurrence(current[None, :])[0]  # (GPU order)
    on = np.flatnonzero(current >= 0)
    recorded = np.where(rank_of[on] == holder[on], rank[on], -1)
    by_job = np.lexsort((recorded, current[on]))
    # Sorted by job, then by recorded rank, a job's record is whole if its ranks run 0, 1, 2, ...
    jobs = current[on][by_job]
    bad = jobs[recorded[by_job] != search.occurrence(jobs[None, :])[0]]
    good = on[~np.isin(current[on], bad)]
    out[good] = rank[good]
    return out


def _speeds(ctx: RoundContext, active: Active, fixed: np.ndarray) -> np.ndarray:
    """(n, C+1) samples/s at 0..C GPUs, consolidated, each at local batch x GPUs up to the job's
    batch cap (past it the local batch shrinks, as the job is launched)."""
    n, c = len(active), ctx.cluster.n_gpus
    counts = np.arange(c + 1)
    per_node = ctx.cluster.max_gpus_per_node
    elastic = ctx.throughput.elastic
    speed = np.zeros((n, c + 1))
    ok = ~fixed
    if elastic is not None and ok.any():
        app = _column(ctx, "elastic_model", active.rows[ok], -1).astype(np.int64)
        local = _local_batch(ctx, active)[ok]
        most = np.nan_to_num(_column(ctx, "max_batch_size", active.rows[ok], np.inf), nan=np.inf)
        cc = np.broadcast_to(counts[1:], (int(ok.sum()), c))
        batch = np.minimum(local[:, None] * cc, np.maximum(most, 1)[:, None])
        speed[ok, 1:] = elastic.throughput(app[:, None], np.ceil(cc / per_node), cc, batch)
    # A job the elastic profile does not know runs at its own rate on the GPUs it asked for.
    rigid = np.flatnonzero(fixed)
    speed[rigid, np.minimum(active.gpus[rigid], c)] = active.reference_rate[rigid]
    return speed


def _median_run_s(ctx: RoundContext, running: np.ndarray) -> float:
    """The median run time of every job started, finished ones included (the artifact's
    _get_median_run_time); the rows `running` are started even if they have not run a second."""
    run = np.asarray(ctx.jobs.column("run_s"), dtype=np.float64)
    started = run > 0
    started[running] = True
    return float(np.median(run[started])) if started.any() else 0.0
