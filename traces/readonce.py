"""A trace read once for a run, though two steps need it: the cluster's check reads the graph's
traces for the GPU types their jobs name (runtime/cluster_types.py, `cluster_gpu_types`) before the run
starts, and the TraceSource that replays one then takes that read instead of reading the file
again (300,000 PAI jobs take about 1.4 s to read).

A read is handed over only as the source's own read would give it: its key is the file (its
whole path, size and modification time, so an edited file is read again) and how it is read (the
format asked for, and the elastic profile, which a canonical elastic job's work depends on). It is
kept until as many sources take it as asked for it, and at most a few reads are kept at once (the
oldest let go), so that checks without runs (`roundhouse check`) hold few; a sweep's plan and a
what-if's look at another graph's cluster let theirs go (`clear`), since no source of theirs
takes them in this process."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roundhouse.traces.formats import LoadedTrace

# Reads kept at once: a run's traces (a graph rarely has more than two sources).
_KEPT_AT_MOST = 4

# key -> [the read trace, how many sources are still to take it]
_kept: dict[tuple, list] = {}
_lock = threading.Lock()


def read_for_source(path: str | Path, format: str, elastic) -> LoadedTrace:
    """The trace, read (or found kept), and kept for one more source to take with `take_or_read`."""
    key = _key(path, format, elastic)
    if key is not None:
        with _lock:
            entry = _kept.get(key)
            if entry is not None:
                entry[1] += 1
                return entry[0]
    trace = _read(path, format, elastic)
    if key is not None:
        with _lock:
            if key in _kept:
                _kept[key][1] += 1
            else:
                while len(_kept) >= _KEPT_AT_MOST:
                    del _kept[next(iter(_kept))]
                _kept[key] = [trace, 1]
    return trace


def take_or_read(path: str | Path, format: str, elastic) -> LoadedTrace:
    """The trace as `read_for_source` kept it for this source, else read from the file."""
    trace = _take(_key(path, format, elastic))
    return _read(path, format, elastic) if trace is None else trace


def release(path: str | Path, format: str, elastic) -> None:
    """Give up a read kept for a source that will not take it (its run was refused)."""
    _take(_key(path, format, elastic))


def _take(key: tuple | None) -> LoadedTrace | None:
    if key is None:
        return None
    with _lock:
        entry = _kept.get(key)
        if entry is None:
            return None
        entry[1] -= 1
        if entry[1] <= 0:
            del _kept[key]
        return entry[0]


def kept() -> int:
    """How many reads are kept for sources to take."""
    with _lock:
        return len(_kept)


def clear() -> None:
    """Let every kept read go."""
    with _lock:
        _kept.clear()


def _read(path: str | Path, format: str, elastic) -> LoadedTrace:
    from roundhouse.traces import formats  # (looked up at each read, as the sources always have)

    return formats.load_trace(path, format=format, elastic=elastic)


def _key(path: str | Path, format: str, elastic) -> tuple | None:
    """What makes two reads give one trace; None when that cannot be told (a file that is not
    there, whose reader says so; an elastic profile made in code, with no origin to name it)."""
    try:
        whole = Path(path).resolve()
        stat = whole.stat()
    except (OSError, RuntimeError):
        return None
    if elastic is None:
        profile = None
    else:
        profile = getattr(elastic, "origin", "")
        if not profile:
            return None
    return (str(whole), stat.st_size, stat.st_mtime_ns, format, profile)
