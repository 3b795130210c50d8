"""Which jobs the world has added progress to, for elements that keep something per job that moves
only with progress (a policy's order by attained service): they look again at those jobs alone,
not at every job of a long queue, whose waiting jobs do not move.

The world notes the rows each time it adds progress (a round's, a stretch of rounds passed at
once, a run carried out in bulk). Nothing is kept until an element opens a reader, and a reader
keeps only what came after it opened. A reader not read for long gives up rather than grow: its
next `take` says it lost track, and its owner looks at every job once, as without the log.
"""

from __future__ import annotations

import numpy as np

_NO_ROWS = np.zeros(0, dtype=np.int64)


class ProgressLog:
    """The world's side: `note` the rows progress was added to; `open` a reader."""

    def __init__(self) -> None:
        self._readers: list[ProgressReader] = []

    def note(self, rows: np.ndarray) -> None:
        for reader in self._readers:
            reader.add(rows)

    def open(self) -> ProgressReader:
        reader = ProgressReader(self)
        self._readers.append(reader)
        return reader

    def close(self, reader: ProgressReader) -> None:
        if reader in self._readers:
            self._readers.remove(reader)


class ProgressReader:
    """The rows progress was added to since the last `take` (or since it opened)."""

    # Notes kept before the reader gives up: a reader is read once a ticked round, and a round
    # notes once (a stretch passed or carried out in bulk, once in all).
    LIMIT = 4096

    def __init__(self, log: ProgressLog) -> None:
        self._log = log
        self._notes: list[np.ndarray] = []
        self._lost = False

    def add(self, rows: np.ndarray) -> None:
        if self._lost:
            return
        if len(self._notes) >= self.LIMIT:
            self._notes, self._lost = [], True
            return
        self._notes.append(np.array(rows, dtype=np.int64))  # (a copy: the caller's array may be reused)

    def take(self) -> np.ndarray | None:
        """The rows noted since the last take (repeats possible), or None if the reader lost
        track (too many notes between two takes)."""
        notes, lost = self._notes, self._lost
        self._notes, self._lost = [], False
        if lost:
            return None
        if not notes:
            return _NO_ROWS
        return notes[0] if len(notes) == 1 else np.concatenate(notes)

    def close(self) -> None:
        self._log.close(self)
