"""World state: the job table and who holds which GPU. The runtime is its only writer.

The job table is columnar (one numpy array per field, grown by doubling), so that a policy
sorting ten thousand jobs, or the simulator advancing every running job, works on whole
columns. Each job is a row; `job_id` is the id its trace gave it.

Work is measured in iterations. A job known only by `duration_s` has `duration_s` units of
work and progresses at one unit per second on any GPU. A job with a model progresses at the
profile's throughput for its placement; given `duration_s` (isolated run time on the reference
GPU type, consolidated) its work is that duration times the reference throughput.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import RoundhouseError, TraceError
from roundhouse.runtime import rowsets
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.rowsets import isin_rows, without
from roundhouse.runtime.types import Events, Plan

PENDING, RUNNING, FINISHED = 0, 1, 2
STATUS_NAMES = ("pending", "running", "finished")

# Fields of a job's spec, as the canonical trace schema names them, and their storage type.
SPEC_COLUMNS: dict[str, type] = {
    "job_id": np.int64,
    "arrival_s": np.float64,
    "gpus": np.int64,
    "duration_s": np.float64,
    "model": object,
    "batch_size": np.int64,
    "user": object,
    "weight": np.float64,
    "slo_s": np.float64,
}
# Spec fields derived when the job is prepared, never read from a trace.
DERIVED_COLUMNS: dict[str, type] = {
    "has_model": np.bool_,  # the model is in the profile (else: one unit of work per second)
    "work": np.float64,  # total work
    "reference_rate": np.float64,  # throughput on the reference placement
}

# Live fields, written by the runtime as rounds pass.
LIVE_COLUMNS: dict[str, tuple[type, object]] = {
    "status": (np.int8, PENDING),
    "done": (np.float64, 0.0),  # iterations (or seconds of work) completed
    "service": (np.float64, 0.0),  # attained service: GPU-seconds held
    "run_s": (np.float64, 0.0),  # wall-clock seconds holding GPUs
    "first_start_s": (np.float64, np.nan),
    "finish_s": (np.float64, np.nan),
    "preemptions": (np.int64, 0),
    "launches": (np.int64, 0),
    "held": (np.int64, 0),  # GPUs held now
    "rate": (np.float64, 0.0),  # iterations per second on the current placement
    "placed_type": (np.int64, -1),  # GPU type code of the current placement
    "batch_used": (np.int64, 0),  # batch size of the current launch
    # Live runs: the job failed for good (it is FINISHED without completing its work), and
    # how often it lost its GPUs without a plan (lost node, crashed process).
    "failed": (np.bool_, False),
    "interruptions": (np.int64, 0),
    "partner": (np.int64, -1),  # row of the job sharing this job's GPUs (space sharing), -1 none
}

# Job-table columns the simulator writes itself, which a trace or submission may not bring: a
# trace column of one of these names would overwrite the runtime's books when its jobs are added
# (traces/schema.py refuses such columns). `loss` is not among them: a trace may give it.
OWN_COLUMNS: frozenset[str] = frozenset(DERIVED_COLUMNS) | frozenset(LIVE_COLUMNS)


@attrs.frozen
class JobBatch:
    """Prepared job specs, columnar: what a source registers with the world, in arrival order.

    Made once per trace (vectorised), then sliced round by round.
    """

    columns: dict[str, np.ndarray]
    type_rates: np.ndarray  # (jobs, GPU types): iterations/s on each type, consolidated; 0 = cannot run
    origin: str = ""

    def __len__(self) -> int:
        return len(self.columns["job_id"])

    def slice(self, start: int, stop: int) -> JobBatch:
        return JobBatch({k: v[start:stop] for k, v in self.columns.items()}, self.type_rates[start:stop], self.origin)


def prepare_jobs(trace: pl.DataFrame, cluster: Cluster, profile, reference_gpu: str, origin: str) -> tuple[JobBatch, set[str]]:
    """Turn a canonical trace frame into a JobBatch: work, reference throughput and the
    throughput on each GPU type of the cluster. Returns the batch and the models the profile
    does not know (those jobs, which must have `duration_s`, progress at one unit per second)."""
    n = trace.height
    get = lambda name, dtype, fill: (  # noqa: E731
        trace[name].fill_null(fill).to_numpy().astype(dtype, copy=False) if name in trace.columns else np.full(n, fill, dtype)
    )
    job_id = get("job_id", np.int64, 0)
    gpus = get("gpus", np.int64, 1)
    duration = get("duration_s", np.float64, np.nan)
    iterations = get("iterations", np.float64, np.nan)
    batch = get("batch_size", np.int64, 0).copy()  # filled in below (polars may hand out a read-only view)
    raw_models = trace["model"].to_list() if "model" in trace.columns else [None] * n

    models = np.empty(n, dtype=object)
    unknown: set[str] = set()
    for i, m in enumerate(raw_models):
        if m is None:
            continue
        canonical = profile.canonical_model(m)
        if canonical is None:
            unknown.add(m)
        models[i] = canonical
    for i, m in enumerate(models):
        if m is not None and batch[i] <= 0:
            batch[i] = profile.default_batch_size(m)

    n_types = len(cluster.gpu_types)
    type_rates = np.ones((n, n_types), dtype=np.float64)
    reference_rate = np.ones(n, dtype=np.float64)
    known = np.array([m is not None for m in models], dtype=bool)
    if known.any():
        idx = known.nonzero()[0]
        ref = np.zeros(len(idx))
        sub_models, sub_batch, sub_gpus = models[idx], batch[idx], gpus[idx]
        # Lookups per distinct GPU count keep the profile calls vectorised.
        for g in np.unique(sub_gpus):
            sel = sub_gpus == g
            ref[sel] = profile.rates(sub_models[sel], sub_batch[sel], reference_gpu, int(g), True)
            for t, type_name in enumerate(cluster.gpu_types):
                type_rates[idx[sel], t] = profile.rates(sub_models[sel], sub_batch[sel], type_name, int(g), True)
        # Without a reference-type entry, the fastest type stands in as the reference.
        ref = np.where(ref > 0, ref, type_rates[idx].max(axis=1))
        reference_rate[idx] = ref
        bad = idx[ref <= 0]
        if len(bad):
            i = int(bad[0])
            raise TraceError(
                origin,
                f"job {job_id[i]}: the profile has no throughput for {models[i]} (batch size {batch[i]}) "
                f"on {gpus[i]} GPU(s) of any type in this cluster ({', '.join(cluster.gpu_types)})",
            )
    missing_duration = ~known & np.isnan(duration)
    if missing_duration.any():
        i = int(missing_duration.nonzero()[0][0])
        raise TraceError(
            origin,
            f"job {job_id[i]}: model {raw_models[i]!r} is not in the profile and the job has no duration_s, "
            "so its speed is unknown",
        )
    work = np.where(~np.isnan(iterations) & known, iterations, duration * reference_rate)
    too_big = gpus > cluster.n_gpus
    if too_big.any():
        i = int(too_big.nonzero()[0][0])
        raise TraceError(origin, f"job {job_id[i]} asks for {gpus[i]} GPUs but the cluster has {cluster.n_gpus}")
    columns = {
        "job_id": job_id,
        "arrival_s": get("arrival_s", np.float64, 0.0),
        "gpus": gpus,
        "duration_s": duration,
        "model": models,
        "has_model": known,
        "batch_size": batch,
        "user": np.array(trace["user"].to_list() if "user" in trace.columns else [None] * n, dtype=object),
        "weight": get("weight", np.float64, 1.0),
        "slo_s": get("slo_s", np.float64, np.nan),
        "work": work.astype(np.float64),
        "reference_rate": reference_rate,
    }
    extra = [c for c in trace.columns if c not in columns and c != "iterations"]
    for name in extra:
        series = trace[name]
        columns[name] = (
            series.cast(pl.Float64).fill_null(np.nan).to_numpy()
            if series.dtype.is_numeric()
            else np.array(series.to_list(), dtype=object)
        )
    columns.update(_placement_columns(trace, raw_models, models, known, batch, gpus, profile, reference_gpu, origin))
    from roundhouse.traces.losscurves import initial_loss

    loss = initial_loss(trace, origin)
    if loss is not None:
        columns["loss"] = loss  # a live column from here on (World.apply_progress)
    return JobBatch(columns, type_rates, origin), unknown


def _placement_columns(trace, raw_models, models, known, batch, gpus, profile, reference_gpu, origin) -> dict:
    """`tensor_skew` and `spread_slowdown` per job (traces/placement.py). For a job whose model
    is in the profile, the slowdown is what the profile implies on the reference GPU type."""
    from roundhouse.traces.placement import placement_columns

    out = placement_columns(trace, raw_models, origin)
    multi = (known & (gpus > 1)).nonzero()[0]
    for g in np.unique(gpus[multi]):
        sel = multi[gpus[multi] == g]
        together = profile.rates(models[sel], batch[sel], reference_gpu, int(g), True)
        apart = profile.rates(models[sel], batch[sel], reference_gpu, int(g), False)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["spread_slowdown"][sel] = np.where((together > 0) & (apart > 0), together / apart, np.nan)
    return out


def _largest(a: np.ndarray):
    """The largest entry of a non-empty array (an index lookup: cheaper than `a.max()`)."""
    return a[a.argmax()]


class PlanError(RoundhouseError):
    """A plan that cannot be carried out (double-booked GPU, unknown job, ...): a bug in the
    element that made it, reported with that element's name."""


