"""A sweep's folder, as `roundhouse sweep --out DIR` writes it: summary.csv, one row per run in
the order the sweep ran them, and a results/ store of Parquet files with the same columns (a
`status` other than "ok", or an `error`, marking runs that failed). Each run's `point` says what
the sweep varied ("name=value ..."), beside its `seed`: those are the labels, and every other
numeric column is something measured."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import polars as pl

from roundhouse.errors import UsageError, first_line, print_warning
from roundhouse.runtime.results_store import SUFFIX, ResultsStore
from roundhouse.runtime.sweep import RUN_COLUMNS, label_columns, point_text
from roundhouse.tools.outputs.csv_rows import refuse_short_rows

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
    trace: str | None = None  # the trace given with --trace (by its whole path), if the store records one
    # The runs that failed, in the order of `table`'s: their point, seed, status and error.
    failures: pl.DataFrame = attrs.field(factory=pl.DataFrame)

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


def open_sweep(path: Path) -> SweepFolder:
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
            raise UsageError(f"{store}: its files cannot be read as one table ({first_line(err)})") from None
        # As a sweep does: a damaged file is named and left out, and the other runs still count.
        unreadable = tuple(results.unreadable)
        for damaged in unreadable:
            print_warning(f"warning: {damaged}: cannot be read (damaged?); its run is left out")
        # (A run's row always has its point: without one, what the sweep varied cannot be told.)
        pointless = table.filter(pl.col("point").is_null()) if "point" in table.columns else table
        foreign = [*results.foreign, *(store / f"{key}{SUFFIX}" for key in pointless["key"].unique(maintain_order=True))]
        table = table.filter(pl.col("point").is_not_null()) if "point" in table.columns else table.clear()
        for file in foreign:
            print_warning(f"warning: {file}: holds no run's row (no key or point: damaged?); left out")
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
    graph, trace = _one_of(table, "graph"), _one_of(table, "trace")
    ok = _unvaried(ok, labels)
    failures = marked.filter(pl.col("__failed")).select(
        pl.col(c).cast(pl.String) if c in marked.columns else pl.lit(None, pl.String).alias(c)
        for c in ("point", "seed", "status", "error")
    )
    return SweepFolder(path, source, ok, labels, failures.height, graph, unreadable, incomplete, tuple(notes), trace, failures)


def _one_of(table: pl.DataFrame, column: str) -> str | None:
    """The one value the runs record in `column` (their graph, their --trace), if they record one."""
    if column not in table.columns:
        return None
    values = table[column].drop_nulls().unique().to_list()
    return str(values[0]) if len(values) == 1 else None


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
    # Each run as summary.csv describes it: its point, what its sweep fixed, its varied values,
    # and how it went. Two points of one key (two copies of one file, say: the same run) are each
    # a row of their own, the one stored run's; a point and seed listed twice with one key, one
    # row. (Of a failed run shared by two points, the store keeps the first point's error; the
    # sweep ran the other point again for one naming its own file, which only summary.csv keeps.)
    described = [c for c in ("point", "set", "status", "error", *label_columns(listed)) if c in listed.columns]
    stale = [c for c in ours.columns if c in described or c in label_columns(table)]
    points = listed.unique([c for c in ("key", "point", "seed") if c in listed.columns], maintain_order=True)
    points = points.with_row_index("__listed").select("__listed", "key", *described)
    ours = ours.drop(stale).join(points, on="key", how="inner").sort("__listed", maintain_order=True).drop("__listed")
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
        print_warning(f"warning: {err}; the results store's runs are listed as they finished")
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
    print_warning(f"warning: {store}: {note}")
    return later.drop("__n", "__i"), [note]


def _read_summary(path: Path) -> pl.DataFrame:
    """summary.csv with its labels as written (read as numbers, `1e3` would become 1000.0). A
    row cut short, a run with no point, and two runs of one point and seed are refused."""
    refuse_short_rows(path)
    try:
        text = pl.read_csv(path, infer_schema_length=0, glob=False)  # (a folder may be named with [ or *)
        labels = [c for c in _varied(text, path) if c in text.columns and c != "seed"]
        table = pl.read_csv(path, infer_schema_length=None, schema_overrides=dict.fromkeys(labels, pl.String), glob=False)
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot be read as CSV ({first_line(err)})") from None
    counted = _runs_counted(path.with_name("points.csv"))
    if counted is not None and counted > table.height:  # (cut at the end of a line, it reads whole)
        raise UsageError(f"{path}: lists {table.height} runs, but points.csv beside it counts {counted} (cut short?)")
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


def _runs_counted(points: Path) -> int | None:
    """The runs points.csv counts (its `runs`, summed over the points), which a sweep writes
    with summary.csv; None without a points.csv that reads."""
    try:
        runs = pl.read_csv(points, columns=["runs"], schema_overrides={"runs": pl.Int64}, glob=False)["runs"]
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError):
        return None
    return int(runs.sum()) if runs.null_count() == 0 else None


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
