"""Tiresias' job CSV (SymbioticLab/Tiresias, `simulator/60_job.csv`).

Header `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`; times in seconds
from 0, `interval` the gap to the next submission. Mapping: job_id → job_id, num_gpu → gpus,
submit_time → arrival_s, iterations → iterations, model_name → model, duration → duration_s.
`interval` is dropped on reading (it follows from the arrivals) and recomputed on writing.
Other columns are kept as extras. The writer adds every other column that has a value (a
`batch_size`, without which a model's throughput would be ambiguous, weights, users, resources)
after the seven: Tiresias reads rows as dicts, so an extra column does it no harm. Tiresias' model names (vgg19, resnet50, ...) are its own and
mostly absent from our profile table; known ones are mapped to Gavel's names.

Tiresias parses whole numbers only (`value.isdigit()`), so the writer rounds times, durations
and iterations to whole numbers.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from roundhouse.errors import TraceError, did_you_mean
from roundhouse.traces.csvtext import data_lines, head_text, read_cells
from roundhouse.traces.gavel import LAYOUTS as gavel_layouts
from roundhouse.traces.gavel import int64_column
from roundhouse.traces.profiles import REFERENCE_GPU_TYPE, ProfileTable
from roundhouse.traces.schema import KNOWN_COLUMNS, columns_with_values, validate, warn_near_misses

COLUMNS: tuple[str, ...] = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval")
RENAME = {"num_gpu": "gpus", "submit_time": "arrival_s", "model_name": "model", "duration": "duration_s"}
SOURCE_NAMES = {canonical: own for own, canonical in RENAME.items()}
# What a Tiresias CSV's columns may be named: its own, and the canonical ones kept as extras.
KNOWN = KNOWN_COLUMNS | frozenset(COLUMNS)


def looks_like(header: list[str]) -> bool:
    """Whether a CSV header is Tiresias' (used by format detection): both its own columns, or one
    of them and neither canonical one nor a column only Helios' log has, so that a Tiresias CSV
    missing a column is read as Tiresias' and the reader names the column it lacks (not the
    canonical one)."""
    names = {h.strip() for h in header}
    own = names & {"num_gpu", "submit_time"}
    return len(own) == 2 or (bool(own) and not names & {"gpus", "arrival_s", "gpu_num", "start_time", "end_time"})


def read(path: str | Path) -> pl.DataFrame:
    """A Tiresias job CSV as a canonical frame; errors name the line and Tiresias' column."""
    _check_separator(str(path))
    cells = read_cells(path)
    frame = cells.frame
    clash = [c for own, c in RENAME.items() if c in frame.columns and own in frame.columns]
    if clash:
        raise TraceError(str(path), f"has both Tiresias and canonical columns ({', '.join(clash)}); which one is meant?")
    _check_columns(str(path), frame.columns)
    warn_near_misses(frame.columns, str(path), KNOWN)
    frame = frame.drop([c for c in ("interval",) if c in frame.columns]).rename(
        {k: v for k, v in RENAME.items() if k in frame.columns}
    )
    return validate(frame, str(path), cells.lines, source_names=SOURCE_NAMES)


def _check_separator(path: str) -> None:
    """A header with no comma is no Tiresias header, and taken as one column its whole line would
    be that column's name: say what the file looks like instead (a Gavel trace's tab-separated
    fields, a JSON list), else that Tiresias separates its columns with commas."""
    lines, numbers = data_lines(head_text(path))
    if not lines.len():
        return  # (read_cells says the file is empty)
    first, line = lines[0].strip(), int(numbers[0])
    expected = f"a Tiresias job CSV has a header of comma-separated names ({','.join(COLUMNS)})"
    if first.startswith(("[", "{")):
        looks = "it looks like JSON (Philly's cluster_job_log or a Helios job list): read it as philly or helios"
        raise TraceError(path, f"its first line is no CSV header: {looks}; {expected}", row=line)
    if "," in first:
        return  # (a CSV: the column check says what is missing)
    fields = first.count("\t") + 1
    if fields in gavel_layouts and not looks_like(first.split("\t")):  # (a Tiresias header, tab-separated: said below)
        looks = f"{fields} tab-separated fields, as a Gavel trace's lines have: read it as gavel (format=gavel, or no format)"
        raise TraceError(path, f"its first line has no commas but {looks}; {expected}", row=line)
    others = [name for sep, name in _SEPARATORS if sep in first]
    said = f" (its fields are separated by {others[0]})" if others else ""
    raise TraceError(path, f"its first line has no commas{said}; {expected}", row=line)


# Separators that other tables use, named for messages.
_SEPARATORS = (("\t", "tabs"), (";", "semicolons"), ("|", "vertical bars"))


def _check_columns(path: str, found: list[str]) -> None:
    """The columns a Tiresias job CSV needs, said with the file's own names (the schema's check
    comes after the renaming, and would list the canonical names the file does not have)."""
    found_text = ", ".join(f"'{c}'" for c in found) or "none"
    missing = [c for c in ("job_id", "num_gpu", "submit_time") if c not in found]
    if not missing and ("duration" in found or {"model_name", "iterations"} <= set(found)):
        return
    wanted = missing[0] if missing else "duration"
    either = f"'{wanted}'" if missing else "'duration' (or both 'model_name' and 'iterations')"
    hint = did_you_mean(wanted, found)
    if {"arrival_s", "gpus"} <= set(found) and not {"num_gpu", "submit_time"} & set(found):
        hint = "its columns are the canonical format's (arrival_s, gpus): read it as canonical (format=canonical, or no format)"
    raise TraceError(
        path, f"missing column {either} of Tiresias' job CSV; columns found: {found_text}" + (f"; {hint}" if hint else "")
    )