class JobTable:
    """All jobs the run has seen: spec, live fields and outcomes, one numpy array per column."""

    def __init__(self, n_gpu_types: int, capacity: int = 1024):
        self._n = 0
        self._capacity = capacity
        self._n_types = n_gpu_types
        self._cols: dict[str, np.ndarray] = {}
        for name, dtype in {**SPEC_COLUMNS, **DERIVED_COLUMNS}.items():
            self._cols[name] = np.empty(capacity, dtype=dtype)
        for name, (dtype, fill) in LIVE_COLUMNS.items():
            self._cols[name] = np.full(capacity, fill, dtype=dtype)
        self._type_rates = np.zeros((capacity, n_gpu_types))
        self._row_of_id: dict[int, int] = {}

    def __len__(self) -> int:
        return self._n

    @property
    def names(self) -> list[str]:
        return list(self._cols)

    def column(self, name: str) -> np.ndarray:
        """A column over all rows (a view; read-only for elements via the round context)."""
        try:
            return self._cols[name][: self._n]
        except KeyError:
            from roundhouse.errors import did_you_mean

            hint = did_you_mean(name, self._cols)
            raise KeyError(f"the job table has no column '{name}'" + (f" ({hint})" if hint else "")) from None

    def has_column(self, name: str) -> bool:
        return name in self._cols

    @property
    def type_rates(self) -> np.ndarray:
        return self._type_rates[: self._n]

    def row_of(self, job_id: int) -> int | None:
        return self._row_of_id.get(int(job_id))

    def append(self, batch: JobBatch) -> np.ndarray:
        """Add jobs; returns their rows. A job id seen before is an error naming both sources."""
        k = len(batch)
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        ids = batch.columns["job_id"]
        start = self._n
        for offset, job_id in enumerate(ids.tolist()):
            if job_id in self._row_of_id:
                for j in range(offset):
                    del self._row_of_id[int(ids[j])]
                raise TraceError(batch.origin, f"job id {job_id} is used twice (job ids must be unique in a run)")
            self._row_of_id[job_id] = start + offset
        self._reserve(start + k)
        rowsets.reserve(start + k)
        for name, values in batch.columns.items():
            if name not in self._cols:
                fill = np.nan if values.dtype.kind == "f" else None
                self._cols[name] = np.full(self._capacity, fill, dtype=values.dtype if values.dtype.kind == "f" else object)
            self._cols[name][start : start + k] = values
        self._type_rates[start : start + k] = batch.type_rates
        self._n = start + k
        return np.arange(start, start + k, dtype=np.int64)

    def float_column(self, name: str) -> np.ndarray:
        """The whole storage array of a float column, made (NaN) if the table lacks it."""
        if name not in self._cols:
            self._cols[name] = np.full(self._capacity, np.nan)
        return self._cols[name]

    def _reserve(self, n: int) -> None:
        if n <= self._capacity:
            return
        capacity = max(n, 2 * self._capacity)
        for name, arr in self._cols.items():
            grown = np.empty(capacity, dtype=arr.dtype)
            grown[: self._n] = arr[: self._n]
            if name in LIVE_COLUMNS:
                grown[self._n :] = LIVE_COLUMNS[name][1]
            elif arr.dtype.kind == "f":
                grown[self._n :] = np.nan
            self._cols[name] = grown
        rates = np.zeros((capacity, self._n_types))
        rates[: self._n] = self._type_rates[: self._n]
        self._type_rates = rates
        self._capacity = capacity

    def frame(self, rows: np.ndarray | None = None, columns: Sequence[str] | None = None) -> pl.DataFrame:
        rows = np.arange(self._n) if rows is None else np.asarray(rows)
        names = list(columns) if columns is not None else list(self._cols)
        data = {}
        for name in names:
            values = self._cols[name][: self._n][rows]
            data[name] = values.tolist() if values.dtype == object else values
        return pl.DataFrame(data)


