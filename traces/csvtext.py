"""Delimited text read cell by cell as strings, each row remembering its line in the file.

Trace errors must name the line a person would open in an editor, and polars' own CSV reader
neither reports where a bad row is nor counts blank or comment lines. So files are read as text
here: blank lines and `#` comment lines are skipped, each row keeps its 1-based line number
(the header is line 1 when it comes first), and every cell stays a string so the schema can
say exactly which cell did not convert. Files without quote characters (all the formats we
write and read) are split with polars, vectorised; a file with quotes goes through Python's
`csv` module, which understands quoted separators and line breaks.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import TraceError, UsageError


@attrs.frozen
class Cells:
    """The text of a delimited file: String columns named by the header, and each row's line."""

    frame: pl.DataFrame
    lines: np.ndarray
    header_line: int


def read_text(path: str | Path) -> str:
    """The file as text (UTF-8, an optional BOM removed), or a `TraceError` saying what is wrong."""
    return decode_text(path, read_bytes(path))


def decode_text(path: str | Path, data: bytes, first_line: int = 1) -> str:
    """`data`, read from the file `path`, as `read_text` gives it; `first_line`: the line of the
    file that `data` begins (a piece of whole lines, after the first: no byte-order mark then)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line, _ = where_undecodable(err, first_line)
        byte = undecodable_byte(err, first_line)
        raise TraceError(str(path), f"is not UTF-8 text ({byte} cannot be decoded)", row=line) from None
    nul = text.find("\x00")
    if nul >= 0:  # (valid UTF-8, but no trace holds one: UTF-16 text without its byte-order mark)
        raise TraceError(
            str(path),
            "holds a NUL byte, which no text trace has (UTF-16 text?); save it as UTF-8",
            row=first_line + text.count("\n", 0, nul),
        )
    return text.removeprefix("\ufeff") if first_line == 1 else text


def where_undecodable(err: UnicodeDecodeError, first_line: int = 1) -> tuple[int, int]:
    """The 1-based line and column of the byte that `err` could not decode, as an editor shows
    them (and as the .sched reader says them): lines end at a newline, and the column counts
    the characters before it on its line (a byte-order mark at the file's start is none).
    `first_line`: the line of the file that the decoded bytes begin."""
    before = bytes(err.object[: err.start])
    line_start = before.rfind(b"\n") + 1
    start = before[line_start:].decode("utf-8", errors="replace")
    if line_start == 0 and first_line == 1:
        start = start.removeprefix("\ufeff")
    return first_line + before.count(b"\n"), len(start) + 1


def undecodable_byte(err: UnicodeDecodeError, first_line: int = 1) -> str:
    """The byte that `err` could not decode, by its value and place ("byte 0xd0 at line 1, column 25")."""
    line, column = where_undecodable(err, first_line)
    return f"byte 0x{err.object[err.start]:02x} at line {line}, column {column}"


def check_trace_file(path: str | Path) -> None:
    """A `TraceError` unless `path` names a file: what reading it would say, said before any work."""
    if not str(path).strip():  # (often an unset shell variable: to pathlib, the current folder)
        raise UsageError("the trace path is empty: give a trace file")
    p = Path(path)
    try:
        folder = p.is_dir()
    except OSError as err:  # (a name too long for the system)
        raise TraceError(str(path), f"cannot be read: {err.strerror or err}") from None
    if folder:
        raise TraceError(str(path), "is a folder, not a trace file")
    if not p.exists():
        raise TraceError(str(path), "no such file")
    if not p.is_file():  # (/dev/null, a pipe: a TraceSource takes none, and would blame --trace's override)
        raise TraceError(str(path), "is not a regular file (a device or a pipe): give a trace file")


def read_bytes(path: str | Path, size: int | None = None) -> bytes:
    """The file's bytes (with `size`, its first `size` bytes at most), or a `TraceError`."""
    p = Path(path)
    try:
        if size is None:
            data = p.read_bytes()
        else:
            with open(p, "rb") as f:
                data = f.read(size)
    except (FileNotFoundError, IsADirectoryError):
        check_trace_file(path)
        raise
    except OSError as err:
        raise TraceError(str(path), f"cannot be read: {err.strerror or err}") from None
    check_start(path, data)
    return data


def check_start(path: str | Path, data: bytes) -> None:
    """A `TraceError` if the file's first bytes `data` say it is no UTF-8 text: compressed, or
    in a wider Unicode encoding."""
    if data[:2] == b"\x1f\x8b":  # gzip's magic number: a compressed trace read as text is noise
        raise TraceError(str(path), "is gzip-compressed; decompress it first (gunzip)")
    for mark, encoding in _WIDE_MARKS:  # (a byte-order mark: every reader takes UTF-8 only)
        if data.startswith(mark):
            raise TraceError(str(path), f"is {encoding} text; save it as UTF-8 first (e.g. iconv -f {encoding} -t UTF-8)")


# Byte-order marks of the wider Unicode encodings (UTF-32's first: UTF-16 LE's is a prefix of its).
_WIDE_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


# A carriage return that ends no line: one not followed by a newline, nor at the file's end.
_BARE_CR = re.compile(r"\r(?![\n\r]|\s*\Z)")


def check_line_ends(path: str | Path, text: str, first_line: int = 1) -> None:
    """A `TraceError` if `text` (from line `first_line` of the file on) has lines ended by
    carriage returns alone (classic Mac OS line endings, which some spreadsheets still write):
    split at newlines, the whole file would be one line, and the message about its "header"
    would make no sense."""
    found = _BARE_CR.search(text) if "\r" in text else None
    if found:
        raise TraceError(
            str(path),
            "holds a carriage return (\\r) that ends no line: its lines end in \\r alone (old Mac line "
            "endings), which no trace reader takes as a line break; save it with \\n or \\r\\n line endings",
            row=first_line + text.count("\n", 0, found.start()),
        )


def head_text(path: str | Path, comment: str | None = "#", size: int = 65536) -> str:
    """The file's text up to the end of its first line that is neither blank nor (with
    `comment`) a comment: read in growing pieces from the start, never the whole of a long trace."""
    while True:
        data = read_bytes(path, size)
        start = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # (a BOM)
        while start < len(data):
            end = data.find(b"\n", start)
            if end < 0:
                break  # (the line goes on past what was read, or the file ends here)
            line = data[start : end + 1].strip()
            if line and not (comment and line.startswith(comment.encode())):
                return decode_text(path, data[: end + 1])
            start = end + 1
        if len(data) < size:
            return decode_text(path, data)
        size *= 8


def data_lines(text: str, comment: str | None = "#") -> tuple[pl.Series, np.ndarray]:
    """The lines that hold data (not blank, not comments) and their 1-based line numbers."""
    lines = pl.Series("line", text.split("\n"), dtype=pl.String).str.strip_suffix("\r")
    keep = lines.str.strip_chars().str.len_bytes() > 0
    if comment:
        keep = keep & ~lines.str.strip_chars_start().str.starts_with(comment)
    numbers = np.flatnonzero(keep.to_numpy()) + 1
    return lines.filter(keep), numbers


def read_cells(path: str | Path, separator: str = ",", text: str | None = None) -> Cells:
    """Read a delimited file with a header line into String columns (see the module docstring)."""
    path = str(path)
    if text is None:
        text = read_text(path)
    rows: pl.Series | list[list[str]]
    if '"' in text:
        header, rows, numbers = _split_quoted(path, text, separator)
    else:  # (a quoted value may hold a carriage return: the csv module finds those outside one)
        check_line_ends(path, text)
        lines, numbers = data_lines(text)
        if lines.len() == 0:
            raise TraceError(path, "is empty (no header line)")
        header = lines[0].split(separator)
        rows = lines.slice(1).str.split(separator)
    header_line = int(numbers[0])
    names = _check_header(path, [h.strip() for h in header], header_line)
    return Cells(_columns(path, names, rows, numbers[1:]), np.asarray(numbers[1:], dtype=np.int64), header_line)


def _split_quoted(path: str, text: str, separator: str) -> tuple[list[str], list[list[str]], np.ndarray]:
    """Records as Python's `csv` reads them, strictly (a quote left open is an error, not the
    rest of the file read as one value). Blank and comment lines are skipped where a record
    would begin, as `data_lines` skips them, so that a file reads the same with quotes or without."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    first = 0  # the line the record being read began on (0-based)
    at_start = True
    position = 0

    def feed():
        nonlocal first, at_start, position
        while position < len(lines):
            line = lines[position]
            position += 1
            if at_start:
                bare = line.strip()
                if not bare or bare.startswith("#"):
                    continue
                first, at_start = position - 1, False
            yield line + "\n"

    reader = csv.reader(feed(), delimiter=separator, strict=True)
    records: list[list[str]] = []
    numbers: list[int] = []
    while True:
        at_start = True
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            if position >= len(lines):
                raise TraceError(path, "a quoted value in this row is not closed by the end of the file", row=first + 1) from None
            if "new-line character seen in unquoted field" in str(err):  # (a line ended by "\r" alone)
                check_line_ends(path, "\n".join(lines[first:position]), first + 1)
            raise TraceError(path, f"cannot be read as CSV: {err}", row=position) from None
        records.append(record)
        numbers.append(first + 1)
    if not records:
        raise TraceError(path, "is empty (no header line)")
    return records[0], records[1:], np.asarray(numbers, dtype=np.int64)


def _check_header(path: str, names: list[str], line: int) -> list[str]:
    seen: set[str] = set()
    for position, name in enumerate(names, start=1):
        if not name:
            raise TraceError(path, f"the header's column {position} has no name{_unnamed_why(position, names)}", row=line)
        if name in seen:
            raise TraceError(path, "appears twice in the header", row=line, column=name)
        seen.add(name)
    return names


def _unnamed_why(position: int, names: list[str]) -> str:
    """What most likely left the header's column at `position` (from 1) without a name."""
    if position == len(names) > 1:
        return " (a comma at the end of the line?)"
    if position == 1 and len(names) > 1:  # (pandas' to_csv and R's write.csv write each row's index first)
        return " (a row index, as pandas' to_csv and R's write.csv write by default? write the file without it: index=False, row.names=FALSE)"
    return ""


def _columns(path: str, names: list[str], rows: pl.Series | list[list[str]], numbers: np.ndarray) -> pl.DataFrame:
    """Rows (a List[String] series or a list of lists) as String columns, after checking that
    every row has as many values as the header has names."""
    width = len(names)
    if isinstance(rows, pl.Series):
        counts = rows.list.len().to_numpy()
    else:
        counts = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    wrong = np.flatnonzero(counts != width)
    if wrong.size:
        i = int(wrong[0])
        extra = counts[i] == width + 1 and _last_cell(rows, i) == ""
        raise TraceError(
            path,
            f"has {counts[i]} value{'s' if counts[i] != 1 else ''} but the header names {width} columns"
            + (" (the last one empty: a comma at the end of the line?)" if extra else ""),
            row=int(numbers[i]),
        )
    if isinstance(rows, pl.Series):
        return pl.DataFrame([rows.list.get(j).alias(name) for j, name in enumerate(names)]) if len(rows) else _empty(names)
    if not rows:
        return _empty(names)
    return pl.DataFrame({name: list(column) for name, column in zip(names, zip(*rows))}, schema={n: pl.String for n in names})


def _last_cell(rows: pl.Series | list[list[str]], i: int) -> str:
    row = rows[i].to_list() if isinstance(rows, pl.Series) else rows[i]
    return row[-1].strip() if row else ""


def _empty(names: list[str]) -> pl.DataFrame:
    return pl.DataFrame(schema={name: pl.String for name in names})


# What a numeric cell must be: a count (a whole number, at least 1), an index (a whole number,
# 0 or more), a time (0 or more) or an amount (more than 0); each as a test failed by a bad
# value, and the words for it.
NUMBER_KINDS = {
    "count": (lambda v: (v < 1) | (v % 1 != 0), "a whole number of at least 1"),
    "index": (lambda v: (v < 0) | (v % 1 != 0) | (v >= 2.0**63), "a whole number, 0 or more"),
    "time": (lambda v: v < 0, "a number, 0 or more"),
    "amount": (lambda v: v <= 0, "a number more than 0"),
}


def number_column(cells: pl.DataFrame, column: str, lines: np.ndarray, origin: str, kind: str) -> np.ndarray:
    """A column of cells as finite numbers of a `NUMBER_KINDS` kind, or a `TraceError` naming
    the first bad cell's line (`lines[i]` is row i's). Spaces around a number are no part of it
    (as the schema reads a canonical trace's cells)."""
    given = cells.get_column(column)
    values = (given.str.strip_chars() if given.dtype == pl.String else given).cast(pl.Float64, strict=False)
    fails, words = NUMBER_KINDS[kind]
    bad = values.is_null() | ~values.is_finite().fill_null(False) | fails(values).fill_null(True)
    if bad.any():
        i = int(bad.arg_true()[0])
        cell = cells.get_column(column)[i]
        said = f"has no value (it must be {words})" if cell is None or not str(cell).strip() else f"{cell!r} is not {words}"
        raise TraceError(origin, said, row=int(lines[i]), column=column)
    return values.to_numpy()


def read_json_list(path: str, what: str) -> list:
    """A JSON file that holds a list (of jobs): `what` names what the file should be, for the
    messages (a cluster_job_log, a Helios job list)."""
    import json

    text = read_text(path)  # (UTF-8, as every reader and every message's line number takes it)
    if not text.strip():
        raise TraceError(path, f"is empty; {what} is a JSON list of jobs")
    try:
        records = json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceError(path, f"is not valid JSON: {err.msg} (column {err.colno})", row=err.lineno) from None
    except RecursionError:  # lists or objects nested thousands deep: no job list is
        raise TraceError(path, f"is not valid JSON for {what}: it is nested too deeply") from None
    if not isinstance(records, list):
        raise TraceError(path, f"holds a JSON {json_kind(records)}; {what} is a list of jobs")
    return records


def located_in_json(err: TraceError) -> TraceError:
    """An error that names a record of a JSON list by its number, named by the line the record
    begins on (what `file:N:` means everywhere), its number kept in the message; another record
    it names (`also`) becomes a line the same way. The lines are found only when an error needs
    one: reading the list itself does not track them."""
    if err.row is None:
        return err
    message, also = err.message, None
    if err.also is not None:  # (named again, by its line, as the new error ends its message)
        message = message.removesuffix(f": here and at {err.path}:{err.also}")
        also = json_record_line(err.path, err.also)
    if not message.startswith("record "):
        message = f"record {err.row}: {message}"
    return TraceError(err.path, message, row=json_record_line(err.path, err.row), column=err.column, also=also)


def json_record_line(path: str, number: int) -> int:
    """The line on which record `number` (from 1) of the JSON list in `path` begins."""
    import json
    import re

    text = read_text(path)
    decoder = json.JSONDecoder()

    between = re.compile(r"[\s,]*")

    def past_separators(at: int) -> int:
        found = between.match(text, at)  # (always found: it may be empty)
        return found.end() if found else at

    at = past_separators(text.index("[") + 1)
    for _ in range(number - 1):
        _, at = decoder.raw_decode(text, at)
        at = past_separators(at)
    return text.count("\n", 0, at) + 1


def json_kind(value) -> str:
    """What a JSON value is, in JSON's words (for messages)."""
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )
