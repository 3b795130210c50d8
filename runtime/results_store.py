"""A sweep's results store: one Parquet file per finished run in one folder, read as one table.

Why a file per run: a run's row is written to a hidden temporary file in the same folder,
flushed to disk, then renamed to `<key>.parquet`. A rename within a folder is atomic, so a
crash (of the sweep, the machine, or a full disk) at any moment leaves every earlier file
whole and at worst a temporary file, which readers ignore and the next sweep removes. Writing a
run again (a retry after a failure) replaces its file in one step, so a key is never in the
store twice. Reading concatenates the files; columns that only some runs have (a failed run has
no metrics) are null elsewhere.

One sweep at a time writes to a folder: it holds a lock on `.lock` while it runs.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from pathlib import Path
from typing import IO, Any

import polars as pl

from roundhouse.errors import UsageError

SUFFIX = ".parquet"
_TEMPORARY = ".tmp"

# Columns whose type is fixed, whatever one run's values are (a failed run's are mostly null).
_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "key": pl.String,
    "status": pl.String,
    "error": pl.String,
    "traceback": pl.String,
    "graph": pl.String,
    "point": pl.String,
    "set": pl.String,
    "seed": pl.Int64,
    "rounds": pl.Int64,
    "run_s": pl.Float64,
    "worker": pl.String,
    "finished_at": pl.Datetime("us", "UTC"),
}


class ResultsStore:
    def __init__(self, folder: str | Path, labels: tuple[str, ...] = ()):
        self.folder = Path(folder)
        self.labels = labels  # columns that hold a grid point's values, always as text
        self.unreadable: list[Path] = []
        self.foreign: list[Path] = []  # files that read, but hold no run's row (one without a key)
        self._lock_file: IO[str] | None = None

    # --- writing ---
    def lock(self, what: str = "--out") -> None:
        """Take the folder for this process, and clear temporary files an earlier crash left."""
        if self.folder.exists() and not self.folder.is_dir():
            raise UsageError(
                f"{what} {self.folder.parent}: {self.folder} is a file, where the results store (a folder) goes; "
                f"remove it or give another {what}"
            )
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle = open(self.folder / ".lock", "a+")
        except OSError as err:
            raise UsageError(
                f"{what} {self.folder.parent}: cannot make the results store {err.filename or self.folder}: {err.strerror or err}"
            ) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise UsageError(f"{what} {self.folder.parent}: another sweep is writing to this results store now") from None
        self._lock_file = handle
        for leftover in self.folder.glob(f".*{_TEMPORARY}"):
            leftover.unlink(missing_ok=True)

    def unlock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def write(self, row: dict[str, Any]) -> Path:
        """Add one run's row (replacing an earlier row of the same key), all or nothing."""
        types = {name: _SCHEMA.get(name) or (pl.String if name in self.labels else None) for name in row}
        frame = pl.DataFrame([row], schema_overrides={k: v for k, v in types.items() if v is not None})
        final = self.folder / f"{row['key']}{SUFFIX}"
        temporary = self.folder / f".{row['key']}.{uuid.uuid4().hex}{_TEMPORARY}"
        try:
            with open(temporary, "wb") as f:
                frame.write_parquet(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, final)
        finally:
            temporary.unlink(missing_ok=True)
        _sync_folder(self.folder)
        return final

    # --- reading ---
    def files(self) -> list[Path]:
        return sorted(p for p in self.folder.glob(f"*{SUFFIX}") if not p.name.startswith("."))

    def read(self) -> pl.DataFrame:
        """Every run in the store, one row each. A file that cannot be read (damaged outside
        Roundhouse), or whose columns cannot be one table with the other files' (a column of
        another kind), is listed in `unreadable` and left out, so that its run is done again; one
        that reads but holds no run's row (a row without a key: put there by something else,
        or written over) is listed in `foreign` and left out."""
        frames = []
        self.unreadable = []
        self.foreign = []
        for path in self.files():
            try:
                frame = pl.read_parquet(path, glob=False)  # (a folder may be named with [ or *)
            except Exception:  # any damage: polars raises several kinds
                self.unreadable.append(path)
                continue
            if _holds_a_run(frame):
                frames.append((path, frame))
            else:
                self.foreign.append(path)
        if not frames:
            return pl.DataFrame(schema=_SCHEMA)
        try:
            return pl.concat([frame for _, frame in frames], how="diagonal_relaxed")
        except pl.exceptions.PolarsError:  # (a file whose column cannot be one with the others')
            return self._fitting(frames)

    def _fitting(self, frames: list[tuple[Path, pl.DataFrame]]) -> pl.DataFrame:
        """The runs of the files whose columns fit together, those of the most files first; a
        file that fits none of them (damaged outside Roundhouse) is listed in `unreadable`."""
        shared: dict[tuple, int] = {}
        for _, frame in frames:
            key = tuple(frame.schema.items())
            shared[key] = shared.get(key, 0) + 1
        # (The most common columns first; ties in the files' order.)
        ranked = sorted(range(len(frames)), key=lambda i: -shared[tuple(frames[i][1].schema.items())])
        table: pl.DataFrame | None = None
        kept = set()
        for i in ranked:
            path, frame = frames[i]
            try:
                table = frame if table is None else pl.concat([table, frame], how="diagonal_relaxed")
                kept.add(i)
            except pl.exceptions.PolarsError:
                self.unreadable.append(path)
        self.unreadable.sort()
        try:  # (in the files' order, as a whole store is read)
            return pl.concat([frames[i][1] for i in sorted(kept)], how="diagonal_relaxed")
        except pl.exceptions.PolarsError:
            assert table is not None
            return table

    def finished_keys(self) -> set[str]:
        """Keys of runs that finished with a result (failed ones are run again)."""
        frame = self.read()
        return set(frame.filter(pl.col("status") == "ok")["key"].to_list())


def _holds_a_run(frame: pl.DataFrame) -> bool:
    """Whether a store file's table is runs' rows, as `write` writes one: each with its key."""
    return frame.height > 0 and "key" in frame.columns and frame["key"].dtype == pl.String and not frame["key"].null_count()


def _sync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (the folder's entry, not just the file's data)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
