"""Port types: the few immutable values that travel along a graph's connections (DESIGN §3).

| type    | what it carries                                                                  |
|---------|----------------------------------------------------------------------------------|
| Jobs    | jobs entering the system this round                                              |
| Active  | the pool's admitted, unfinished jobs, with live fields                           |
| Ranking | job rows best first, with GPUs wanted and optional GPU type, batch size, layout  |
| Shares  | an allocation matrix: the fraction of time each job should get on each GPU type  |
| Plan    | launches (job -> GPU ids), keeps and suspensions                                 |
| Events  | what happened: finished (with exact times), launched, suspended, failed, metrics |

Jobs are named by their row in the world's job table (`row`), a dense index that lets
policies work on numpy arrays; `job_id` is the id the trace gave them. `Jobs` and `Active` are
read-only views of the job table, defined with it in traces/jobs.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.traces.jobs import Active, Jobs, frozen_rows

if TYPE_CHECKING:
    import polars as pl

_EMPTY_ROWS = np.zeros(0, dtype=np.int64)
_EMPTY_ROWS.setflags(write=False)
_NO_FLOATS = np.zeros(0)
_NO_FLOATS.setflags(write=False)


def frozen_array(values, dtype=None) -> np.ndarray:
    """A read-only numpy array (a port value must not be changed by whoever receives it)."""
    if type(values) is np.ndarray and (dtype is None or values.dtype is dtype or values.dtype == dtype):
        if not values.flags.writeable:
            return values
        arr = values.view()  # a read-only view; the owner keeps its writeable array
    else:
        arr = np.asarray(values, dtype=dtype)
        if not arr.flags.writeable:
            return arr
        arr = arr.view()
    arr.setflags(write=False)
    return arr


_INT64, _FLOAT64 = np.dtype(np.int64), np.dtype(np.float64)


def _rows(a) -> np.ndarray:
    """Converter for fields of job rows (or GPU ids, counts): read-only int64 arrays."""
    if a is _EMPTY_ROWS:  # a default
        return a
    if type(a) is np.ndarray and a.dtype is _INT64:  # the common case, inline (ports carry many)
        if a.flags.writeable:
            a = a.view()
            a.setflags(write=False)
        return a
    return frozen_rows(a)


def _floats(a) -> np.ndarray:
    """Converter for fields of times: read-only float64 arrays."""
    return a if a is _NO_FLOATS else frozen_array(a, _FLOAT64)


@attrs.frozen
class Ranking:
    """Jobs in the order a policy wants them served, with what each should get.

    `gpus[i]` GPUs for `rows[i]`; `gpu_type[i]` a GPU type code or -1 for any; `batch_size[i]`
    0 for the job's own; `consolidate[i]` True to require one node, False to allow spreading
    (None: the placer decides). `partner[i]` the row of a job to run on the same GPUs as
    `rows[i]` (space sharing; -1 for none; the partner has no entry of its own). `backfill`:
    when a job does not fit, may lower ones run?

    A ranking by one key (`Ranking.by_key`) is kept in the pool's order with each job's key, and
    put in order (a stable sort by key) when `rows` or `gpus` is first read: a placer that needs
    only part of the order (every job fits, and only the newcomers are to be placed) reads the
    jobs in any order (`any_order`) and orders just that part (`order_of`).
    """

    _stored_rows: np.ndarray = attrs.field(converter=_rows, alias="rows")
    _stored_gpus: np.ndarray = attrs.field(converter=_rows, alias="gpus")
    gpu_type: np.ndarray | None = attrs.field(default=None)
    batch_size: np.ndarray | None = attrs.field(default=None)
    consolidate: np.ndarray | None = attrs.field(default=None)
    backfill: bool = True
    partner: np.ndarray | None = attrs.field(default=None)
    # The key the order sorts by, per job in the stored order (None: stored in ranking order),
    # and the order once found (given, or sorted when first asked).
    keys: np.ndarray | None = attrs.field(default=None, eq=False)
    _order: np.ndarray | None = attrs.field(default=None, alias="order", eq=False, repr=False)
    _in_order: tuple[np.ndarray, np.ndarray] | None = attrs.field(default=None, init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        n = len(self._stored_rows)
        if len(self._stored_gpus) != n:
            raise ValueError(f"Ranking.gpus has {len(self._stored_gpus)} entries for {n} jobs")
        if self.keys is not None:
            if (
                self.gpu_type is not None
                or self.batch_size is not None
                or self.consolidate is not None
                or self.partner is not None
            ):
                raise ValueError("a Ranking by key carries rows, GPUs and keys only")
            if len(self.keys) != n:
                raise ValueError(f"Ranking.keys has {len(self.keys)} entries for {n} jobs")
            return
        if self.gpu_type is None and self.batch_size is None and self.consolidate is None and self.partner is None:
            return  # a plain ranking (most policies): nothing else to check
        for name, value in (
            ("gpu_type", self.gpu_type),
            ("batch_size", self.batch_size),
            ("consolidate", self.consolidate),
            ("partner", self.partner),
        ):
            if value is not None and len(value) != n:
                raise ValueError(f"Ranking.{name} has {len(value)} entries for {n} jobs")

    @classmethod
    def by_key(
        cls, rows: np.ndarray, gpus: np.ndarray, keys: np.ndarray, backfill: bool = True, order: np.ndarray | None = None
    ) -> Ranking:
        """Jobs ranked by `keys`, smallest first, ties in the order of `rows` (a stable sort);
        `order`: that sort, if already known (`keys.argsort(kind="stable")`)."""
        return cls(rows, gpus, backfill=backfill, keys=frozen_array(keys), order=order)

    @classmethod
    def in_key_order(cls, rows: np.ndarray, gpus: np.ndarray, keys: np.ndarray, backfill: bool = True) -> Ranking:
        """Jobs ranked by `keys` and already stored in ranking order (a policy that keeps its
        order from round to round)."""
        ranking = cls(rows, gpus, backfill=backfill, keys=frozen_array(keys))
        object.__setattr__(ranking, "_in_order", (ranking._stored_rows, ranking._stored_gpus))
        return ranking

    @property
    def order(self) -> np.ndarray:
        """For a ranking by key: the stored jobs' places in ranking order (the stable sort by key)."""
        order = self._order
        if order is None:
            assert self.keys is not None  # (a ranking stored in order has no order to find)
            # (stored in order: the places as they are; else the sort, found once)
            order = np.arange(len(self.keys)) if self._in_order is not None else self.keys.argsort(kind="stable")
            object.__setattr__(self, "_order", order)  # (found once: a cache, not a change)
        return order

    @property
    def ordered(self) -> bool:
        """Whether the ranking order is known (stored in order, or found already)."""
        return self.keys is None or self._order is not None or self._in_order is not None

    @property
    def rows(self) -> np.ndarray:
        """The jobs, best first."""
        if self.keys is None:
            return self._stored_rows
        got = self._in_order  # (read often: the sorted arrays kept, without a call)
        return (got if got is not None else self._ordered())[0]

    @property
    def gpus(self) -> np.ndarray:
        """GPUs each job should get, in ranking order."""
        if self.keys is None:
            return self._stored_gpus
        got = self._in_order
        return (got if got is not None else self._ordered())[1]

    def _ordered(self) -> tuple[np.ndarray, np.ndarray]:
        order = self.order
        rows, gpus = self._stored_rows[order], self._stored_gpus[order]  # (new int64 arrays: ours to freeze)
        rows.setflags(write=False)
        gpus.setflags(write=False)
        object.__setattr__(self, "_in_order", (rows, gpus))
        return rows, gpus

    def any_order(self) -> tuple[np.ndarray, np.ndarray]:
        """The jobs and the GPUs each should get, in an order that is not necessarily the
        ranking's (for questions the order does not change), without sorting."""
        return self._stored_rows, self._stored_gpus

    def order_of(self, positions: np.ndarray) -> np.ndarray:
        """Places in `any_order`'s arrays (ascending), in ranking order."""
        if self.keys is None or len(positions) < 2:
            return positions
        return positions[self.keys[positions].argsort(kind="stable")]

    def __len__(self) -> int:
        return len(self._stored_rows)

    @classmethod
    def empty(cls) -> Ranking:
        return cls(_EMPTY_ROWS, _EMPTY_ROWS)


