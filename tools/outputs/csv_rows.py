"""The rows of a CSV file a run or a sweep wrote, checked whole before polars reads it."""

from __future__ import annotations

import csv
from pathlib import Path

from roundhouse.errors import UsageError, first_line


def refuse_short_rows(path: Path) -> None:
    """A CSV file's rows each with as many fields as its header (the last row of a file cut
    short has fewer, and would be read with its last values missing)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            for row in reader:
                if header is not None and row and len(row) != len(header):
                    what = "a row cut short" if len(row) < len(header) else "a row longer than the header"
                    raise UsageError(f"{path}:{reader.line_num}: {what} ({len(row)} fields, the header has {len(header)})")
    except (csv.Error, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot be read as CSV ({first_line(err)})") from None
