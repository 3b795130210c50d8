"""The job vocabulary: the job table's columns and what they mean, the status codes, and the
read-only views of it that elements receive.

The job table is columnar (one numpy array per field, grown by doubling), so that a policy
sorting ten thousand jobs, or the simulator advancing every running job, works on whole
columns. Each job is a row; `job_id` is the id its trace gave it. Jobs are named by their row
(a dense index) everywhere inside a run.

Work is measured in iterations. A job known only by `duration_s` has `duration_s` units of
work and progresses at one unit per second on any GPU. A job with a model progresses at the
throughput model's rate for its placement (traces/throughput.py); given `duration_s` (isolated
run time on the reference GPU type, consolidated) its work is that duration times the
reference throughput.

The runtime's world (runtime/world.py) is the table's only writer. Everyone else reads it
through a `JobReader`: columns come out as arrays with `writeable=False`, and nothing on the
reader or on a view leads back to the writable table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

import attrs
import numpy as np
from numpy.lib.stride_tricks import as_strided

from roundhouse.errors import TraceError, did_you_mean

if TYPE_CHECKING:
    import polars as pl

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
    # Row of the job's model in the communication profile (traces/communication.py); -1: none,
    # or the cluster has no network tiers.
    "comm_model": np.int64,
    # Row of the job's model in the CPU and memory sensitivity profile (traces/resources.py); -1:
    # none (its speed does not depend on the CPU and memory that come with its GPUs).
    "resource_model": np.int64,
    # Row of the job's application in the elastic profile (traces/goodput.py); -1: none. Such a
    # job's work is samples (at its application's initial batch size) and its rate its goodput.
    "elastic_model": np.int64,
}

# Live fields, written by the runtime as rounds pass.
LIVE_COLUMNS: dict[str, tuple[type, object]] = {
    "status": (np.int8, PENDING),
    "done": (np.float64, 0.0),  # iterations (or seconds of work) completed
    "service": (np.float64, 0.0),  # attained service: GPU-seconds held
    "run_s": (np.float64, 0.0),  # attained wall-clock seconds holding GPUs
    "first_start_s": (np.float64, np.nan),
    "finish_s": (np.float64, np.nan),
    "preemptions": (np.int64, 0),
    "launches": (np.int64, 0),
    "held": (np.int64, 0),  # GPUs held now
    "rate": (np.float64, 0.0),  # iterations per second on the current placement
    # The rate of the job's latest launch without communication (the network tiers' share taken
    # out): a running job's progress at this rate is its compute time, the rest of its time held
    # exposed communication. Equal to `rate` where the communication model does not apply; not
    # reset when the job stops (read it for running jobs).
    "compute_rate": (np.float64, 0.0),
    # Seconds the work done so far would have taken at each launch's `compute_rate`: `run_s`
    # minus this is the job's exposed communication (and restore) time.
    "compute_s": (np.float64, 0.0),
    "placed_type": (np.int64, -1),  # GPU type code of the current placement
    "batch_used": (np.int64, 0),  # batch size of the current launch
    # Live runs: the job failed for good (it is FINISHED without completing its work), and
    # how often it lost its GPUs without a plan (lost node, crashed process).
    "failed": (np.bool_, False),
    "interruptions": (np.int64, 0),
    "partner": (np.int64, -1),  # row of the job sharing this job's GPUs (space sharing), -1 none
    # CPU cores and GB of memory held now with the job's GPUs (all its machines together); the
    # core-seconds and GB-seconds held under earlier allocations, and the job's `run_s` when the
    # current one began (so that per-round progress need not count them: `resource_seconds`).
    "cpus_held": (np.float64, 0.0),
    "memory_held_gb": (np.float64, 0.0),
    "cpu_s": (np.float64, 0.0),
    "memory_gb_s": (np.float64, 0.0),
    "held_since_run_s": (np.float64, 0.0),
    # Elastic jobs. How often a plan resized the job (not counted as preemptions), and the
    # learning-rate rule of its latest resize (runtime/types.py LR_RULES; -1: never resized)
    # with the factor it gives its learning rate (NaN: the job adapts it itself, AdaScale).
    "resizes": (np.int64, 0),
    "lr_rule": (np.int8, -1),
    "lr_scale": (np.float64, 1.0),
    # Statistical efficiency of the batch size the job runs with (progress per sample
    # processed, relative to its application's initial batch size; 1 where no efficiency model applies) and
    # goodput = throughput x efficiency, the progress its work is counted in, per second
    # (equal to `rate` for a running job; traces/throughput.py). Set at launch and resize.
    "efficiency": (np.float64, 1.0),
    "goodput": (np.float64, 0.0),
}

# Job-table columns the runtime writes itself, which a trace or submission may not bring: a
# trace column of one of these names would overwrite the runtime's books when its jobs are added
# (traces/schema.py refuses such columns). `loss` is not among them: a trace may give it.
OWN_COLUMNS: frozenset[str] = frozenset(DERIVED_COLUMNS) | frozenset(LIVE_COLUMNS)


class _SliceColumns(Mapping[str, np.ndarray]):
    """A slice's columns, each cut from the whole batch's when first read: the job table has
    most slices' rows written ahead, and then reads only their arrival times."""

    __slots__ = ("_whole", "_start", "_stop", "_cut", "length")

    def __init__(self, whole: Mapping[str, np.ndarray], start: int, stop: int):
        self._whole, self._start, self._stop = whole, start, stop
        self._cut: dict[str, np.ndarray] = {}
        self.length = max(0, min(stop, len(whole["job_id"])) - start)  # (the jobs in the slice)

    def __setstate__(self, state) -> None:
        # (a snapshot saved by code whose slices kept no length: worked out as `__init__` does)
        slots = state[1] if isinstance(state, tuple) else state
        for name, value in slots.items():
            object.__setattr__(self, name, value)
        if "length" not in slots:
            self.length = max(0, min(self._stop, len(self._whole["job_id"])) - self._start)

    def __getitem__(self, name: str) -> np.ndarray:
        column = self._cut.get(name)
        if column is None:
            column = self._cut[name] = self._whole[name][self._start : self._stop]
        return column

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole)

    def __len__(self) -> int:
        return len(self._whole)


