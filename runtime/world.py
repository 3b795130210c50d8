"""World state: which job holds which GPU, which GPUs are online, the job table's live fields,
and the clock's totals. The runtime is its only writer: the engine folds the backend's events
in (arrivals, progress, completions, failures, lost GPUs) and carries out checked plans, at one
point of the round each. Elements read it through read-only views (runtime/context.py).

The job vocabulary (columns, status codes, views) is traces/jobs.py; how fast a job runs where
it is placed is traces/throughput.py; plan checking is runtime/plans.py.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.errors import Location
from roundhouse.runtime import resizing, rowsets
from roundhouse.runtime.allocation import close_allocations, launch_resources, reallocate, regain_shared, rerated
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.plans import PlanCheck, PlanError
from roundhouse.runtime.progress_log import ProgressLog
from roundhouse.runtime.rowsets import isin_rows, without
from roundhouse.runtime.types import Events, Plan
from roundhouse.traces.jobs import FINISHED, OWN_COLUMNS, PENDING, RUNNING, SPEC_COLUMNS, JobBatch, JobTable, read_only
from roundhouse.traces.prepare import prepare_jobs
from roundhouse.traces.throughput import Placement, PlacementError, ThroughputModel

if TYPE_CHECKING:
    from roundhouse.runtime.explain import Recorder

__all__ = ["World", "PlanError"]


# What a World remakes when copied or loaded rather than carrying it (views and faces).
_REMADE = ("_cols", "_check", "holder_face", "online_face", "co_holder_face")


class World:
    """The cluster, the job table, which job holds which GPU, and the clock's totals."""

    shared_gpu_s = 0.0  # GPU-seconds pairs sharing GPUs both counted in their service (see busy_gpu_s)

    def __init__(self, cluster: Cluster, profile, reference_gpu: str = "V100", pairs=None, elastic=None):
        self.cluster = cluster
        self.profile = profile
        self.reference_gpu = reference_gpu
        self.reference_at: Location | str | None = None  # where it was given (its line, the option; None: default)
        self.throughput = ThroughputModel(profile, cluster, pairs, elastic=elastic)
        self.jobs = JobTable(len(cluster.gpu_types))
        self._cols = self.jobs.writable  # the world is the job table's writer
        self._check = PlanCheck(self)
        self.holder = np.full(cluster.n_gpus, -1, dtype=np.int64)  # job row per GPU, -1 free
        # Second job per GPU (space sharing); None until a plan first launches a pair (runs without pairs never touch it).
        self.co_holder: np.ndarray | None = None
        self.running_rows = np.zeros(0, dtype=np.int64)  # sorted, read-only (see _set_running)
        self.running_rows.setflags(write=False)
        self.unfinished = 0
        self.first_arrival_s = np.inf
        self.last_finish_s = 0.0
        self.unknown_models: set[str] = set()
        # GPUs that can run jobs (live runs: on a registered, reachable node).
        self.online = np.ones(cluster.n_gpus, dtype=bool)
        # Read-only faces of the arrays above for the round context (made once: they follow the arrays, which change in place).
        self.holder_face, self.online_face = read_only(self.holder), read_only(self.online)
        self.co_holder_face: np.ndarray | None = None
        self.all_online = True
        self.batch_jump_penalty = 0.0  # epochs per doubling beyond 2x in one resize (runtime/resizing.py)
        # Whether any job so far has a profiled model, or slows down when spread: without
        # either, every launch runs at one unit of work per second (launch_rates' fast path).
        self._any_model = False
        self._any_slowdown = False
        self._any_comm = False  # any job under the communication model (a cluster with tiers)
        # Why each job is where it is (runtime/explain.py's Recorder), if the run records it; kept here to be forked with the world.
        self.explain: Recorder | None = None
        # Which jobs progress was added to, for the elements that read it (runtime/progress_log.py).
        self.progress_log = ProgressLog()
        # The time the world is as of, where known: set on a copy folded in to the clock
        # (`Simulation.world_now`), which a projection from it checks (`simulate_ahead`). A
        # running engine's own world is between two rounds' facts, so it stays None.
        self.as_of: float | None = None

    # Forks and snapshots (runtime/snapshot.py): arrays copied, read-only faces made afresh; the
    # cluster, profile and throughput model shared. (A backend compares running sets by identity.)
    def __deepcopy__(self, memo: dict) -> World:
        new = memo[id(self)] = object.__new__(World)
        state = self.__getstate__()
        for name in ("holder", "co_holder", "online", "running_rows"):  # (memo keyed by the original: shared)
            state[name] = memo[id(self.__dict__[name])] = None if state[name] is None else state[name].copy()
        if self.explain is not None:  # (the fork's record goes on on its own; the engine's is the same)
            state["explain"] = memo[id(self.explain)] = self.explain.copy()
        state["progress_log"] = copy.deepcopy(self.progress_log, memo)  # (with its readers, which the elements' state names)
        new.__setstate__({**state, "jobs": copy.deepcopy(self.jobs, memo), "unknown_models": set(self.unknown_models)})
        return new

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in _REMADE}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("progress_log", ProgressLog())  # (a snapshot written before the log)
        self.__dict__.setdefault("as_of", None)  # (a snapshot written before the world kept its time)
        self._cols, self._check = self.jobs.writable, PlanCheck(self)
        self.running_rows.setflags(write=False)  # (owns its data: made by _set_running, or a copy)
        self.holder_face, self.online_face = read_only(self.holder), read_only(self.online)
        self.co_holder_face = None if self.co_holder is None else read_only(self.co_holder)

    def _set_running(self, rows: np.ndarray) -> None:
        """The running jobs' rows, sorted, as a read-only array that owns its data (a new one
        whenever it changes), so that no view of it handed out can be made writeable again."""
        if rows.base is not None:
            rows = rows.copy()
        rows.setflags(write=False)
        self.running_rows = rows

    @property
    def busy_gpu_s(self) -> float:
        """GPU-seconds held by jobs since the run began: their attained service, summed (no running
        total to keep), less the time pairs both held their shared GPUs (each GPU counts once)."""
        return float(self.jobs.column("service").sum()) - self.shared_gpu_s

    def gpus_of(self, row: int) -> np.ndarray:
        if self.co_holder is not None:
            return ((self.holder == row) | (self.co_holder == row)).nonzero()[0]
        return (self.holder == row).nonzero()[0]

    @property
    def pairs(self):
        """The pair-throughput table (space sharing), loaded on first use."""
        return self.throughput.pairs

    def prepare(self, trace, origin: str, profile=None) -> tuple[JobBatch, set[str]]:
        """A canonical trace frame as job specs for this world's cluster and profile (or
        another profile); returns the batch and the models the profile does not know."""
        model = self.throughput if profile is None else ThroughputModel(profile, self.cluster, elastic=self.throughput.elastic)
        return prepare_jobs(trace, model, self.reference_gpu, self.cluster.n_gpus, origin, getattr(self, "reference_at", None))

    # --- arrivals ---
    def add_jobs(self, batch: JobBatch) -> np.ndarray:
        rows = self.jobs.append(batch)
        rowsets.reserve(len(self.jobs))
        self.unfinished += len(rows)
        if len(rows):  # (index lookups and flag counts: cheaper than numpy's reductions here)
            whole = batch.whole
            if whole is None or not _least_arrival(whole) >= self.first_arrival_s:  # (else none of it comes sooner)
                arrival = batch.columns["arrival_s"]
                self.first_arrival_s = min(self.first_arrival_s, float(arrival[arrival.argmin()]))
            if whole is not None and "flags" not in whole.memo:
                whole.memo["flags"] = _flags(whole.columns, False, False, False)
            if whole is None or whole.memo["flags"] != (False, False, False):
                # (Each flag, once set, stays: its column need not be looked at again. A slice of a
                # batch none of whose jobs sets one sets none.)
                self._any_model, self._any_slowdown, self._any_comm = _flags(
                    batch.columns, self._any_model, self._any_slowdown, self._any_comm
                )
        return rows

    # --- progress and completions (from the backend) ---
    def apply_progress(self, rows, done, service, run_s, rounds: int = 1, block: np.ndarray | None = None) -> None:
        """Running jobs' progress over a round (over `rounds` rounds alike: the same additions,
        repeated, so that the totals match round by round to the last bit). `block`: the four
        steps in one array, compute seconds included (backends/base.py's Progress)."""
        if len(rows) == 0:
            return
        self.progress_log.note(rows)
        cols = self._cols
        count_shared(self, rows, service if block is None else block[1], rounds)  # (once a plan has launched a pair)
        if block is None:
            # (Rates are fixed per launch, so each round's work over the launch's compute rate
            # adds up to the job's compute time; a rate of 0 only marks a job that never ran.)
            compute_s = compute_seconds(done, cols["compute_rate"][rows])
            add_progress(cols, rows, (done, service, run_s, compute_s), rounds)
        else:
            add_progress(cols, rows, block, rounds)
        if "loss_speed" in cols:  # simulated loss curves (live jobs report their own loss)
            self._update_loss(rows, cols)

    def _update_loss(self, rows: np.ndarray, cols) -> None:
        """The live `loss` of jobs with a loss curve, from their progress (traces/losscurves.py)."""
        speed = cols["loss_speed"][rows]
        rows = rows[~np.isnan(speed)]
        if len(rows):
            from roundhouse.traces.losscurves import loss_at

            fraction = cols["done"][rows] / cols["work"][rows]
            cols["loss"][rows] = loss_at(cols["loss_start"][rows], cols["loss_final"][rows], cols["loss_speed"][rows], fraction)

    def apply_finished(self, rows: np.ndarray, times: np.ndarray) -> None:
        """Jobs that completed their work."""
        self._leave(rows, times)
        self._cols["done"][rows] = self._cols["work"][rows]

    def complete(self, rows: np.ndarray, now: float) -> None:
        """Finish these unfinished jobs now, keeping the work they have done (a plan's
        `complete`): their GPUs are free at once."""
        self._leave(rows, np.full(len(rows), float(now)))

    def apply_failed(self, rows: np.ndarray, times: np.ndarray) -> None:
        """Jobs that failed for good leave the system without completing their work."""
        keep = self._cols["status"][rows] != FINISHED
        rows, times = rows[keep], times[keep]
        self._leave(rows, times)
        self._cols["failed"][rows] = True

    def _leave(self, rows: np.ndarray, times: np.ndarray) -> None:
        """Jobs leave the system at `times`: their GPUs are free and they stop counting."""
        if len(rows) == 0:
            return
        cols = self._cols
        cols["status"][rows] = FINISHED
        cols["finish_s"][rows] = times
        self._release(rows)
        self.unfinished -= len(rows)
        self.last_finish_s = max(self.last_finish_s, float(times.max()))

    # --- faults and node changes (live backends) ---
    def set_online(self, online: np.ndarray) -> None:
        """Which GPUs can run jobs from now on."""
        self.online[:] = np.asarray(online, dtype=bool)
        self.all_online = bool(self.online.all())

    def apply_requeued(self, rows: np.ndarray) -> None:
        """Jobs that lost their GPUs without a plan wait again (rows not running are left)."""
        cols = self._cols
        rows = rows[cols["status"][rows] == RUNNING] if len(rows) else rows
        if not len(rows):
            return
        cols["status"][rows] = PENDING
        cols["interruptions"][rows] += 1
        self._release(rows)

    def _release(self, rows: np.ndarray, leave_running_rows: bool = False) -> None:
        """These jobs stop running (their status already says how): their GPUs are free, and
        a space-sharing partner that stays keeps its GPUs to itself. `leave_running_rows`: the
        caller sets `running_rows` itself."""
        cols = self._cols
        cols["held"][rows] = 0
        close_allocations(self._cols, rows)
        freed = None  # (copies, once a pair has run: what a partner that stays may take)
        if self.co_holder is not None:
            freed = (cols["cpus_held"][rows], cols["memory_held_gb"][rows])
        cols["cpus_held"][rows] = 0.0
        cols["memory_held_gb"][rows] = 0.0
        cols["rate"][rows] = 0.0
        cols["placed_type"][rows] = -1
        self.holder[isin_rows(self.holder, rows)] = -1
        if not leave_running_rows:
            self._set_running(without(self.running_rows, rows))
        if freed is not None:
            leave_shared_gpus(self, rows, freed)

    def apply_metrics(self, metrics) -> None:
        """Store the latest metrics jobs reported (loss, iteration time, ...) as float columns
        of the job table, for policies to read (`active.column("loss")`)."""
        for row, values in metrics.items():
            for name, value in values.items():
                if name in SPEC_COLUMNS or name in OWN_COLUMNS:
                    continue  # the protocol refuses these names; never let a job overwrite its books
                column = self.jobs.float_column(name)
                if column.dtype.kind == "f":  # not a trace's own text column of that name
                    column[row] = value

    def check_plan(self, plan: Plan) -> None:
        """Raise PlanError unless the plan can be carried out (runtime/plans.py)."""
        self._check(plan)

    def launch_rates(self, plan: Plan, compute: np.ndarray | None = None) -> np.ndarray:
        """Throughput of each launch of a plan (traces/throughput.py); `compute`, if given, is
        filled with the rates without communication."""
        if plan.launch_partner is None and plan.alloc_rows is None and self._plain():
            return self._plain_rates(len(plan.launch_rows), compute)
        cpus, memory = launch_resources(self.throughput, plan) if plan.alloc_rows is not None else (None, None)
        placement = Placement(plan.launch_gpus, plan.launch_counts, plan.launch_starts, plan.launch_batch, plan.launch_partner, cpus, memory)  # fmt: skip
        return self._rates(plan.launch_rows, placement, compute)

    def _plain(self) -> bool:
        """Every job so far known by duration, and nothing slows any down."""
        return not (self._any_model or self._any_slowdown or self._any_comm)

    @staticmethod
    def _plain_rates(n: int, compute: np.ndarray | None) -> np.ndarray:
        if compute is not None:
            compute[:] = 1.0
        return np.ones(n)  # one unit of work per second, wherever

    def _rates(self, rows: np.ndarray, placement: Placement, compute: np.ndarray | None = None) -> np.ndarray:
        if placement.partner is None and placement.cpus is None and self._plain():
            return self._plain_rates(len(rows), compute)
        try:
            return self.throughput.rates(self.jobs.reader, rows, placement, self._any_model, compute)
        except PlacementError as err:
            raise PlanError(str(err)) from None

    def apply_plan(self, plan: Plan, now: float) -> Events | None:
        """Carry out a checked plan on the world's books; returns the launch/suspend events
        (None when the plan only renews leases)."""
        if not plan.changes:
            return None
        cols = self._cols
        rows, gpus, counts = plan.launch_rows, plan.launch_gpus, plan.launch_counts
        # Rates without communication differ from the rates only under the communication model.
        compute = np.empty(len(rows)) if self.throughput.communication is not None else None
        rates = self.launch_rates(plan, compute) if len(rows) else np.zeros(0)
        if self._any_model and len(rates) and rates.min() <= 0:  # only a profile says "cannot run"
            raise PlanError(cannot_run(self, plan, rates))
        resize = resizing.rates(self, plan) if len(plan.resize_rows) else None
        suspend = plan.suspend
        if len(plan.complete):
            self.complete(plan.complete, now)
        paired = plan.launch_partner is not None and bool((plan.launch_partner >= 0).any())
        if paired:
            if self.co_holder is None:
                self.co_holder = np.full(self.cluster.n_gpus, -1, dtype=np.int64)
                self.co_holder_face = read_only(self.co_holder)
        if len(suspend):
            cols["status"][suspend] = PENDING
            cols["preemptions"][suspend] += 1
            self._release(suspend, leave_running_rows=True)
        if resize is not None:
            resizing.apply(self, self._cols, plan, *resize)
        if paired:
            second = ~self._check.partners(plan)
            per_gpu = second.repeat(counts)
            assert self.co_holder is not None  # made above for this plan's pairs
            self.holder[gpus[~per_gpu]] = rows[~second].repeat(counts[~second])
            self.co_holder[gpus[per_gpu]] = rows[second].repeat(counts[second])
            cols["partner"][rows] = plan.launch_partner
        elif len(rows):
            self.holder[gpus] = rows.repeat(counts)
        if len(rows):
            book_launches(self, plan, rates, compute, now)
        # The checked plan's keeps (and resizes) are the running jobs that go on running.
        running = np.concatenate((plan.keep, plan.resize_rows, rows)) if len(rows) or len(plan.resize_rows) else plan.keep.copy()
        running.sort(kind="stable")  # (sorted runs: timsort merges them)
        self._set_running(running)
        if plan.alloc_rows is not None and len(plan.alloc_rows):
            reallocate(self, plan)
        return Events(time=now, launched=rows, launched_gpus=gpus, launched_counts=counts, suspended=suspend, resized=plan.resize_rows)  # fmt: skip


