"""Reading what a run or a sweep wrote with --out, for plots and reports.

A run's folder (`roundhouse run GRAPH --out DIR`) holds run.json, and its JobMetrics sink's
jobs.csv and summary.json (`ELEMENT-jobs.csv` and `ELEMENT-summary.json` when the graph has
several sinks). A sweep's folder (`roundhouse sweep --out DIR`) holds summary.csv, one row per
run, or a results/ store of Parquet files with the same columns (and a `status` other than
"ok", or an `error`, marking runs that failed)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import attrs
import polars as pl

from roundhouse.errors import UsageError
from roundhouse.runtime.files import holds_a_sweep
from roundhouse.runtime.results_store import ResultsStore

# The columns of a JobMetrics summary (elements/sinks.py); the other columns of a sweep's
# table are its varied names, apart from the bookkeeping below.
METRICS = (
    "jobs_tracked",
    "jobs_finished",
    "jobs_failed",
    "avg_jct_s",
    "median_jct_s",
    "p95_jct_s",
    "p99_jct_s",
    "avg_responsiveness_s",
    "median_responsiveness_s",
    "avg_queue_s",
    "makespan_s",
    "utilization",
    "cpu_utilization",
    "memory_utilization",
    "preemptions",
    "end_s",
    "median_queue_s",
    "p95_queue_s",
    "p99_queue_s",
    "avg_queue_after_preemption_s",
    "avg_comm_s",
    "p95_comm_s",
    "total_comm_s",
    "machine_starts",
    "rack_starts",
    "network_starts",
)
# Columns a results store may keep about each run that are neither varied nor measured. (A
# sweep records a setting such as `cluster` only when it varies it: then it is an axis.)
BOOKKEEPING = {
    "key",
    "run_key",
    "hash",
    "status",
    "error",
    "wall_s",
    "rounds",
    "graph",
    "trace",
    "overrides",
    "settings",
    "version",
    "roundhouse_version",
    "started_at",
    "finished_at",
    "worker",
    "stop_reason",
    "traceback",
    "point",
    "run_s",
}
JOB_COLUMNS = ("job_id", "arrival_s", "first_start_s", "finish_s", "jct_s", "run_s", "gpus", "preemptions")


@attrs.frozen
class RunFolder:
    path: Path
    info: dict  # run.json
    jobs: pl.DataFrame
    summary: dict
    sink: str | None  # the sink's element name when the graph has several

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
                    key: _read_json(self.path / name)
                    for key, name in files.items()
                    if str(name).endswith(".json") and Path(str(name)).name == name and (self.path / name).is_file()
                }
                summary = found.pop("summary", None)
                if summary is not None or found:
                    out.append((element, summary or {}, found))
            return out
        if (self.path / "summary.json").is_file():
            return [(self.sink or "", _read_json(self.path / "summary.json"), {})]
        return [(p.name.removesuffix("-summary.json"), _read_json(p), {}) for p in sorted(self.path.glob("*-summary.json"))]

    @property
    def cluster_gpus(self) -> int | None:
        """The cluster's GPU count, from how run.json describes it ("128 GPUs on 32 nodes ...")."""
        m = re.match(r"\s*(\d+) GPUs", str(self.info.get("cluster", "")))
        return int(m.group(1)) if m else None


# What a sweep store says of a name a run did not vary.
NOT_VARIED = "(graph's own)"


@attrs.frozen
class SweepFolder:
    path: Path
    source: Path  # summary.csv or the results/ folder
    table: pl.DataFrame  # one row per run that finished, labels as written
    labels: tuple[str, ...]  # the varied names, in table order
    failed: int  # runs the store records as failed
    graph: str | None  # the graph, if the store records one
    unreadable: tuple[Path, ...] = ()  # damaged files of the results store, left out


def open_folder(text: str) -> RunFolder | SweepFolder:
    path = Path(text)
    if not path.exists():
        raise UsageError(f"{text}: no such folder")
    if not path.is_dir():
        raise UsageError(f"{text}: not a folder (give the folder a run or a sweep wrote with --out)")
    if (path / "run.json").is_file():
        return _open_run(path)
    if holds_a_sweep(path):
        return _open_sweep(path)
    raise UsageError(
        f"{text}: neither a run's folder (no run.json, as `roundhouse run GRAPH --out DIR` writes) "
        "nor a sweep's (no results/ or summary.csv, as `roundhouse sweep --out DIR` writes)"
    )


# What run.json says that plots and reports read, and the type each must have.
_RUN_FACTS = {"graph": (str,), "cluster": (str,), "end_s": (int, float), "busy_gpu_s": (int, float)}
# Columns of jobs.csv with a value in every row (a row cut short lacks the last ones).
_ALWAYS = ("job_id", "arrival_s", "run_s", "gpus", "preemptions")