@attrs.frozen
class JobBatch:
    """Prepared job specs, columnar: what a source emits, in arrival order (traces/prepare.py).

    Made once per trace (vectorised), then sliced round by round.
    """

    columns: Mapping[str, np.ndarray]
    type_rates: np.ndarray  # (jobs, GPU types): iterations/s on each type, consolidated; 0 = cannot run
    origin: str = ""
    # The job ids increase strictly down the batch (so in every slice of it): the job table
    # then checks only a slice's first id against the ids it holds.
    ids_increasing: bool = False
    # A slice's whole batch and where the slice starts in it (None: not a slice), so that the job
    # table can write the next slices' rows ahead, in one pass (`JobTable.append`).
    whole: JobBatch | None = attrs.field(default=None, eq=False, repr=False)
    offset: int = attrs.field(default=0, eq=False, repr=False)
    # What readers worked out about all of a whole batch's jobs, once, by name (the world: whether
    # any of them makes its rates other than one unit of work per second).
    memo: dict[str, object] = attrs.field(factory=dict, eq=False, repr=False)

    def __len__(self) -> int:
        columns = self.columns
        if type(columns) is _SliceColumns:  # (a slice knows its length: no column cut for it)
            return columns.length
        return len(columns["job_id"])

    def slice(self, start: int, stop: int) -> JobBatch:
        whole = self if self.whole is None else self.whole
        return JobBatch(
            _SliceColumns(whole.columns, self.offset + start, self.offset + stop),
            self.type_rates[start:stop],
            self.origin,
            self.ids_increasing,
            whole,
            self.offset + start,
        )


# How many jobs of a batch the job table writes ahead at a time.
_AHEAD = 4096


def read_only(a: np.ndarray) -> np.ndarray:
    """A read-only face of an array: its owner keeps writing the array, and the face (or any
    view of it) cannot be made writeable again. (About 6 us: owners cache the faces they hand
    out often.)"""
    return as_strided(a, writeable=False)


