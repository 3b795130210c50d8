"""Decision explanations: why each job is where it is, round by round, recorded compactly.

Elements that decide give reasons through the round context (`ctx.explain(reason, rows, a, b,
c)`): a `Reason` code and up to three numbers whose meaning the code fixes (`MEANINGS`). The
engine adds what the plan did (launched, suspended, moved or resized, completed) and what the
backend reported (finished, failed, requeued). The `Recorder` keeps, per job, the reason it
holds now (the code and the element that gave it) and appends a record only when that changes:
a job that waits for the same reason as last round costs a comparison, nothing more, and rounds
skipped because nothing can change record nothing. Each record carries the time its reason
began; its numbers are those of that moment.

Records are kept columnar, as the arrays elements hand over (appended to a list, and every few
thousand of them joined into one block of columns), so recording is a few numpy operations per
element per round. Once the blocks held in memory pass a few megabytes they are written out
(spilled) to a file in a temporary folder of the record's own, so that a long run holds a
bounded part of its record in memory. The recorder is a plain object on the world
(`World.explain`), copied with `copy()` when a world is forked (a copy shares the blocks spilled
so far and spills its own elsewhere). `frame(world)` gives the record as a table; `write`
writes it block by block beside a run's jobs.csv as explain.parquet (docs/explain.md,
runtime/explain_file.py), finishing the file a run from the command line writes as it goes.
"""

from __future__ import annotations

import array
import itertools
import operator
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from roundhouse.runtime import rowsets
from roundhouse.runtime.rowsets import isin_rows

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from roundhouse.runtime.explain_file import Labels, RecordFile
    from roundhouse.runtime.types import Events, Plan
    from roundhouse.runtime.world import World

FILE_NAME = "explain.parquet"


class Reason(IntEnum):
    """Why a job is where it is. The numbers a, b, c of each code are listed in MEANINGS."""

    ADMITTED = 1
    HELD = 2
    RANKED_BEHIND = 3
    NO_FREE_TYPE = 4
    NO_ROOM = 5
    BLOCKED = 6
    DELAY_MACHINE = 7
    DELAY_RACK = 8
    NOT_CHOSEN = 9
    NO_ALLOCATION = 10
    NO_SHARE = 11
    NOT_SCHEDULED = 12
    GATED = 13
    NOT_ELASTIC = 14
    LAUNCHED = 20
    SUSPENDED = 21
    PREEMPTED = 22
    LEASE_END = 23
    DEMOTED = 24
    PROMOTED = 25
    MOVED = 26
    RESIZED = 27
    FINISHED = 30
    FAILED = 31
    COMPLETED = 32
    REQUEUED = 33
    RUN_ENDED = 34


# Per code: the job's state, and what its numbers a, b, c mean ("" for unused).
MEANINGS: dict[Reason, tuple[str, str, str, str]] = {
    Reason.ADMITTED: ("waiting", "", "", ""),
    Reason.HELD: ("held", "place in the admission queue", "GPUs asked for by admitted jobs", "the gate's limit in GPUs"),
    Reason.RANKED_BEHIND: ("waiting", "rank", "jobs ranked ahead that hold GPUs", "GPUs left free"),
    Reason.NO_FREE_TYPE: ("waiting", "rank", "GPU type code", "GPUs of that type left free"),
    Reason.NO_ROOM: ("waiting", "rank", "jobs ranked ahead that hold GPUs", "GPUs left free"),
    Reason.BLOCKED: ("waiting", "rank", "rank of the job that does not fit", "GPUs left free"),
    Reason.DELAY_MACHINE: ("waiting", "seconds starved", "machine timer in seconds", ""),
    Reason.DELAY_RACK: ("waiting", "seconds starved", "rack timer in seconds", ""),
    Reason.NOT_CHOSEN: ("waiting", "entries chosen this round", "GPUs left idle", ""),
    Reason.NO_ALLOCATION: ("waiting", "time the allocation in force was made (s)", "earliest time of the next (s)", ""),
    Reason.NO_SHARE: ("waiting", "time the allocation in force was made (s)", "GPUs left idle", ""),
    Reason.NOT_SCHEDULED: ("waiting", "jobs the schedule runs", "GPUs it leaves idle", ""),
    Reason.GATED: (
        "waiting",
        "GPUs the held-back schedule gives it (0: none)",
        "jobs the allocation in force runs",
        "GPUs it leaves idle",
    ),
    Reason.NOT_ELASTIC: (
        "waiting",
        "jobs the schedule runs",
        "GPUs it leaves idle",
        "applications of the elastic profile (0: the run has none)",
    ),
    Reason.LAUNCHED: ("running", "machine of its first GPU", "GPUs", "machines spanned"),
    Reason.SUSPENDED: ("suspended", "", "", ""),
    Reason.PREEMPTED: ("suspended", "rank", "jobs ranked ahead that hold GPUs", ""),
    Reason.LEASE_END: ("suspended", "entries chosen this round", "", ""),
    Reason.DEMOTED: ("note", "queue", "GPU-seconds of service", ""),
    Reason.PROMOTED: ("note", "queue", "seconds waited", ""),
    Reason.MOVED: ("running", "machine of its first GPU", "GPUs", "machine of its first GPU before (-1: not in the record)"),
    Reason.RESIZED: ("running", "machine of its first GPU", "GPUs", "GPUs before"),
    Reason.FINISHED: ("finished", "", "", ""),
    Reason.FAILED: ("finished", "", "", ""),
    Reason.COMPLETED: ("finished", "", "", ""),
    Reason.REQUEUED: ("waiting", "", "", ""),
    # (live: stopped by the run's end, checkpointed or its launch withheld, and waiting)
    Reason.RUN_ENDED: ("suspended", "", "", ""),
}

