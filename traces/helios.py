"""SenseTime's Helios jobs (Hu et al., SC'21): the public `cluster_log.csv`, and the JSON job
lists that Dally's workloads are made from.

`cluster_log.csv` (S-Lab-System-Group/HeliosData, README "Schema and Description") has a header
and the columns::

    job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time,
    duration, queue

with times as "YYYY-MM-DD HH:MM:SS", `duration` = end_time - start_time and `queue` =
start_time - submit_time in seconds, and `state` one of COMPLETED, CANCELLED, FAILED, TIMEOUT,
NODE_FAIL. Mapping: job_id → job_id (Slurm's, in submission order), submit_time → arrival_s
(seconds after the first submission of a job kept: a skipped record, below, does not count, so
the first job kept arrives at 0, as in traces/pai.py), gpu_num → gpus, duration → duration_s,
cpu_num → cpus; user, vc, state, node_num and queue are kept as extra columns.

Dally's JSON (aakash-sharma/cluster-sim, e.g. `sense_500jobs_0start0arrival-withBert.json`) is
a list of objects holding a Helios record's fields (all as text) plus the workload's own:
`model`, `batchsize`, `total_iterations`, `time_per_iteration`, `max_parallelism` (the GPU
demand) and `arrival_time` (seconds). Mapping, record by record (a record without the first
field, or with it empty, gives the second): max_parallelism (else gpu_num) → gpus, arrival_time
(else submit_time, as above) → arrival_s, duration → duration_s, model → model,
total_iterations → iterations, batchsize → batch_size, cpu_num → cpus, and time_per_iteration →
the extra column `iteration_time_s`; user, state, dataset and node_num are kept. Jobs whose
arrivals come some from `arrival_time` (counted from the workload's start) and some from
`submit_time` (counted from the first submission kept) are read so, with a warning on stderr
giving how many take each: nothing in the file says how the two clocks meet. In Dally's files
time_per_iteration × total_iterations equals duration, and Dally's simulator runs a job on g
GPUs in time_per_iteration × total_iterations / g before communication. The Themis-style
`cross_*_slowdown` fields and the submission's calendar parts are dropped.

Model names become Dally's Table I names: VGG → VGG11 and BERT → BERT-large (the schema then
writes ResNet50 and ResNet18 as ResNet-50 and ResNet-18, as everywhere).

Jobs that asked for no GPU (Helios also ran CPU jobs) or never ran (duration 0, or in the CSV a
CANCELLED job with no start_time and no duration) are skipped and counted; any other empty
duration in the CSV is an error at its line. The Helios data has no licence, so no rows of it
ship with Roundhouse; read the files in place.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import json_kind as _kind
from roundhouse.traces.csvtext import located_in_json, read_bytes, read_cells, read_json_list
from roundhouse.traces.philly import collection_paused
from roundhouse.traces.schema import cast_column, missing_hint, validate, warn_near_misses, warn_once

CSV_COLUMNS: tuple[str, ...] = (
    "job_id",
    "user",
    "vc",
    "gpu_num",
    "cpu_num",
    "node_num",
    "state",
    "submit_time",
    "start_time",
    "end_time",
    "duration",
    "queue",
)
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
# Dally's trace names two models more briefly than its Table I does.
MODEL_NAMES: dict[str, str] = {"VGG": "VGG11", "BERT": "BERT-large"}
SKIPPED = "jobs that asked for no GPU or never ran"

# canonical column ← the file's field, in order of preference; and the extras kept as they are.
_CSV_FIELDS = {"job_id": "job_id", "gpus": "gpu_num", "duration_s": "duration", "cpus": "cpu_num"}
_CSV_EXTRAS = ("user", "vc", "state", "node_num", "queue")
_JSON_FIELDS = {
    "job_id": ("job_id",),
    "gpus": ("max_parallelism", "gpu_num"),
    "duration_s": ("duration",),
    "model": ("model",),
    "iterations": ("total_iterations",),
    "batch_size": ("batchsize",),
    "cpus": ("cpu_num",),
    "iteration_time_s": ("time_per_iteration",),
}
_JSON_EXTRAS = ("user", "state", "dataset", "node_num")
# Keys of a Helios or Dally record that Philly's records (jobid, submitted_time, attempts) lack.
JSON_KEYS = ("job_id", "max_parallelism", "gpu_num", "arrival_time", "submit_time", "duration", "total_iterations")
_JSON_KEY = re.compile(r'"(' + "|".join(JSON_KEYS) + r')"\s*:')


@attrs.frozen
class HeliosTrace:
    """The converted jobs and how many records were skipped (no GPU, or never ran)."""

    frame: pl.DataFrame
    skipped: int


def looks_like(header: list[str]) -> bool:
    """Whether a CSV header is Helios' (used by format detection): its GPU and submission
    columns, or (one of those misspelt, say) all but two of its columns and not the canonical
    arrival_s, so that the reader names the column it lacks."""
    names = {h.strip() for h in header}
    if {"gpu_num", "submit_time"} <= names:
        return True
    return "arrival_s" not in names and len(names & set(CSV_COLUMNS)) >= len(CSV_COLUMNS) - 2


def looks_like_json(head: str) -> bool:
    """Whether the start of a JSON file holds Helios/Dally records (not Philly's): a key of
    theirs, even with the GPU field missing (the reader then says so)."""
    return '"attempts"' not in head and _JSON_KEY.search(head) is not None


def read(path: str | Path) -> pl.DataFrame:
    return parse(path).frame


def parse(path: str | Path) -> HeliosTrace:
    """A Helios `cluster_log.csv` or a Dally JSON job list, by its first non-blank byte."""
    path = str(path)
    if read_bytes(path).lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"[", b"{"):
        return _parse_json(path)
    return _parse_csv(path)


def _parse_csv(path: str) -> HeliosTrace:
    cells = read_cells(path)
    raw, lines = cells.frame, cells.lines
    names = {canonical: own for canonical, own in _CSV_FIELDS.items()}
    names["arrival_s"] = "submit_time"
    for needed in ("job_id", "gpu_num", "submit_time", "duration"):
        if needed not in raw.columns:
            found = ", ".join(f"'{c}'" for c in raw.columns)
            hint = missing_hint([needed], raw.columns, CSV_COLUMNS)
            raise TraceError(path, f"missing column '{needed}' of Helios' cluster_log; columns found: {found}{hint}")
    warn_near_misses(raw.columns, path, CSV_COLUMNS, fixed="Helios' cluster_log")
    submitted = _times(path, raw.get_column("submit_time"), lines, "submit_time")
    columns = {canonical: raw.get_column(own) for canonical, own in _CSV_FIELDS.items() if own in raw.columns}
    keep = _kept(path, columns, lines, names) & ~_cancelled_before_start(path, raw, lines)
    columns["arrival_s"] = _seconds_after_first(submitted, keep)
    columns.update({name: raw.get_column(name) for name in _CSV_EXTRAS if name in raw.columns})
    return _finish(path, pl.DataFrame({k: v.alias(k) for k, v in columns.items()}), lines, names, keep)


def _cancelled_before_start(path: str, raw: pl.DataFrame, lines: np.ndarray) -> pl.Series:
    """Which records have an empty `duration` because they never ran: their `state` is
    CANCELLED and (when the log has the column) their `start_time` is empty, a job cancelled
    while it waited. Any other record with an empty duration is an error at its line."""
    empty = _empty(raw.get_column("duration"))
    if not empty.any():
        return empty
    never = empty & False  # (without a state, no record says it was cancelled)
    if "state" in raw.columns:
        state = raw.get_column("state").cast(pl.String).str.strip_chars().str.to_uppercase()
        never = empty & (state == "CANCELLED").fill_null(False)
    if "start_time" in raw.columns:
        never = never & _empty(raw.get_column("start_time"))
    refused = empty & ~never
    if refused.any():
        i = int(refused.arg_true()[0])
        raise TraceError(
            path,
            "is empty: every Helios job has its run time here (end_time - start_time) but one cancelled "
            "before it started (state CANCELLED, no start_time), which is skipped",
            row=int(lines[i]),
            column="duration",
        )
    return never


def _empty(cells: pl.Series) -> pl.Series:
    """Which cells hold nothing (missing, or only blanks)."""
    text = cells.cast(pl.String).str.strip_chars()
    return (text.is_null() | (text.str.len_bytes() == 0)).fill_null(True)


def _parse_json(path: str) -> HeliosTrace:
    with collection_paused():  # (as for Philly's JSON: a long list read in a fraction of the time)
        return _parse_records_of(path)


def _parse_records_of(path: str) -> HeliosTrace:
    records = read_json_list(path, "a Helios job list")  # (freed on return, with the collector still off)
    try:
        return _parse_records(path, records)
    except TraceError as err:
        raise located_in_json(err) from None


def _parse_records(path: str, records: list) -> HeliosTrace:
    numbers = np.arange(1, len(records) + 1, dtype=np.int64)
    present = {key for record in records if isinstance(record, dict) for key in record}
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise TraceError(path, f"record {number}: is a JSON {_kind(record)}, expected an object (one job)", row=number)
    names: dict[str, str] = {}
    columns: dict[str, pl.Series] = {}
    used: dict[str, pl.Series] = {}  # per record, the field a column's value came from
    times: tuple[pl.Series | None, pl.Series | None] | None = None  # arrival_time, submit_time: for once the jobs kept are known
    fields_of = {**_JSON_FIELDS, "arrival_s": ("arrival_time", "submit_time")}
    for canonical, fields in fields_of.items():
        found = [f for f in fields if f in present]
        if not found:
            continue
        names[canonical] = found[0]
        texts = [_texts(path, records, f) for f in found]
        if canonical == "arrival_s":
            given = dict(zip(found, texts))
            times = (given.get(fields[0]), given.get(fields[1]))
        else:
            columns[canonical] = _first_given(texts)
        if len(found) > 1:
            which = [pl.when(_given(t)).then(pl.lit(f)) for t, f in zip(texts, found)]
            used[found[0]] = pl.select(pl.coalesce(which)).to_series()
    for needed, fields in (
        ("job_id", ("job_id",)),
        ("gpus", ("max_parallelism", "gpu_num")),
        ("arrival_s", ("arrival_time", "submit_time")),
    ):
        if records and needed not in columns and not (needed == "arrival_s" and times is not None):
            either = " or ".join(f"'{f}'" for f in fields)
            raise TraceError(path, f"no record has {either}, which every Helios job needs")
    if "model" in columns:
        columns["model"] = columns["model"].str.strip_chars().replace(MODEL_NAMES)
    columns.update({name: _texts(path, records, name) for name in _JSON_EXTRAS if name in present})
    try:
        keep = _kept(path, columns, numbers, names)
        if times is not None:
            columns["arrival_s"] = _arrivals(path, times[0], times[1], numbers, keep)
        frame = pl.DataFrame({k: v.alias(k) for k, v in columns.items()}) if records else pl.DataFrame()
        if not records:
            frame = pl.DataFrame(schema={"job_id": pl.String, "arrival_s": pl.String, "gpus": pl.String, "duration_s": pl.String})
        return _finish(path, frame, numbers, names, keep)
    except TraceError as err:
        raise _named_by_record(err, used) from None


def _given(values: pl.Series) -> pl.Series:
    """Which cells hold something (an empty text is nothing)."""
    if values.dtype == pl.String:
        return (values.str.strip_chars().str.len_bytes() > 0).fill_null(False)
    return values.is_not_null()


def _first_given(texts: list[pl.Series]) -> pl.Series:
    """Per record, the first of these fields that holds something: Dally's files name some
    columns one way in some records and the other in others."""
    if len(texts) == 1:
        return texts[0]
    return pl.select(pl.coalesce([pl.when(_given(t)).then(t) for t in texts])).to_series()


def _named_by_record(err: TraceError, used: dict[str, pl.Series]) -> TraceError:
    """The error about a column that several fields give, naming the field of the record at
    fault (the error names the first field when the record has none)."""
    if err.column not in used or err.row is None or err.also is not None:
        return err
    field = used[err.column][err.row - 1]
    return err if field is None else TraceError(err.path, err.message, err.row, field)


def _arrivals(path: str, arrival: pl.Series | None, submit: pl.Series | None, numbers: np.ndarray, keep: pl.Series) -> pl.Series:
    """Each record's arrival: its `arrival_time` (seconds), else its `submit_time` as seconds
    after the first submission of a record kept (`keep`; only a record that needs it must have a
    readable one). Arrival times stay text, for the schema to check in file order with the
    other columns."""
    if submit is None:
        assert arrival is not None
        return arrival
    if arrival is None:
        return _seconds_after_first(_times(path, submit, numbers, "submit_time"), keep)
    given = _given(arrival)
    if given.all():
        return arrival
    text = submit.str.strip_chars()
    submitted = _times(path, pl.select(pl.when(~given).then(text)).to_series(), numbers, "submit_time")
    first = pl.select(pl.coalesce(submitted, text.str.to_datetime(TIME_FORMAT, strict=False))).to_series().filter(keep).min()
    if first is None:  # (no job kept needs its submission: those without a time are the schema's to report)
        return pl.select(pl.when(given).then(arrival)).to_series()
    _warn_of_two_clocks(path, int((given & keep).sum()), int((~given & keep & submitted.is_not_null()).sum()))
    seconds = (submitted - first).dt.total_seconds(fractional=True).cast(pl.String)
    return pl.select(pl.when(given).then(arrival).otherwise(seconds)).to_series()


def _warn_of_two_clocks(path: str, by_arrival: int, by_submission: int) -> None:
    """Say that the jobs kept take their arrivals from two clocks, when they do: Dally's
    `arrival_time` counts from its workload's own start, and a submission is counted from the
    first submission of a job kept, and nothing in the file says how the two start lines meet."""
    if by_arrival and by_submission:
        warn_once(
            path,
            "arrival clocks",
            f"{by_arrival:,} job(s) arrive at their 'arrival_time' (seconds from the workload's start) and "
            f"{by_submission:,} at their 'submit_time' (seconds after the first submission of a job kept): "
            "the two may not start at the same moment; give every record the same one",
        )


def _kept(path: str, columns: dict[str, pl.Series], rows: np.ndarray, names: dict[str, str]) -> pl.Series:
    """Which records are jobs kept: not those that asked for no GPU or never ran (duration 0),
    after checking that those cells are numbers, so that a damaged cell is an error rather than
    a skipped job."""
    keep = pl.Series([True] * len(rows), dtype=pl.Boolean)
    for column in ("gpus", "duration_s"):
        if column in columns:
            values = cast_column(columns[column], pl.Float64, path, rows, names.get(column, column))
            keep = keep & (values != 0).fill_null(True)
    return keep


def _finish(path: str, frame: pl.DataFrame, rows: np.ndarray, names: dict[str, str], keep: pl.Series) -> HeliosTrace:
    """Skip the records not kept (`_kept`), then validate."""
    skipped = frame.height - int(keep.sum())
    frame, rows = frame.filter(keep), rows[keep.to_numpy()]
    return HeliosTrace(validate(frame, path, rows, source_names=names), skipped)


def _texts(path: str, records: list[dict], field: str) -> pl.Series:
    """One field of every record as text (Dally writes numbers as text; JSON numbers are fine
    too); a list, object or boolean is an error naming the record."""
    values = [record.get(field) for record in records]
    if set(map(type, values)) <= {str, type(None)}:  # (Dally's files: all text, taken at once)
        return pl.Series(field, values, dtype=pl.String)
    out: list[str | None] = []
    for number, record in enumerate(records, start=1):
        value = record.get(field)
        if value is None or isinstance(value, str):
            out.append(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(repr(value))
        else:
            raise TraceError(
                path, f"record {number}: is a JSON {_kind(value)}, expected text or a number", row=number, column=field
            )
    return pl.Series(field, out, dtype=pl.String)


def _times(path: str, text: pl.Series, rows: np.ndarray, column: str) -> pl.Series:
    """Parse times in bulk; an empty cell is missing, anything else unparsable is an error."""
    text = text.str.strip_chars()
    missing = text.is_null() | (text.str.len_bytes() == 0)
    parsed = text.str.to_datetime(TIME_FORMAT, strict=False)
    bad = ~missing & parsed.is_null()
    if bad.any():
        i = int(bad.arg_true()[0])
        raise TraceError(path, f"{text[i]!r} is not a time like '2020-06-09 18:41:01'", row=int(rows[i]), column=column)
    return parsed


def _seconds_after_first(times: pl.Series, keep: pl.Series) -> pl.Series:
    """Seconds after the first of the times of records kept (`keep`): a skipped record's time
    does not move the others'."""
    first = times.filter(keep).min()
    if first is None:  # no jobs kept, or no times: the schema reports the missing values
        return pl.Series(times.name, [None] * times.len(), dtype=pl.Float64)
    return (times - first).dt.total_seconds(fractional=True)
