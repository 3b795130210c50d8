"""SenseTime's Helios jobs (Hu et al., SC'21): the public `cluster_log.csv`, and the JSON job
lists that Dally's workloads are made from.

`cluster_log.csv` (S-Lab-System-Group/HeliosData, README "Schema and Description") has a header
and the columns::

    job_id, user, vc, gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time,
    duration, queue

with times as "YYYY-MM-DD HH:MM:SS", `duration` = end_time - start_time and `queue` =
start_time - submit_time in seconds, and `state` one of COMPLETED, CANCELLED, FAILED, TIMEOUT,
NODE_FAIL. Mapping: job_id → job_id (Slurm's, in submission order), submit_time → arrival_s
(seconds after the first submission), gpu_num → gpus, duration → duration_s, cpu_num → cpus;
user, vc, state, node_num and queue are kept as extra columns.

Dally's JSON (aakash-sharma/cluster-sim, e.g. `sense_500jobs_0start0arrival-withBert.json`) is
a list of objects holding a Helios record's fields (all as text) plus the workload's own:
`model`, `batchsize`, `total_iterations`, `time_per_iteration`, `max_parallelism` (the GPU
demand) and `arrival_time` (seconds). Mapping: max_parallelism (else gpu_num) → gpus,
arrival_time (else submit_time, as above) → arrival_s, duration → duration_s, model → model,
total_iterations → iterations, batchsize → batch_size, cpu_num → cpus, and time_per_iteration →
the extra column `iteration_time_s`; user, state, dataset and node_num are kept. In Dally's files
time_per_iteration × total_iterations equals duration, and Dally's simulator runs a job on g
GPUs in time_per_iteration × total_iterations / g before communication. The Themis-style
`cross_*_slowdown` fields and the submission's calendar parts are dropped.

Model names become Dally's Table I names: VGG → VGG11 and BERT → BERT-large (the schema then
writes ResNet50 and ResNet18 as ResNet-50 and ResNet-18, as everywhere).

Jobs that asked for no GPU (Helios also ran CPU jobs) or never ran (duration 0) are skipped and
counted. The Helios data has no licence, so no rows of it ship with Roundhouse; read the files
in place.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import json_kind as _kind
from roundhouse.traces.csvtext import located_in_json, read_bytes, read_cells, read_json_list
from roundhouse.traces.schema import cast_column, validate

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


@attrs.frozen
class HeliosTrace:
    """The converted jobs and how many records were skipped (no GPU, or never ran)."""

    frame: pl.DataFrame
    skipped: int


def looks_like(header: list[str]) -> bool:
    """Whether a CSV header is Helios' (used by format detection)."""
    return {"gpu_num", "submit_time"} <= {h.strip() for h in header}


def looks_like_json(head: str) -> bool:
    """Whether the start of a JSON file holds Helios/Dally records (not Philly's)."""
    return '"attempts"' not in head and ('"max_parallelism"' in head or '"gpu_num"' in head)


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
            raise TraceError(path, f"missing column '{needed}' of Helios' cluster_log; columns found: {found}")
    submitted = _times(path, raw.get_column("submit_time"), lines, "submit_time")
    columns = {canonical: raw.get_column(own) for canonical, own in _CSV_FIELDS.items() if own in raw.columns}
    columns["arrival_s"] = _seconds_after_first(submitted)
    columns.update({name: raw.get_column(name) for name in _CSV_EXTRAS if name in raw.columns})
    return _finish(path, pl.DataFrame({k: v.alias(k) for k, v in columns.items()}), lines, names)


def _parse_json(path: str) -> HeliosTrace:
    records = read_json_list(path, "a Helios job list")
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
    for canonical, fields in _JSON_FIELDS.items():
        field = next((f for f in fields if f in present), None)
        if field is not None:
            names[canonical] = field
            columns[canonical] = _texts(path, records, field)
    if "arrival_time" in present:
        names["arrival_s"] = "arrival_time"
        columns["arrival_s"] = _texts(path, records, "arrival_time")
    elif "submit_time" in present:
        names["arrival_s"] = "submit_time"
        columns["arrival_s"] = _seconds_after_first(_times(path, _texts(path, records, "submit_time"), numbers, "submit_time"))
    for needed, fields in (
        ("job_id", ("job_id",)),
        ("gpus", ("max_parallelism", "gpu_num")),
        ("arrival_s", ("arrival_time", "submit_time")),
    ):
        if records and needed not in columns:
            either = " or ".join(f"'{f}'" for f in fields)
            raise TraceError(path, f"no record has {either}, which every Helios job needs")
    if "model" in columns:
        columns["model"] = columns["model"].str.strip_chars().replace(MODEL_NAMES)
    columns.update({name: _texts(path, records, name) for name in _JSON_EXTRAS if name in present})
    frame = pl.DataFrame({k: v.alias(k) for k, v in columns.items()}) if records else pl.DataFrame()
    if not records:
        frame = pl.DataFrame(schema={"job_id": pl.String, "arrival_s": pl.String, "gpus": pl.String, "duration_s": pl.String})
    return _finish(path, frame, numbers, names)


def _finish(path: str, frame: pl.DataFrame, rows: np.ndarray, names: dict[str, str]) -> HeliosTrace:
    """Skip jobs that asked for no GPU or never ran (after checking that those cells are numbers,
    so a damaged cell is an error rather than a skipped job), then validate."""
    keep = pl.Series([True] * frame.height, dtype=pl.Boolean)
    for column in ("gpus", "duration_s"):
        if column in frame.columns:
            values = cast_column(frame.get_column(column), pl.Float64, path, rows, names.get(column, column))
            keep = keep & (values != 0).fill_null(True)
    skipped = frame.height - int(keep.sum())
    frame, rows = frame.filter(keep), rows[keep.to_numpy()]
    return HeliosTrace(validate(frame, path, rows, source_names=names), skipped)


def _texts(path: str, records: list[dict], field: str) -> pl.Series:
    """One field of every record as text (Dally writes numbers as text; JSON numbers are fine
    too); a list, object or boolean is an error naming the record."""
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


def _seconds_after_first(times: pl.Series) -> pl.Series:
    if times.drop_nulls().len() == 0:  # no rows, or no times: the schema reports the missing values
        return pl.Series(times.name, [None] * times.len(), dtype=pl.Float64)
    return (times - times.min()).dt.total_seconds(fractional=True)