# The reason a job holds after a code: a job preempted for the jobs ranked ahead goes on
# waiting behind them, and one whose Gavel round ended goes on not being chosen, so that the
# next round's reason is no change (and costs nothing).
_AFTER = np.arange(128)
_AFTER[Reason.PREEMPTED] = Reason.RANKED_BEHIND
_AFTER[Reason.LEASE_END] = Reason.NOT_CHOSEN
_AFTER[[Reason.MOVED, Reason.RESIZED]] = Reason.LAUNCHED  # (it runs, as a launched job does)
_AFTER_OF = _AFTER.tolist()  # (indexed with Python ints in the round)
_AFTER_KEYS: dict[tuple[int, np.dtype], np.ndarray] = {}


def _after_keys(base: int, dtype: np.dtype) -> np.ndarray:
    """Per code: the key a job holds after it, given by the element of key `base`, in the
    record's dtype of keys (one lookup and one comparison of like arrays per round)."""
    keys = _AFTER_KEYS.get((base, dtype))
    if keys is None:
        keys = _AFTER_KEYS[base, dtype] = (_AFTER + base).astype(dtype)
    return keys


# Reasons a running job holds only when an element has just explained its suspension (a
# released Dally job that declines an offer waits for its timer; a Gavel job that a new
# allocation gives no share stops; a Gavel job preempted because its type had too few GPUs
# left at its turn then waits for GPUs of that type): the engine adds a plain SUSPENDED to the
# other suspensions.
_SUSPENSIONS = np.zeros(128, dtype=bool)
_SUSPENSIONS[
    [
        Reason.SUSPENDED,
        Reason.RANKED_BEHIND,
        Reason.NO_FREE_TYPE,
        Reason.NOT_CHOSEN,
        Reason.NO_SHARE,
        Reason.DELAY_MACHINE,
        Reason.DELAY_RACK,
    ]
] = True

# Codes recorded every time they are given, with no comparison: events rather than states, and
# suspensions (a running job never holds a suspension's reason already).
# (Lists: indexed with Python ints in the round.)
_ALWAYS = [
    c in (Reason.DEMOTED, Reason.PROMOTED, Reason.PREEMPTED, Reason.LEASE_END, Reason.SUSPENDED, Reason.RUN_ENDED)
    for c in range(128)
]
# Codes by which an element explains a suspension (counted, so that the engine need not look
# for suspensions nobody explained when all were).
_SUSPENSIONS_GIVEN = [c in (Reason.SUSPENDED, Reason.PREEMPTED, Reason.LEASE_END) for c in range(128)]

# A record's key: which element gave which code, in one integer (element -1: the runtime).
_CODES = 128

# Not a reason: a switch (ChoosePolicy) gives this code with no rows and, as its first number,
# the index of the candidate whose ranking it passes on from now on, so that the placers it
# feeds are recorded as following that candidate (`Recorder(switches=...)`).
CANDIDATE = _CODES - 1


_ALL = slice(None)


# A reason's number: a constant, an array by row, or a function of the positions (in the rows
# given) of the rows recorded.
Number = int | float | np.ndarray | Callable[[Any], np.ndarray]

# The record holds only numbers and arrays (no objects the garbage collector would have to
# visit again and again as the record grows): a launch's numbers are kept as its plan's arrays,
# marked by this in place of the first number, and worked out when the record is read. (The
# only string among the numbers: found by its type, since a record pickled and read back, a
# packed fork's, holds an equal string, not this one.)
_LAUNCH = "launch"


def join_chunks(chunks: list[tuple], node: np.ndarray | None, narrow: bool = False) -> dict[str, np.ndarray]:
    """Chunks of records as columns t, row, key, a, b, c. With `narrow` (a block kept for
    the rest of the run): whole-number columns are kept in the fewest bits that hold their
    values (8, 16 or 32), and a column that every chunk gave as one number (a round's time, a
    reason) is kept once per chunk, beside each chunk's length; one that most records have as
    their chunk's one number (the times of rounds, with a few finishing times given per job)
    is kept so too, with the chunks given per row and their numbers beside (`_records` widens
    them all again, on the writing thread when a file is written as the run goes). Each
    column is made in a few passes over all the chunks, not a pass per chunk: a round
    leaves a few chunks, and a block joins thousands."""
    fields = list(zip(*chunks)) if chunks else [()] * 6  # t, rows, key, a, b, c (a launch's: _LAUNCH, counts, GPUs)
    lengths = _counts(map(len, fields[1]))
    begins = lengths.cumsum() - lengths
    out: dict[str, np.ndarray] = {"row": _joined_rows(fields[1])}
    launch = _flags(map(isinstance, fields[3], itertools.repeat(str)))  # (_LAUNCH)
    at_launches = launch.nonzero()[0]
    launches = at_launches.tolist()
    once: dict[str, np.ndarray] = {}
    for name, values in zip(("t", "key", "a", "b", "c"), (fields[0], fields[2], *fields[3:6])):
        dtype = np.float64 if name == "t" else np.int64
        given = _flags(map(isinstance, values, itertools.repeat(np.ndarray)))
        worked_out = name in ("a", "c") and launches  # (a launch's own a and c: below)
        if worked_out:
            given &= ~launch
        at_arrays = given.nonzero()[0]
        arrays = at_arrays.tolist()
        if not arrays and not worked_out:
            each = _numbers(values, dtype)
            if narrow and chunks:
                once[name] = each
                continue
            out[name] = np.repeat(each, lengths)
            continue
        numbers = list(values)
        for k in itertools.chain(arrays, launches if worked_out else ()):
            numbers[k] = 0
        if narrow and not worked_out and 2 * int(lengths[at_arrays].sum()) < len(out["row"]):
            once[name] = _numbers(numbers, dtype)
            out[name + _GIVEN] = at_arrays
            # (cast as the column's own assignment casts: floats given for whole numbers, cut)
            out[name + _VALUES] = _joined(list(map(values.__getitem__, arrays)), np.dtype(dtype)).astype(dtype, copy=False)
            continue
        column = np.repeat(_numbers(numbers, dtype), lengths)
        if arrays:
            column[_positions(begins, lengths, at_arrays)] = _joined(list(map(values.__getitem__, arrays)), column.dtype)
        out[name] = column
    if launches:
        first, machines = _launch_numbers(chunks, launches, node)
        where = _positions(begins, lengths, at_launches)
        out["a"][where] = first
        out["c"][where] = machines
    if narrow:
        for name, each in once.items():
            out[name + _ONCE] = each
        if once:
            out["lengths"] = lengths
        for name, kept in out.items():
            if kept.dtype.kind == "i":
                out[name] = _narrowest(kept)
    return {name: out[name] for name in (*(n for n in _COLUMN_ORDER if n in out), *(n for n in out if n not in _COLUMN_ORDER))}


