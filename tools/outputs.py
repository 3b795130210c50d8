"""Reading what a run or a sweep wrote with --out, for plots and reports.

A run's folder (`roundhouse run GRAPH --out DIR`) holds run.json, and its JobMetrics sink's
jobs.csv and summary.json (`ELEMENT-jobs.csv` and `ELEMENT-summary.json` when the graph has
several sinks). A sweep's folder (`roundhouse sweep --out DIR`) holds summary.csv, one row per
run in the order the sweep ran them, and a results/ store of Parquet files with the same columns
(a `status` other than "ok", or an `error`, marking runs that failed). Each run's `point` says
what the sweep varied ("name=value ..."), beside its `seed`: those are the labels, and every
other numeric column is something measured."""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from pathlib import Path

import attrs
import polars as pl

from roundhouse.errors import UsageError
from roundhouse.runtime.files import holds_a_sweep
from roundhouse.runtime.results_store import SUFFIX, ResultsStore
from roundhouse.runtime.sweep import RUN_COLUMNS, label_columns, point_text

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


# What a sweep store says of a name a run did not vary, nor its sweep fix (with --set,
# --cluster, --trace); and of one a run did not vary, whose row does not say what was fixed.
NOT_VARIED = "(graph's own)"
NOT_RECORDED = "(not recorded)"


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
    notes: tuple[str, ...] = ()  # runs of the results store left out, and why

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
    _refuse_short_rows(jobs_file)
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
    notes: list[str] = []
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
        # (A run's row always has its point: without one, what the sweep varied cannot be told.)
        pointless = table.filter(pl.col("point").is_null()) if "point" in table.columns else table
        foreign = [*results.foreign, *(store / f"{key}{SUFFIX}" for key in pointless["key"].unique(maintain_order=True))]
        table = table.filter(pl.col("point").is_not_null()) if "point" in table.columns else table.clear()
        for path in foreign:
            print(f"warning: {path}: holds no run's row (no key or point: damaged?); left out", file=sys.stderr)
        if not table.height:
            raise UsageError(f"{store}: none of its {len(results.files())} Parquet files can be read as runs' rows (damaged?)")
        unreadable += tuple(foreign)
        table, incomplete, notes = _the_last_sweep(table, summary, {p.stem for p in unreadable})
        source = store
    elif summary.is_file():
        table, source = _read_summary(summary), summary
    else:
        raise UsageError(f"{path}: holds neither results/ nor summary.csv, as `roundhouse sweep --out` writes")
    for name, dtype in table.schema.items():
        if isinstance(dtype, pl.Struct):  # labels kept as one struct column
            table = table.unnest(name)
    labels = _varied(table, source)
    table = _numbers(table, labels, source)
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
    ok = _unvaried(ok, labels)
    return SweepFolder(path, source, ok, labels, marked.height - ok.height, graph, unreadable, incomplete, tuple(notes))


def _the_last_sweep(table: pl.DataFrame, summary: Path, damaged: set[str]) -> tuple[pl.DataFrame, str | None, list[str]]:
    """Of a results store's runs, those of the sweep that last wrote the folder: those its
    summary.csv lists, in the order it ran them and described as it describes them (a run
    reused from an earlier sweep may have been labelled otherwise by it). Without summary.csv
    (the sweep did not finish), every run, in the order they finished, but of two runs of one
    point and seed (of sweeps of different graphs or traces) only the later. And why the store
    may not hold the whole sweep: no summary.csv, or runs summary.csv lists that it lacks
    (`damaged`: the keys of its files that cannot be read, named already); and notes on the
    runs left out."""
    listed = _listed(summary)
    finished = ["finished_at"] if "finished_at" in table.columns else []
    if listed is None or not isinstance(listed, pl.DataFrame):
        table = table.sort(finished, maintain_order=True) if finished else table
        stored = table.height
        table, notes = _the_later_of_each(table, summary.parent / "results")
        if listed is None:
            return table, f"the sweep did not finish (no {summary.name}); {stored} runs are in its results store", notes
        return table, None, notes
    keys = listed["key"].to_list()
    rank: dict[str, int] = {}
    for i, key in enumerate(keys):
        rank.setdefault(key, i)
    ours = table.filter(pl.col("key").is_in(list(rank)))
    notes = []
    others = table.height - ours.height
    if others:
        notes.append(
            f"{others} other {'run' if others == 1 else 'runs'} of its results store (of earlier sweeps into the "
            f"folder) {'is' if others == 1 else 'are'} left out: "
            f"{summary.name} lists the {len(rank)} runs of the last sweep"
        )
    # Each run as summary.csv describes it: its point, what its sweep fixed, its varied values.
    described = [c for c in ("point", "set", *label_columns(listed)) if c in listed.columns]
    stale = [c for c in ours.columns if c in described or c in label_columns(table)]
    ours = ours.drop(stale).join(listed.unique("key", maintain_order=True).select("key", *described), on="key", how="left")
    ranked = pl.col("key").replace_strict(rank, default=None, return_dtype=pl.Int64)
    ours = ours.sort(ranked, maintain_order=True)
    stored = damaged | set(table["key"].to_list())
    there = sum(key in stored for key in rank)
    incomplete = f"{there} of the {len(rank)} runs {summary.name} lists are in its results store" if there < len(rank) else None
    return ours, incomplete, notes


