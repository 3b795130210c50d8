"""Reading what a run or a sweep wrote with --out, for plots and reports.

A run's folder (`roundhouse run GRAPH --out DIR`) holds run.json, and its JobMetrics sink's
jobs.csv and summary.json (`ELEMENT-jobs.csv` and `ELEMENT-summary.json` when the graph has
several sinks). A sweep's folder (`roundhouse sweep --out DIR`) holds summary.csv, one row per
run in the order the sweep ran them, and a results/ store of Parquet files with the same columns
(a `status` other than "ok", or an `error`, marking runs that failed). Each run's `point` says
what the sweep varied ("name=value ..."), beside its `seed`: those are the labels, and every
other numeric column is something measured."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import attrs
import polars as pl

from roundhouse.errors import UsageError
from roundhouse.runtime.files import holds_a_sweep
from roundhouse.runtime.results_store import ResultsStore
from roundhouse.runtime.sweep import RUN_COLUMNS, point_text

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
                    key: (read_summary if key == "summary" else _read_json)(self.path / name)
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
        """The cluster's GPU count, from how run.json describes it ("128 GPUs on 32 nodes ...")."""
        m = re.match(r"\s*(\d+) GPUs", str(self.info.get("cluster", "")))
        return int(m.group(1)) if m else None


# What a sweep store says of a name a run did not vary.
NOT_VARIED = "(graph's own)"


@attrs.frozen
class SweepFolder:
    path: Path
    source: Path  # summary.csv or the results/ folder
    table: pl.DataFrame  # one row per run that finished, in the order the sweep ran them, labels as written
    labels: tuple[str, ...]  # the varied names (as the runs' points name them) and the seed, seeds last
    failed: int  # runs the store records as failed
    graph: str | None  # the graph, if the store records one
    unreadable: tuple[Path, ...] = ()  # damaged files of the results store, left out
    incomplete: str | None = None  # why the folder may not hold every run of its sweep

    @property
    def metrics(self) -> list[str]:
        """The columns that may be drawn: numeric, and not a label. A measured column that no
        finished run has a value of (avg_jct_s when no job finished) is read with no type of
        number, yet is a metric still: drawing it is refused for want of values, not of a name."""
        empty = lambda c: self.table.height > 0 and self.table[c].null_count() == self.table.height  # noqa: E731
        return [
            c
            for c, t in self.table.schema.items()
            if c not in self.labels and (t.is_numeric() or (c not in RUN_COLUMNS and empty(c)))
        ]


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
_AMOUNTS = ("end_s", "busy_gpu_s")  # a time and a GPU time: finite, 0 or more
# Columns of jobs.csv with a value in every row (a row cut short lacks the last ones).
_ALWAYS = ("job_id", "arrival_s", "run_s", "gpus", "preemptions")


def _open_run(path: Path) -> RunFolder:
    info = _read_json(path / "run.json")
    for key, types in _RUN_FACTS.items():
        value = info.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
            what = "a string" if types == (str,) else "a number"
            raise UsageError(f"{path / 'run.json'}: {key!r} should be {what}, not {json.dumps(value)}")
        # (Python's json reads NaN and Infinity; a time or a GPU time is neither, nor below 0.)
        if key in _AMOUNTS and value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{path / 'run.json'}: {key!r} should be a number of 0 or more, not {json.dumps(value)}")
    jobs_files = [path / "jobs.csv"] if (path / "jobs.csv").is_file() else sorted(path.glob("*-jobs.csv"))
    if not jobs_files:
        listed = [n for n in _listed_files(info) if n == "jobs.csv" or n.endswith("-jobs.csv")]
        if listed:  # (the run wrote one: it went missing since)
            raise UsageError(f"{path / listed[0]}: missing, though run.json lists it (removed or moved?)")
        raise UsageError(f"{path}: the run wrote no jobs.csv (its graph has no JobMetrics sink)")
    jobs_file = jobs_files[0]
    sink, summary_name = _sink_of(info, jobs_file.name)
    summary_file = path / summary_name
    summary = read_summary(summary_file) if summary_file.is_file() else {}
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
    return RunFolder(path, info, jobs, summary, sink, jobs_file.name, summary_name)


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
    summary = _read_json(path)
    for key, value in summary.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UsageError(f"{path}: {key!r} should be a number or null, not {json.dumps(value)}")
        if not math.isfinite(value):  # (Python's json reads NaN and Infinity)
            raise UsageError(f"{path}: {key!r} should be a finite number or null, not {json.dumps(value)}")
    return summary