def _optional_rows(a) -> np.ndarray | None:
    return None if a is None else frozen_array(a, np.int64)


def _optional_fractions(a) -> np.ndarray | None:
    return None if a is None else frozen_array(a, np.float64)


@attrs.frozen
class Shares:
    """An allocation matrix from an optimisation policy: `fractions[i, t]` is the fraction of
    wall-clock time job `rows[i]` should spend on GPU type `gpu_types[t]`.

    Optional parts: `placement[t]` says how column t's GPUs are laid out ("consolidated": one
    node, "spread": one GPU per node), so that a type may appear twice (placement-sensitive
    policies); None means either. With space sharing, `pairs[p]` holds two job rows that share
    GPUs and `pair_fractions[p, t]` the fraction of time they should spend together on column t.
    """

    rows: np.ndarray = attrs.field(converter=lambda a: frozen_array(a, np.int64))
    gpu_types: tuple[str, ...] = attrs.field(converter=tuple)
    fractions: np.ndarray = attrs.field(converter=lambda a: frozen_array(a, np.float64))
    placement: tuple[str, ...] | None = attrs.field(default=None, converter=lambda p: None if p is None else tuple(p))
    pairs: np.ndarray | None = attrs.field(default=None, converter=_optional_rows)
    pair_fractions: np.ndarray | None = attrs.field(default=None, converter=_optional_fractions)

    def __attrs_post_init__(self) -> None:
        if self.fractions.shape != (len(self.rows), len(self.gpu_types)):
            raise ValueError(f"Shares.fractions has shape {self.fractions.shape}")
        if self.placement is not None and len(self.placement) != len(self.gpu_types):
            raise ValueError("Shares.placement needs one entry per column")
        if (self.pairs is None) != (self.pair_fractions is None):
            raise ValueError("Shares.pairs and Shares.pair_fractions come together")
        if self.pairs is not None and self.pair_fractions is not None:
            if self.pairs.shape != (len(self.pairs), 2) or self.pair_fractions.shape != (len(self.pairs), len(self.gpu_types)):
                raise ValueError(f"Shares.pairs has shape {self.pairs.shape} and pair_fractions {self.pair_fractions.shape}")