def _listed(summary: Path) -> pl.DataFrame | str | None:
    """The runs summary.csv lists (refused if two of them have one point and seed), or None
    without it. One that cannot be read is named in a warning ("unreadable" is returned), and
    the store's runs kept in the order they finished."""
    if not summary.is_file():
        return None
    try:
        listed = _read_summary(summary)
        if "key" not in listed.columns:
            raise UsageError(f"{summary}: no column 'key' (each run's key, as `roundhouse sweep` writes)")
    except UsageError as err:
        print(f"warning: {err}; the results store's runs are listed as they finished", file=sys.stderr)
        return "unreadable"
    return listed.with_columns(pl.col("key").cast(pl.String))


def _the_later_of_each(table: pl.DataFrame, store: Path) -> tuple[pl.DataFrame, list[str]]:
    """Of runs that finished with one point and seed (of sweeps of different graphs or traces
    into one folder), the one that finished last, with a warning and a note that say so."""
    keys = [c for c in ("point", "seed") if c in table.columns]
    ok = pl.col("status").cast(pl.String).fill_null("ok") == "ok" if "status" in table.columns else pl.lit(True)
    counted = table.with_columns(pl.when(ok).then(pl.len().over([*keys, ok])).otherwise(1).alias("__n"))
    repeated = counted.filter(pl.col("__n") > 1)
    if not repeated.height:
        return table, []
    later = counted.with_row_index("__i").filter((pl.col("__n") == 1) | (pl.col("__i") == pl.col("__i").max().over([*keys, ok])))
    groups = repeated.unique(keys).height
    note = (
        f"{repeated.height} runs share {groups} points and seeds (of sweeps of different graphs or traces into "
        f"the folder?): of each, only the one that finished last is drawn"
    )
    print(f"warning: {store}: {note}", file=sys.stderr)
    return later.drop("__n", "__i"), [note]


def _read_summary(path: Path) -> pl.DataFrame:
    """summary.csv with its labels as written (read as numbers, `1e3` would become 1000.0). A
    row cut short, a run with no point, and two runs of one point and seed are refused."""
    _refuse_short_rows(path)
    try:
        text = pl.read_csv(path, infer_schema_length=0)
        labels = [c for c in _varied(text, path) if c in text.columns and c != "seed"]
        table = pl.read_csv(path, infer_schema_length=None, schema_overrides=dict.fromkeys(labels, pl.String))
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot be read as CSV ({_first_line(err)})") from None
    lines = table.with_row_index("__line", offset=2)
    pointless = lines.filter(pl.col("point").is_null())
    if pointless.height:
        raise UsageError(f"{path}:{pointless['__line'][0]}: a run with no point (what the sweep varied for it)")
    if "seed" in table.columns:
        once = lines.unique("key", maintain_order=True) if "key" in table.columns else lines
        twice = once.filter(pl.int_range(pl.len()).over("point", "seed") > 0)
        if twice.height:
            row = twice.row(0, named=True)
            first = once.filter((pl.col("point") == row["point"]) & pl.col("seed").eq_missing(row["seed"]))["__line"][0]
            raise UsageError(
                f"{path}:{row['__line']}: a second run of {row['point']} seed={row['seed']} (the first is on line "
                f"{first}); which of them to draw cannot be told"
            )
    return table


def _refuse_short_rows(path: Path) -> None:
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
        raise UsageError(f"{path}: cannot be read as CSV ({_first_line(err)})") from None


def _is_measured(name: str) -> bool:
    """Whether a column is one a run's row holds a number in: what JobMetrics measures (counts
    of jobs, times in seconds, utilizations, preemptions, starts) and how the run went."""
    return (
        name in ("rounds", "run_s", "utilization", "preemptions")
        or name.startswith("jobs_")
        or name.endswith(("_s", "_utilization", "_starts"))
    )


def _numbers(table: pl.DataFrame, labels: tuple[str, ...], source: Path) -> pl.DataFrame:
    """The runs with each measured column as numbers; one holding something else is refused,
    naming the file, the column and the run (its line of summary.csv, or its file in the
    results store). (A store's column is read as text where a file left out holds text.)"""
    cast = []
    for name, dtype in table.schema.items():
        if name in labels or not _is_measured(name) or dtype.is_numeric() or dtype == pl.Null:
            continue
        values = table[name]
        numbers = values.cast(pl.Float64, strict=False) if dtype == pl.String else pl.Series([None] * len(values))
        bad = (values.is_not_null() & numbers.is_null()).arg_true()
        if len(bad):
            i = int(bad[0])
            if source.is_dir() and "key" in table.columns:
                where = f"{source / (str(table['key'][i]) + SUFFIX)}"
            else:
                where = f"{source}:{i + 2}"
            raise UsageError(f"{where}: {name} is {json.dumps(str(values[i]))}, not a number")
        cast.append(numbers.alias(name))
    return table.with_columns(cast)


def _unvaried(ok: pl.DataFrame, labels: tuple[str, ...]) -> pl.DataFrame:
    """The runs, each varied name given a value where its run did not vary it (a store that
    sweeps of different names wrote): what the run's sweep fixed it to (its `set`), else the
    graph's own value; for a run that does not record what was fixed, NOT_RECORDED."""
    unset = [c for c in labels if ok[c].null_count()]
    if not unset:
        return ok
    fixed = [_fixed(text) for text in (ok["set"].cast(pl.String) if "set" in ok.columns else [None] * ok.height)]
    filled = {}
    for c in unset:
        values = ok[c].cast(pl.String).to_list()
        filled[c] = [
            v if v is not None else (NOT_RECORDED if f is None else str(f.get(c, NOT_VARIED))) for v, f in zip(values, fixed)
        ]
    return ok.with_columns(pl.Series(c, filled[c], dtype=pl.String) for c in unset)


def _fixed(text: str | None) -> dict | None:
    """A run's `set` column: what its sweep fixed, by name; None if it does not say."""
    try:
        value = json.loads(text) if text else None
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


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
