"""Alibaba PAI's 2020 GPU trace (Weng et al., NSDI'22): the task table, `pai_task_table.csv`.

The columns (alibaba/clusterdata, `cluster-trace-gpu-v2020/data/pai_task_table.header` and the
folder's README) are::

    job_name, task_name, inst_num, status, start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type

The released CSV has no header line (the names are in the separate `.header` file); a file
with that header line first reads too. Times are seconds shifted by a constant; a start_time of
0 means the task never started. `plan_cpu` is CPU cores in percent (600 = 6 cores),
`plan_mem` GB of memory, `plan_gpu` GPUs in percent (50 = half a GPU), each per instance, and a
task runs `inst_num` instances.

A job is all the tasks of one `job_name`. Mapping: gpus = Σ inst_num × ceil(plan_gpu / 100)
(an instance asking for part of a GPU still takes one whole GPU here), cpus = Σ inst_num ×
plan_cpu / 100, memory_gb = Σ inst_num × plan_mem; arrival_s = the job's first task start
(seconds after the first job's), duration_s = its last task end minus its first task start.
The task table has no submission times (those are in `pai_job_table`), so the queueing the
jobs saw in Alibaba's cluster is not part of their arrival times. job_id is the order of
arrival (0, 1, 2, ...); the original name is kept as `name`, with `gpu_share` (the fractional
GPUs asked for, Σ inst_num × plan_gpu / 100) and `gpu_type` (of the job's first GPU task),
which the run then keeps the job to (traces/gputypes.py: on a cluster without that type, PAI's
`MISC` of older GPUs included, the run refuses the job).

Jobs that asked for no GPU, or never ran (no task with a start and a later end), are skipped
and counted; a task that asks for GPUs with no inst_num is an error, not a job skipped. The data has no licence, so no rows of it ship with Roundhouse.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import data_lines, head_text, read_cells, read_text
from roundhouse.traces.schema import INT64_LIMIT, cast_column, validate, warn_near_misses

COLUMNS: tuple[str, ...] = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
STATUSES = frozenset({"Terminated", "Failed", "Running", "Waiting"})
SKIPPED = "jobs that asked for no GPU or never ran"
_NUMBERS = ("inst_num", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu")
# Error messages about a job's totals name the field they come from.
SOURCE_NAMES = {
    "arrival_s": "start_time",
    "gpus": "plan_gpu",
    "cpus": "plan_cpu",
    "memory_gb": "plan_mem",
    "duration_s": "end_time",
}


@attrs.frozen
class PaiTrace:
    """The converted jobs and how many were skipped (no GPU asked for, or never ran)."""

    frame: pl.DataFrame
    skipped: int


def looks_like(fields: list[str], name: str = "") -> bool:
    """Whether a CSV's first line is a PAI task table's: its header, or (the released file has
    none) ten fields with a PAI status fourth, or ten fields in a file named like the table
    (but not a header with the canonical job_id or arrival_s: a canonical trace converted from
    the table may keep its name)."""
    names = [f.strip() for f in fields]
    if "plan_gpu" in names and "job_name" in names:
        return True
    if {"job_id", "arrival_s"} & set(names):
        return False
    return len(names) == len(COLUMNS) and (names[3] in STATUSES or name.startswith("pai_task_table"))


def file_columns(path: str | Path) -> tuple[str, ...]:
    lines, _ = data_lines(head_text(path))  # (its first line only: a task table is large)
    first = [f.strip() for f in lines[0].split(",")] if len(lines) else []
    return tuple(first) if "plan_gpu" in first else COLUMNS


def read(path: str | Path) -> pl.DataFrame:
    return parse(path).frame


def parse(path: str | Path) -> PaiTrace:
    """Read a task table; errors name the line and the column."""
    path = str(path)
    text = read_text(path)
    lines, _ = data_lines(text)
    has_header = len(lines) > 0 and "plan_gpu" in lines[0]
    if has_header:
        cells = read_cells(path, text=text)
        rows = cells.lines
    else:  # the released file: the header is a separate file, so lend it the names
        try:
            cells = read_cells(path, text=",".join(COLUMNS) + "\n" + text)
        except TraceError as err:  # say where in the file itself, which has no header line
            message = err.message.replace("the header names", "a PAI task table has")
            raise TraceError(path, message, row=None if err.row is None else err.row - 1, column=err.column) from None
        rows = cells.lines - 1
    raw = cells.frame
    for name in COLUMNS:
        if name not in raw.columns:
            found = ", ".join(f"'{c}'" for c in raw.columns)
            raise TraceError(path, f"missing column '{name}' of PAI's task table; columns found: {found}")
    warn_near_misses(raw.columns, path, COLUMNS, fixed="PAI's task table")
    values = {name: cast_column(raw.get_column(name), pl.Float64, path, rows, name) for name in _NUMBERS}
    for name in _NUMBERS:
        bad = (values[name].is_nan() | values[name].is_infinite() | (values[name] < 0)).fill_null(False)
        if bad.any():
            i = int(bad.arg_true()[0])
            raise TraceError(path, f"must be a finite number, 0 or more, got {values[name][i]:g}", row=int(rows[i]), column=name)
    # A count of instances is whole: a fraction would otherwise reach the job's GPUs, and the
    # error about them would blame plan_gpu.
    fraction = (values["inst_num"] % 1 != 0).fill_null(False)
    if fraction.any():
        i = int(fraction.arg_true()[0])
        raise TraceError(
            path, f"{values['inst_num'][i]:g} is not a whole number of instances", row=int(rows[i]), column="inst_num"
        )
    job_name = raw.get_column("job_name").str.strip_chars()
    nameless = job_name.is_null() | (job_name.str.len_bytes() == 0)
    if nameless.any():
        i = int(nameless.arg_true()[0])
        raise TraceError(path, "has no value (every task names its job)", row=int(rows[i]), column="job_name")

    gpu = values["plan_gpu"].fill_null(0.0)
    # A task that asks for GPUs but says not how many instances would count as none, and its
    # job be skipped as one that asked for no GPU: a damaged cell is an error instead.
    uncounted = (values["inst_num"].is_null() & (gpu > 0)).fill_null(False)
    if uncounted.any():
        i = int(uncounted.arg_true()[0])
        raise TraceError(
            path, "has no value (a task that asks for GPUs runs some number of instances)", row=int(rows[i]), column="inst_num"
        )
    instances = values["inst_num"].fill_null(0.0)
    per_instance = (gpu / 100.0).ceil()
    # A task's GPUs past a count's range would be blamed on plan_gpu as a total no cell holds:
    # the error names the task's own cells, and the one that makes the total so large.
    huge = (instances * per_instance >= INT64_LIMIT).fill_null(False)
    if huge.any():
        i = int(huge.arg_true()[0])
        column = "plan_gpu" if per_instance[i] >= instances[i] else "inst_num"
        raise TraceError(
            path,
            f"{instances[i]:g} instances of {per_instance[i]:g} GPU(s) each (plan_gpu {gpu[i]:g}) come to "
            f"{instances[i] * per_instance[i]:g} GPUs, more than a count of GPUs holds (at most 2^63 - 1)",
            row=int(rows[i]),
            column=column,
        )
    start, end = values["start_time"], values["end_time"]
    backwards = ((start > 0) & (end > 0) & (end < start)).fill_null(False)
    if backwards.any():
        i = int(backwards.arg_true()[0])
        raise TraceError(path, f"{end[i]:g} is before the task's start_time {start[i]:g}", row=int(rows[i]), column="end_time")
    ran = ((start > 0) & (end > start)).fill_null(False)
    tasks = pl.DataFrame(
        {
            "line": pl.Series(rows, dtype=pl.Int64),
            "name": job_name,
            "gpus": instances * per_instance,
            "gpu_share": instances * gpu / 100.0,
            "cpus": instances * values["plan_cpu"] / 100.0,
            "memory_gb": instances * values["plan_mem"],
            "start": pl.select(pl.when(ran).then(start)).to_series(),
            "end": pl.select(pl.when(ran).then(end)).to_series(),
            "gpu_type": pl.select(pl.when(gpu > 0).then(raw.get_column("gpu_type").str.strip_chars())).to_series(),
        }
    )
    jobs = tasks.group_by("name", maintain_order=True).agg(
        pl.col("line").min(),
        pl.col("gpus").sum(),
        pl.col("gpu_share").sum(),
        _sum_or_null("cpus"),
        _sum_or_null("memory_gb"),
        pl.col("start").min(),
        pl.col("end").max(),
        pl.col("gpu_type").drop_nulls().first(),
    )
    total = jobs.height
    jobs = jobs.filter((pl.col("gpus") > 0) & pl.col("start").is_not_null()).sort("start", "line", maintain_order=True)
    first = jobs.get_column("start").min() if jobs.height else 0.0
    frame = jobs.select(
        job_id=pl.int_range(pl.len(), dtype=pl.Int64),
        arrival_s=pl.col("start") - first,
        gpus=pl.col("gpus"),
        duration_s=pl.col("end") - pl.col("start"),
        cpus=pl.col("cpus"),
        memory_gb=pl.col("memory_gb"),
        name=pl.col("name"),
        gpu_share=pl.col("gpu_share"),
        gpu_type=pl.col("gpu_type"),
    )
    rows_of_jobs = np.asarray(jobs.get_column("line").to_numpy(), dtype=np.int64)
    return PaiTrace(validate(frame, path, rows_of_jobs, source_names=SOURCE_NAMES), total - jobs.height)


def _sum_or_null(name: str) -> pl.Expr:
    """A job's total, or nothing when none of its tasks gave the value."""
    return pl.when(pl.col(name).is_null().all()).then(None).otherwise(pl.col(name).sum()).alias(name)
