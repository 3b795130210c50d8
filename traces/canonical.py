"""Our own trace files: the canonical schema (see `traces.schema`) as CSV or Parquet.

CSV is for people (diffable, editable, the shipped samples); Parquet is for large traces. Both
hold the same columns and read back to the same frame, its jobs sorted by arrival and, for
jobs arriving at the same time, by job id (not by their order in the file; `traces.schema`).
Writers leave out optional columns that carry nothing (all empty, or `weight` all 1.0, its
default), so a duration-only trace stays a four-column file; readers put them back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from roundhouse.errors import TraceError, first_line
from roundhouse.traces.csvtext import read_cells
from roundhouse.traces.schema import CANONICAL_COLUMNS, DEFAULT_WEIGHT, REQUIRED_COLUMNS, validate

if TYPE_CHECKING:
    from roundhouse.traces.goodput import ElasticProfile

PARQUET_SUFFIXES = (".parquet", ".pq")


def read_csv(path: str | Path, elastic: ElasticProfile | None = None) -> pl.DataFrame:
    """A canonical CSV trace, validated; errors name the line (the header is line 1). `elastic`:
    the run's elastic profile, if it has one (a job of one of its applications needs no work column)."""
    cells = read_cells(path)
    return validate(cells.frame, str(path), cells.lines, elastic=elastic)


def read_parquet(path: str | Path, elastic: ElasticProfile | None = None) -> pl.DataFrame:
    """A canonical Parquet trace, validated; errors name the record (1-based); `elastic` as
    for read_csv."""
    try:
        check_parquet_file(path)
        frame = pl.read_parquet(path, glob=False)
    except FileNotFoundError:
        raise TraceError(str(path), "no such file") from None
    except (pl.exceptions.PolarsError, OSError, ValueError) as err:
        raise TraceError(str(path), f"cannot be read as Parquet: {first_line(err)}") from None
    return validate(frame, str(path), elastic=elastic)


PARQUET_MAGIC = b"PAR1"  # how a Parquet file begins and ends ("PARE" ends an encrypted one)
_TEXT_SNIFF = 4096  # bytes looked at to tell text from other binary


def check_parquet_file(path: str | Path) -> None:
    """A TraceError if the file is plainly no Parquet file (where polars would say only "The file
    must end with PAR1"): empty, text (a CSV trace given a .parquet name, say), or other bytes.
    A file that begins and ends as Parquet does is left to polars."""
    with open(path, "rb") as f:
        head = f.read(_TEXT_SNIFF)
        size = f.seek(0, 2)
        f.seek(max(size - 4, 0))
        tail = f.read(4)
    if size == 0:
        raise TraceError(str(path), "is empty, not a Parquet file")
    if head.startswith(PARQUET_MAGIC):
        if size >= 12 and tail in (PARQUET_MAGIC, b"PARE"):
            return
        raise TraceError(str(path), "begins as a Parquet file but does not end as one: cut short, or still being written?")
    text = _as_text(head)
    if text is None:
        raise TraceError(str(path), "is not a Parquet file (one begins and ends with the bytes PAR1)")
    first = next((line.strip() for line in text.removeprefix("\ufeff").splitlines() if line.strip()), "")
    shown = first if len(first) <= 60 else first[:57] + "..."
    if "," in first:
        raise TraceError(str(path), f"is not a Parquet file: it looks like CSV text ({shown!r}); name a CSV trace .csv")
    raise TraceError(
        str(path), f"is not a Parquet file: it holds text ({shown!r}); name a text trace for its format (.csv, .trace, .json)"
    )


def _as_text(head: bytes) -> str | None:
    """The file's first bytes as text, if they are UTF-8 text (a character cut at the end aside)."""
    if b"\x00" in head:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3:  # (not only a character the read cut short)
            return None
        return head[: err.start].decode("utf-8")


def read(path: str | Path) -> pl.DataFrame:
    """CSV or Parquet by extension."""
    return read_parquet(path) if is_parquet(path) else read_csv(path)


def is_parquet(path: str | Path) -> bool:
    return Path(path).suffix.lower() in PARQUET_SUFFIXES


def compact(df: pl.DataFrame) -> pl.DataFrame:
    """The trace without the optional canonical columns that carry no information. A trace of no
    jobs keeps `duration_s`: a reader needs a column of work (durations, or models and
    iterations), and with no jobs every column is empty."""
    drop = []
    for name in CANONICAL_COLUMNS:
        if name in REQUIRED_COLUMNS or name not in df.columns or (name == "duration_s" and df.height == 0):
            continue
        column = df.get_column(name)
        if column.null_count() == column.len():
            drop.append(name)
        elif name == "weight" and (column == DEFAULT_WEIGHT).all():
            drop.append(name)
    return df.drop(drop)


def write_csv(df: pl.DataFrame, path: str | Path) -> None:
    """Write a canonical CSV (validated first, so what we write we can read)."""
    frame = compact(validate(df, f"{path} (jobs being written)"))
    Path(path).write_text(frame.write_csv(), encoding="utf-8", newline="")


def write_parquet(df: pl.DataFrame, path: str | Path) -> None:
    frame = compact(validate(df, f"{path} (jobs being written)"))
    frame.write_parquet(path)


def write(df: pl.DataFrame, path: str | Path) -> None:
    """CSV or Parquet by extension."""
    (write_parquet if is_parquet(path) else write_csv)(df, path)
