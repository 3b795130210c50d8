"""What the commands that run a graph share: compiling it with --set and --trace, printing a
run's summary, writing its results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from roundhouse.errors import UsageError
from roundhouse.runtime.compiler import Override, compile_graph
from roundhouse.runtime.dsl.loader import load
from roundhouse.tools.common import overrides
from roundhouse.traces.csvtext import check_trace_file

if TYPE_CHECKING:
    from rich.console import Console


def compile_with_overrides(args):
    """The graph of `args.graph`, with `--set` overrides and `--trace` replacing the path of
    every TraceSource."""
    flat = load(args.graph)
    given = overrides(args.overrides)
    if args.trace is not None:
        sources = [d.name for d in flat.decls.values() if d.class_name == "TraceSource"]
        if not sources:
            raise UsageError(f"--trace: {args.graph} has no TraceSource element whose trace it could replace")
        check_trace_file(args.trace)  # the message a trace reader gives, before the graph is built
        quoted = json.dumps(str(Path(args.trace).resolve()))
        given += [Override(f"{name}.path={quoted}") for name in sources]
    return compile_graph(flat, given)


def in_units(span_s: float | None):
    """How a summary writes times: in hours for runs of hours, else minutes or seconds (a live
    run on a laptop lasts a minute; a simulated trace, days)."""
    span = span_s or 0.0
    unit, size = ("h", 3600.0) if span >= 7200 else ("min", 60.0) if span >= 120 else ("s", 1.0)
    return lambda seconds: "—" if seconds is None else f"{seconds / size:.2f} {unit}"


_RESOURCES = (("CPU", "cpu_utilization"), ("memory", "memory_utilization"))


def print_summary(console: Console, graph, cluster, result, live: bool = False) -> None:
    from rich.table import Table

    for name, report in result.reports.items():
        _print_objectives(console, name, report)
        summary = report.get("summary")
        if summary is None:
            continue
        table = Table(title=f"{Path(graph.path).name} · {name} · {cluster.describe()}", show_header=False)
        table.add_column("metric")
        table.add_column("value", justify="right")
        show = in_units(summary["makespan_s"])
        rows = [
            ("jobs finished / tracked", f"{summary['jobs_finished']} / {summary['jobs_tracked']}"),
            ("average JCT", show(summary["avg_jct_s"])),
            ("median JCT", show(summary["median_jct_s"])),
            ("p95 JCT", show(summary["p95_jct_s"])),
            ("p99 JCT", show(summary["p99_jct_s"])),
            ("average responsiveness", show(summary["avg_responsiveness_s"])),
            ("average queueing", show(summary["avg_queue_s"])),
            ("makespan", show(summary["makespan_s"])),
            ("utilization", "—" if summary["utilization"] is None else f"{summary['utilization']:.1%}"),
            *((f"{what} utilization", f"{summary[key]:.1%}") for what, key in _RESOURCES if summary.get(key) is not None),
            ("preemptions", str(summary["preemptions"])),
        ]
        for k, v in rows:
            table.add_row(k, v)
        console.print(table)
    console.print(
        f"{result.rounds} rounds, {'ran' if live else 'simulated'} {in_units(result.end_s)(result.end_s)} in {result.wall_s:.2f} s "
        f"({result.rounds / max(result.wall_s, 1e-9):,.0f} rounds/s); stopped: {result.stop_reason}"
    )
    if result.world.unknown_models:
        console.print(
            "note: models not in the profile progress at one unit per second: " + ", ".join(sorted(result.world.unknown_models))
        )


def _print_objectives(console: Console, name: str, report: dict) -> None:
    """Sinks other than JobMetrics (cost, SLOs, fairness, ...) report flat dicts of numbers."""
    from rich.table import Table

    for key, value in report.items():
        if key == "summary" or not isinstance(value, dict):
            continue
        table = Table(title=f"{name} · {key}", show_header=False)
        table.add_column("metric")
        table.add_column("value", justify="right")
        for k, v in value.items():
            table.add_row(k, "—" if v is None else (f"{v:,.4g}" if isinstance(v, float) else str(v)))
        console.print(table)


def write_results(out: Path, graph, cluster, result) -> None:
    """One folder per run: the sinks' tables and summaries, and what was run (no wall times,
    so that the same inputs give byte-identical files)."""
    out.mkdir(parents=True, exist_ok=True)
    single = len(result.reports) == 1
    for element, report in result.reports.items():
        for key, value in report.items():
            stem = key if single else f"{element}-{key}"
            if hasattr(value, "write_csv"):
                value.write_csv(out / f"{stem}.csv")
            else:
                (out / f"{stem}.json").write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    run_info = {
        "graph": str(graph.path),
        "cluster": cluster.describe(),
        "settings": {k: (float(v) if isinstance(v, float) else v) for k, v in _settings(graph).items()},
        "rounds": result.rounds,
        "skipped_rounds": result.skipped_rounds,
        "passed_rounds": result.passed_rounds,
        "end_s": result.end_s,
        "stop_reason": result.stop_reason,
        "counters": result.counters,
    }
    (out / "run.json").write_text(json.dumps(run_info, indent=2, sort_keys=True, default=str) + "\n")
    from roundhouse.runtime.explain import FILE_NAME

    record = result.world.explain
    if record is not None:
        record.write(out / FILE_NAME, result.world)
    elif (out / FILE_NAME).is_file():  # an earlier run's record would not explain this one
        (out / FILE_NAME).unlink()


def _settings(graph) -> dict:
    import attrs

    return attrs.asdict(graph.settings)