class JobTable:
    """All jobs the run has seen: spec, live fields and outcomes, one numpy array per column.

    Readers get read-only columns (`column`, or a `JobReader`); the runtime's world writes
    through `writable`.
    """

    def __init__(self, n_gpu_types: int, capacity: int = 1024):
        self._n = 0
        self._capacity = capacity
        self._n_types = n_gpu_types
        self._cols: dict[str, np.ndarray] = {}
        for name, dtype in {**SPEC_COLUMNS, **DERIVED_COLUMNS}.items():
            self._cols[name] = np.empty(capacity, dtype=dtype)
        for name, (dtype, fill) in LIVE_COLUMNS.items():
            self._cols[name] = _filled(capacity, dtype, fill)
        self._type_rates = np.zeros((capacity, n_gpu_types))
        # Job id -> row. While ids arrive in increasing order (every trace and generator gives
        # them so), the job_id column is sorted and a binary search finds a row: no dict of a
        # million Python ints (about 110 MB). The dict is built the first time an id comes out
        # of order, and kept from then on.
        self._row_of_id: dict[int, int] | None = None
        self._faces: dict[str, np.ndarray] = {}  # read-only faces of the storage, made on first read
        self.reader = JobReader(self)
        # Rows written ahead past the end (`append`): the whole batch, and the stretch of it.
        self._ahead: tuple[JobBatch, int, int] | None = None

    def __len__(self) -> int:
        return self._n

    # Forks and snapshots (runtime/snapshot.py): columns copied as arrays (the object columns'
    # items are immutable strings, so a shallow copy suffices), read-only faces made afresh.
    def __deepcopy__(self, memo: dict) -> JobTable:
        new = object.__new__(JobTable)
        memo[id(self)] = new
        new.__setstate__(
            {
                **self.__getstate__(),
                "_cols": {name: arr.copy() for name, arr in self._cols.items()},
                "_type_rates": self._type_rates.copy(),
                "_row_of_id": None if self._row_of_id is None else self._row_of_id.copy(),
                "_capacity": self._capacity,
            }
        )
        memo[id(self.reader)] = new.reader
        return new

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_faces", "reader", "_ahead")}
        # Only the rows in use: past them is memory never written (which would make two
        # snapshots of one state differ) or rows written ahead, written again after a load.
        n = self._n
        state.update(_cols={name: arr[:n] for name, arr in self._cols.items()}, _type_rates=self._type_rates[:n], _capacity=n)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._faces = {}
        self.reader = JobReader(self)
        self._ahead = None

    @property
    def names(self) -> list[str]:
        return list(self._cols)

    def column(self, name: str) -> np.ndarray:
        """A column over all rows, read-only."""
        face = self._faces.get(name)
        if face is None:
            if name not in self._cols:
                hint = did_you_mean(name, self._cols)
                raise KeyError(f"the job table has no column '{name}'" + (f" ({hint})" if hint else ""))
            face = self._faces[name] = read_only(self._cols[name])
        return face[: self._n]

    def has_column(self, name: str) -> bool:
        return name in self._cols

    @property
    def type_rates(self) -> np.ndarray:
        """(jobs, GPU types): throughput of each job on each type at its requested GPU count."""
        face = self._faces.get("")
        if face is None:
            face = self._faces[""] = read_only(self._type_rates)
        return face[: self._n]

    def row_of(self, job_id: int) -> int | None:
        if self._row_of_id is not None:
            return self._row_of_id.get(int(job_id))
        ids = self._cols["job_id"][: self._n]
        row = int(np.searchsorted(ids, job_id))
        return row if row < self._n and ids[row] == job_id else None

    # --- for the writer (runtime/world.py) ---
    @property
    def writable(self) -> dict[str, np.ndarray]:
        """The storage arrays by column (capacity-long; rows past `len` are unused). Only the
        runtime's world writes through these."""
        return self._cols

    def float_column(self, name: str) -> np.ndarray:
        """The whole storage array of a float column, made (NaN) if the table lacks it."""
        if name not in self._cols:
            self._cols[name] = np.full(self._capacity, np.nan)
            self._faces.pop(name, None)
        return self._cols[name]

    def append(self, batch: JobBatch) -> np.ndarray:
        """Add jobs; returns their rows. A job id seen before is an error naming both sources.

        A slice of a batch whose ids increase is followed, as sources emit them, by the next slice:
        the rows of the slices to come are written ahead, past the table's end, in one pass
        (`_write_ahead`), and such a slice then only moves the end."""
        k = len(batch)
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        start = self._n
        ahead = self._ahead
        if ahead is not None and batch.whole is ahead[0] and batch.offset == ahead[1] and batch.offset + k <= ahead[2]:
            self._ahead = (ahead[0], ahead[1] + k, ahead[2])
            self._n = start + k
            return np.arange(start, start + k, dtype=np.int64)
        self._ahead = None  # (whatever was written ahead lies where these rows go)
        ids = batch.columns["job_id"]
        if self._row_of_id is not None or not self._after_last(ids, batch.ids_increasing):
            self._add_ids(ids.tolist(), start, batch.origin)
        self._reserve(start + k)
        self._write(batch.columns, batch.type_rates, start, k)
        self._n = start + k
        if batch.whole is not None and batch.ids_increasing and self._row_of_id is None:
            self._write_ahead(batch.whole, batch.offset + k)
        return np.arange(start, start + k, dtype=np.int64)

    def _write(self, columns: Mapping[str, np.ndarray], type_rates: np.ndarray, start: int, k: int) -> None:
        """Write k jobs' specs into the storage from row `start` (the end stays where it is)."""
        cols = self._cols
        at: int | slice = start if k == 1 else slice(start, start + k)  # (one job, as most rounds bring: an item each)
        for name, values in columns.items():
            column = cols.get(name)
            if column is None:
                fill = np.nan if values.dtype.kind == "f" else None
                column = cols[name] = np.full(self._capacity, fill, dtype=values.dtype if values.dtype.kind == "f" else object)
                self._faces.pop(name, None)
            column[at] = values[0] if k == 1 else values
        self._type_rates[start : start + k] = type_rates

    def _write_ahead(self, whole: JobBatch, offset: int) -> None:
        """Write the jobs of `whole` from `offset` on (up to `_AHEAD` of them) past the table's end,
        where the next slices of it go. Nothing else reads rows past the end; the next append of
        anything else writes over them."""
        stop = min(len(whole), offset + _AHEAD)
        if stop <= offset:
            return
        start = self._n
        self._reserve(start + stop - offset)
        self._write({k: v[offset:stop] for k, v in whole.columns.items()}, whole.type_rates[offset:stop], start, stop - offset)
        self._ahead = (whole, offset, stop)

    def _after_last(self, ids: np.ndarray, increasing: bool) -> bool:
        """Whether `ids` (known to increase, or not) increase strictly and all come after the
        ids the table holds."""
        if self._n and not int(ids[0]) > int(self._cols["job_id"][self._n - 1]):
            return False
        return increasing or len(ids) == 1 or np.count_nonzero(ids[1:] > ids[:-1]) == len(ids) - 1

    def _add_ids(self, ids: list[int], start: int, origin: str) -> None:
        """Ids out of order: look rows up in a dict from now on, refusing an id seen before."""
        if self._row_of_id is None:
            self._row_of_id = dict(zip(self._cols["job_id"][:start].tolist(), range(start)))
        k = len(ids)
        fresh = set(ids)
        if len(fresh) < k or not self._row_of_id.keys().isdisjoint(fresh):  # (set operations: no loop in Python)
            seen: set[int] = set()
            twice = next(i for i in ids if i in self._row_of_id or i in seen or seen.add(i))  # type: ignore[func-returns-value]
            raise TraceError(origin, f"job id {twice} is used twice (job ids must be unique in a run)")
        self._row_of_id.update(zip(ids, range(start, start + k)))

    def _reserve(self, n: int) -> None:
        if n <= self._capacity:
            return
        self._ahead = None  # (only the rows up to the end are kept)
        capacity = max(n, 2 * self._capacity)
        # Faces first: they would keep every old array alive until the last column has grown.
        self._faces.clear()
        for name, arr in self._cols.items():
            if name in LIVE_COLUMNS:
                grown = _filled(capacity, arr.dtype, LIVE_COLUMNS[name][1])
            else:
                grown = (
                    np.full(capacity, np.nan, dtype=arr.dtype) if arr.dtype.kind == "f" else np.empty(capacity, dtype=arr.dtype)
                )
            grown[: self._n] = arr[: self._n]
            self._cols[name] = grown
        rates = np.zeros((capacity, self._n_types))
        rates[: self._n] = self._type_rates[: self._n]
        self._type_rates = rates
        self._capacity = capacity
        self._faces.clear()

    def frame(self, rows: np.ndarray | None = None, columns: Sequence[str] | None = None) -> pl.DataFrame:
        import polars as pl

        rows = np.arange(self._n) if rows is None else np.asarray(rows)
        names = list(columns) if columns is not None else list(self._cols)
        data = {}
        for name in names:
            values = self._cols[name][: self._n][rows]
            data[name] = values.tolist() if values.dtype == object else values
        return pl.DataFrame(data)