def _flags(columns: Mapping[str, np.ndarray], model: bool, slowdown: bool, comm: bool) -> tuple[bool, bool, bool]:
    """The world's flags (any job with a profiled model, any slowed down when spread, any under
    the communication model), set as they are or by these jobs' columns."""
    model = model or bool(np.count_nonzero(columns["has_model"]))
    spread = None if slowdown else columns.get("spread_slowdown")
    slowdown = slowdown or (spread is not None and bool(np.count_nonzero(spread > 1.0)))
    comm_model = None if comm else columns.get("comm_model")
    comm = comm or (comm_model is not None and bool(np.count_nonzero(comm_model >= 0)))
    return model, slowdown, comm


def _least_arrival(whole: JobBatch) -> float:
    """The earliest arrival of a whole batch (worked out once; NaN if one is NaN)."""
    least = whole.memo.get("least_arrival")
    if least is None:
        arrival = whole.columns["arrival_s"]
        least = whole.memo["least_arrival"] = float(arrival[arrival.argmin()]) if len(arrival) else math.inf
    return least  # type: ignore[return-value]


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
        # (only launches that carry a batch size: a launch without one, the hot path of large
        # runs, leaves the factor as the job's latest resize or launch set it)
        resizing.note_launch_lr(world, cols, rows, batch)
    cols["batch_used"][rows] = batch
    cols["launches"][rows] += 1
    cols["first_start_s"][rows] = np.fmin(cols["first_start_s"][rows], now)  # NaN: not started before
    resizing.note_goodput(world, cols, rows, rates, batch)