@attrs.frozen
class Assignment:
    """One launch: job `row` on these GPU ids, with a batch size (0: the job's own)."""

    row: int
    gpus: tuple[int, ...] = attrs.field(converter=lambda g: tuple(int(x) for x in g))
    batch_size: int = 0


# How a resize sets the learning rate from the new global batch size B and the job's own B0:
# keep it, scale it by B/B0 (Goyal et al.; ONES), by sqrt(B/B0), or let the job's optimizer
# adapt it from its gradient statistics (AdaScale; Pollux). Plans carry the code (an index).
LR_RULES: tuple[str, ...] = ("keep", "linear", "sqrt", "adascale")
LR_KEEP, LR_LINEAR, LR_SQRT, LR_ADASCALE = range(4)


@attrs.frozen
class Resize:
    """One resize of a running job: its new GPUs (those it keeps among them too), its new
    global batch size (0: unchanged), the learning-rate rule (an index into LR_RULES), and
    whether it is done in place (True) or by checkpoint and restart."""

    row: int
    gpus: tuple[int, ...] = attrs.field(converter=lambda g: tuple(int(x) for x in g))
    batch_size: int = 0
    lr_rule: int = LR_LINEAR
    in_place: bool = True


@attrs.frozen
class Plan:
    """A round's decisions, columnar. Every running job is either kept (its lease is renewed,
    it pays nothing), suspended, resized, or completed. `complete` names unfinished jobs to
    finish now, with the work they have done (a job that has converged, Blox §5.3): their
    GPUs are free at once for this plan's launches.

    Resize i gives running job `resize_rows[i]` the `resize_counts[i]` GPUs next in
    `resize_gpus` (grouped by resize, in order), global batch size `resize_batch[i]` (0: the
    one it runs with), learning-rate rule `resize_lr[i]` (LR_RULES) and, when
    `resize_in_place[i]`, an in-place change (the simulator's `resize_in_place` cost) rather
    than a checkpoint and restart (`resize_restart`). A resized job keeps its identity and
    progress: it is not counted as preempted. Moving a job to other GPUs of the same count is
    a resize too.

    Launch i runs job `launch_rows[i]` on `launch_counts[i]` GPUs, the next ones in
    `launch_gpus` (grouped by launch, in launch order), with batch size `launch_batch[i]`
    (0: the job's own). With space sharing, `launch_partner[i]` is the row of the job launched
    in the same plan on exactly the same GPUs (-1: the launch has its GPUs to itself).

    CPU and memory (optional): job `alloc_rows[i]`, launched or kept by this plan, holds
    `alloc_cpus[i]` CPU cores and `alloc_memory_gb[i]` GB of memory from now on, all its
    machines together, spread over them by their shares per GPU (runtime/plans.py,
    `share_weights`: like its GPUs where its machines are alike). A launch not named gets the
    GPU-proportional share of its machines; a kept job not named keeps what it has.
    """

    launch_rows: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    launch_gpus: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    launch_counts: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    launch_batch: np.ndarray | None = attrs.field(default=None)
    keep: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    suspend: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    complete: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    launch_partner: np.ndarray | None = attrs.field(default=None, converter=_optional_rows)
    alloc_rows: np.ndarray | None = attrs.field(default=None, converter=_optional_rows)
    alloc_cpus: np.ndarray | None = attrs.field(default=None, converter=_optional_fractions)
    alloc_memory_gb: np.ndarray | None = attrs.field(default=None, converter=_optional_fractions)
    # Resizes of running jobs (see above).
    resize_rows: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    resize_gpus: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    resize_counts: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    resize_batch: np.ndarray | None = attrs.field(default=None, converter=_optional_rows)
    resize_lr: np.ndarray | None = attrs.field(default=None, converter=_optional_rows)
    resize_in_place: np.ndarray | None = attrs.field(
        default=None, converter=lambda a: None if a is None else frozen_array(a, bool)
    )
    launch_starts: np.ndarray = attrs.field(init=False, repr=False, eq=False)  # where each launch's GPUs begin
    resize_starts: np.ndarray = attrs.field(init=False, repr=False, eq=False)  # where each resize's GPUs begin

    def __attrs_post_init__(self) -> None:
        self._check_resizes()
        n = len(self.launch_rows)
        if self.alloc_rows is not None or self.alloc_cpus is not None or self.alloc_memory_gb is not None:
            k = -1 if self.alloc_rows is None else len(self.alloc_rows)
            if (
                self.alloc_cpus is None
                or self.alloc_memory_gb is None
                or len(self.alloc_cpus) != k
                or len(self.alloc_memory_gb) != k
            ):
                raise ValueError("Plan: alloc_rows, alloc_cpus and alloc_memory_gb come together, one entry each per job")
        if not n and not len(self.launch_counts) and not len(self.launch_gpus):
            object.__setattr__(self, "launch_starts", _EMPTY_ROWS)  # a plan without launches
            return
        ends = self.launch_counts.cumsum()
        if len(self.launch_counts) != n or (n and int(ends[-1]) != len(self.launch_gpus)) or (not n and len(self.launch_gpus)):
            raise ValueError("Plan: launch_counts must give one GPU count per launch, summing to len(launch_gpus)")
        if self.launch_batch is not None and len(self.launch_batch) != n:
            raise ValueError("Plan: launch_batch needs one entry per launch")
        if self.launch_partner is not None and len(self.launch_partner) != n:
            raise ValueError("Plan: launch_partner needs one entry per launch")
        object.__setattr__(self, "launch_starts", ends - self.launch_counts)

    def _check_resizes(self) -> None:
        n = len(self.resize_rows)
        if not n and not len(self.resize_counts) and not len(self.resize_gpus):
            object.__setattr__(self, "resize_starts", _EMPTY_ROWS)
            return
        ends = self.resize_counts.cumsum()
        if len(self.resize_counts) != n or (n and int(ends[-1]) != len(self.resize_gpus)) or (not n and len(self.resize_gpus)):
            raise ValueError("Plan: resize_counts must give one GPU count per resize, summing to len(resize_gpus)")
        for name in ("resize_batch", "resize_lr", "resize_in_place"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"Plan: {name} needs one entry per resize")
        if self.resize_lr is not None and n and (self.resize_lr.min() < 0 or self.resize_lr.max() >= len(LR_RULES)):
            raise ValueError(f"Plan: resize_lr holds a code outside 0..{len(LR_RULES) - 1} ({', '.join(LR_RULES)})")
        object.__setattr__(self, "resize_starts", ends - self.resize_counts)

    @classmethod
    def empty(cls) -> Plan:
        return cls()

    @classmethod
    def of(
        cls, launches: Sequence[Assignment] = (), keep=_EMPTY_ROWS, suspend=_EMPTY_ROWS, resizes: Sequence[Resize] = ()
    ) -> Plan:
        """A plan from lists of Assignments and Resizes (convenient when a placer decides job
        by job)."""
        extra: dict = {}
        if resizes:
            extra = dict(
                resize_rows=[r.row for r in resizes],
                resize_gpus=np.concatenate([np.asarray(r.gpus, dtype=np.int64) for r in resizes]),
                resize_counts=[len(r.gpus) for r in resizes],
                resize_batch=[r.batch_size for r in resizes],
                resize_lr=[r.lr_rule for r in resizes],
                resize_in_place=[r.in_place for r in resizes],
            )
        if not launches:
            return cls(keep=keep, suspend=suspend, **extra)
        return cls(
            launch_rows=[a.row for a in launches],
            launch_gpus=np.concatenate([np.asarray(a.gpus, dtype=np.int64) for a in launches]),
            launch_counts=[len(a.gpus) for a in launches],
            launch_batch=frozen_array([a.batch_size for a in launches], np.int64),
            keep=keep,
            suspend=suspend,
            **extra,
        )

    @property
    def resizes(self) -> tuple[Resize, ...]:
        """The resizes as Resize values (for reading plans in tests and tools)."""
        n = len(self.resize_rows)
        batch = self.resize_batch if self.resize_batch is not None else np.zeros(n, np.int64)
        lr = self.resize_lr if self.resize_lr is not None else np.full(n, LR_LINEAR, np.int64)
        in_place = self.resize_in_place if self.resize_in_place is not None else np.ones(n, bool)
        return tuple(
            Resize(int(r), self.resize_gpus[s : s + c], int(b), int(lr_), bool(p))
            for r, s, c, b, lr_, p in zip(self.resize_rows, self.resize_starts, self.resize_counts, batch, lr, in_place)
        )

    @property
    def launch(self) -> tuple[Assignment, ...]:
        """The launches as Assignments (for reading plans in tests and tools)."""
        starts = self.launch_starts
        batch = self.launch_batch if self.launch_batch is not None else np.zeros(len(self.launch_rows), np.int64)
        return tuple(
            Assignment(int(r), self.launch_gpus[s : s + c], int(b))
            for r, s, c, b in zip(self.launch_rows, starts, self.launch_counts, batch)
        )

    @property
    def changes(self) -> bool:
        return (
            len(self.launch_rows) > 0
            or len(self.suspend) > 0
            or len(self.complete) > 0
            or len(self.resize_rows) > 0
            or (self.alloc_rows is not None and len(self.alloc_rows) > 0)
        )