def _filled(capacity: int, dtype, fill) -> np.ndarray:
    """A live column's storage. Zeros come from the allocator already zeroed, so the pages of a
    column no job writes (or of rows not yet added) take no memory."""
    if fill == 0:  # (NaN is not)
        return np.zeros(capacity, dtype=dtype)
    return np.full(capacity, fill, dtype=dtype)


def resource_seconds(reader: JobReader) -> tuple[float, float]:
    """Core-seconds and GB-seconds of memory held with GPUs since the run began, all jobs."""
    pending = reader.column("run_s") - reader.column("held_since_run_s")
    cpu = reader.column("cpu_s") + reader.column("cpus_held") * pending
    memory = reader.column("memory_gb_s") + reader.column("memory_held_gb") * pending
    return float(cpu.sum()), float(memory.sum())


class JobReader:
    """The job table as elements see it: read-only columns and views of rows. Its API offers
    no way to write the table."""

    __slots__ = ("_table",)

    def __init__(self, table: JobTable):
        self._table = table

    def __len__(self) -> int:
        return len(self._table)

    def column(self, name: str) -> np.ndarray:
        return self._table.column(name)

    def has_column(self, name: str) -> bool:
        return self._table.has_column(name)

    @property
    def type_rates(self) -> np.ndarray:
        """(jobs, GPU types): throughput of each job on each type at its requested GPU count."""
        return self._table.type_rates

    def view(self, rows: np.ndarray, kind: type[V]) -> V:
        """A view of these rows as a port value of type `kind` (Jobs, Active)."""
        return kind(self, rows)

    def row_of(self, job_id: int) -> int | None:
        return self._table.row_of(job_id)

    def frame(self, rows: np.ndarray | None = None, columns: Sequence[str] | None = None) -> pl.DataFrame:
        return self._table.frame(rows, columns)