_PROGRESS = ("done", "service", "run_s", "compute_s")


def compute_seconds(done: np.ndarray, compute_rate: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Seconds of compute that `done` work took at these compute rates (0 where a rate is 0)."""
    ran = compute_rate > 0
    if np.count_nonzero(ran) == len(ran):  # (as running jobs' rates are: a plain division is cheaper than a masked one)
        return np.divide(done, compute_rate, out=out)
    if out is None:
        out = np.zeros(len(done))
    else:
        out.fill(0.0)
    return np.divide(done, compute_rate, out=out, where=ran)


def add_progress(cols: dict[str, np.ndarray], rows: np.ndarray, steps, rounds: int) -> None:
    """Add each step (done, service, run_s, compute_s) to its column at `rows`, `rounds` times
    over (repeated additions, not one of `rounds` times the step: the same bits as round by
    round). Over several rounds, one array of the four steps is added in one pass per round."""
    if rounds == 1:  # (a gather, an addition and a scatter per column: cheaper than the block's copies)
        done, service, run_s, compute_s = steps
        cols["done"][rows] += done
        cols["service"][rows] += service
        cols["run_s"][rows] += run_s
        cols["compute_s"][rows] += compute_s
        return
    total = np.empty((4, len(rows)))
    for i, name in enumerate(_PROGRESS):
        cols[name].take(rows, out=total[i])
    step = steps if isinstance(steps, np.ndarray) else np.stack(steps)
    for _ in range(rounds):
        total += step
    for i, name in enumerate(_PROGRESS):
        cols[name][rows] = total[i]


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


# --- space sharing (only once a plan has launched a pair) ---
def count_shared(world: World, rows: np.ndarray, service: np.ndarray, rounds: int) -> None:
    """Add to the world's `shared_gpu_s` what pairs of jobs sharing GPUs both count in a round's
    `service` (by row of `rows`), `rounds` times over (round by round, as the service is added);
    nothing until a plan has launched a pair."""
    if world.co_holder is None:
        return
    shared = shared_service(world.jobs.column("partner"), rows, service)
    for _ in range(rounds if shared else 0):
        world.shared_gpu_s += shared


def shared_service(partner: np.ndarray, rows: np.ndarray, service: np.ndarray) -> float:
    """The GPU-seconds that pairs of jobs sharing GPUs both count in a round's `service` (by
    row of `rows`): for each pair, the lesser of the two, the time both held their GPUs (the
    two hold the same GPUs, each from the round's start until it stops). A job whose partner
    has no progress in it counts alone."""
    mates = partner[rows]
    paired = np.flatnonzero(mates >= 0)
    if not len(paired):
        return 0.0
    own, mates = rows[paired], mates[paired]
    order = own.argsort(kind="stable")
    at = order[np.minimum(own.searchsorted(mates, sorter=order), len(own) - 1)]
    first = (own[at] == mates) & (own < mates)  # (each pair once)
    return float(np.minimum(service[paired[first]], service[paired[at[first]]]).sum())


def leave_shared_gpus(world: World, rows: np.ndarray, freed: tuple[np.ndarray, np.ndarray]) -> None:
    """Jobs that stop running (finished or suspended) leave their GPUs: a partner that
    stays gets its GPUs to itself, at its own throughput from the next round on, and the CPU
    cores and memory the leaver held (`freed`, by row of `rows`) up to its GPUs' whole share."""
    cols = world._cols
    co = world.co_holder
    assert co is not None  # called only once a pair has run
    co[isin_rows(co, rows)] = -1
    lone = (world.holder < 0) & (co >= 0)
    world.holder[lone] = co[lone]
    co[lone] = -1
    mates = cols["partner"][rows]
    cols["partner"][rows] = -1
    stays = mates >= 0
    stays[stays] = (cols["status"][mates[stays]] == RUNNING) & (cols["partner"][mates[stays]] >= 0)
    survivors = mates[stays]
    if len(survivors):
        cols["partner"][survivors] = -1
        gpus = [world.gpus_of(int(r)) for r in survivors]
        regain_shared(cols, world.throughput, survivors, gpus, (freed[0][stays], freed[1][stays]))
        held = {"cpus": cols["cpus_held"][survivors], "memory_gb": cols["memory_held_gb"][survivors]}
        alone = Placement.of(np.concatenate(gpus), [len(g) for g in gpus], batch=cols["batch_used"][survivors], **held)
        compute = np.empty(len(survivors))
        rerated(cols, survivors, world._rates(survivors, alone, compute), compute)
