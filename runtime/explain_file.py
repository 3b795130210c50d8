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

from roundhouse.runtime.explain import _CODES, MEANINGS, Reason, _records, _split_key

if TYPE_CHECKING:
    import pyarrow as pa

    from roundhouse.traces.jobs import JobTable

# Records written to the file at once (one row group).
PIECE = 1 << 18
# Blocks waiting for the writing thread; the simulation waits when it is this far ahead.
_WAITING = 2

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
        self.tables = ["", *elements], ["", *classes], ["", *ranked_by], ["", *(of.get(r, "") for r in ranked_by)]
        self.jobs = jobs

    def table(self, cols: dict[str, np.ndarray]) -> pa.Table:
        """Columns t, row, code, element, a, b, c as the record's table, built as Arrow arrays:
        the labels are dictionaries of the few names with an index per record (no strings per
        record)."""
        import pyarrow as pa

        codes = cols["code"]
        el = cols["element"] + 1  # (0: the runtime)
        columns = {"t_s": _arrow(cols["t"]), "job_id": _arrow(self.jobs.column("job_id")[cols["row"]])}
        columns["state"], columns["reason"] = _labels(_STATES, codes), _labels(_NAMES, codes)
        for name, table in zip(("element", "element_class", "ranked_by", "ranked_by_class"), self.tables):
            columns[name] = _labels(table, el)
        for name in "abc":
            columns[name] = _arrow(cols[name].astype(np.int64, copy=False))
        return pa.Table.from_arrays(list(columns.values()), schema=_schema())


def part_of(path: str | os.PathLike) -> Path:
    """The file a record is written to until it is whole, beside the record's own name (the
    name `roundhouse explain` looks for to tell a run still writing its record)."""
    path = Path(path)
    return path.with_name(path.name + ".part")


class RecordFile:
    """explain.parquet being written: `add` each joined block in order, then `close`. Made with
    `RecordFile(path, table)` it encodes each block as it is added; made with `on_a_thread` it
    hands each block to a thread of its own. `table` makes a piece's Arrow table."""

    def __init__(self, path: str | os.PathLike, table: Callable[[dict[str, np.ndarray]], pa.Table]):
        import pyarrow.parquet as pq

        self.path = Path(path)
        self._part = part_of(self.path)
        self._table = table
        # (Statistics only for time and job, the columns one filters on: the labels' would
        # cost a third of the writing.)
        self._writer = pq.ParquetWriter(self._part, _schema(), compression="zstd", write_statistics=["t_s", "job_id"])
        self._errors: list[BaseException] = []  # (what the writing thread met)
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._removal: weakref.finalize[..., RecordFile] = weakref.finalize(self, _remove, self._writer, self._part)

    @classmethod
    def on_a_thread(cls, path: str | os.PathLike, labels: Labels) -> RecordFile:
        self = cls(path, labels.table)
        self._queue = queue.Queue(_WAITING)
        stop = threading.Event()
        # (The thread holds what it writes with, not this object: a record dropped before it
        # is written drops this object, whose finalizer stops the thread and removes the part.)
        args = (self._queue, stop, self._writer, labels.table, self._errors, self._part)
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
        writer.write_table(table(_split_key(piece)))


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


def _labels(table: list[str], index: np.ndarray) -> pa.DictionaryArray:
    """Strings by index, as a dictionary of the distinct strings and an index into it per value
    (polars reads it as a categorical)."""
    import pyarrow as pa

    distinct = list(dict.fromkeys(table))
    at = np.array([distinct.index(name) for name in table], dtype=np.uint32)
    return pa.DictionaryArray.from_arrays(_arrow(at[index]), _arrow_strings(distinct))


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
