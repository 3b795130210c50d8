"""`roundhouse sweep GRAPH --vary name=v1,v2,...`: simulate every combination, in parallel, on
this machine or on a Dask cluster, storing each run's result as it finishes (docs/sweeps.md)."""

from __future__ import annotations

import math
import os
import sys
import uuid
from collections.abc import Collection
from contextlib import closing
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from roundhouse.errors import print_warning, shown_text
from roundhouse.runtime.files import check_output_file, results_folder, writing
from roundhouse.runtime.results_store import SUFFIX, ResultsStore
from roundhouse.runtime.sweep import (
    RUN_COLUMNS,
    RunSpec,
    fixed_text,
    label_columns,
    point_text,
)
from roundhouse.runtime.sweep_exec import DaskExecutor, LocalExecutor, Task
from roundhouse.tools.common import add_overrides, positive_int
from roundhouse.tools.outputs.console import forgiving, stderr_console, stdout_console
from roundhouse.tools.outputs.stdout_result import plural, result_console, text_of, write_result
from roundhouse.tools.results import in_units_of_table
from roundhouse.tools.sweep_plan import plan

# The metrics the printed table shows (the stored rows and CSV files have them all).
SHOWN_METRICS = ("jobs_finished", "avg_jct_s", "avg_responsiveness_s", "utilization")

# The tables a sweep writes in --out when it ends.
TABLES = ("summary.csv", "points.csv")


def register(sub) -> None:
    p = sub.add_parser("sweep", help="simulate a graph over a grid of settings and arguments")
    p.add_argument("graph", help="the .sched file")
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="NAME=V1,V2,...",
        help="an element argument (element.field) or setting and its values; repeat for a grid",
    )
    add_overrides(p, "a fixed override (element.field=value or a graph setting); repeatable")
    p.add_argument("--cluster", help="cluster spec for every run")
    p.add_argument(
        "--trace",
        metavar="FILE",
        help="the trace every run reads, in place of the path of the graph's one TraceSource (a graph with several is refused)",
    )
    p.add_argument(
        "--until", help="stop each run at this simulated time (e.g. 48h; inf: when every job has finished, as without --until)"
    )
    p.add_argument(
        "--sink",
        metavar="NAME",
        help="the JobMetrics element whose summary the sweep compares runs by (needed when the graph has several)",
    )
    p.add_argument(
        "--seeds",
        type=positive_int,
        default=1,
        metavar="N",
        help="runs per point, with seeds S..S+N-1 from the graph's seed S; the summary gives 95%% confidence intervals",
    )
    p.add_argument("--timeout", help="wall-clock time one run may take (e.g. 10min); a run past it is recorded as failed")
    p.add_argument("--workers", type=positive_int, default=None, help="local runs at a time (default: one per core)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786)")
    p.add_argument(
        "--out",
        help="folder for the results store (results/, one Parquet file per run: a repeated sweep skips finished "
        "runs), summary.csv (one row per run) and points.csv (one row per point)",
    )
    p.set_defaults(handler=sweep)


def sweep(args) -> int:
    names, runs, timeout = plan(args)  # (before --out is made: a bad grid leaves no folder behind)
    # Connected before --out is made too: a Dask address that does not answer leaves no folder.
    executor = DaskExecutor(args.dask) if args.dask is not None else LocalExecutor(args.workers)
    try:
        return _sweep_on(executor, args, names, runs, timeout)
    finally:
        executor.close()


def _sweep_on(executor, args, names: tuple[str, ...], runs: list, timeout: float | None) -> int:
    """The sweep's runs on `executor`: those not already in the results store, the tables of all."""
    out = results_folder(args.out, "--out", "sweep") if args.out is not None else None
    # (What the sweep says goes nowhere once its reader has gone, `sweep ... | head` say: the
    # runs go on, and the store and tables are written, as if it had been read.)
    err = stderr_console()
    store = None
    finished: dict[str, dict] = {}
    others: set[str] = set()
    if out is not None:
        # (Before the store is made: a table that cannot be written would fail the sweep once
        # every run is done, and leave an empty store behind.)
        for table in TABLES:
            check_output_file(out / table, "--out")
        store = ResultsStore(out / "results", labels=names)
        store.lock()
        # An earlier sweep's tables would describe the store as complete until this one ends
        # (and tables a sweep stopped while writing are no one's).
        for table in TABLES:
            with writing(out):
                (out / table).unlink(missing_ok=True)
                for partial in out.glob(f".{table}.*{_PARTIAL}"):
                    partial.unlink(missing_ok=True)
        ours = {key for key, _ in runs}
        stored = store.read()
        others = set(label_columns(stored)) - set(names)
        for row in stored.iter_rows(named=True):
            if row["key"] in ours and row["status"] == "ok":
                finished[row["key"]] = row
        for path, what in _damaged_files(store, ours):
            print_warning(f"warning: {path}: {what}", err.file)
    rows = dict(finished)
    # Points of one key (two copies of one file, say) are one run, run once (as its first point)
    # and listed for each.
    shared: dict[str, list[str]] = {}  # each run's points and seeds, as its progress line names them
    first_spec: dict[str, RunSpec] = {}
    for key, spec in runs:
        first_spec.setdefault(key, spec)
        texts = shared.setdefault(key, [])
        text = f"{point_text(spec.labels)} seed={spec.labels['seed']}"
        if text not in texts:
            texts.append(text)
    total = len(shared)
    try:
        tasks = [Task(key, first_spec[key]) for key in shared if key not in finished]
        if finished and store is not None:
            err.print(
                f"{len(finished):,} of {total:,} runs already in {store.folder}; "
                + (f"running the other {len(tasks):,}" if tasks else "nothing to run"),
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        if tasks:
            err.print(
                f"running {plural(len(tasks), 'run')} on {executor.where_for(len(tasks))}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        same = len(runs) - total
        if same:
            err.print(
                f"{same:,} of the grid's {len(runs):,} runs {'is' if same == 1 else 'are'} the same run as another (the same "
                "graph, values and files): each such run is run once, and listed for each of its points",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        with SweepProgress(total, len(finished), err, shared) as progress, closing(executor.run(tasks, timeout)) as results:
            for row in results:
                if store is not None:
                    with writing(store.folder):
                        store.write(row)
                rows[row["key"]] = row
                progress.update(row)
        own = _own_errors(executor, runs, first_spec, rows, timeout, err)
        frame = _per_run(runs, rows, names, others, own)
        points = point_summary(frame, names)
        if out is not None:
            # (While the store is locked: a sweep started on the folder next removes them.
            # points.csv first: a folder with summary.csv has both, whole.)
            with writing(out):
                _write_tables(out, {"points.csv": points, "summary.csv": frame.drop("traceback", strict=False)})
    except KeyboardInterrupt:  # (Ctrl-C, or SIGTERM: the command line says which)
        _say_interrupted(err, rows, total, store, args.dask is not None)
        raise
    finally:
        if store is not None:
            store.unlock()
    print_summary(Path(args.graph).name, names, frame, points, only_result=out is None)
    if seeds_repeat_one_run(points):
        print(
            f"note: every point's seeds gave the same results: nothing in {shown_text(Path(args.graph).name)} draws at "
            "random from the graph's seed (an element with a seed of its own draws the same in every run, a TraceSource "
            "without `rate` reads its trace's times as they are), so each point's runs repeat one run, and their "
            "intervals of 0 measure nothing",
            file=err.file,
        )
    failed = frame.filter(pl.col("status") != "ok")
    if failed.height:
        _say_failed(failed, frame.height, rows, store, getattr(args, "debug", False))
        return 1
    return 0


def _own_errors(executor, runs, first_spec: dict[str, RunSpec], rows: dict[str, dict], timeout, err: Console) -> dict:
    """The rows of the points whose run, shared with an earlier point (their files have the same
    contents), failed on a file that the first point's --vary value named: each such point is run
    again, alone, so that its error names its own file and value, not the first point's. Such a
    failure is found as its files are read, so these runs are short; a shared run that succeeds
    is run once. By (key, point); the results store keeps the shared run's row."""
    again = [Task(key, spec) for key, spec in runs if _failed_on_a_value(rows.get(key), first_spec[key], spec)]
    if not again:
        return {}
    err.print(
        f"running {plural(len(again), 'run')} again, each for a point of a failed run shared with another whose "
        "--vary value named another file: for its error to name its own",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    own = {}
    with SweepProgress(len(again), 0, err) as progress, closing(executor.run(again, timeout)) as results:
        for row in results:
            own[row["key"], row["point"]] = row
            progress.update(row)
    return own


def _failed_on_a_value(row: dict | None, first: RunSpec, spec: RunSpec) -> bool:
    """Whether `row`, the run of `first`, failed on a file named by a --vary value of `first`
    that `spec` (a point of the same run) gives otherwise."""
    if spec is first or row is None or row["status"] != "error" or not row["error"]:
        return False
    differ = [name for name, value in first.labels.items() if spec.labels.get(name) != value]
    return any(row["error"].startswith(shown_text(f"--vary {name}={first.labels[name]}: ")) for name in differ)


def _damaged_files(store: ResultsStore, ours: Collection[str]) -> list[tuple[Path, str]]:
    """The store's files that hold no readable run, each with what becomes of it: a file named
    by the key of one of this sweep's runs (`ours`) is that run's, which is done again and
    written over it; any other is no run of this sweep, and is left as it is."""

    def fate(path: Path) -> str:
        if path.name.removesuffix(SUFFIX) in ours:
            return "its run, one of this sweep's, is done again and written over it"
        return "not a run of this sweep: left alone"

    damaged = [(path, f"cannot be read (damaged?); {fate(path)}") for path in store.unreadable]
    damaged += [
        (path, f"holds no run's row (no key or point: not written by a sweep, or damaged); {fate(path)}")
        for path in store.foreign
    ]
    return damaged


# The end of the name of a table being written (hidden, beside it, until it is whole).
_PARTIAL = ".partial"


def _write_tables(out: Path, tables: dict[str, pl.DataFrame]) -> None:
    """Write each table to `out` whole or not at all, in the order given: each is written to a
    hidden file beside it, flushed to disk, then renamed over it, once all are written. A sweep
    stopped, or a disk that fills, while they are written leaves none of them cut short."""
    partials = {name: out / f".{name}.{uuid.uuid4().hex}{_PARTIAL}" for name in tables}
    try:
        for name, frame in tables.items():
            with open(partials[name], "wb") as f:
                frame.write_csv(f)
                f.flush()
                os.fsync(f.fileno())
        for name, partial in partials.items():
            os.replace(partial, out / name)
    finally:
        for partial in partials.values():
            partial.unlink(missing_ok=True)


def _say_failed(failed: pl.DataFrame, total: int, rows: dict[str, dict], store: ResultsStore | None, debug: bool) -> None:
    """The failed runs, a line each; with --debug, then each one's Python traceback, else where
    the tracebacks are kept (each run's row in the store has its own)."""
    err = forgiving(sys.stderr)
    print(f"{failed.height:,} of {total:,} runs failed:", file=err)
    for row in failed.iter_rows(named=True):
        print(f"  {row['point']} seed={row['seed']}: {row['status']}: {row['error']}", file=err)
    traced = [(row, text) for row in failed.iter_rows(named=True) if (text := rows[row["key"]].get("traceback"))]
    if not traced:  # (a timeout, say, has no traceback to point to)
        return
    if debug:
        for row, text in traced:
            print(f"\n{row['point']} seed={row['seed']}:\n{text.rstrip()}", file=err)
    elif store is not None:
        print(
            f"(the Python tracebacks are in the column traceback of {store.folder}/KEY{SUFFIX}, KEY a failed "
            "run's key; or run again with --debug to see them here)",
            file=err,
        )
    else:
        print("(the Python tracebacks: run again with --debug)", file=err)


def _say_interrupted(err: Console, rows: dict[str, dict], total: int, store: ResultsStore | None, on_dask: bool) -> None:
    """What an interrupted sweep leaves: the runs kept, and how to go on."""
    done = sum(1 for row in rows.values() if row["status"] == "ok")
    if store is not None:
        text = f"{done:,} of {total:,} runs kept in {store.folder}; run the same command to resume"
    else:
        text = f"{done:,} of {total:,} runs had finished; none is kept without --out"
    if on_dask and len(rows) < total:  # (stopped after its last run came back: none is under way)
        text += " (the runs under way on the Dask cluster were told to stop)"
    err.print(text, highlight=False, markup=False, soft_wrap=True)


def _per_run(
    runs, rows: dict[str, dict], names: tuple[str, ...], others: Collection[str] = (), own: dict | None = None
) -> pl.DataFrame:
    """One row per run of this sweep, in grid order; labels first, then the seed, the outcome and
    metrics. A run stored by an earlier sweep that varied other names (`others`: its label
    columns) is described as this sweep's: by this sweep's names and point. `own`: the rows of
    points run again for their own errors (`_own_errors`), by key and point."""
    own = own or {}
    ordered = [
        {
            **{k: v for k, v in own.get((key, point_text(spec.labels)), rows[key]).items() if k not in others},
            **{n: str(spec.labels[n]) for n in names},
            "set": fixed_text(spec.fixed),
            "point": point_text(spec.labels),
        }
        for key, spec in runs
    ]
    frame = pl.DataFrame(ordered, infer_schema_length=None)
    first = [*names, "seed", "status", "error"]
    rest = [
        c for c in frame.columns if c not in first and c not in ("set", "point", "graph", "trace", "finished_at", "traceback")
    ]
    return frame.select([*dict.fromkeys(first), *rest, "set", "point"])


def mean_ci(values: list[float]) -> tuple[float, float | None]:
    """The mean and the half-width of its 95% confidence interval (Student's t), None for one value."""
    from scipy import stats

    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    if min(values) == max(values):  # (identical runs: no spread, where the sum's rounding would show one)
        return values[0], 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)


def point_summary(frame: pl.DataFrame, names: tuple[str, ...]) -> pl.DataFrame:
    """One row per grid point: its runs, how many failed, and each metric's mean and 95% CI half-width.
    A metric that no run has a value of (avg_jct_s when no job finished) has a column of no type
    of number, and is a metric still: its mean and half-width are empty."""
    reserved = set(RUN_COLUMNS) | set(names)
    metrics = [c for c, t in frame.schema.items() if c not in reserved and (t.is_numeric() or t == pl.Null)]
    out = []
    for point in dict.fromkeys(frame["point"].to_list()):
        runs = frame.filter(pl.col("point") == point)
        ok = runs.filter(pl.col("status") == "ok")
        # A varied seed is pooled like the seeds of --seeds (the point leaves it out): its cell
        # lists the seeds pooled rather than claim the first.
        row = {n: ",".join(map(str, dict.fromkeys(runs[n].to_list()))) if n == "seed" else runs[n][0] for n in names}
        row |= {"runs": runs.height, "failed": runs.height - ok.height}
        for m in metrics:
            values = [float(v) for v in ok[m].to_list() if v is not None]
            mean, half = mean_ci(values) if values else (None, None)
            row[f"{m}_mean"] = mean
            row[f"{m}_ci95"] = half
        out.append(row)
    return pl.DataFrame(out, infer_schema_length=None)


def seeds_repeat_one_run(points: pl.DataFrame) -> bool:
    """Whether the runs of each point's seeds all gave the same values (every interval 0), where
    some point has several runs that finished: then no run drew anything from its seed."""
    several = points.filter((pl.col("runs") - pl.col("failed")) >= 2)
    widths = several.select(pl.col("^.*_ci95$")).to_numpy().ravel() if several.height else []
    known = [w for w in widths if w is not None and w == w]
    return bool(known) and all(w == 0.0 for w in known)


def print_summary(graph_name: str, names, frame: pl.DataFrame, points: pl.DataFrame, only_result: bool = False) -> None:
    """The table of the sweep's points. `only_result`: the sweep has no --out, and the table is
    all it leaves: lost (a full disk), it is an error, not a sweep that went well."""
    seeds = frame.filter(pl.col("point") == frame["point"][0]).height
    title = f"{graph_name}: {plural(frame.height, 'run')}" + (f", {seeds:,} seeds per point (mean ± 95% CI)" if seeds > 1 else "")
    table = Table(title=escape(shown_text(title)))  # (rich reads [brackets] in cells as markup)
    shown = [m for m in SHOWN_METRICS if f"{m}_mean" in points.columns]
    for col in [*names, "runs", *shown]:
        table.add_column(escape(col), overflow="fold")  # (a varied name cut short is no name: wrapped)
    # Times in one readable unit, chosen as `roundhouse report` chooses it for its table.
    times = in_units_of_table({m: [*points[f"{m}_mean"], *points[f"{m}_ci95"]] for m in shown})
    for row in points.iter_rows(named=True):
        runs = f"{row['runs']:,}" if not row["failed"] else f"{row['runs'] - row['failed']:,}/{row['runs']:,} ok"
        cells = [_fmt(row[n]) for n in names] + [runs]
        for m in shown:
            mean, half = row[f"{m}_mean"], row[f"{m}_ci95"]
            fmt = times if m.endswith("_s") else _fmt
            cells.append(fmt(mean) + (f" ± {fmt(half)}" if half is not None else ""))
        table.add_row(*cells)
    if not only_result:  # (a reader gone, `| head`, or a full disk: --out holds the results)
        stdout_console().print(table)
        return
    console = result_console()
    console.print(table)
    write_result(text_of(console), "the sweep's table")


def _fmt(v) -> str:
    if isinstance(v, float):
        # (Four significant figures, but a mean of thousands of jobs whole, its digits grouped,
        # not 1.234e+04.)
        return f"{v:,.0f}" if math.isfinite(v) and abs(v) >= 1000 else f"{v:.4g}"
    return "—" if v is None else escape(str(v))


class SweepProgress:
    """Runs done, failed and remaining: a progress bar on a terminal, else one line per run."""

    def __init__(self, total: int, done: int, console: Console, shared: dict[str, list[str]] | None = None):
        self.total, self.done, self.failed = total, done, 0
        self.console = console
        self.shared = shared or {}  # a run's key -> each point and seed it is the run of, when several
        self._bar = None
        if console.is_terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("sweep"),
                BarColumn(),
                TextColumn("{task.fields[counts]}"),
                TimeElapsedColumn(),
                console=console,
            )
            self._task = self._bar.add_task("sweep", total=total, completed=done, counts=self._counts())

    def _counts(self) -> str:
        return f"{self.done:,} done, {self.failed:,} failed, {self.total - self.done - self.failed:,} remaining"

    def __enter__(self):
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def update(self, row: dict) -> None:
        if row["status"] == "ok":
            self.done += 1
        else:
            self.failed += 1
        what = f"{row['point']} seed={row['seed']}"
        also = [text for text in self.shared.get(row["key"], []) if text != what]
        what += f" (also {', '.join(also)}: the same run)" if also else ""
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done + self.failed, counts=self._counts())
            if row["status"] != "ok":
                self._bar.console.print(f"{row['status']}: {what}: {row['error']}", highlight=False, markup=False)
            return
        took = f" in {row['run_s']:.1f} s" if row.get("run_s") is not None else ""
        note = f": {row['error']}" if row["status"] != "ok" else ""
        self.console.print(
            f"[{self._counts()}] {row['status']} {what}{took}{note}", highlight=False, markup=False, soft_wrap=True
        )