def _open_run(path: Path) -> RunFolder:
    info = _read_json(path / "run.json")
    for key, types in _RUN_FACTS.items():
        value = info.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
            what = "a string" if types == (str,) else "a number"
            raise UsageError(f"{path / 'run.json'}: {key!r} should be {what}, not {json.dumps(value)}")
    jobs_files = [path / "jobs.csv"] if (path / "jobs.csv").is_file() else sorted(path.glob("*-jobs.csv"))
    if not jobs_files:
        raise UsageError(f"{path}: the run wrote no jobs.csv (its graph has no JobMetrics sink)")
    jobs_file = jobs_files[0]
    sink = None if jobs_file.name == "jobs.csv" else jobs_file.name.removesuffix("-jobs.csv")
    summary_file = path / ("summary.json" if sink is None else f"{sink}-summary.json")
    summary = _read_json(summary_file) if summary_file.is_file() else {}
    try:
        jobs = pl.read_csv(jobs_file, infer_schema_length=None)
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as err:
        raise UsageError(f"{jobs_file}: cannot be read as CSV ({_first_line(err)})") from None
    missing = [c for c in JOB_COLUMNS if c not in jobs.columns]
    if missing and jobs.height:
        raise UsageError(f"{jobs_file}: no column {', '.join(repr(c) for c in missing)} (is this a JobMetrics jobs.csv?)")
    if jobs.height:
        try:
            jobs = jobs.with_columns(pl.col(c).cast(pl.Float64) for c in JOB_COLUMNS)
        except pl.exceptions.PolarsError as err:
            raise UsageError(f"{jobs_file}: a column that should hold numbers does not ({_first_line(err)})") from None
        for column in _ALWAYS:
            empty = jobs[column].is_null() | jobs[column].is_nan()
            if empty.any():
                line = int(empty.arg_true()[0]) + 2  # (after the header line)
                raise UsageError(f"{jobs_file}:{line}: no value in column {column!r} (a row cut short?)")
    return RunFolder(path, info, jobs, summary, sink)


def _open_sweep(path: Path) -> SweepFolder:
    store = path / "results"
    unreadable: tuple[Path, ...] = ()
    if store.is_dir():
        results = ResultsStore(store)
        if not results.files():
            raise UsageError(f"{store}: the results store holds no Parquet files (no run has finished)")
        try:
            table = results.read()
        except (pl.exceptions.PolarsError, OSError) as err:  # (files that read, but do not fit together)
            raise UsageError(f"{store}: its files cannot be read as one table ({_first_line(err)})") from None
        # As a sweep does: a damaged file is named and left out, and the other runs still count.
        unreadable = tuple(results.unreadable)
        for damaged in unreadable:
            print(f"warning: {damaged}: cannot be read (damaged?); its run is left out", file=sys.stderr)
        if len(unreadable) == len(results.files()):
            raise UsageError(f"{store}: none of its {len(unreadable)} Parquet files can be read (damaged?)")
        source = store
    else:
        source = path / "summary.csv"
        try:
            table = pl.read_csv(source, infer_schema_length=None)
        except (pl.exceptions.PolarsError, UnicodeDecodeError) as err:
            raise UsageError(f"{source}: cannot be read as CSV ({_first_line(err)})") from None
    for name, dtype in table.schema.items():
        if isinstance(dtype, pl.Struct):  # labels kept as one struct column
            table = table.unnest(name)
    failed = pl.lit(False)
    if "status" in table.columns:  # "ok", or what went wrong ("error", "timeout", "failed")
        failed = failed | (pl.col("status").cast(pl.String).fill_null("ok") != "ok")
    if "error" in table.columns:
        failed = failed | (pl.col("error").cast(pl.String).fill_null("") != "")
    marked = table.with_columns(failed.fill_null(False).alias("__failed"))
    ok = marked.filter(~pl.col("__failed")).drop("__failed")
    graph = None
    if "graph" in table.columns and table.height:
        graphs = table["graph"].drop_nulls().unique().to_list()
        graph = str(graphs[0]) if len(graphs) == 1 else None
    labels = [c for c in table.columns if c not in METRICS and c not in BOOKKEEPING]
    seeds = [c for c in labels if c == "seed" or c.endswith(".seed")]
    labels = tuple([c for c in labels if c not in seeds] + seeds)  # seeds last, as a sweep orders its runs
    # A store that sweeps of different names wrote: a run that did not vary a name ran with the
    # graph's own value of it.
    unset = [c for c in labels if ok[c].null_count()]
    ok = ok.with_columns(pl.col(c).cast(pl.String).fill_null(NOT_VARIED) for c in unset)
    return SweepFolder(path, source, ok, labels, marked.height - ok.height, graph, unreadable)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise UsageError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object")
    return data


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