_INT64 = np.dtype(np.int64)


def frozen_rows(a) -> np.ndarray:
    """Job rows (or GPU ids, counts) as a read-only int64 array (a port value must not be
    changed by whoever receives it)."""
    if type(a) is np.ndarray and a.dtype is _INT64:  # the common case, inline (ports carry many)
        if a.flags.writeable:
            a = a.view()
            a.setflags(write=False)
        return a
    arr = np.asarray(a)
    if arr.dtype.kind == "f":  # (a cast would truncate 1.5 to 1, and turn NaN into a number)
        _check_whole(arr)
    arr = arr.astype(_INT64, copy=False)
    if arr.flags.writeable:
        arr = arr.view()
        arr.setflags(write=False)
    return arr


def _check_whole(arr: np.ndarray) -> None:
    """A ValueError naming the first value of a float array that is not a whole number int64
    holds (a fraction, NaN, infinity): job rows, GPU ids and counts are whole."""
    flat = arr.ravel()
    bad = np.flatnonzero(~((np.abs(flat) < 2.0**63) & (flat == np.round(flat))))  # (NaN fails both)
    if len(bad):
        at = f" at index {bad[0]}" if arr.ndim else ""
        raise ValueError(
            f"job rows, GPU ids and GPU counts must be whole numbers within int64: got an array of {arr.dtype} holding "
            f"{flat[bad[0]].item()!r}{at} ({len(bad):,} of {arr.size:,} not whole)"
        )