def _narrowest(values: np.ndarray) -> np.ndarray:
    """Whole numbers in the narrowest of 8, 16 and 32 bits that holds them all (else as they
    are): a busy run's blocks are spilled to disk and held in memory, and their ranks, counts
    and keys mostly fit in 16 bits."""
    if not len(values):
        return values.astype(np.int8)
    low, high = int(values.min()), int(values.max())
    for dtype, least, most in _NARROW:
        if low >= least and high <= most:
            return values.astype(dtype)
    return values


_NARROW = [(np.dtype(kind), int(np.iinfo(kind).min), int(np.iinfo(kind).max)) for kind in (np.int8, np.int16, np.int32)]


def _launch_numbers(chunks: list[tuple], launches: list[int], node: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The numbers a and c of the launch chunks (machine of the first GPU, machines spanned;
    b is the GPU count), for all of them at once, one after another."""
    assert node is not None  # (the machine of each GPU: set with the first launch)
    gpus = [chunks[k][5] for k in launches]
    offsets = _counts(map(len, gpus)).cumsum()
    offsets[1:] = offsets[:-1]
    offsets[0] = 0
    each = [chunks[k][6] for k in launches]
    starts = _joined_rows(each)
    starts += np.repeat(offsets, _counts(map(len, each)))
    on = node[_joined_rows(gpus)]
    return on[starts], _machines(on, starts)


# A block's per-chunk values (thousands of them) are read in one pass each: truth values as
# the bytes of a bytearray, lengths with `np.fromiter`, numbers given alone through Python's own
# arrays (a third cheaper than `np.array`, which first looks for the type that holds them all).


def _counts(values: Iterable[int]) -> np.ndarray:
    """Whole numbers (lengths) as an int64 array."""
    return np.fromiter(values, dtype=np.int64)


def _flags(values: Iterable[bool]) -> np.ndarray:
    """Truth values as a bool array."""
    return np.frombuffer(bytearray(values), dtype=bool)


def _numbers(values: Sequence, dtype: type) -> np.ndarray:
    """A chunk's numbers (Python numbers, most of them) as an array of `dtype` (np.int64 or
    np.float64), as `np.array(values, dtype=dtype)` makes it."""
    try:
        return np.frombuffer(array.array("d" if dtype is np.float64 else "q", values), dtype=dtype)
    except (TypeError, OverflowError):  # (a number not whole for a column of whole numbers, say)
        return np.array(values, dtype=dtype) if len(values) else np.empty(0, dtype=dtype)


def _joined(arrays: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """Arrays one after another, in a column of `dtype`: as `_joined_rows` joins them when all
    are of that dtype, else as numpy joins them (the column converts them)."""
    if set(map(_DTYPE_CHAR, arrays)) == {dtype.char}:
        try:
            return np.frombuffer(bytearray().join(arrays), dtype=dtype)  # type: ignore[arg-type]
        except (BufferError, TypeError):  # (one not contiguous)
            pass
    return np.concatenate(arrays)


_DTYPE_CHAR = operator.attrgetter("dtype.char")


def _joined_rows(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Arrays of whole numbers that index arrays (job rows, a plan's GPUs and starts) one after
    another, as one writeable int64 array. A block joins thousands of small ones: their bytes
    are joined, several times faster than `np.concatenate`, which sets up a copy for each. (An
    array that indexes holds whole numbers, so when their bytes come to 8 a number all are of
    8 bytes, int64 or a uint64 of the same values; otherwise they are joined as numpy joins
    them, or when one is not contiguous.)"""
    if not arrays:
        return np.empty(0, dtype=np.int64)
    try:
        joined = bytearray().join(arrays)  # type: ignore[arg-type]
    except (BufferError, TypeError):  # (one not contiguous)
        joined = None
    if joined is not None and len(joined) == 8 * sum(map(len, arrays)):
        return np.frombuffer(joined, dtype=np.int64)
    return np.concatenate(arrays).astype(np.int64, copy=False)