@attrs.frozen
class Events:
    """What happened, as seen at the round boundary `time`. Rows are job-table rows.

    `finished` holds every job that left the system (with the time it did), `failed` the
    subset that failed for good rather than completing its work (live runs only).
    """

    time: float
    finished: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    finished_at: np.ndarray = attrs.field(default=_NO_FLOATS, converter=_floats)
    launched: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    # Where the launched jobs went: `launched_counts[i]` GPUs for `launched[i]`, the next ones in
    # `launched_gpus` (grouped by launch, in order). Empty when not given (hand-made events).
    launched_gpus: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    launched_counts: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    suspended: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    failed: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    resized: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)  # running jobs a plan resized
    nodes_joined: tuple[str, ...] = ()
    nodes_lost: tuple[str, ...] = ()
    # Metrics reported by jobs (loss, iteration time, ...), by row.
    metrics: Mapping[int, Mapping[str, float]] = attrs.field(factory=dict)
    # Live runs only. Jobs that lost their GPUs without a plan (their node was lost, their
    # process crashed and will be retried): they wait again, from their last checkpoint.
    requeued: np.ndarray = attrs.field(default=_EMPTY_ROWS, converter=_rows)
    # Which GPUs can run jobs, when that changed (nodes joined or lost); None: unchanged.
    online: np.ndarray | None = None
    # Jobs submitted since the last round (a canonical trace frame), for LiveSource; None
    # where nothing can be submitted (the simulator).
    submitted: pl.DataFrame | None = None

    def is_quiet(self) -> bool:
        """Nothing happened: only the time is set."""
        return not len(self.finished) and self.is_quiet_but_finished()

    def is_quiet_but_finished(self) -> bool:
        """Nothing happened but, maybe, jobs finishing."""
        return not (
            len(self.launched)
            or len(self.suspended)
            or len(self.failed)
            or len(self.resized)
            or len(self.requeued)
            or self.metrics
            or self.nodes_joined
            or self.nodes_lost
            or self.online is not None
            or self.submitted is not None
        )

    @classmethod
    def merge(cls, many: Sequence[Events]) -> Events:
        many = [e for e in many if e is not None]
        if len(many) == 1:
            return many[0]
        time = max(e.time for e in many)
        news = [e for e in many if not e.is_quiet()]
        if len(news) <= 1:  # the common case: at most one of them says anything
            only = news[0] if news else many[0]
            return only if only.time == time else attrs.evolve(only, time=time)

        many = news  # (a quiet event adds nothing but its time)

        def cat(name: str) -> np.ndarray:
            parts = [a for a in (getattr(e, name) for e in many) if len(a)]
            if not parts:
                return getattr(many[0], name)
            return parts[0] if len(parts) == 1 else np.concatenate(parts)

        metrics: dict[int, Mapping[str, float]] = {}
        for e in many:
            if e.metrics:
                metrics.update(e.metrics)
        launched, counts = cat("launched"), cat("launched_counts")
        placed = len(counts) == len(launched)  # (where every part says where its launches went)
        return cls(
            time=time,
            finished=cat("finished"),
            finished_at=cat("finished_at"),
            launched=launched,
            launched_gpus=cat("launched_gpus") if placed else _EMPTY_ROWS,
            launched_counts=counts if placed else _EMPTY_ROWS,
            suspended=cat("suspended"),
            failed=cat("failed"),
            resized=cat("resized"),
            nodes_joined=sum((e.nodes_joined for e in many), ()),
            nodes_lost=sum((e.nodes_lost for e in many), ()),
            metrics=metrics,
            requeued=cat("requeued"),
            online=next((e.online for e in reversed(many) if e.online is not None), None),
            submitted=next((e.submitted for e in many if e.submitted is not None), None),
        )


PORT_TYPES: dict[str, type] = {t.__name__: t for t in (Jobs, Active, Ranking, Shares, Plan, Events)}