class JobView:
    """A read-only view of some rows of the job table, with columns as numpy arrays.

    Columns are read lazily and cached: `view.gpus`, `view.column("loss")`. The view is valid
    for the round it was made in; the runtime changes the table only between rounds.
    """

    __slots__ = ("rows", "_reader", "_cache")

    def __init__(self, reader: JobReader, rows: np.ndarray):
        self._reader = reader
        self.rows = frozen_rows(rows)
        self._cache: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} jobs)"

    def __getattr__(self, name: str) -> Any:
        """Only for a name that is no attribute: an element's `active.model` (a column read by
        `column`) or `active.arrival` (for `arrival_s`) says so, rather than Python's bare
        "no attribute"."""
        if name.startswith("_") or name in ("rows", "lineage"):  # (a slot not set yet, Python's protocols: no hint)
            raise AttributeError(name)
        table = getattr(self._reader, "_table", None)
        if table is None:  # (a view of another reader: Python's own words)
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        kind = type(self).__name__
        if table.has_column(name):
            raise AttributeError(
                f"'{kind}' object has no attribute '{name}': the job table's column '{name}' is read as "
                f"{kind.lower()}.column('{name}')"
            )
        own = [n for n in dir(type(self)) if not n.startswith("_")]
        hint = did_you_mean(name, [*own, *table.names])
        raise AttributeError(f"'{kind}' object has no attribute '{name}'" + (f" ({hint})" if hint else ""))

    def column(self, name: str) -> np.ndarray:
        got = self._cache.get(name)
        if got is None:
            got = self._reader.column(name)[self.rows]
            got.setflags(write=False)
            self._cache[name] = got
        return got

    def select(self, which: np.ndarray) -> Self:
        """The jobs picked by a boolean mask or an index array, in that order."""
        return type(self)(self._reader, self.rows[which])

    def frame(self, columns: Sequence[str] | None = None) -> pl.DataFrame:
        return self._reader.frame(self.rows, columns)

    # Columns every policy reads; anything else through `column(name)`.
    job_id = property(lambda self: self.column("job_id"))
    arrival_s = property(lambda self: self.column("arrival_s"))
    gpus = property(lambda self: self.column("gpus"))
    work = property(lambda self: self.column("work"))
    done = property(lambda self: self.column("done"))
    service = property(lambda self: self.column("service"))
    run_s = property(lambda self: self.column("run_s"))
    weight = property(lambda self: self.column("weight"))
    first_start_s = property(lambda self: self.column("first_start_s"))
    held = property(lambda self: self.column("held"))
    reference_rate = property(lambda self: self.column("reference_rate"))
    goodput = property(lambda self: self.column("goodput"))
    efficiency = property(lambda self: self.column("efficiency"))

    @property
    def running(self) -> np.ndarray:
        """True for jobs that hold GPUs this round."""
        return self.column("held") > 0

    @property
    def remaining_s(self) -> np.ndarray:
        """Oracle remaining time on the job's reference placement (isolated, consolidated)."""
        return (self.work - self.done) / self.reference_rate

    @classmethod
    def merge(cls, views: Sequence[Self]) -> Self:
        views = [v for v in views if v is not None]
        if len(views) == 1:
            return views[0]
        return cls(views[0]._reader, np.concatenate([v.rows for v in views]))


V = TypeVar("V", bound=JobView)


class Jobs(JobView):
    """Jobs entering the system this round (from sources, through admission, to the pool)."""

    __slots__ = ()


class Active(JobView):
    """All admitted, unfinished jobs, running or waiting, with their live fields.

    A pool's view says how it follows the pool's last one (`lineage`): the pool's token, the
    number of views it has made, and which of the last view's jobs are still here (a mask over
    its rows, or None for all), first and in order, the jobs that joined after them. A policy
    that keeps an order between rounds reads it to see what changed without comparing the
    sets. None for any other view.
    """

    __slots__ = ("lineage",)

    def __init__(self, reader: JobReader, rows: np.ndarray):
        super().__init__(reader, rows)
        self.lineage: tuple[object, int, np.ndarray | None] | None = None