def _positions(begins: np.ndarray, lengths: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """The places, in joined columns, of the records of these chunks (in order)."""
    given = lengths[chunks]
    return np.arange(int(given.sum())) + np.repeat(begins[chunks] - (given.cumsum() - given), given)


def _machines(node: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """How many machines each launch spans: one more each time its GPUs' machine changes."""
    step = np.empty(len(node), dtype=np.int64)
    step[0] = 1
    np.not_equal(node[1:], node[:-1], out=step[1:], casting="unsafe")
    step[starts] = 1
    return np.add.reduceat(step, starts)


class Recorder:
    """The run's record of reasons. `elements`: the graph's element names (an element's id is
    its index); `classes` and `ranked_by` (the element whose ranking a placer follows, or "")
    describe them in the written record; `switches`: per switch (ChoosePolicy) that ranks for a
    placer, its candidates' names (the records of that placer name the candidate acting)."""

    def __init__(
        self,
        elements: Sequence[str],
        classes: Sequence[str],
        ranked_by: Sequence[str],
        switches: dict[str, Sequence[str]] | None = None,
    ):
        self.elements, self.classes, self.ranked_by = list(elements), list(classes), list(ranked_by)
        # Each element's own id, and the id its records are made under now (`ctx.explain` reads
        # it): a placer fed by a switch has one per candidate (`_Candidates`).
        self._own_ids = {name: i for i, name in enumerate(self.elements)}
        self._candidates = _Candidates(self.elements, self.classes, self.ranked_by, switches or {})
        self.ids, self._places = dict(self._own_ids), _Places()
        # Per job row: the key of the reason it holds now. As narrow as the graph's keys allow:
        # each round compares the keys of every waiting job, read at rows spread over the whole
        # job table, and a narrower array is read faster.
        narrow = (len(self.elements) + 1) * _CODES <= np.iinfo(np.int16).max
        self._key = np.zeros(0, dtype=np.int16 if narrow else np.int32)
        # The records, as the arrays they came in: (time, rows, key, a, b, c); every
        # _CHUNKS of them joined into a block of columns (`join_chunks`), so that a million jobs'
        # records are a few arrays rather than hundreds of thousands of small ones.
        self._chunks: list[tuple] = []
        self._blocks: list[dict[str, np.ndarray]] = []  # blocks held in memory
        self._held = 0  # their bytes
        # Blocks spilled to disk, oldest first, before those held: (spill file, how many of
        # its blocks belong to this record); the last may be this record's own (`_spill`).
        self._spilled: list[tuple[_Spill, int]] = []
        self._spill: _Spill | None = None
        self.records = 0
        self._joined = 0  # records in blocks
        self._explained = 0  # suspensions elements explained since the last plan
        self._node: np.ndarray | None = None  # the machine of each GPU, once a plan launched
        self._file: RecordFile | None = None  # explain.parquet written as the run goes (`write_as_it_goes`), or None

    @classmethod
    def for_graph(cls, graph) -> Recorder:
        """A record naming a compiled graph's elements; a placer's ranking is credited to the
        element that ranked it."""
        order = list(graph.elements.values())
        ranked_by = [(graph.producer_of(el.name, "ranking") if el.input("ranking") is not None else None) or "" for el in order]
        return cls([e.name for e in order], [type(e).__name__ for e in order], ranked_by, _switches(graph, ranked_by))

    def plan_ids(self, graph) -> dict[str, tuple[int, int]]:
        """Per launcher of the graph: the ids of the element that made the plan it carries out
        (`_planner`), and of the one whose completions it carries out (the one element feeding
        its `finish` port, LossTermination say; else its own)."""
        ids = self._own_ids
        return {
            el.name: (ids.get(_planner(graph, el.name), -1), ids.get(_finisher(graph, el.name), -1))
            for el in graph.elements.values()
            if el.category == "launch"
        }

    def copy(self) -> Recorder:
        """An independent copy (a forked world's record goes on from here on its own)."""
        other = Recorder.__new__(Recorder)
        other.__dict__.update(self.__dict__)
        other._key, other.ids = self._key.copy(), dict(self.ids)
        other._candidates, other._places = self._candidates.copy(), self._places.copy()
        other._chunks = list(self._chunks)  # (the arrays in them are never written again)
        other._blocks = list(self._blocks)
        # (Blocks spilled so far are shared: a spill file is only appended to, and the copy
        # reads as many of its blocks as there are now. Its own go to a file of its own.)
        other._spilled = list(self._spilled)
        other._spill = None
        other._file = None  # (the file being written is this record's)
        return other

    def __deepcopy__(self, memo: dict) -> Recorder:
        return self.copy()

    def __getstate__(self) -> dict:
        # Pickled (a snapshot, a fork packed for another process): the spilled blocks are read
        # in, since the temporary folder belongs to this process's record alone.
        state = dict(self.__dict__)
        if self._spilled:
            spilled = [store.read(i) for store, n in self._spilled for i in range(n)]
            state["_blocks"] = spilled + self._blocks
            state["_held"] = self._held + sum(_nbytes(block) for block in spilled)
            state["_spilled"], state["_spill"] = [], None
        state["_file"] = None  # (a file being written stays with this process's record)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_file", None)  # (a record pickled before files were written as runs went)
        if "_places" not in state:  # (one pickled before moves and switches were recorded)
            self._own_ids, self._candidates = dict(self.ids), _Candidates(self.elements, self.classes, self.ranked_by, {})
            self._places = _Places()
            self._places.reserve(len(self._key))

    def reserve(self, n_jobs: int) -> None:
        """Room for rows up to `n_jobs` (called as jobs join the table)."""
        if len(self._key) < n_jobs:
            grown = np.zeros(max(n_jobs, 2 * len(self._key)), dtype=self._key.dtype)
            grown[: len(self._key)] = self._key
            self._key = grown
            self._places.reserve(len(grown))
            rowsets.reserve(len(grown))  # (for the membership tests of `plan`)

    def note(
        self,
        element: int,
        reason: int | np.ndarray,
        rows: np.ndarray,
        a: Number = 0,
        b: Number = 0,
        c: Number = 0,
        t: float | np.ndarray = 0.0,
        changed_only: bool = True,
    ) -> None:
        """These jobs hold `reason` (a code, or one per row) from `element` since `t`. Only rows
        whose reason or element differs from the one they hold are recorded (all rows, with
        `changed_only=False`: launches and completions always change where a job is). Arrays
        of numbers are kept as given: hand over ones nobody changes afterwards."""
        if not len(rows):
            if not isinstance(reason, np.ndarray) and reason == CANDIDATE:
                self._candidates.select(self.ids, element, int(a))  # type: ignore[arg-type]
            return
        base = (element + 1) * _CODES
        key: Any = None  # (by row: worked out for the rows recorded); `held`: the key it holds from now on
        if isinstance(reason, np.ndarray):
            scalar = False
            held: Any = _after_keys(base, self._key.dtype).take(reason)
        else:
            scalar, code = True, int(reason)
            if _SUSPENSIONS_GIVEN[code]:
                self._explained += len(rows)
            key, held = code + base, _AFTER_OF[code] + base
        sel: Any = None
        if changed_only and not (scalar and _ALWAYS[code]):
            sel = (self._key[rows] != held).nonzero()[0]
            if not len(sel):
                return
            if len(sel) == len(rows):
                sel = None
            else:
                rows = rows[sel]
                if not scalar:
                    reason, held = reason[sel], held[sel]  # type: ignore[index]
                if isinstance(t, np.ndarray):
                    t = t[sel]
        if sel is None and rows.flags.writeable and rows.base is not None:
            rows = rows.copy()  # (a writeable view: its owner may change; port values never do)
        self._key[rows] = held
        if not scalar:
            key = np.add(reason, base, dtype=np.int64)  # (codes of any integer dtype: int8 ones too)
        # The numbers, for the rows recorded: constants, arrays by row, or functions of `sel`.
        numbers = []
        for value in (a, b, c):
            if callable(value):
                value = value(_ALL if sel is None else sel)
            elif sel is not None and isinstance(value, np.ndarray):
                value = value[sel]
            numbers.append(value)
        self._chunks.append((t, rows, key, *numbers))
        self.records += len(rows)

    # --- what the engine records ---
    def plan(self, plan: Plan, world: World, placer: int, launcher: int, now: float) -> None:
        """What a carried-out plan did (called for every plan): suspensions no element
        explained, completions, launches (on which machine, how many GPUs, over how many
        machines)."""
        explained, self._explained = self._explained, 0
        if len(self._chunks) >= _CHUNKS or self.records - self._joined >= _ROWS:
            self._keep(join_chunks(self._chunks, self._node, narrow=True))
            self._chunks, self._joined = [], self.records
            self._places.joined()
        if not plan.changes:
            return
        placer = self._candidates.acting.get(placer, placer)
        rows = plan.launch_rows
        # Jobs suspended and launched again by the same plan moved or were resized: one record
        # each, with their launch, rather than a suspension nobody explained.
        again = _again(rows, plan.suspend)
        moves = 0 if again is None else int(np.count_nonzero(again))
        if len(plan.suspend) > explained:
            plain = ~_SUSPENSIONS[self._key[plan.suspend] % _CODES]
            if moves:
                plain &= ~isin_rows(plan.suspend, rows)
            if plain.any():
                self.note(placer, Reason.SUSPENDED, plan.suspend[plain], t=now)
                self._explained = 0  # (its own notes explain nothing to the next plan)
        if len(plan.complete):
            self.note(launcher, Reason.COMPLETED, plan.complete, t=now, changed_only=False)
        if len(rows):
            self._node = world.cluster.gpu_node
            if again is not None and moves:
                self.note(placer, *self._places.relaunched(self, plan, again), t=now, changed_only=False)
            else:
                key = int(Reason.LAUNCHED) + (placer + 1) * _CODES
                self._key[rows] = key
                # (which machines: worked out when the record is read; a plan's arrays never change)
                self._chunks.append((now, rows, key, _LAUNCH, plan.launch_counts, plan.launch_gpus, plan.launch_starts))
                self.records += len(rows)
        if len(plan.resize_rows):  # (running jobs resized, or moved to as many other GPUs, in place)
            self.note(placer, *self._places.resized(self, world.cluster.gpu_node, plan), t=now, changed_only=False)

    def events(self, events: Events) -> None:
        """What the backend reported: jobs that finished (at their exact times) or failed, and
        jobs that lost their GPUs without a plan."""
        self._finished(events)
        if len(events.requeued):
            self.note(-1, Reason.REQUEUED, events.requeued, t=events.time)

    def run_ended(self, events: Events) -> None:
        """What a live run's end reported (runtime/backends/live/ending.py): jobs that finished
        or failed while it waited for their exits, and the jobs it stopped (checkpointed, or
        their launch withheld), which wait again: `run_ended`, recorded as a suspension is."""
        self._finished(events)
        if len(events.requeued):
            self.note(-1, Reason.RUN_ENDED, events.requeued, t=events.time)

    def _finished(self, events: Events) -> None:
        if len(events.finished):
            reason: int | np.ndarray = Reason.FINISHED
            if len(events.failed):
                reason = np.where(np.isin(events.finished, events.failed), int(Reason.FAILED), int(Reason.FINISHED))
            self.note(-1, reason, events.finished, t=events.finished_at)

    # --- keeping it ---
    def _keep(self, block: dict[str, np.ndarray]) -> None:
        """Keep a joined block; once the blocks held pass `_SPILL_BYTES`, spill them all."""
        self._blocks.append(block)
        self._held += _nbytes(block)
        if self._file is not None:
            self._file.add(block)
        if self._held > _SPILL_BYTES:
            if self._spill is None:
                self._spill = _Spill()
                self._spilled.append((self._spill, 0))
            while self._blocks:  # (one at a time: a failed write leaves the record whole)
                self._spill.add(self._blocks[0])
                self._spilled[-1] = (self._spill, self._spilled[-1][1] + 1)
                self._held -= _nbytes(self._blocks.pop(0))

    def _all_blocks(self, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        """The joined blocks in the order recorded from the `start`th (`_blocks_from`)."""
        return _blocks_from(self._spilled, self._blocks, start)

    # --- reading it ---
    def arrays(self) -> dict[str, np.ndarray]:
        """The records as columns: t, row, code, element (-1: the runtime), a, b, c."""
        blocks = [*map(_records, self._all_blocks()), join_chunks(self._chunks, self._node)]
        out = {name: np.concatenate([b[name] for b in blocks], dtype=blocks[-1][name].dtype) for name in blocks[-1]}
        return _split_key(out)

    def frame(self, world: World) -> pl.DataFrame:
        """The record as a table, one row per change: t_s, job_id, state, reason, element and
        element_class (who gave it; empty: the runtime), ranked_by and ranked_by_class (the
        element whose ranking a placer followed), a, b, c (see MEANINGS), in the order recorded."""
        import polars as pl

        return pl.from_arrow(self._table(self.arrays(), world))  # type: ignore[return-value]

    def _table(self, cols: dict[str, np.ndarray], world: World) -> pa.Table:
        return self._labels(world).table(cols)

    def _labels(self, world: World) -> Labels:
        from roundhouse.runtime.explain_file import Labels

        return Labels(self.elements, self.classes, self.ranked_by, world.jobs)

    # --- writing it (explain.parquet, runtime/explain_file.py: `_write`, `_write_as_it_goes`) ---
    def write(self, path, world: World) -> None:
        """The record as Parquet, finished by the thread that has written it as it went when it
        was given this path (`write_as_it_goes`)."""
        _write(self, path, world)

    def write_as_it_goes(self, path, world: World) -> None:
        """Write the record to `path` (explain.parquet) as the run goes, on a thread of its own:
        the blocks joined so far, then each as it is joined; `write(path, world)` finishes it."""
        _write_as_it_goes(self, path, world)

    def abandon_file(self) -> None:
        """Stop writing the file begun by `write_as_it_goes`, and leave none (the run's other
        results could not be written)."""
        file, self._file = self._file, None
        if file is not None:
            file.abandon()


# --- writing the record ---
def _write(record: Recorder, path, world: World) -> None:
    """Write `record` to `path` as Parquet: the file written as the run went finished, if it is
    that path's; else all of it, block by block (spilled ones read back one at a time)."""
    from roundhouse.runtime.explain_file import RecordFile

    last = join_chunks(record._chunks, record._node)
    file, record._file = record._file, None
    if file is not None and file.path == Path(path):
        file.add(last)
        file.close()
        return
    if file is not None:
        file.abandon()
    file = RecordFile(path, record._labels(world).piece)
    try:
        for block in itertools.chain(record._all_blocks(), [last]):
            file.add(block)
    except BaseException:
        file.abandon()
        raise
    file.close()


def _write_as_it_goes(record: Recorder, path, world: World) -> None:
    """Begin writing `record` to `path` on a thread of its own (one begun before is abandoned):
    the blocks joined so far now, then each as `Recorder._keep` keeps it."""
    from roundhouse.runtime.explain_file import RecordFile

    if record._file is not None:
        record._file.abandon()
    record._file = RecordFile.on_a_thread(path, record._labels(world))
    for block in record._all_blocks():
        record._file.add(block)


def _again(rows: np.ndarray, suspend: np.ndarray) -> np.ndarray | None:
    """Which of a plan's launches (`rows`) are of jobs it suspends, or None when none is (the
    common case; for a few dozen rows each, Python's sets tell it cheaper than array steps)."""
    if not len(rows) or not len(suspend):
        return None
    if len(rows) + len(suspend) <= 256 and set(suspend.tolist()).isdisjoint(rows.tolist()):
        return None
    return isin_rows(rows, suspend)


def _blocks_from(
    spilled: list[tuple[_Spill, int]], held: list[dict[str, np.ndarray]], start: int
) -> Iterator[dict[str, np.ndarray]]:
    """A record's joined blocks in the order recorded from the `start`th: those spilled (read
    back one at a time), then those held in memory."""
    for store, n in spilled:
        for i in range(min(start, n), n):
            yield store.read(i)
        start = max(start - n, 0)
    yield from held[start:]


def _switches(graph, ranked_by: list[str]) -> dict[str, Sequence[str]]:
    """The switches among the elements placers follow (ChoosePolicy): their candidates' names."""
    return {
        name: [c.name for c in graph.elements[name].candidates]
        for name in dict.fromkeys(ranked_by)
        if name and isinstance(getattr(graph.elements[name], "candidates", None), list)
    }


def _planner(graph, launcher: str) -> str:
    """The element that made the plan a launcher carries out: the one feeding its `plan` port,
    or, past elements that take a plan and hand it on with something added (a CPU and memory
    allocator, PolluxAgent's batch sizes), the placer or policy before them, whose decisions
    the launches are ("" when none feeds it)."""
    from roundhouse.runtime.types import Plan

    name = graph.producer_of(launcher, "plan") or ""
    for _ in range(len(graph.elements)):  # (a graph has no cycles: this only bounds the walk)
        port = graph.elements[name].input("plan") if name in graph.elements else None
        sources = graph.sources_of(name, "plan") if port is not None and port.type is Plan else []
        if len(sources) != 1:  # (a plan merged from several: the element that merged it)
            break
        name = sources[0][0]
    return name


def _finisher(graph, launcher: str) -> str:
    """The element whose completions a launcher carries out: the one feeding its `finish` port
    (LossTermination, say), else the launcher itself (none, or several: which asked is not known)."""
    finishers = {src for src, _ in graph.sources_of(launcher, "finish")}
    return finishers.pop() if len(finishers) == 1 else launcher


# Codes that place a job (`_Places`).
_PLACED = np.zeros(_CODES, dtype=bool)
_PLACED[[Reason.LAUNCHED, Reason.MOVED, Reason.RESIZED]] = True

# Records of one code each: codes, rows, a, b, c (as `Recorder.note` takes them).
_Records = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class _Places:
    """Per job row: the GPUs it was last placed on (how many, and the machine of the first), for
    the record of a later move or resize. Read from the record itself (its launches, moves and
    resizes), when a move or resize asks, from where the last reading stopped: most runs move
    nothing, and their rounds pay nothing for what none reads."""

    def __init__(self) -> None:
        self.count = np.zeros(0, dtype=np.int32)  # (0: none in the record)
        self.machine = np.zeros(0, dtype=np.int32)
        self.blocks = 0  # the record's joined blocks read so far
        self.chunks = 0  # and its chunks not yet joined

    def __setstate__(self, state: dict) -> None:
        if "machine" not in state:  # (pickled when launches were written in as they came: read afresh)
            state = {"count": np.zeros_like(state["count"]), "machine": np.zeros_like(state["count"]), "blocks": 0, "chunks": 0}
        self.__dict__.update(state)

    def reserve(self, n: int) -> None:
        if len(self.count) < n:
            self.count = np.concatenate([self.count, np.zeros(n - len(self.count), dtype=np.int32)])
            self.machine = np.concatenate([self.machine, np.zeros(n - len(self.machine), dtype=np.int32)])

    def copy(self) -> _Places:
        other = _Places()
        other.__dict__.update(self.__dict__)
        other.count, other.machine = self.count.copy(), self.machine.copy()
        return other

    def read(self, record: Recorder) -> None:
        """Read the record's blocks joined since the last reading, then its chunks not yet
        joined (those not read yet: reading them again, once joined, is harmless)."""
        for block in record._all_blocks(self.blocks):
            self._take(_records(block))
            self.blocks += 1
        for chunk in record._chunks[self.chunks :]:
            self._take_chunk(chunk, record._node)
        self.chunks = len(record._chunks)

    def joined(self) -> None:
        """The chunks were joined into a block (read again with it: reading is repeatable)."""
        self.chunks = 0

    def _take(self, cols: dict[str, np.ndarray]) -> None:
        """Records' placements (launched, moved, resized: GPUs b, first on machine a), the last
        of a job's winning."""
        at = _PLACED.take(cols["key"] % _CODES).nonzero()[0]
        if not len(at):
            return
        rows = cols["row"][at]
        _, last = np.unique(rows[::-1], return_index=True)  # (a fancy assignment's order is not kept)
        last = at[len(rows) - 1 - last]
        self.count[cols["row"][last]] = cols["b"][last]
        self.machine[cols["row"][last]] = cols["a"][last]

    def _take_chunk(self, chunk: tuple, node: np.ndarray | None) -> None:
        """One chunk's placements, read as it was appended rather than joined first: a run whose
        plans move jobs every round (Gavel's) asks after every plan, and a round leaves only a
        few chunks."""
        rows, key, a, b = chunk[1], chunk[2], chunk[3], chunk[4]
        if isinstance(a, str):  # (_LAUNCH: b is the counts, then the GPUs and where each job's begin)
            assert node is not None  # (set with the first launch)
            self.count[rows] = b
            self.machine[rows] = node[chunk[5][chunk[6]]]
            return
        if not isinstance(key, np.ndarray):
            if _PLACED[key % _CODES]:
                self.count[rows], self.machine[rows] = b, a
            return
        at = _PLACED.take(key % _CODES).nonzero()[0]
        if len(at):
            self.count[rows[at]] = b[at] if isinstance(b, np.ndarray) else b
            self.machine[rows[at]] = a[at] if isinstance(a, np.ndarray) else a

    def changes(self, rows: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Jobs now on `counts` GPUs: per job, MOVED (as many GPUs as before) or RESIZED, and
        the number c of its record (the machine it was on, the GPUs it had)."""
        had = self.count[rows]
        resized = (had != counts) & (had > 0)
        code = np.where(resized, int(Reason.RESIZED), int(Reason.MOVED))
        before = np.where(resized, had, np.where(had > 0, self.machine[rows], -1))
        return code, before

    def relaunched(self, record: Recorder, plan: Plan, again: np.ndarray) -> _Records:
        """The records (codes, rows, a, b, c) of a plan's launches, some of them (`again`) of
        jobs it suspended: those moved or were resized (where they were: read from `record`)."""
        self.read(record)
        rows, counts, starts = plan.launch_rows, plan.launch_counts, plan.launch_starts
        assert record._node is not None  # (set by the launch)
        on = record._node[plan.launch_gpus]
        code, before = self.changes(rows[again], counts[again])
        codes = np.full(len(rows), int(Reason.LAUNCHED))
        codes[again] = code
        c = _machines(on, starts)
        c[again] = before
        return codes, rows, on[starts], counts, c

    def resized(self, record: Recorder, node: np.ndarray, plan: Plan) -> _Records:
        """The records (codes, rows, a, b, c) of a plan's resizes of running jobs (on GPUs
        whose machines are `node`; where they were: read from `record`)."""
        self.read(record)
        rows, counts = plan.resize_rows, plan.resize_counts
        code, before = self.changes(rows, counts)
        return code, rows, node[plan.resize_gpus[plan.resize_starts]], counts, before


class _Candidates:
    """Placers whose ranking comes from a switch (ChoosePolicy): each has an id of its own per
    candidate (an entry added to the record's elements, under the placer's name, ranked by the
    candidate), and makes its records under the one of the candidate acting now."""

    def __init__(self, elements: list[str], classes: list[str], ranked_by: list[str], switches: dict[str, Sequence[str]]):
        ids = {name: i for i, name in enumerate(elements)}
        # Per switch's id, per candidate: (placer's name, its own id, its id for the candidate).
        self.choices: dict[int, list[list[tuple[str, int, int]]]] = {}
        for i, ranker in enumerate(list(ranked_by)):
            names = switches.get(ranker)
            if not names:
                continue
            per = self.choices.setdefault(ids[ranker], [[] for _ in names])
            for k, candidate in enumerate(names):
                per[k].append((elements[i], i, len(elements)))
                elements.append(elements[i])
                classes.append(classes[i])
                ranked_by.append(candidate)
        self.selected: dict[int, int] = {}  # per switch's id: the candidate acting
        self.acting: dict[int, int] = {}  # per placer's own id: the id it records under

    def copy(self) -> _Candidates:
        other = _Candidates.__new__(_Candidates)
        other.choices, other.selected, other.acting = self.choices, dict(self.selected), dict(self.acting)
        return other

    def select(self, ids: dict[str, int], switch: int, index: int) -> None:
        """Switch `switch` passes on candidate `index`'s ranking from now on."""
        per = self.choices.get(switch)
        if per is None or self.selected.get(switch) == index or not 0 <= index < len(per):
            return
        self.selected[switch] = index
        for name, own, acting in per[index]:
            ids[name] = self.acting[own] = acting


class _Spill:
    """Blocks of a record written to one file, in a temporary folder of its own, their columns'
    raw bytes one after the other. Only ever appended to, so that forks of the record read the
    blocks written before they were made while it goes on. The folder is removed when the last
    record that uses it is dropped, or when the process exits (also after a failed run)."""

    def __init__(self) -> None:
        folder = tempfile.mkdtemp(prefix="roundhouse-explain-")
        self.path = os.path.join(folder, "blocks")
        self._removal = weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
        # Per block: (column, dtype, where its bytes begin, values).
        self._index: list[list[tuple[str, str, int, int]]] = []

    def add(self, block: dict[str, np.ndarray]) -> None:
        entry = []
        with open(self.path, "ab") as f:
            at = f.tell()  # (the file's end: bytes of an earlier write that failed are skipped)
            for name, values in block.items():
                values = np.ascontiguousarray(values)
                f.write(values.data)
                entry.append((name, values.dtype.str, at, len(values)))
                at += values.nbytes
        self._index.append(entry)

    def read(self, i: int) -> dict[str, np.ndarray]:
        with open(self.path, "rb") as f:
            out = {}
            for name, dtype, at, n in self._index[i]:
                f.seek(at)
                out[name] = np.fromfile(f, dtype=dtype, count=n)
            return out


def _nbytes(block: dict[str, np.ndarray]) -> int:
    return sum(values.nbytes for values in block.values())


# Chunks of records kept as they came before they are joined into a block of columns (or
# records, whichever comes first: a busy round's chunks hold thousands).
_CHUNKS = 4096
_ROWS = 1 << 19
# Bytes of blocks held in memory before they are spilled to disk.
_SPILL_BYTES = 16 << 20


# A block's column kept once per chunk is named with this after the column's name; one kept so
# for most of its chunks, with these: the chunks that gave it per row, and their numbers joined.
_ONCE = "/chunk"
_GIVEN, _VALUES = "/given", "/values"
# The order of a joined block's columns.
_COLUMN_ORDER = ("t", "row", "key", "a", "b", "c")


def _records(block: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A block's columns with one entry per record (columns kept once per chunk repeated, and
    the numbers of the chunks that gave theirs per row put in their places)."""
    lengths = block.get("lengths", 0)
    out = {}
    for name, values in block.items():
        if name.endswith(_ONCE):
            name = name.removesuffix(_ONCE)
            given = block.get(name + _GIVEN)
            if given is None:
                out[name] = np.repeat(values, lengths)
                continue
            numbers = block[name + _VALUES]
            column = np.repeat(values.astype(np.promote_types(values.dtype, numbers.dtype), copy=False), lengths)
            counts = np.asarray(lengths, dtype=np.int64)
            column[_positions(counts.cumsum() - counts, counts, given)] = numbers
            out[name] = column
        elif name != "lengths" and not name.endswith((_GIVEN, _VALUES)):
            out[name] = values
    return out


def _split_key(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A record's key as its code and its element (-1: the runtime)."""
    key = cols.pop("key").astype(np.int64, copy=False)
    cols["code"] = key % _CODES
    cols["element"] = key // _CODES - 1
    return cols
