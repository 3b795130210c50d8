"""A run's folder, as `roundhouse run GRAPH --out DIR` writes it: run.json, and its JobMetrics
sink's jobs.csv and summary.json (`ELEMENT-jobs.csv` and `ELEMENT-summary.json` when the graph
has several sinks), read and checked for plots and reports."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import attrs
import polars as pl

from roundhouse.errors import UsageError, first_line
from roundhouse.tools.outputs.csv_rows import refuse_short_rows
from roundhouse.tools.outputs.stdout_result import count_text

JOB_COLUMNS = ("job_id", "arrival_s", "first_start_s", "finish_s", "jct_s", "run_s", "gpus", "preemptions")


@attrs.frozen
class RunFolder:
    path: Path
    info: dict  # run.json
    jobs: pl.DataFrame
    summary: dict
    sink: str | None  # the sink's element name when the graph has several
    jobs_name: str = "jobs.csv"  # the file `jobs` was read from
    summary_name: str = "summary.json"  # the file `summary` was read from (or would be)
    incomplete: str | None = None  # why `jobs` may not hold every job the sink tracked

    @property
    def graph(self) -> str | None:
        return self.info.get("graph")

    @property
    def end_s(self) -> float:
        return float(self.info.get("end_s") or 0.0)

    @property
    def busy_gpu_s(self) -> float | None:
        """The GPU time every job of the run held (run.json; None from runs that did not write it)."""
        value = self.info.get("busy_gpu_s")
        return None if value is None else float(value)

    def reports(self) -> list[tuple[str, dict, dict]]:
        """Each metrics sink's summary and what each element reported as flat dicts (cost,
        SLOs, fairness), as `roundhouse run` printed them: (element name; its summary, or {}
        when it has none; {name: dict}). From run.json's list of what each element reported,
        else (a run.json written before it listed them) the sinks' summaries by file name."""
        listed = self.info.get("reports")
        if isinstance(listed, dict) and all(isinstance(files, dict) for files in listed.values()):
            out = []
            for element, files in listed.items():
                found = {
                    key: (read_summary if key == "summary" else read_json)(self.path / name)
                    for key, name in files.items()
                    if str(name).endswith(".json") and Path(str(name)).name == name and (self.path / name).is_file()
                }
                summary = found.pop("summary", None)
                if summary is not None or found:
                    out.append((element, summary or {}, found))
            return out
        if (self.path / "summary.json").is_file():
            return [(self.sink or "", read_summary(self.path / "summary.json"), {})]
        return [(p.name.removesuffix("-summary.json"), read_summary(p), {}) for p in sorted(self.path.glob("*-summary.json"))]

    @property
    def cluster_gpus(self) -> int | None:
        """The cluster's GPU count, from how run.json describes it ("6,400 GPUs on 800 nodes ...",
        or without the separators, as earlier versions wrote it)."""
        m = re.match(r"\s*(\d{1,3}(?:,\d{3})+|\d+) GPUs?\b", str(self.info.get("cluster", "")))
        return int(m.group(1).replace(",", "")) if m else None


# What run.json says that plots and reports read, and the type each must have.
_RUN_FACTS: dict[str, tuple[type, ...]] = {
    "graph": (str,),
    "cluster": (str,),
    "stop_reason": (str,),
    "rounds": (int,),
    "end_s": (int, float),
    "busy_gpu_s": (int, float),
}
_AMOUNTS = ("rounds", "end_s", "busy_gpu_s")  # a count, a time and a GPU time: finite, 0 or more
_KINDS: dict[tuple[type, ...], str] = {(str,): "a string", (int,): "a whole number"}
# Columns of jobs.csv with a value in every row (a row cut short lacks the last ones).
_ALWAYS = ("job_id", "arrival_s", "run_s", "gpus", "preemptions")


def open_run(path: Path) -> RunFolder:
    info = read_json(path / "run.json")
    for key, types in _RUN_FACTS.items():
        value = info.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
            what = _KINDS.get(types, "a number")
            raise UsageError(f"{path / 'run.json'}: {key!r} should be {what}, not {json.dumps(value)}")
        # (Python's json reads NaN and Infinity; a time or a GPU time is neither, nor below 0.)
        if key in _AMOUNTS and isinstance(value, int | float) and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{path / 'run.json'}: {key!r} should be a number of 0 or more, not {json.dumps(value)}")
    jobs_files = [path / "jobs.csv"] if (path / "jobs.csv").is_file() else sorted(path.glob("*-jobs.csv"))
    if not jobs_files:
        listed = [n for n in _listed_files(info) if n == "jobs.csv" or n.endswith("-jobs.csv")]
        if listed:  # (the run wrote one: it went missing since, or something else took its place)
            if (path / listed[0]).exists():
                raise UsageError(f"{path / listed[0]}: not a file (a folder?), where the run wrote its jobs' table")
            raise UsageError(f"{path / listed[0]}: missing, though run.json lists it (removed or moved?)")
        raise UsageError(f"{path}: the run wrote no jobs.csv (its graph has no JobMetrics sink)")
    jobs_file = jobs_files[0]
    sink, summary_name = _sink_of(info, jobs_file.name)
    summary_file = path / summary_name
    if summary_file.exists() and not summary_file.is_file():
        raise UsageError(f"{summary_file}: not a file (a folder?), where the run wrote its summary")
    summary = read_summary(summary_file) if summary_file.is_file() else {}
    refuse_short_rows(jobs_file)
    try:
        jobs = pl.read_csv(jobs_file, infer_schema_length=None, glob=False)  # (a folder may be named with [ or *)
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as err:
        raise UsageError(f"{jobs_file}: cannot be read as CSV ({first_line(err)})") from None
    # (Checked with no rows too: a run with no jobs still writes the table's header.)
    missing = [c for c in JOB_COLUMNS if c not in jobs.columns]
    if missing:
        raise UsageError(f"{jobs_file}: no column {', '.join(repr(c) for c in missing)} (is this a JobMetrics jobs.csv?)")
    if jobs.height:
        try:
            jobs = jobs.with_columns(pl.col(c).cast(pl.Float64) for c in JOB_COLUMNS)
        except pl.exceptions.PolarsError as err:
            raise UsageError(f"{jobs_file}: a column that should hold numbers does not ({first_line(err)})") from None
        for column in _ALWAYS:
            empty = jobs[column].is_null() | jobs[column].is_nan()
            if empty.any():
                row = int(empty.arg_true()[0])
                line = row + 2  # (after the header line)
                if jobs[column][row] is None:
                    raise UsageError(f"{jobs_file}:{line}: no value in column {column!r} (a row cut short?)")
                raise UsageError(f"{jobs_file}:{line}: column {column!r} holds nan (not a number), where a number should be")
        _refuse_out_of_range(jobs_file, jobs)
        _refuse_impossible(jobs_file, jobs)
    return RunFolder(
        path, info, jobs, summary, sink, jobs_file.name, summary_name, _short_of(jobs_file, jobs, summary_file, summary)
    )


