"""What the commands that run a graph share: compiling it with --set and --trace, and printing a
run's summary (its results folder is written by runtime/results_files.py)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from roundhouse.errors import RoundhouseError, RoundhouseErrors, SchedError, TraceError, UsageError, shown_text
from roundhouse.runtime import sweep
from roundhouse.runtime.compiler import Override, compile_graph
from roundhouse.runtime.dsl.loader import load
from roundhouse.runtime.element_failures import argument_error
from roundhouse.runtime.files import refuse_control_characters
from roundhouse.runtime.useless_runs import print_warnings_before_run, unstarted_notes, untracked_note
from roundhouse.tools.common import overrides
from roundhouse.tools.outputs.stdout_result import count_text, plural
from roundhouse.traces.csvtext import check_trace_file

if TYPE_CHECKING:
    from rich.console import Console


def compile_with_overrides(args):
    """The graph of `args.graph`, with `--set` overrides and `--trace` replacing the path of
    every TraceSource; what it would run to no use is warned of (runtime/useless_runs.py), unless
    `--quiet`."""
    graph = compile_with_trace(args.graph, overrides(args.overrides), args.trace, getattr(args, "cluster", None))
    if not getattr(args, "quiet", False):
        print_warnings_before_run(graph, getattr(args, "cluster", None))
    return graph


def compile_with_trace(
    graph,
    given: list[Override],
    trace: str | None,
    cluster: str | None = None,
    flag: str = "--trace",
    then: list[Override] | None = None,
):
    """The graph of the file `graph`, with overrides `given` and the trace file `trace`
    replacing the path of every TraceSource (`flag`: the option that gave it); `cluster`,
    the option `--cluster` if given, which a `--set cluster` would contradict. `then`: more
    overrides, applied after those (a what-if's changes to the run's own graph)."""
    flat = load(graph)
    given = list(given) + trace_overrides(flat, graph, given, trace, flag)
    for o in given:  # (--cluster would replace the cluster given with --set without a word)
        if cluster is not None and o.target == "cluster":
            raise UsageError(f"--cluster {cluster} and {o.label}: the cluster is given twice; keep one")
    compiled = compile_graph(flat, given + (then or []))
    check_traces(compiled, trace)
    return compiled


def trace_overrides(flat, graph, given: list[Override], trace: str | None, flag: str = "--trace") -> list[Override]:
    """The overrides that make the trace file `trace` (None: none given) the path of every
    TraceSource of the loaded graph `flat` (read from the file `graph`), by its whole path, so
    that a run in another folder reads the same file. `given`: the other overrides (--set,
    --vary), none of which may name a path the trace replaces."""
    if trace is None:
        return []
    sources = sweep.replaced_sources(flat, graph, flag)
    for o in given:  # (the trace would replace the path given with --set without a word)
        if o.target in {f"{name}.path" for name in sources}:
            raise UsageError(f"{flag} {trace} and {o.label}: {flag} replaces {o.target}; keep one")
    # (A TraceSource's path is a .sched string, which holds no such character: said of the option.)
    refuse_control_characters(trace, flag, "trace file")
    try:
        check_trace_file(trace)  # the message a trace reader gives, before the graph is built
    except UsageError as err:  # (an empty path names no file the message could start with: the option, then)
        raise UsageError(f"{flag}: {err}") from None
    return sweep.trace_overrides(flat, str(Path(trace).resolve()))


def trace_problems(graph, trace: str | None = None) -> list[RoundhouseError]:
    """What each TraceSource's trace lacks that a run needs, as far as its header says: said
    before anything is bound, created or waited for (`serve` would find it only once its agents
    had come). Only the header is read, so a trace of millions of jobs is checked as fast. A
    graph's own trace is named at the argument that names it; `trace`, the file an option gave
    every TraceSource (`--trace`), by its own name."""
    from roundhouse.runtime.simulate import load_elastic
    from roundhouse.traces.formats import check_trace_header

    problems: list[RoundhouseError] = []
    sources = [(name, el) for name, el in graph.elements.items() if type(el).__name__ == "TraceSource"]
    # Read as the run reads them: under the graph's elastic profile (whose own errors name its files).
    elastic = load_elastic(graph) if sources else None
    for name, el in sources:
        try:
            check_trace_header(el.path, el.format, elastic=elastic)
        except TraceError as err:
            if trace is not None:
                return [err]  # (every TraceSource reads it: once is enough)
            arg = _written_argument(graph, name, "path", first=True)
            written = arg.value.value if arg is not None and arg.value.kind == "string" else None
            # (relative to the file that writes the path, which an import may put in another folder)
            declared_in = str(Path(arg.value.location.path).parent) if arg is not None else str(Path(graph.path).parent)
            if written is None or (Path(declared_in) / written).resolve() != Path(el.path).resolve():
                problems.append(err)  # (a path given by a --set: the trace's error names its file)
                continue
            shown = written
            where = shown if err.row is None else f"{shown}:{err.row}"
            what = f"column '{err.column}': {err.message}" if err.column else err.message
            location = arg.value.location if arg is not None else el.declared_at
            problems.append(SchedError(f"argument 'path' of TraceSource: {where}: {what}", location))
    return problems + _model_problems(graph)


def _model_problems(graph) -> list[RoundhouseError]:
    """A source that gives its jobs models (`models=blox`) needs a model the graph's profile runs
    at every GPU count it draws: said now, not when the run starts."""
    from roundhouse.runtime.simulate import load_profile
    from roundhouse.traces.generators import PHILLY_GPU_COUNTS, model_choices, no_model_on

    sources = [el for el in graph.elements.values() if getattr(el, "models", None) == "blox"]
    if not sources:
        return []
    try:
        profile = load_profile(graph)
    except RoundhouseError as err:  # (its own message names the file)
        return [err]
    problems: list[RoundhouseError] = []
    for el in sources:
        counts = PHILLY_GPU_COUNTS if el.gpus == "philly" else (1,)
        missing = next((c for c in counts if not model_choices(profile, c)), None)
        if missing is not None:
            drawn = f"gpus={el.gpus} draws {', '.join(map(str, counts))} GPUs"
            problems.append(
                argument_error(
                    el, "models", f"argument 'models' of {type(el).__name__}: {no_model_on(profile, missing)} ({drawn})"
                )
            )
    return problems


def _written_argument(graph, element: str, field: str, first: bool = False):
    """Where the graph writes `field` of `element` (the argument's declaration, None if it does
    not: a default or a --set); `first`: the field may be written as the first unnamed argument."""
    decl = graph.decls.get(element)
    if decl is None:
        return None
    return next((a for i, a in enumerate(decl.args) if a.name == field or (first and a.name is None and i == 0)), None)


def check_traces(graph, trace: str | None = None) -> None:
    """`trace_problems` raised as errors: every one of them, whatever its kind."""
    problems = trace_problems(graph, trace)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise RoundhouseErrors(problems)


def in_units(span_s: float | None):
    """How a summary writes times: in hours for runs of hours, else minutes or seconds (a live
    run on a laptop lasts a minute; a simulated trace, days)."""
    span = span_s or 0.0
    unit, size = ("h", 3600.0) if span >= 7200 else ("min", 60.0) if span >= 120 else ("s", 1.0)
    return lambda seconds: "—" if seconds is None else f"{_two_figures(seconds / size)} {unit}"


def in_units_of_table(columns: Mapping[str, Iterable[object]]):
    """How a table of runs writes its times (`roundhouse sweep`'s printed table, `report`'s
    sweep page): in the unit in_units picks for the largest time the table shows, over every
    time column (a name ending in `_s`) of `columns`, the columns it shows by name with their
    cells. Taken from one column alone, another could read 3600.00 s beside 60.00 s. Cells that
    are not finite numbers are left out."""
    times = (
        abs(v)
        for name, cells in columns.items()
        if name.endswith("_s")
        for v in cells
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    )
    return in_units(max(times, default=0.0))


def _two_figures(value: float) -> str:
    """Two decimals, or as many more as keep two significant figures of a value below 0.1 (a
    30 s wait in a run of hours is 0.0083 h, not 0.01 h; 17 s is not 0.00 h)."""
    if value == 0 or not math.isfinite(value) or abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.{min(12, 1 - math.floor(math.log10(abs(value))))}f}"


def _rate(count: int, seconds: float) -> str:
    """A rate in whole numbers from 10 on, else to two significant figures (a run of a thousand
    GPUs can take seconds a round: 0.4 rounds/s is not 0)."""
    rate = count / max(seconds, 1e-9)
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"


_RESOURCES = (("CPU", "cpu_utilization"), ("memory", "memory_utilization"))


def print_summary(console: Console, graph, cluster, result, live: bool = False) -> None:
    from rich.markup import escape
    from rich.table import Table

    for name, report in result.reports.items():
        _print_objectives(console, name, report)
        summary = report.get("summary")
        if summary is None:
            continue
        # (a file's name as it is written: not obeyed by the terminal, nor read by rich as markup)
        title = escape(shown_text(f"{Path(graph.path).name} · {name} · {cluster.describe()}"))
        table = Table(title=title, show_header=False)
        table.add_column("metric")
        table.add_column("value", justify="right")
        for k, v in summary_rows(summary):
            table.add_row(k, v)
        console.print(table)
        if summary["jobs_tracked"] == 0 and len(result.world.jobs):
            element = getattr(graph, "elements", {}).get(name)
            console.print(untracked_note(name, element, result.world.jobs.column("job_id")), markup=False, highlight=False)
        elif summary.get("jobs_started", summary["jobs_tracked"]) < summary["jobs_tracked"]:
            console.print(
                f"note: {name}: {summary['jobs_tracked'] - summary['jobs_started']:,} of its {summary['jobs_tracked']:,} job(s) "
                f"never started; responsiveness is over the {summary['jobs_started']:,} that did, JCT and queueing over "
                f"the {summary['jobs_finished']:,} that finished"
            )
        running, preempted, failed = _started_unfinished(report.get("jobs")) or (0, 0, 0)
        if running + preempted:
            console.print(
                f"note: {name}: {running + preempted:,} job(s) started but had not finished when the run ended "
                f"({running:,} running, {preempted:,} preempted and waiting); JCT and queueing leave them out"
            )
        if failed:
            console.print(f"note: {name}: {failed:,} job(s) failed for good (status failed); JCT and queueing leave them out")
        track = getattr(getattr(graph, "elements", {}).get(name), "track", None)
        if track is not None and 0 < summary["jobs_tracked"] < len(track):
            console.print(
                f"note: {name} tracks ids {track.start}..{track.stop} but the run saw {summary['jobs_tracked']:,} of them: "
                "the window never filled, so it did not stop the run"
            )
    span = in_units(result.end_s)(result.end_s)
    if live:
        # A live run's clock is the wall clock, its rounds one a round's length: a time taken and
        # a rate would say it again, and a resumed run's rounds and clock count from its start,
        # while this scheduler's time does not ("ran 68 s in 49.92 s", of a run that ran 68 s).
        timing = f"ran {span}"
    else:
        timing = f"simulated {span} in {result.wall_s:.2f} s ({_rate(result.rounds, result.wall_s)} rounds/s)"
    console.print(f"{plural(result.rounds, 'round')}, {timing}; stopped: {result.stop_reason}")
    for note in unstarted_notes(graph, result):
        console.print(note, markup=False, highlight=False)
    if result.world.unknown_models:
        console.print(
            "note: models not in the profile progress at one unit per second: " + ", ".join(result.world.unknown_models)
        )
    for name, counters in result.counters.items():  # (a TraceSource's: `trace describe` shows them too)
        if counters.get("skipped") and getattr(graph.elements.get(name), "category", None) == "source":
            console.print(
                f"note: {name}: {counters['skipped']:,} record(s) of its trace skipped in reading: jobs that never ran, "
                "or asked for no GPU (`roundhouse trace describe` counts them)",
                markup=False,
                highlight=False,
            )


def _started_unfinished(jobs) -> tuple[int, int, int] | None:
    """How many of a metrics sink's jobs (its `jobs` table) had started but not finished when
    the run ended: running then, preempted and waiting to run again, and failed for good (a
    live job that crashed past its retries or could not run: it waits for nothing). None for
    a table without the columns that tell."""
    import polars as pl

    if not isinstance(jobs, pl.DataFrame) or not {"first_start_s", "finish_s", "status"} <= set(jobs.columns):
        return None
    open_ = jobs.filter(pl.col("first_start_s").is_not_null() & pl.col("finish_s").is_null())
    running = int((open_["status"] == "running").sum())
    failed = int((open_["status"] == "failed").sum())
    return running, open_.height - running - failed, failed


def summary_rows(summary: dict) -> list[tuple[str, str]]:
    """A metrics sink's summary as `roundhouse run` prints it and `roundhouse report` shows it:
    (metric, value) rows ("—" for a value the summary lacks)."""
    show = in_units(summary.get("makespan_s"))
    get = summary.get
    percent = lambda key: "—" if get(key) is None else f"{get(key):.1%}"  # noqa: E731
    return [
        ("jobs finished / tracked", f"{count_text(get('jobs_finished'))} / {count_text(get('jobs_tracked'))}"),
        ("average JCT", show(get("avg_jct_s"))),
        ("median JCT", show(get("median_jct_s"))),
        ("p95 JCT", show(get("p95_jct_s"))),
        ("p99 JCT", show(get("p99_jct_s"))),
        ("average responsiveness", show(get("avg_responsiveness_s"))),
        ("average queueing", show(get("avg_queue_s"))),
        ("makespan", show(get("makespan_s"))),
        ("utilization", percent("utilization")),
        *((f"{what} utilization", percent(key)) for what, key in _RESOURCES if get(key) is not None),
        ("preemptions", count_text(get("preemptions"))),
    ]


def objectives(report: dict) -> list[tuple[str, list[tuple[str, str]]]]:
    """What sinks other than JobMetrics (cost, SLOs, fairness, ...) report, flat dicts of
    numbers: (name, rows) for each, as `roundhouse run` prints them and `report` shows them."""
    return [
        (key, [(k, "—" if v is None else (f"{v:,.4g}" if isinstance(v, float) else count_text(v))) for k, v in value.items()])
        for key, value in report.items()
        if key != "summary" and isinstance(value, dict)
    ]


def _print_objectives(console: Console, name: str, report: dict) -> None:
    from rich.table import Table

    for key, rows in objectives(report):
        table = Table(title=f"{name} · {key}", show_header=False)
        table.add_column("metric")
        table.add_column("value", justify="right")
        for k, v in rows:
            table.add_row(k, v)
        console.print(table)