class World:
    """The cluster, the job table, which job holds which GPU, and the clock's totals."""

    def __init__(self, cluster: Cluster, profile, reference_gpu: str = "V100", pairs=None):
        self.cluster = cluster
        self.profile = profile
        self.reference_gpu = reference_gpu
        self._pairs = pairs  # the pair table, or where to load it from when a pair first runs
        self.jobs = JobTable(len(cluster.gpu_types))
        self.holder = np.full(cluster.n_gpus, -1, dtype=np.int64)  # job row per GPU, -1 free
        # Second job per GPU (space sharing); None until a plan first launches a pair, so that
        # runs without pairs never touch it.
        self.co_holder: np.ndarray | None = None
        self.running_rows = np.zeros(0, dtype=np.int64)  # sorted
        self.unfinished = 0
        self.first_arrival_s = np.inf
        self.last_finish_s = 0.0
        self.unknown_models: set[str] = set()
        # GPUs that can run jobs (live runs: on a registered, reachable node).
        self.online = np.ones(cluster.n_gpus, dtype=bool)
        self.all_online = True
        # Whether any job so far has a profiled model, or slows down when spread: without
        # either, every launch runs at one unit of work per second (launch_rates' fast path).
        self._any_model = False
        self._any_slowdown = False

    @property
    def busy_gpu_s(self) -> float:
        """GPU-seconds held by jobs since the run began: their attained service, summed (so
        that advancing a round need not keep a running total)."""
        return float(self.jobs.column("service").sum())

    def gpus_of(self, row: int) -> np.ndarray:
        if self.co_holder is not None:
            return ((self.holder == row) | (self.co_holder == row)).nonzero()[0]
        return (self.holder == row).nonzero()[0]

    @property
    def pairs(self):
        """The pair-throughput table (space sharing), loaded on first use."""
        from roundhouse.traces.pairs import PairTable

        if not isinstance(self._pairs, PairTable):
            self._pairs = PairTable.load(self._pairs)
        return self._pairs

    # --- arrivals ---
    def add_jobs(self, batch: JobBatch) -> np.ndarray:
        rows = self.jobs.append(batch)
        self.unfinished += len(rows)
        if len(rows):  # (index lookups and flag counts: cheaper than numpy's reductions here)
            columns = batch.columns
            arrival = columns["arrival_s"]
            self.first_arrival_s = min(self.first_arrival_s, float(arrival[arrival.argmin()]))
            self._any_model = self._any_model or np.count_nonzero(columns["has_model"]) > 0
            slowdown = columns.get("spread_slowdown")
            self._any_slowdown = self._any_slowdown or (slowdown is not None and np.count_nonzero(slowdown > 1.0) > 0)
        return rows

    # --- progress and completions (from the backend) ---
    def apply_progress(self, rows, done, service, run_s) -> None:
        if len(rows) == 0:
            return
        cols = self.jobs._cols
        cols["done"][rows] += done
        cols["service"][rows] += service
        cols["run_s"][rows] += run_s
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
        self.jobs._cols["done"][rows] = self.jobs._cols["work"][rows]

    def complete(self, rows: np.ndarray, now: float) -> None:
        """Finish these unfinished jobs now, keeping the work they have done (a plan's
        `complete`): their GPUs are free at once."""
        self._leave(rows, np.full(len(rows), float(now)))

    def apply_failed(self, rows: np.ndarray, times: np.ndarray) -> None:
        """Jobs that failed for good leave the system without completing their work."""
        keep = self.jobs._cols["status"][rows] != FINISHED
        rows, times = rows[keep], times[keep]
        self._leave(rows, times)
        self.jobs._cols["failed"][rows] = True

    def _leave(self, rows: np.ndarray, times: np.ndarray) -> None:
        """Jobs leave the system at `times`: their GPUs are free and they stop counting."""
        if len(rows) == 0:
            return
        cols = self.jobs._cols
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
        cols = self.jobs._cols
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
        cols = self.jobs._cols
        cols["held"][rows] = 0
        cols["rate"][rows] = 0.0
        cols["placed_type"][rows] = -1
        self.holder[isin_rows(self.holder, rows)] = -1
        if not leave_running_rows:
            self.running_rows = without(self.running_rows, rows)
        if self.co_holder is not None:
            self._leave_shared_gpus(rows)

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

    # --- plans (from the Launch element) ---
    def check_plan(self, plan: Plan) -> None:
        """Raise PlanError unless the plan accounts for every running job exactly once and
        launches pending jobs on free GPUs. Checks everything before anything changes."""
        keep, suspend = plan.keep, plan.suspend
        complete = plan.complete
        ending = self._check_complete(complete) if len(complete) else complete
        if len(ending):
            suspend = np.concatenate([suspend, ending])  # running jobs ended now, for the checks below
        if len(suspend):
            mentioned = np.concatenate((keep, suspend))
            mentioned.sort()
        else:
            mentioned = keep
        # Kept, suspended and completed running jobs, together, must be exactly the running
        # ones (which implies each names a running job, once). Placers list them in order;
        # another order is sorted before it is judged.
        running = self.running_rows
        # (Counting flags is cheaper than numpy's reductions, min/max/any/all, at these sizes.)
        if len(mentioned) != len(running) or np.count_nonzero(mentioned != running):
            if not np.array_equal(np.sort(mentioned), running):
                self._explain_mismatch(keep, suspend)
        rows, gpus, counts = plan.launch_rows, plan.launch_gpus, plan.launch_counts
        if not len(rows):
            return
        if len(complete) and isin_rows(rows, complete).any():
            raise PlanError(f"plan launches job {self._job(rows[isin_rows(rows, complete)][0])}, which it also completes")
        n, n_gpus = len(self.jobs), self.cluster.n_gpus
        ordered = rows.copy()
        ordered.sort()
        if ordered[0] < 0 or ordered[-1] >= n:
            raise PlanError("plan launches a job row that does not exist")
        if np.count_nonzero(ordered[1:] == ordered[:-1]):
            raise PlanError(f"plan launches job {self._job(ordered[1:][ordered[1:] == ordered[:-1]][0])} twice")
        if counts[counts.argmin()] < 1:
            raise PlanError(f"plan launches job {self._job(rows[counts < 1][0])} on no GPU")
        # Seen as unsigned, a negative GPU id is too large.
        if _largest(gpus.view(np.uint64)) >= n_gpus:
            raise PlanError(f"plan uses GPU {gpus[(gpus < 0) | (gpus >= n_gpus)][0]}, which does not exist")
        status = self.jobs._cols["status"][rows]
        if np.count_nonzero(status):  # PENDING is 0: only launches of jobs that are not waiting need a look
            launchable = (status == PENDING) | ((status == RUNNING) & isin_rows(rows, suspend))
            if np.count_nonzero(launchable) < len(rows):
                row, what = rows[~launchable][0], status[~launchable][0]
                reason = "has finished" if what == FINISHED else "is running (suspend it to move or resize it)"
                raise PlanError(f"plan launches job {self._job(row)}, which {reason}")
        counted = gpus  # GPUs of launches that count towards occupancy (a pair's second does not)
        if plan.launch_partner is not None:
            first = self._check_partners(plan)
            counted = gpus if first.all() else gpus[first.repeat(counts)]
        per_gpu = np.bincount(counted, minlength=n_gpus)
        if _largest(per_gpu) > 1:
            raise PlanError(f"plan puts two jobs (or one twice) on GPU {int(np.argmax(per_gpu))}")
        if not self.all_online and not self.online[gpus].all():
            off = gpus[~self.online[gpus]][0]
            raise PlanError(f"plan puts job {self._job(rows.repeat(counts)[gpus == off][0])} on GPU {off}, which is offline")
        for holder in (self.holder, self.co_holder):
            if holder is None:
                continue
            holders = holder[gpus]
            ok = (holders < 0) | isin_rows(holders, suspend)
            if np.count_nonzero(ok) < len(ok):
                owner = rows.repeat(counts)[~ok][0]
                raise PlanError(
                    f"plan puts job {self._job(owner)} on GPU {gpus[~ok][0]}, which job {self._job(holders[~ok][0])} holds"
                )

    def _check_partners(self, plan: Plan) -> np.ndarray:
        """Space sharing: each launch with a partner names a job launched in the same plan on
        exactly the same GPUs, which names it back. Returns which launches come first in their
        pair (the other shares its GPUs)."""
        rows, partner, counts, starts = plan.launch_rows, plan.launch_partner, plan.launch_counts, plan.launch_starts
        paired = (partner >= 0).nonzero()[0]
        first = np.ones(len(rows), dtype=bool)
        if not len(paired):
            return first
        position = {int(r): i for i, r in enumerate(rows.tolist())}
        for i in paired.tolist():
            j = position.get(int(partner[i]))
            if j is None or partner[j] != rows[i] or j == i:
                raise PlanError(
                    f"plan launches job {self._job(rows[i])} to share GPUs with job {self._job(partner[i])}, "
                    "which is not launched in the same plan as its partner"
                )
            same = counts[i] == counts[j] and np.array_equal(
                plan.launch_gpus[starts[i] : starts[i] + counts[i]], plan.launch_gpus[starts[j] : starts[j] + counts[j]]
            )
            if not same:
                raise PlanError(f"plan launches jobs {self._job(rows[i])} and {self._job(rows[j])} as partners on different GPUs")
            first[max(i, j)] = False
        return first

    def _check_complete(self, complete: np.ndarray) -> np.ndarray:
        """Checks the plan's completions; returns those of running jobs."""
        n = len(self.jobs)
        if complete.min() < 0 or complete.max() >= n:
            raise PlanError("plan completes a job row that does not exist")
        ordered = np.sort(complete)
        if (ordered[1:] == ordered[:-1]).any():
            raise PlanError(f"plan completes job {self._job(ordered[1:][ordered[1:] == ordered[:-1]][0])} twice")
        status = self.jobs._cols["status"][complete]
        if (status == FINISHED).any():
            raise PlanError(f"plan completes job {self._job(complete[status == FINISHED][0])}, which has finished")
        return complete[status == RUNNING]

    def _job(self, row) -> int:
        return int(self.jobs._cols["job_id"][row])

    def _explain_mismatch(self, keep: np.ndarray, suspend: np.ndarray) -> None:
        n = len(self.jobs)
        for name, rows in (("keep", keep), ("suspend", suspend)):
            if len(rows) and (rows.min() < 0 or rows.max() >= n):
                raise PlanError(f"plan's {name} list names a job row that does not exist")
            not_running = rows[self.jobs._cols["status"][rows] != RUNNING] if len(rows) else rows
            if len(not_running):
                raise PlanError(f"plan asks to {name} job {self._job(not_running[0])}, which is not running")
        missing = without(self.running_rows, np.concatenate([keep, suspend]))
        if len(missing):
            raise PlanError(f"running job {self._job(missing[0])} is neither kept nor suspended")
        raise PlanError("plan keeps or suspends a job twice")

    def launch_rates(self, plan: Plan) -> np.ndarray:
        """Throughput of each launch: the profile's value for the job's model, GPU type, GPU
        count and spread (one node or not); one unit per second for jobs known by duration.
        A launch spread over several GPU types runs at the pace of its slowest type."""
        cols = self.jobs._cols
        rows, gpus, counts = plan.launch_rows, plan.launch_gpus, plan.launch_counts
        rates = np.ones(len(rows))
        if not self._any_model and not self._any_slowdown:
            return rates
        has_model = cols["has_model"][rows]
        if not has_model.all() and counts.max() > 1:
            self._spread_slowdown(plan, rates, has_model)
        if not has_model.any():
            return rates
        models = cols["model"][rows]
        starts = plan.launch_starts
        cluster = self.cluster
        types = cluster.gpu_type[gpus]
        nodes = cluster.gpu_node[gpus]
        t_low, t_high = np.minimum.reduceat(types, starts), np.maximum.reduceat(types, starts)
        one_node = np.minimum.reduceat(nodes, starts) == np.maximum.reduceat(nodes, starts)
        batch = cols["batch_size"][rows].copy()
        if plan.launch_batch is not None:
            batch = np.where(plan.launch_batch > 0, plan.launch_batch, batch)
        profile = self.profile
        idx = has_model.nonzero()[0]
        same = t_low[idx] == t_high[idx]
        uniform, mixed = idx[same], idx[~same]
        keys = np.stack([t_low[uniform], counts[uniform], one_node[uniform]], axis=1)
        for key in np.unique(keys, axis=0):
            sel = uniform[(keys == key).all(axis=1)]
            t, count, consolidated = (int(k) for k in key)
            rates[sel] = profile.rates(models[sel], batch[sel], cluster.gpu_types[t], count, bool(consolidated))
        for j in mixed.tolist():  # rare: one job over several GPU types
            on = np.unique(types[starts[j] : starts[j] + counts[j]])
            got = [profile.rate(models[j], batch[j], cluster.gpu_types[t], int(counts[j]), bool(one_node[j])) for t in on]
            rates[j] = min(r or 0.0 for r in got)
        return rates

    def _spread_slowdown(self, plan: Plan, rates: np.ndarray, has_model: np.ndarray) -> None:
        """Jobs known by duration run `spread_slowdown` times slower when their GPUs span more
        nodes than they need (traces/placement.py); profiled jobs get the profile's spread rate."""
        slowdown = self.jobs._cols.get("spread_slowdown")
        if slowdown is None:
            return
        counts = plan.launch_counts
        # Only multi-GPU jobs known by duration with a slowdown can lose by spreading.
        candidates = ((counts > 1) & ~has_model).nonzero()[0]
        if len(candidates):
            factor = slowdown[plan.launch_rows[candidates]]
            candidates, factor = candidates[factor > 1.0], factor[factor > 1.0]
        if not len(candidates):
            return
        cluster, starts = self.cluster, plan.launch_starts
        c = counts[candidates]
        owner = np.arange(len(candidates)).repeat(c)
        offset = np.arange(int(c.sum())) - (c.cumsum() - c).repeat(c)
        nodes = cluster.gpu_node[plan.launch_gpus[starts[candidates].repeat(c) + offset]]
        nodes_used = np.bincount(np.unique(owner * cluster.n_nodes + nodes) // cluster.n_nodes, minlength=len(candidates))
        needed = -(-c // cluster.max_gpus_per_node)
        spread = nodes_used > needed
        rates[candidates[spread]] /= factor[spread]

    def apply_plan(self, plan: Plan, now: float) -> Events | None:
        """Carry out a checked plan on the world's books; returns the launch/suspend events
        (None when the plan only renews leases)."""
        if not plan.changes:
            return None
        cols = self.jobs._cols
        rows, gpus, counts, starts = plan.launch_rows, plan.launch_gpus, plan.launch_counts, plan.launch_starts
        rates = self.launch_rates(plan) if len(rows) else np.zeros(0)
        if self._any_model and len(rates) and rates.min() <= 0:  # only a profile says "cannot run"
            bad = int((rates <= 0).nonzero()[0][0])
            gpu_type = self.cluster.gpu_types[self.cluster.gpu_type[gpus[starts[bad]]]]
            why = ""
            if self.profile.canonical_gpu_type(gpu_type) is None:  # a cluster spec the profile cannot serve
                why = f" (the throughput profile has no GPU type '{gpu_type}'; it knows {', '.join(self.profile.gpu_types)})"
            raise PlanError(
                f"plan puts job {cols['job_id'][rows[bad]]} ({cols['model'][rows[bad]]}) on {counts[bad]} "
                f"{gpu_type} GPU(s), where it cannot run{why}"
            )
        suspend = plan.suspend
        if len(plan.complete):
            self.complete(plan.complete, now)
        paired = plan.launch_partner is not None and bool((plan.launch_partner >= 0).any())
        if paired:
            rates = self._pair_rates(plan, rates)
            if self.co_holder is None:
                self.co_holder = np.full(self.cluster.n_gpus, -1, dtype=np.int64)
        if len(suspend):
            cols["status"][suspend] = PENDING
            cols["preemptions"][suspend] += 1
            self._release(suspend, leave_running_rows=True)
        if paired:
            second = ~self._check_partners(plan)
            per_gpu = second.repeat(counts)
            self.holder[gpus[~per_gpu]] = rows[~second].repeat(counts[~second])
            self.co_holder[gpus[per_gpu]] = rows[second].repeat(counts[second])
            cols["partner"][rows] = plan.launch_partner
        elif len(rows):
            self.holder[gpus] = rows.repeat(counts)
        if len(rows):
            cols["status"][rows] = RUNNING
            cols["rate"][rows] = rates
            cols["held"][rows] = counts
            cols["placed_type"][rows] = self.cluster.gpu_type[gpus[starts]] if len(self.cluster.gpu_types) > 1 else 0
            if plan.launch_batch is None:
                cols["batch_used"][rows] = cols["batch_size"][rows]
            else:
                cols["batch_used"][rows] = np.where(plan.launch_batch > 0, plan.launch_batch, cols["batch_size"][rows])
            cols["launches"][rows] += 1
            cols["first_start_s"][rows] = np.fmin(cols["first_start_s"][rows], now)  # NaN: not started before
        # The checked plan's keeps are the running jobs that go on running.
        running = np.concatenate((plan.keep, rows)) if len(rows) else plan.keep.copy()
        running.sort()
        self.running_rows = running
        return Events(time=now, launched=rows, suspended=suspend)

    # --- space sharing (only once a plan has launched a pair) ---
    def _pair_rates(self, plan: Plan, rates: np.ndarray) -> np.ndarray:
        """Launch throughputs with each paired launch at its pair throughput (the pair table's
        entry for the two models on that GPU type and count)."""
        cols = self.jobs._cols
        rows, partner, starts = plan.launch_rows, plan.launch_partner, plan.launch_starts
        idx = (partner >= 0).nonzero()[0]
        position = {int(r): i for i, r in enumerate(rows.tolist())}
        other = np.array([position[int(p)] for p in partner[idx].tolist()], dtype=np.int64)
        types = self.cluster.gpu_type[plan.launch_gpus[starts[idx]]]
        rates = rates.copy()
        models, batch = cols["model"], cols["batch_size"]
        for t in np.unique(types).tolist():
            sel = idx[types == t]
            mates = other[types == t]
            a, b = rows[sel], rows[mates]
            ra, _ = self.pairs.rates(models[a], batch[a], models[b], batch[b], self.cluster.gpu_types[t], plan.launch_counts[sel])
            bad = ~(ra > 0)
            if bad.any():
                i = int(sel[bad][0])
                j = int(mates[bad][0])
                what = "has no entry for" if np.isnan(ra[bad][0]) else "says cannot share:"
                raise PlanError(
                    f"plan launches jobs {self._job(rows[i])} ({models[rows[i]]}) and {self._job(rows[j])} ({models[rows[j]]}) "
                    f"on the same {plan.launch_counts[i]} {self.cluster.gpu_types[t]} GPU(s), but the pair table {what} that pair"
                )
            rates[sel] = ra
        return rates

    def _leave_shared_gpus(self, rows: np.ndarray) -> None:
        """Jobs that stop running (finished or suspended) leave their GPUs: a partner that
        stays gets its GPUs to itself, at its own throughput from the next round on."""
        cols = self.jobs._cols
        co = self.co_holder
        co[isin_rows(co, rows)] = -1
        lone = (self.holder < 0) & (co >= 0)
        self.holder[lone] = co[lone]
        co[lone] = -1
        mates = cols["partner"][rows]
        cols["partner"][rows] = -1
        survivors = mates[mates >= 0]
        survivors = survivors[cols["status"][survivors] == RUNNING]
        survivors = survivors[cols["partner"][survivors] >= 0]
        if len(survivors):
            cols["partner"][survivors] = -1
            gpus = [self.gpus_of(int(r)) for r in survivors]
            alone = Plan(
                launch_rows=survivors,
                launch_gpus=np.concatenate(gpus),
                launch_counts=[len(g) for g in gpus],
                launch_batch=cols["batch_used"][survivors],
            )
            cols["rate"][survivors] = self.launch_rates(alone)
