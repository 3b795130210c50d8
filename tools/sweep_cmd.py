"""`roundhouse sweep GRAPH --vary name=v1,v2,...`: simulate every combination, in parallel."""

from __future__ import annotations

import itertools
from pathlib import Path

from rich.console import Console
from rich.table import Table

from roundhouse.errors import UsageError
from roundhouse.runtime.compiler import Override, compile_file
from roundhouse.runtime.files import make_folder, writing
from roundhouse.runtime.simulate import load_cluster
from roundhouse.runtime.sweep import RunSpec, check_sweepable, run_all, summaries
from roundhouse.tools.common import positive_int, seconds


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
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE", help="a fixed override")
    p.add_argument("--cluster", help="cluster spec for every run")
    p.add_argument("--until", help="stop each run at this time (e.g. 48h)")
    p.add_argument("--workers", type=positive_int, default=None, help="runs at a time (default: one per core)")
    p.add_argument("--out", help="folder for summary.csv (one row per run)")
    p.set_defaults(handler=sweep)


def split_values(text: str) -> list[str]:
    """Split on commas that are not inside [brackets] or "quotes"."""
    out, depth, quoted, current = [], 0, False, ""
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "[":
            depth += 1
        elif not quoted and ch == "]":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    out.append(current.strip())
    return [v for v in out if v]


def sweep(args) -> int:
    grid = []
    for item in args.vary:
        name, sep, values = item.partition("=")
        if not sep or not name.strip() or not split_values(values):
            raise UsageError(f"--vary {item}: write --vary element.field=v1,v2 or --vary setting=v1,v2")
        grid.append((name.strip(), split_values(values)))
    until = seconds(args.until, "--until")
    out = make_folder(args.out, "--out") if args.out is not None else None
    specs = []
    for combo in itertools.product(*(values for _, values in grid)):
        varied = [Override(f"{n}={v}", flag="--vary") for (n, _), v in zip(grid, combo)]
        # Every combination is checked, its cluster included, before any runs.
        graph = compile_file(args.graph, [*args.overrides, *varied])
        check_sweepable(graph)
        load_cluster(graph, args.cluster)
        overrides = tuple(args.overrides) + tuple(o.text for o in varied)
        labels = {n: v for (n, _), v in zip(grid, combo)}
        specs.append(RunSpec(str(Path(args.graph).resolve()), overrides, args.cluster, until, labels))
    outcomes = run_all(specs, args.workers)
    frame = summaries(outcomes)
    table = Table(title=f"{Path(args.graph).name}: {len(specs)} runs")
    shown = [n for n, _ in grid] + ["jobs_finished", "avg_jct_s", "avg_responsiveness_s", "utilization"]
    for col in shown:
        table.add_column(col)
    for row in frame.iter_rows(named=True):
        table.add_row(*[_fmt(row.get(c)) for c in shown])
    Console().print(table)
    if out is not None:
        with writing(out / "summary.csv"):
            frame.write_csv(out / "summary.csv")
    return 0


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "—" if v is None else str(v)
