"""`roundhouse run GRAPH`: simulate a graph, print a summary, write per-job tables."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from roundhouse.errors import UsageError, print_warning
from roundhouse.runtime.compiler import refuse_empty_graph_path
from roundhouse.runtime.explain import FILE_NAME
from roundhouse.runtime.files import first_missing, remove_made, results_folder, writing
from roundhouse.runtime.results_files import write_results
from roundhouse.runtime.simulate import load_cluster, simulate
from roundhouse.runtime.useless_runs import live_only_warnings
from roundhouse.runtime.values import format_duration
from roundhouse.tools.common import add_overrides, seconds
from roundhouse.tools.live_run import add_live_options, refuse_live_only, run_live
from roundhouse.tools.results import compile_with_overrides, print_summary
from roundhouse.tools.run_snapshot import check_snapshot_file, refuse_snapshot_without_until, refuse_unsavable_graph, run_and_save

if TYPE_CHECKING:
    from rich.console import Console


def register(sub) -> None:
    p = sub.add_parser("run", help="simulate a graph and report JCT, responsiveness, utilization")
    p.add_argument("graph", help="the .sched file")
    p.add_argument("--cluster", help="cluster spec: a .toml file or a shorthand such as 32x4:V100 or 36:36:36")
    p.add_argument(
        "--trace", help="trace file for the graph's one TraceSource, in place of its path (a graph with several is refused)"
    )
    add_overrides(p, "override an element argument (element.field=value) or a graph setting (round=10min); repeatable")
    p.add_argument(
        "--until", help="stop the simulation at this time (e.g. 48h; inf: when every job has finished, as without --until)"
    )
    p.add_argument(
        "--snapshot",
        metavar="FILE",
        help="with --until: also save the simulation's state at that time to FILE, as Simulation.save does, "
        "for `roundhouse whatif FILE` or Simulation.load",
    )
    p.add_argument("--out", help="folder for jobs.csv, summary.json, run.json and explain.parquet")
    p.add_argument(
        "--no-explain",
        dest="explain",
        action="store_false",
        help="with --out, keep no record of why each job waited or ran (explain.parquet, read by `roundhouse explain`)",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="print nothing but errors (with --live, the log too shows only errors unless --log-level names another level)",
    )
    p.add_argument(
        "--live", metavar="ADDR", help="run live on `roundhouse agent` nodes, listening on ADDR (as `roundhouse serve`)"
    )
    add_live_options(p.add_argument_group("live runs (with --live)"), given_only=True)
    p.set_defaults(handler=run)


def run(args) -> int:
    refuse_empty_graph_path(args.graph)
    # (options that a run would ignore are refused, so that a value given is a value used)
    if not args.explain and args.out is None:
        raise UsageError("--no-explain needs --out: without it nothing is written, explain.parquet included")
    if args.live is not None:
        if args.snapshot is not None:
            raise UsageError(
                "--snapshot is for a simulation: a live run keeps its state in its journal (--journal), "
                "which `roundhouse whatif` reads as it reads a snapshot"
            )
        if not args.live.strip():  # (often an unset shell variable: not a simulation asked for)
            raise UsageError("--live: the address is empty (give one such as tcp://127.0.0.1:5555)")
        return run_live(args, args.live)
    refuse_live_only(args)
    until = seconds(args.until, "--until", endless=True)
    if args.snapshot is not None:
        refuse_snapshot_without_until(args.snapshot, args.until, until)
    graph = compile_with_overrides(args)
    if not args.quiet:  # (a simulation, known only here: `check` cannot tell whether the graph is to be served live)
        for warning in live_only_warnings(graph):
            print_warning(warning)
    if args.snapshot is not None:
        refuse_unsavable_graph(args.snapshot, graph)
    cluster = load_cluster(graph, args.cluster)
    created = first_missing(args.out) if args.out is not None else None
    out = results_folder(args.out, "--out", "run") if args.out is not None else None
    try:
        if args.snapshot is not None:  # (after --out's folder is made: the file may go in it)
            check_snapshot_file(args.snapshot, out)
        ended = _run_into(args, graph, cluster, until, out)
    except BaseException:
        if created is not None and out is not None:
            remove_made(out, created)
        raise
    if ended:  # (the run's results are written: only the snapshot could not be)
        raise UsageError(ended)
    return 0


def _run_into(args, graph, cluster, until, out) -> str:
    """Run and write the results; returns, for a run that was to be saved but had ended before
    --until, why no snapshot was written ("" otherwise)."""
    progress = None
    if not args.quiet:  # (rich only when something is printed: importing it is a start-up cost)
        from rich.console import Console

        console = Console(stderr=True)
        progress = _Progress(console) if console.is_terminal else None
    try:
        on_round = progress.update if progress else None
        # (The record is written as the run goes, beside it: write_results finishes the file.)
        record = out / FILE_NAME if out is not None and args.explain else None
        if args.snapshot is None:
            result, ended = simulate(graph, cluster, until, on_round, explain=record is not None, explain_to=record), ""
        else:
            result, ended = run_and_save(args, until, on_round, record)
    finally:
        if progress:
            progress.close()
    if not args.quiet and out is None:  # (the summary is the run's one result: lost, it is an error)
        from roundhouse.tools.outputs.stdout_result import result_console, text_of, write_result

        console = result_console()
        print_summary(console, graph, cluster, result)
        write_result(text_of(console), "the run's summary")
    elif not args.quiet:  # (a reader gone, `| head`, does not keep the results from being written)
        from roundhouse.tools.outputs.console import stdout_console

        print_summary(stdout_console(), graph, cluster, result)
    if out is not None:
        with writing(out):
            write_results(out, graph, cluster, result, trace=args.trace)
        if not args.quiet:
            Console(stderr=True).print(f"results written to {args.out}/", markup=False, highlight=False, soft_wrap=True)
    return ended


class _Progress:
    """A progress line for long runs, refreshed a few times a second."""

    def __init__(self, console: Console):
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
        )
        self._task = None
        self._last = 0.0
        self._started = time.perf_counter()

    def update(self, ctx) -> None:
        now = time.perf_counter()
        if now - self._last < 0.2:
            return
        self._last = now
        if self._task is None:
            if now - self._started < 1.0:
                return
            self._bar.start()
            self._task = self._bar.add_task("")
        finished = int((ctx.jobs.column("status") == 2).sum())
        self._bar.update(
            self._task,
            description=f"round {ctx.round_index}  t={format_duration(round(ctx.now))}  "
            f"{finished:,}/{len(ctx.jobs):,} jobs finished  {len(ctx.running_rows):,} running",
        )

    def close(self) -> None:
        if self._task is not None:
            self._bar.stop()