def _refuse_out_of_range(jobs_file: Path, jobs: pl.DataFrame) -> None:
    """A time or count no run writes (infinite, or below 0; an id infinite): the file was damaged
    since, and would be drawn as if it held one (an endless bar, a negative GPU count)."""
    for column in JOB_COLUMNS:
        values = jobs[column]
        bad = values.is_infinite() | (values < 0 if column != "job_id" else False)
        if bad.any():
            row = int(bad.fill_null(False).arg_true()[0])
            what = "a time" if column.endswith("_s") else "an id" if column == "job_id" else "a count"
            raise UsageError(
                f"{jobs_file}:{row + 2}: column {column!r} holds {values[row]:g}, where {what} "
                f"{'(a finite number)' if column == 'job_id' else 'of 0 or more'} should be"
            )


def _refuse_impossible(jobs_file: Path, jobs: pl.DataFrame) -> None:
    """Rows no run writes: a job id twice, or a job that finished before it first started (the
    file was edited or put together since; drawn, it would pass for a run's)."""
    twice = jobs["job_id"].is_duplicated()
    if twice.any():
        rows = twice.arg_true()
        job = jobs["job_id"][int(rows[0])]
        lines = [int(r) + 2 for r in rows.to_list() if jobs["job_id"][int(r)] == job][:2]
        raise UsageError(f"{jobs_file}:{lines[1]}: job {job:g} again (as on line {lines[0]}): a run lists each job once")
    start, finish = jobs["first_start_s"], jobs["finish_s"]
    early = (finish < start - 1e-6 * start.abs().clip(lower_bound=1.0)).fill_null(False)
    if early.any():
        row = int(early.arg_true()[0])
        raise UsageError(
            f"{jobs_file}:{row + 2}: job {jobs['job_id'][row]:g} finished at {finish[row]:g} s, before it first "
            f"started ({start[row]:g} s)"
        )


def _short_of(jobs_file: Path, jobs: pl.DataFrame, summary_file: Path, summary: dict) -> str | None:
    """What the jobs file lacks of the jobs its summary counts (it was cut short at the end of a
    line, and reads whole), or None when it holds them all (or the summary does not say)."""
    tracked = summary.get("jobs_tracked")
    if tracked is None or not 0 < jobs.height < tracked:
        return None
    return f"{jobs_file.name} holds {jobs.height:,} jobs, but {summary_file.name} counts {count_text(tracked)} (cut short?)"


def _listed_files(info: dict) -> list[str]:
    """The files run.json says the run wrote (none when it does not say)."""
    files = info.get("files")
    return [f for f in files if isinstance(f, str)] if isinstance(files, list) else []


def _sink_of(info: dict, jobs_name: str) -> tuple[str | None, str]:
    """The sink that wrote the jobs file `jobs_name` (None for a plain jobs.csv) and its summary's
    file: as run.json's `reports` lists them, which keep an element's own name where its files'
    names cannot (a sink inside a compound, `s/m`, writes `s.m-jobs.csv`); else by file name."""
    listed = info.get("reports")
    if isinstance(listed, dict):
        for element, files in listed.items():
            if isinstance(files, dict) and files.get("jobs") == jobs_name:
                summary = files.get("summary")
                named = isinstance(summary, str) and Path(summary).name == summary
                return (None if jobs_name == "jobs.csv" else element), (summary if named else _summary_beside(jobs_name))
    return (None if jobs_name == "jobs.csv" else jobs_name.removesuffix("-jobs.csv")), _summary_beside(jobs_name)


def _summary_beside(jobs_name: str) -> str:
    return jobs_name.removesuffix("jobs.csv") + "summary.json"


def read_summary(path: Path) -> dict:
    """A metrics sink's summary.json, whose every value is a number or null: the summary table
    and the plots compute with them (a wrong type would otherwise be drawn, or fail as a
    traceback)."""
    summary = read_json(path)
    for key, value in summary.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UsageError(f"{path}: {key!r} should be a number or null, not {json.dumps(value)}")
        if not math.isfinite(value):  # (Python's json reads NaN and Infinity)
            raise UsageError(f"{path}: {key!r} should be a finite number or null, not {json.dumps(value)}")
    return summary


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise UsageError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object")
    return data
