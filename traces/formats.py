"""One entry point for every trace format: `read_trace` / `write_trace`, with format detection.

Formats: `canonical` (our CSV or Parquet), `gavel` (`.trace`), `tiresias` (CSV with `num_gpu`
and `submit_time`), `philly` (`cluster_job_log` JSON), `helios` (Helios' `cluster_log.csv`, or
a JSON job list like Dally's), `pai` (Alibaba PAI 2020's `pai_task_table.csv`, with or without
its header), `pollux` (Pollux's workload CSV, `name,time,application,num_replicas,batch_size`),
`ones` (the ONES artifact's trace, `time,model,task,epoch_size,...,num_gpus`).
With format "auto" the extension decides, then the contents (Philly's file is
usually called just `cluster_job_log`); a file that fits none is an error that lists the
formats, never a guess. A file read in a format it was named with but whose contents are
another format's fails with an error that names the format found; so does a `.trace` file that
begins with a CSV format's header, and a header that is a CSV format's but for its names being
separated by tabs or written in capitals (its reader would say only that columns are missing).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import polars as pl

from roundhouse.errors import TraceError, UsageError, did_you_mean, first_line
from roundhouse.traces import canonical, gavel, helios, ones, pai, philly, pollux, tiresias
from roundhouse.traces.csvtext import check_trace_file, data_lines, head_text, read_bytes, read_cells, read_json_list
from roundhouse.traces.schema import REQUIRED_COLUMNS, validate

if TYPE_CHECKING:
    from roundhouse.traces.goodput import ElasticProfile

FORMATS: tuple[str, ...] = ("canonical", "gavel", "tiresias", "philly", "helios", "pai", "pollux", "ones")
WRITE_FORMATS: tuple[str, ...] = ("canonical", "gavel", "tiresias")
_SNIFF_BYTES = 65536
# What Pollux's and ONES' files call the canonical columns they hold as they are (ONES' model is
# its model and task, its batch size per GPU).
_OWN_NAMES = {
    "pollux": {"arrival_s": "time", "gpus": "num_replicas", "model": "application"},
    "ones": {"arrival_s": "time", "gpus": "num_gpus"},
}


@attrs.frozen
class LoadedTrace:
    """A canonical trace plus what reading it left behind (records skipped as never run)."""

    frame: pl.DataFrame
    format: str
    skipped: int = 0
    skipped_what: str = "jobs that never ran"


def check_format(name: str, allowed: tuple[str, ...] = FORMATS, auto: bool = True, flag: str = "") -> str:
    """`name` if it is a known format (or "auto"), else a `UsageError` that lists them (naming
    `flag`, the command-line option that gave it, if one did)."""
    choices = (("auto",) if auto else ()) + allowed
    if name in choices:
        return name
    hint = did_you_mean(name, choices)
    where = f"{flag}: " if flag else ""
    raise UsageError(f"{where}unknown trace format '{name}'; use one of {', '.join(choices)}" + (f" ({hint})" if hint else ""))


def check_write_format(name: str, writer: str = "write_trace", hint: str = "", flag: str = "") -> str:
    """`name` if traces are written in it (or "auto"): a format only read is a `UsageError`
    saying so and what `writer` writes (with `hint`, if given, on where else to get one), any
    other name one that lists the formats written; either names `flag`, if given."""
    if name in FORMATS and name not in WRITE_FORMATS:
        written = ", ".join(WRITE_FORMATS[:-1]) + f" or {WRITE_FORMATS[-1]}"
        where = f"{flag}: " if flag else ""
        raise UsageError(f"{where}{writer} writes {written} only; {name} is read-only" + (f" ({hint})" if hint else ""))
    return check_format(name, WRITE_FORMATS, flag=flag)


def detect_format(path: str | Path) -> str:
    """The format of a trace file, from its extension or else its first bytes."""
    path = str(path)
    suffix = Path(path).suffix.lower()
    if suffix in canonical.PARQUET_SUFFIXES:
        return "canonical"
    head, text, first = _start(path)
    if suffix == ".trace":
        _check_not_comma_separated(path, text, first)
        return "gavel"
    if suffix == ".json" and not text.lstrip().startswith(("[", "{")):
        _check_json_named_csv(path, text, first)
    if suffix == ".json" or text.lstrip().startswith("["):
        return _json_format(path, text)
    if head.startswith(canonical.PARQUET_MAGIC):
        return "canonical"
    _check_header_line(path, text, first)
    if first.count("\t") + 1 in gavel.LAYOUTS:
        return "gavel"
    if "," in first or suffix == ".csv":
        fields = _header_fields(first)
        if pai.looks_like(fields, Path(path).name) and not helios.looks_like(fields):
            return "pai"
        return _header_format(fields) or "canonical"
    raise TraceError(path, f"cannot tell the trace format from the name or the contents; name it (one of {', '.join(FORMATS)})")


def _header_format(fields: list[str]) -> str | None:
    """The format whose CSV header `fields` is, by its column names (PAI's, whose released
    table has no header, aside), else None (what format detection takes for canonical)."""
    for format, fits in (
        ("helios", helios.looks_like),
        ("pollux", pollux.looks_like),
        ("ones", ones.looks_like),
        ("tiresias", tiresias.looks_like),
    ):
        if fits(fields):
            return format
    return None


# The formats read from a CSV with a header (Helios' cluster_log among them).
_HEADED_CSV = ("canonical", "helios", "pollux", "ones", "tiresias")


def _check_header_line(path: str | Path, text: str, first: str) -> None:
    """A TraceError if the first line (`first`, of the file's starting `text`) is a CSV format's
    header written as its reader does not take it: its names separated by tabs (its fields would
    be taken for a Gavel trace line's, seven or ten of them, or the whole line for one column's
    name), or in capitals (names are matched exactly: the header would fit no format)."""
    tabs = "\t" in first and "," not in first
    fields = [name.strip() for name in (first.split("\t") if tabs else _header_fields(first))]
    format = _csv_header_format([name.lower() for name in fields])
    if format is None:
        return
    if tabs:
        why = "its names separated by tabs: a trace is comma-separated; save it with commas"
    elif _csv_header_format(fields) is None:
        capitals = ", ".join(f"'{name}'" for name in fields if name != name.lower())
        why = f"with names in capitals ({capitals}): column names are matched as written, in lower case; write them so"
    else:
        return
    raise TraceError(str(path), f"the header is a {format} trace's, {why}", row=_line_of(text, first))


def _check_not_comma_separated(path: str | Path, text: str, first: str) -> None:
    """A TraceError if a file named as a Gavel trace (.trace) begins with a CSV header (a
    Tiresias job file, say), which the Gavel reader would take for a line of one field."""
    if "\t" in first or "," not in first:
        return
    format = _csv_header_format(_header_fields(first))
    if format is not None:
        raise TraceError(
            str(path),
            f"is named .trace, as Gavel's traces are, but its first line is a {format} trace's CSV header: "
            f"read it as {format} (format={format}), or name it .csv",
            row=_line_of(text, first),
        )


def _check_json_named_csv(path: str, text: str, first: str) -> None:
    """A TraceError if a file named .json (which the JSON readers would call invalid JSON)
    begins with a CSV header: which format's, when the header says, and how to read it."""
    if "," not in first:
        return
    fields = _header_fields(first)
    format = _csv_header_format(fields) or ("pai" if pai.looks_like(fields, Path(path).name) else None)
    how = f"a {format} trace's CSV header: read it as {format} (format={format})" if format else "a CSV line: name its format"
    raise TraceError(
        path, f"is named .json, but it is no JSON: its first line is {how}, or name it .csv", row=_line_of(text, first)
    )


def _csv_header_format(fields: list[str]) -> str | None:
    """The format whose CSV header `fields` is, the canonical one's too (its required columns)."""
    fields = [name.strip() for name in fields]
    return _header_format(fields) or ("canonical" if set(REQUIRED_COLUMNS) <= set(fields) else None)


def _line_of(text: str, first: str) -> int:
    """The line of the file (whose starting `text` this is) that its first line of data, `first`, is."""
    return 1 + text.count("\n", 0, text.find(first))


def _start(path: str | Path) -> tuple[bytes, str, str]:
    """The first bytes of the file at `path`, as read, as text, and its first line that is
    neither blank nor a comment: what format detection goes by."""
    head = read_bytes(path, _SNIFF_BYTES)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    return head, text, next((line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")), "")


def _header_fields(line: str) -> list[str]:
    """The fields of a CSV's first line as its reader takes them: quoted names (as R's
    write.csv and pandas' QUOTE_ALL write them) lose their quotes, and a quoted comma is no
    separator."""
    if '"' not in line:
        return line.split(",")
    return next(csv.reader([line]), [])


# Keys of Philly's `cluster_job_log` records (traces/philly.py).
PHILLY_KEYS = ("jobid", "attempts", "submitted_time")
# What a JSON trace is, in messages about one that is not a list ("... is a list of jobs").
_JSON_TRACE = "a JSON trace (Philly's cluster_job_log or a Helios job list)"
_PHILLY_KEY = re.compile(r'"(' + "|".join(PHILLY_KEYS) + r')"\s*:')


def _json_format(path: str, head: str) -> str:
    """Philly's or Helios' JSON, by the keys at the start of the file, else of all its records:
    a file with records but neither's keys fits no format we read, and is not guessed at."""
    if helios.looks_like_json(head):
        return "helios"
    if _PHILLY_KEY.search(head):
        return "philly"
    records = read_json_list(path, _JSON_TRACE)  # (a file that is no JSON list says so)
    keys = {key for record in records if isinstance(record, dict) for key in record}
    if "attempts" not in keys and keys & set(helios.JSON_KEYS):
        return "helios"
    if not records or keys & set(PHILLY_KEYS):
        return "philly"  # (a list of no jobs reads as no jobs in either)
    found = ", ".join(f"'{k}'" for k in sorted(keys)[:5]) or "none"
    raise TraceError(
        path,
        f"cannot tell the trace format: its JSON records have none of Philly's keys ('jobid', 'attempts') "
        f"nor Helios' ('job_id', 'max_parallelism', 'gpu_num', ...); keys found: {found}; "
        f"name the format (one of {', '.join(FORMATS)})",
    )


def load_trace(path: str | Path, format: str = "auto", elastic: ElasticProfile | None = None) -> LoadedTrace:
    """Read any supported trace into the canonical schema, with what reading skipped. `elastic`:
    the elastic profile of the run the trace is for, if it has one. A Pollux workload names its
    applications (their batch ranges, epochs and GPU limits) in it, by default in Pollux's six
    built in; in a canonical trace a job of one of its applications needs no work column."""
    format = check_format(format)
    # (First: a pipe or a device would be read once to tell its format and again to read it,
    # the second time empty, or waiting for ever on a FIFO that has no writer left.)
    check_trace_file(path)
    if format == "auto":
        found = detect_format(path)
        try:
            return _read(path, found, elastic)
        except TraceError as err:
            raise _no_format_fits(err, path, found) from None
    parquet = read_bytes(path, 4) == canonical.PARQUET_MAGIC
    if format != "canonical" and parquet:
        # (rather than the text readers' "not UTF-8 text" about its first binary byte)
        raise TraceError(str(path), f"is a Parquet file, and only canonical traces are read from Parquet, not {format} traces")
    if format in _HEADED_CSV and not (parquet or canonical.is_parquet(path)):
        _, text, first = _start(path)
        _check_header_line(path, text, first)
    try:
        return _read(path, format, elastic)
    except TraceError as err:
        raise _naming_the_format_found(err, path, format, elastic) from None


def _naming_the_format_found(err: TraceError, path: str | Path, named: str, elastic: ElasticProfile | None) -> TraceError:
    """`err`, met reading `path` in the format `named`, saying which format the file is in when
    format detection finds another: an error of the header (its first line, or a column it
    lacks) of a file in one format read as another names only what it did not find."""
    # (A header of one column, then a line of more values: the file's first line is no CSV
    # header, as in a JSON log or a Gavel trace, and its second line is where that shows.)
    one_column = err.row == 2 and b"," not in read_bytes(path, 65536).split(b"\n", 1)[0]
    of_the_header = err.column is None and (err.row in (None, 1) or one_column)
    # (An error further in is the file's own unless its start is not the named format's at all:
    # the reader then took another format's header for data, or a JSON list for CSV lines.)
    if "read it as" in err.message or not (of_the_header or not _fits(path, named, elastic)):
        return err
    try:
        found = detect_format(path)
        if found == "canonical":  # (what any CSV not told apart is taken for: its header must be one)
            check_trace_header(path, found, elastic)
    except (TraceError, UsageError, OSError):
        return err
    if found == named:
        return err
    hint = f"by its contents it is a {found} trace: read it as {found} (format={found}, or no format)"
    _, text, first = _start(path)
    if found == "gavel" and "\t" in first and "," not in first:
        # (What the named reader made of a Gavel line, taken for a header, would only mislead:
        # its tab-separated fields read as one column's name, a hint to save it with commas.)
        line = f"its first line has {first.count(chr(9)) + 1} tab-separated fields, as a Gavel trace's lines have"
        return TraceError(err.path, f"is not a {named} trace: {line}; {hint}", row=_line_of(text, first))
    return TraceError(err.path, f"{err.message}; {hint}", row=err.row, column=err.column)  # (`also` is in its message)


def _fits(path: str | Path, format: str, elastic: ElasticProfile | None) -> bool:
    """Whether the start of the file at `path` is what a file in `format` starts with, by the
    signs format detection goes by (a header of its columns, tab-separated fields, a JSON list
    with its keys), whether or not detection, which takes the first format that fits, took it."""
    if format == "canonical":
        try:
            check_trace_header(path, format, elastic)
        except (TraceError, UsageError, OSError):
            return False
        return True
    _, text, first = _start(path)
    if text.lstrip().startswith("["):
        return (format == "helios" and helios.looks_like_json(text)) or (format == "philly" and bool(_PHILLY_KEY.search(text)))
    if format == "gavel":
        return Path(path).suffix.lower() == ".trace" or first.count("\t") + 1 in gavel.LAYOUTS
    fields = _header_fields(first)
    if format == "pai":
        return pai.looks_like(fields, Path(path).name)
    header_of = {
        "helios": helios.looks_like,
        "tiresias": tiresias.looks_like,
        "pollux": pollux.looks_like,
        "ones": ones.looks_like,
    }
    return format in header_of and header_of[format](fields)


def _read(path: str | Path, format: str, elastic: ElasticProfile | None) -> LoadedTrace:
    """The trace at `path` read in `format` (not "auto")."""
    if format == "philly":
        result = philly.parse(path)
        return LoadedTrace(result.frame, format, result.skipped, result.skipped_what)
    if format == "helios":
        found = helios.parse(path)
        return LoadedTrace(found.frame, format, found.skipped, helios.SKIPPED)
    if format == "pai":
        tasks = pai.parse(path)
        return LoadedTrace(tasks.frame, format, tasks.skipped, pai.SKIPPED)
    if format == "gavel":
        return LoadedTrace(gavel.read(path), format)
    if format == "tiresias":
        return LoadedTrace(tiresias.read(path), format)
    if format in ("pollux", "ones"):
        # The file's own lines and column names, for what only the schema's checks find.
        cells = read_cells(path)
        if format == "pollux":
            frame = pollux.parse_workload(cells.frame, str(path), elastic, lines=cells.lines)
        else:
            frame = ones.parse_trace(cells.frame, str(path), cells.lines)
        return LoadedTrace(validate(frame, str(path), cells.lines, source_names=_OWN_NAMES[format], elastic=elastic), format)
    if canonical.is_parquet(path) or read_bytes(path, 4) == canonical.PARQUET_MAGIC:
        return LoadedTrace(canonical.read_parquet(path, elastic), format)
    return LoadedTrace(canonical.read_csv(path, elastic), format)


def check_trace_header(path: str | Path, format: str = "auto", elastic: ElasticProfile | None = None) -> None:
    """A TraceError if a run could not read the trace for what its header says: the file is
    missing or unreadable, its format cannot be told, or (a canonical trace, read as a run reads
    it but without its rows) its header is not one the schema takes. Another format's columns
    were what told it apart, and its reader checks them. `elastic`: the run's elastic profile,
    if it has one (load_trace)."""
    check_trace_file(path)  # (what `--trace` checks of a trace before a run)
    found = detect_format(path) if format == "auto" else format
    if found != "canonical":
        return
    try:
        _check_canonical_header(path, elastic)
    except TraceError as err:
        raise (_no_format_fits(err, path, found) if format == "auto" else err) from None


def _check_canonical_header(path: str | Path, elastic: ElasticProfile | None) -> None:
    """check_trace_header's checks of a canonical trace's header (CSV or Parquet)."""
    if canonical.is_parquet(path) or read_bytes(path, 4) == canonical.PARQUET_MAGIC:
        try:
            canonical.check_parquet_file(path)  # (text named .parquet: said so, not polars' complaint)
            frame = pl.read_parquet(path, n_rows=0, glob=False)
        except (pl.exceptions.PolarsError, OSError, ValueError) as err:
            raise TraceError(str(path), f"cannot be read as Parquet: {first_line(err)}") from None
        validate(frame, str(path), elastic=elastic)
    else:
        cells = read_cells(path, text=head_text(path, size=_SNIFF_BYTES))
        validate(cells.frame, str(path), cells.lines, elastic=elastic)


def _no_format_fits(err: TraceError, path: str | Path, found: str) -> TraceError:
    """`err`, met reading `path` as the format detection `found`, saying also that no format's
    header fits it when detection took a CSV for canonical only for want of another (its header
    has none of the canonical columns every job needs): "missing column 'job_id'" alone reads as
    one column left out of a canonical trace, when the file is in a layout Roundhouse does not
    read, or in one whose header it could not tell apart (which naming the format then reads)."""
    if found != "canonical" or err.column is not None or err.row is not None or not err.message.startswith("missing column"):
        return err
    if canonical.is_parquet(path) or read_bytes(path, 4) == canonical.PARQUET_MAGIC:
        return err
    _, _, first = _start(path)
    fields = {name.strip().strip('"').strip().lower() for name in _header_fields(first)}
    # (One field: the separator hint already says what is wrong.)
    if len(fields) < 2 or fields & set(REQUIRED_COLUMNS):
        return err
    others = [f for f in FORMATS if f != "canonical"]
    formats = ", ".join(others[:-1]) + f" or {others[-1]}"
    return TraceError(
        err.path,
        f"{err.message}; its header fits none of the trace formats Roundhouse reads (a canonical trace has "
        f"{', '.join(REQUIRED_COLUMNS)}, and duration_s or model and iterations): if it is in one of "
        f"{formats}, name that format (`trace describe --format`, `trace convert --from`, TraceSource's format)",
    )


def file_columns(path: str | Path, format: str) -> tuple[str, ...]:
    """The columns of a trace file as the file names them (a CSV's header, a Parquet schema, the
    keys of Philly's records), or as its format does where the file has no header (Gavel's
    tab-separated fields). `format` is what `load_trace` found; the file has been read by it."""
    if format in ("philly", "helios") and read_bytes(path).lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"[":
        with philly.collection_paused():  # (a long list decoded as fast as its reader decodes it)
            return _json_keys(str(path))
    if format == "pai":
        return pai.file_columns(path)
    if format == "canonical" and (canonical.is_parquet(path) or read_bytes(path)[:4] == canonical.PARQUET_MAGIC):
        return tuple(pl.scan_parquet(path, glob=False).collect_schema())
    # (The first line only: the file has been read whole once already, and may be large.)
    comment = None if format == "gavel" else "#"  # (as each reader takes comments)
    lines, _ = data_lines(head_text(path, comment), comment)
    first = lines[0] if len(lines) else ""
    if format == "gavel":
        return gavel.LAYOUTS.get(first.count("\t") + 1, ())
    return tuple(name.strip() for name in next(csv.reader([first]), []))


def _json_keys(path: str) -> tuple[str, ...]:
    """The keys of a JSON job list's records, in the order first seen (the records freed on return)."""
    records = read_json_list(path, _JSON_TRACE)
    return tuple(dict.fromkeys(key for record in records if isinstance(record, dict) for key in record))


def read_trace(path: str | Path, format: str = "auto", elastic: ElasticProfile | None = None) -> pl.DataFrame:
    """Read any supported trace into the canonical schema (validated, sorted by arrival);
    `elastic`: the run's elastic profile, if it has one (load_trace)."""
    return load_trace(path, format, elastic).frame


def write_trace(df: pl.DataFrame, path: str | Path, format: str = "auto") -> list[str]:
    """Write a trace. "auto" and "canonical" write CSV or Parquet by extension (`.parquet`,
    `.pq`); "auto" writes Gavel's format for a `.trace` file. Returns, in words, what the
    format could not keep as it was (nothing for canonical files), for whoever asked to say."""
    format = check_write_format(format)
    if format == "auto":
        suffix = Path(path).suffix.lower()
        if suffix == ".trace":
            format = "gavel"
        elif suffix in (".csv",) + canonical.PARQUET_SUFFIXES:
            format = "canonical"
        else:
            raise UsageError(
                f"cannot tell which format to write '{path}' in from its extension; use .csv or .parquet "
                "(canonical) or .trace (gavel), or name the format"
            )
    if format in ("gavel", "tiresias") and canonical.is_parquet(path):
        raise UsageError(f"{path}: a {format} trace is text; a .parquet file holds a canonical trace")
    if format == "gavel":
        return gavel.write(df, path)
    if format == "tiresias":
        return tiresias.write(df, path)
    canonical.write(df, path)
    return []
