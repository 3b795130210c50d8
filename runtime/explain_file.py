"""The explanation record as a Parquet file (explain.parquet, docs/explain.md).

A record is written block by block, one row group for every `PIECE` records at most, so that a
million jobs' records never stand in memory as one table. A run from the command line writes
it as it goes (`RecordFile.on_a_thread`): each block the record joins is handed to a thread of
its own that encodes it, so that the encoding, most of the writing's cost, runs on another core
beside the simulation rather than after it. Either way the file is the same, byte for byte: the
same blocks in the same order, cut into the same row groups. It is written beside its place and
renamed into it when whole, so that a run that fails leaves no half-written record.
"""

from __future__ import annotations

import os
import queue
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.explain import _CODES, MEANINGS, Reason, _records

if TYPE_CHECKING:
    import pyarrow as pa

    from roundhouse.traces.jobs import JobTable

# Records written to the file at once (one row group).
PIECE = 1 << 18
# Blocks waiting for the writing thread; the simulation waits when it is this far ahead.
_WAITING = 2
# How the columns are encoded. Statistics only for time and job, the columns one filters on:
# the labels' would cost a third of the writing. Job ids and the first numbers (a waiting job's
# rank, mostly) take too many values for a dictionary: each piece's was tried, built and
# dropped. Their differences, record to record, are small, so that they are kept as those
# (a fifth cheaper to write, and the file half the size; the values read back are the same).
_DELTA = ("job_id", "a")
_ENCODING = {
    "write_statistics": ["t_s", "job_id"],
    "use_dictionary": ["t_s", "state", "reason", "element", "element_class", "ranked_by", "ranked_by_class", "b", "c"],
    "column_encoding": dict.fromkeys(_DELTA, "DELTA_BINARY_PACKED"),
}

# The labels of a record's code: its state and its reason's name.
_STATES = [""] * _CODES
_NAMES = [""] * _CODES
for _r in Reason:
    _NAMES[_r], _STATES[_r] = _r.name.lower(), MEANINGS[_r][0]


class Labels:
    """What a record's numbers name, to make its table: the graph's element names, their
    classes, and the element whose ranking each follows; and the job table (for job ids)."""

    def __init__(self, elements: Sequence[str], classes: Sequence[str], ranked_by: Sequence[str], jobs: JobTable):
        of = dict(zip(elements, classes))
        tables = ["", *elements], ["", *classes], ["", *ranked_by], ["", *(of.get(r, "") for r in ranked_by)]
        # Per label column: each code's (or element's) index into its distinct names, and those
        # names, worked out once rather than for every piece.
        self.tables = [_dictionary(table) for table in tables]
        self.states, self.names = _dictionary(_STATES), _dictionary(_NAMES)
        self.jobs = jobs
        self._scratch: dict[tuple[str, str], np.ndarray] = {}  # (`piece`'s buffers)

    def table(self, cols: dict[str, np.ndarray]) -> pa.Table:
        """Columns t, row, code, element, a, b, c as the record's table, built as Arrow arrays:
        the labels are dictionaries of the few names with an index per record (no strings per
        record)."""
        return self._table(cols, _fresh)

    def piece(self, cols: dict[str, np.ndarray]) -> pa.Table:
        """Columns t, row, key, a, b, c (a piece of a block, `_records`) as the record's table,
        made in buffers of this object's that the next piece's table uses again: for a table
        written, and dropped, before the next is made. (Fresh buffers for each piece cost the
        first touch of their pages, most of the making; a block's numbers stay as narrow as
        they were kept until they are written as the schema's.)"""
        key = cols["key"]
        codes = np.remainder(key, _CODES, out=self._buffer("code", key.dtype, len(key)))
        el = np.floor_divide(key, _CODES, out=self._buffer("element", key.dtype, len(key)))  # (0: the runtime)
        return self._table({**cols, "code": codes, "element": el}, self._buffer, el_plus_one=True)

    def _buffer(self, name: str, dtype: np.dtype | type, n: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        buffer = self._scratch.get((name, dtype.str))
        if buffer is None or len(buffer) < n:
            buffer = self._scratch[name, dtype.str] = np.empty(max(n, PIECE), dtype=dtype)
        return buffer[:n]

    def _table(self, cols: dict[str, np.ndarray], into: Callable, el_plus_one: bool = False) -> pa.Table:
        import pyarrow as pa

        codes, rows = cols["code"], cols["row"]
        el = cols["element"] if el_plus_one else cols["element"] + 1  # (0: the runtime)
        job_id = self.jobs.column("job_id")
        columns = {"t_s": _arrow(cols["t"]), "job_id": _arrow(_take(job_id, rows, into("job_id", job_id.dtype, len(rows))))}
        for name, dictionary, index in (("state", self.states, codes), ("reason", self.names, codes)):
            columns[name] = _labels(dictionary, index, into(name, np.uint32, len(index)))
        for name, dictionary in zip(("element", "element_class", "ranked_by", "ranked_by_class"), self.tables):
            columns[name] = _labels(dictionary, el, into(name, np.uint32, len(el)))
        for name in "abc":
            values = cols[name]
            out = into(name, np.int64, len(values))
            if out is None:
                out = values.astype(np.int64, copy=False)
            else:
                np.copyto(out, values)
            columns[name] = _arrow(out)
        return pa.Table.from_arrays(list(columns.values()), schema=_schema())


def _fresh(name: str, dtype, n: int) -> None:
    """No buffer: `Labels.table` makes fresh arrays (a frame made of them keeps them)."""
    return None


def _take(values: np.ndarray, index: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """values[index], into `out` if given (indexes that are the record's own: in range)."""
    return values[index] if out is None else values.take(index, out=out, mode="clip")


def part_of(path: str | os.PathLike) -> Path:
    """The file a record is written to until it is whole, beside the record's own name (the
    name `roundhouse explain` looks for to tell a run still writing its record)."""
    path = Path(path)
    return path.with_name(path.name + ".part")


class RecordFile:
    """explain.parquet being written: `add` each joined block in order, then `close`. Made with
    `RecordFile(path, table)` it encodes each block as it is added; made with `on_a_thread` it
    hands each block to a thread of its own. `table` makes a piece's Arrow table from its
    columns t, row, key, a, b, c (`Labels.piece`), and is done with it once it is written."""

    def __init__(self, path: str | os.PathLike, table: Callable[[dict[str, np.ndarray]], pa.Table]):
        import pyarrow.parquet as pq

        self.path = Path(path)
        self._part = part_of(self.path)
        self._table = table
        self._writer = pq.ParquetWriter(self._part, _schema(), compression="zstd", **_ENCODING)
        self._errors: list[BaseException] = []  # (what the writing thread met)
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._removal: weakref.finalize[..., RecordFile] = weakref.finalize(self, _remove, self._writer, self._part)

    @classmethod
    def on_a_thread(cls, path: str | os.PathLike, labels: Labels) -> RecordFile:
        self = cls(path, labels.piece)
        self._queue = queue.Queue(_WAITING)
        stop = threading.Event()
        # (The thread holds what it writes with, not this object: a record dropped before it
        # is written drops this object, whose finalizer stops the thread and removes the part.)
        args = (self._queue, stop, self._writer, labels.piece, self._errors, self._part)
        self._thread = threading.Thread(target=_encode, args=args, name="explain.parquet", daemon=True)
        self._removal.detach()
        self._removal = weakref.finalize(self, _stop, self._queue, stop, self._thread, self._writer, self._part)
        self._thread.start()
        return self

    def add(self, block: dict[str, np.ndarray]) -> None:
        """A joined block, the next in the record's order."""
        if self._queue is None:
            _write_block(self._writer, self._table, block)
        elif not self._errors:  # (after a failure, what follows is dropped: `close` reports it)
            self._queue.put(block)

    def close(self) -> None:
        """Finish the file and put it in its place (raises what went wrong in writing it, and
        then leaves no file behind)."""
        if self._thread is not None:
            assert self._queue is not None
            self._queue.put(None)
            self._thread.join()
        if self._errors:
            self._removal()
            raise self._errors[0]
        self._removal.detach()
        try:
            self._writer.close()
            os.replace(self._part, self.path)
        except BaseException:
            _remove(self._writer, self._part)
            raise

    def abandon(self) -> None:
        """Stop writing and leave no file."""
        self._removal()


def _encode(waiting: queue.Queue, stop: threading.Event, writer, table: Callable, errors: list, part: Path) -> None:
    """The writing thread: blocks from `waiting` into `writer` until None; when stopped, it
    closes the writer and removes the part written."""
    while (block := waiting.get()) is not None and not stop.is_set():
        if errors:
            continue  # (drained: `close` reports the first failure)
        try:
            _write_block(writer, table, block)
        except BaseException as err:  # noqa: BLE001 (kept for `close`, which raises it)
            errors.append(err)
    if stop.is_set():
        _remove(writer, part)


def _write_block(writer, table: Callable, block: dict[str, np.ndarray]) -> None:
    block = _records(block)
    for start in range(0, len(block["t"]), PIECE):  # (a block of a busy run holds millions)
        piece = {name: values[start : start + PIECE] for name, values in block.items()}
        writer.write_table(table(piece))


def _stop(waiting: queue.Queue, stop: threading.Event, thread: threading.Thread, writer, part: Path) -> None:
    stop.set()
    try:
        waiting.put_nowait(None)
    except queue.Full:  # (the thread takes the next block, sees the stop and ends)
        pass
    thread.join(timeout=10)
    if not thread.is_alive():  # (else it removes the part itself when it ends)
        _remove(writer, part)


def _remove(writer, part: Path) -> None:
    try:
        writer.close()
    except Exception:  # noqa: BLE001 (a writer that failed already: the part is removed all the same)
        pass
    part.unlink(missing_ok=True)


def _dictionary(table: list[str]) -> tuple[np.ndarray, pa.Array]:
    """Strings by index as a dictionary: per index, the place of its string among the distinct
    strings, and those (for `_labels`)."""
    distinct = list(dict.fromkeys(table))
    return np.array([distinct.index(name) for name in table], dtype=np.uint32), _arrow_strings(distinct)


def _labels(dictionary: tuple[np.ndarray, pa.Array], index: np.ndarray, out: np.ndarray | None = None) -> pa.DictionaryArray:
    """Strings by index, as a dictionary of the distinct strings and an index into it per value
    (polars reads it as a categorical); the indexes made into `out` if given."""
    import pyarrow as pa

    at, distinct = dictionary
    return pa.DictionaryArray.from_arrays(_arrow(_take(at, index, out)), distinct)


# Arrow arrays are made from the numpy arrays' memory rather than with `pa.array`, which first
# looks for pandas and so imports it: about 0.2 s of every command-line run that writes a record.
def _arrow(values: np.ndarray) -> pa.Array:
    """Numbers (a numpy array) as an Arrow array over the same memory."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def _arrow_strings(names: list[str]) -> pa.Array:
    """Strings as an Arrow string array: their UTF-8 bytes one after the other, and offsets."""
    import pyarrow as pa

    encoded = [name.encode() for name in names]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum(np.array([len(e) for e in encoded], dtype=np.int32), out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def _schema() -> pa.Schema:
    """The written table's schema: the labels as polars writes a categorical."""
    import pyarrow as pa

    label = pa.dictionary(pa.uint32(), pa.string())
    meta = {b"_PL_CATEGORICAL2": b"0;0;u32;"}  # (as polars marks a categorical it writes)
    fields = [pa.field("t_s", pa.float64()), pa.field("job_id", pa.int64())]
    fields += [
        pa.field(n, label, metadata=meta) for n in ("state", "reason", "element", "element_class", "ranked_by", "ranked_by_class")
    ]
    fields += [pa.field(n, pa.int64()) for n in "abc"]
    return pa.schema(fields)