def needs_duration(jobs: str, work: str, models: str | None, source: str = "gavel.csv") -> str:
    """Why jobs without a duration cannot be written as Tiresias' (one wording for the writer and
    `trace generate`, which says it before anything is drawn); `models` None: they name none."""
    if models is None:
        return f"a Tiresias trace needs each job's duration, and {jobs} {work}, with no model to derive one from"
    return (
        f"a Tiresias trace needs each job's duration, and {jobs} {work}, of {models} {source} has no throughput for to derive one"
    )


def write(df: pl.DataFrame, path: str | Path, profile: ProfileTable | None = None) -> list[str]:
    """Write jobs as a Tiresias CSV, in arrival order; returns, in words, what was rounded or
    made up.

    A job without iterations gets duration × its V100 throughput when the profile knows its
    model, else an empty cell (none are made up: Tiresias' README says its schedulers do not
    use iterations, and its reader keeps a cell that is no number as text); a job without a
    duration gets iterations / throughput. A job without a model is written with an empty model_name. Every
    other column with a value (batch size, weight, user, resources, loss curves) follows the
    seven, as the reader keeps it.
    """
    path = str(path)
    profile = profile or ProfileTable.load()
    frame = validate(df, f"{path} (jobs being written)")
    rates = pl.Series(profile.rates(frame["model"], frame["batch_size"], REFERENCE_GPU_TYPE, frame["gpus"]))
    known = rates > 0
    duration = frame.get_column("duration_s")
    iterations = frame.get_column("iterations")
    # (Iterations the profile cannot derive stay unknown: an empty cell, which Tiresias, whose
    # schedulers do not use iterations, keeps as text, and which reads back as no iterations.)
    iterations = iterations.fill_null(pl.select(pl.when(known).then(duration * rates)).to_series())
    duration = duration.fill_null(pl.select(pl.when(known).then(iterations / rates)).to_series())
    if duration.is_null().any():
        i = int(duration.is_null().arg_true()[0])
        work = "gives its work in epochs" if frame["epochs"][i] is not None else "gives its work in iterations"
        model = frame["model"][i]
        of = f"a model ({model})" if model is not None else None
        why = needs_duration(f"job {frame['job_id'][i]}", work, of, Path(profile.source).name)
        raise TraceError(
            path, f"{why}; write canonical CSV or Parquet (.csv, .parquet or .pq), which keeps it", column="duration"
        )
    jobs = frame.get_column("job_id")
    # (A value derived from the other column is that column's to fix.)
    derived_iterations = frame.get_column("iterations").is_null()
    iterations_from = pl.select(pl.when(derived_iterations).then(pl.lit("duration_s")).otherwise(pl.lit("iterations")))
    derived_duration = frame.get_column("duration_s").is_null()
    duration_from = pl.select(pl.when(derived_duration).then(pl.lit("iterations")).otherwise(pl.lit("duration_s")))
    submit = int64_column(frame.get_column("arrival_s"), path, jobs, "submit_time", "arrival_s")
    out = pl.DataFrame(
        {
            "job_id": jobs,
            "num_gpu": frame.get_column("gpus"),
            "submit_time": submit,
            "iterations": int64_column(iterations.clip(lower_bound=1), path, jobs, "iterations", iterations_from.to_series()),
            # (An empty cell, as polars writes a null: "" would put a quote in the file, and a file
            # with quotes is read through Python's csv module, several times slower.)
            "model_name": frame.get_column("model"),
            "duration": int64_column(duration.clip(lower_bound=1), path, jobs, "duration", duration_from.to_series()),
            "interval": (submit.shift(-1) - submit).fill_null(0),
        }
    )
    mapped = {"job_id", "gpus", "arrival_s", "iterations", "model", "duration_s"}
    extras = [c for c in columns_with_values(frame) if c not in mapped]
    taken = [c for c in extras if c in COLUMNS]  # a column named as one of Tiresias' own
    out = out.hstack([frame.get_column(c) for c in extras if c not in COLUMNS])
    Path(path).write_text(out.write_csv(), encoding="utf-8", newline="")
    notes = [f"left out, as Tiresias' own columns have these names: {', '.join(taken)}"] if taken else []
    unknown = int(iterations.is_null().sum())
    if unknown:
        notes.append(
            f"iterations of {unknown} job(s) left empty: the input gives none, and their model is missing or has no "
            f"V100 throughput in {profile.source} to derive them from (Tiresias' schedulers do not use iterations)"
        )
    # (What is written, derived values too: a duration derived from iterations, 0.3 s, is written as 1.)
    return notes + [
        f"{what} rounded to whole numbers (Tiresias reads no fractions)"
        for what, written in (
            ("arrival times", frame.get_column("arrival_s")),
            ("durations", duration),
            ("iterations", iterations),
        )
        if (written.drop_nulls() % 1 != 0).any()
    ]