def _open_sweep(path: Path) -> SweepFolder:
    store = path / "results"
    summary = path / "summary.csv"
    unreadable: tuple[Path, ...] = ()
    incomplete = None
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
        table, incomplete = _in_grid_order(table, summary, {p.stem for p in unreadable})
        source = store
    elif summary.is_file():
        table, source = _read_summary(summary), summary
    else:
        raise UsageError(f"{path}: holds neither results/ nor summary.csv, as `roundhouse sweep --out` writes")
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
    labels = _varied(table, source)
    # A store that sweeps of different names wrote: a run that did not vary a name ran with the
    # graph's own value of it.
    unset = [c for c in labels if ok[c].null_count()]
    ok = ok.with_columns(pl.col(c).cast(pl.String).fill_null(NOT_VARIED) for c in unset)
    return SweepFolder(path, source, ok, labels, marked.height - ok.height, graph, unreadable, incomplete)


def _read_summary(path: Path) -> pl.DataFrame:
    """summary.csv with its labels as written (read as numbers, `1e3` would become 1000.0)."""
    try:
        text = pl.read_csv(path, infer_schema_length=0)
        labels = [c for c in _varied(text, path) if c in text.columns and c != "seed"]
        return pl.read_csv(path, infer_schema_length=None, schema_overrides=dict.fromkeys(labels, pl.String))
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot be read as CSV ({_first_line(err)})") from None


def _varied(table: pl.DataFrame, source: Path) -> tuple[str, ...]:
    """The names the sweep varied, from what each run recorded: its `point` names them with
    their values ("name=value ...", in the order they were given to --vary), and its `seed`
    column holds its seed. Seeds come last, as a sweep orders its runs."""
    if "point" not in table.columns:
        raise UsageError(
            f"{source}: no column 'point' (each run's varied names and values, as `roundhouse sweep` writes), "
            "so what the sweep varied cannot be told from what it measured"
        )
    texts = {
        c: pl.col(c).cast(pl.String)
        for c, t in table.schema.items()
        if c != "point" and (t.is_numeric() or t in (pl.String, pl.Boolean, pl.Categorical))
    }
    names: dict[str, None] = {}
    points = table.filter(pl.col("point").is_not_null()).unique("point", maintain_order=True)
    for row in points.select(pl.col("point").cast(pl.String), *(e.alias(c) for c, e in texts.items())).iter_rows(named=True):
        found = _names_in(row.pop("point"), row)
        if found is None:
            raise UsageError(f"{source}: a run's point does not match its columns, so what the sweep varied cannot be told")
        names.update(dict.fromkeys(found))
    if "seed" in table.columns:
        names["seed"] = None
    seeds = [c for c in names if c == "seed" or c.endswith(".seed")]
    return tuple([c for c in names if c not in seeds] + seeds)


def _names_in(point: str, values: dict[str, str | None]) -> list[str] | None:
    """The names `point` (as runtime/sweep.py's point_text writes it) gives, in its order:
    each `name=value` must be a column of that name holding that value. None if it does not read."""
    if point == point_text({}):
        return []
    found: list[str] = []
    rest = point
    while rest:
        given = (f"{c}={v}" for c, v in values.items() if v is not None and c not in found)
        term = next((t for t in given if rest == t or rest.startswith(t + " ")), None)
        if term is None:
            return None
        found.append(term.partition("=")[0])
        rest = rest[len(term) :].removeprefix(" ")
    return found


def _in_grid_order(table: pl.DataFrame, summary: Path, damaged: set[str]) -> tuple[pl.DataFrame, str | None]:
    """A results store's runs (kept in key order) in the order the sweep ran them, which
    summary.csv lists by key; runs it does not list (an earlier sweep's, or one that did not
    finish) after them, in the order they finished. And why the store may not hold the whole
    sweep: no summary.csv (the sweep did not finish), or runs summary.csv lists that it lacks
    (`damaged`: the keys of its files that cannot be read, named already)."""
    keys = _listed_keys(summary)
    finished = ["finished_at"] if "finished_at" in table.columns else []
    if "key" in table.columns:
        rank = {key: i for i, key in enumerate(keys or ())}
        ranked = pl.col("key").cast(pl.String).replace_strict(rank, default=None, return_dtype=pl.Int64)
        table = table.sort([ranked, *finished], nulls_last=True, maintain_order=True)
    if keys is None:
        return table, f"the sweep did not finish (no {summary.name}); {table.height} runs are in its results store"
    stored = damaged | (set(table["key"].cast(pl.String).to_list()) if "key" in table.columns else set())
    there = sum(key in stored for key in keys)
    if there < len(keys):
        return table, f"{there} of the {len(keys)} runs {summary.name} lists are in its results store"
    return table, None


def _listed_keys(summary: Path) -> list[str] | None:
    """The keys of the runs summary.csv lists, in the order the sweep ran them; None without
    it. One that cannot be read is named, and the store's runs kept in the order they finished."""
    if not summary.is_file():
        return None
    try:
        return pl.read_csv(summary, columns=["key"], schema_overrides={"key": pl.String})["key"].to_list()
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as err:
        print(
            f"warning: {summary}: cannot be read as CSV ({_first_line(err)}); runs are listed as they finished", file=sys.stderr
        )
        return []


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
