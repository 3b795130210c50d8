"""`roundhouse whatif JOURNAL_OR_SNAPSHOT`: from a live scheduler's journal or a simulation's
snapshot, simulate forward under its own graph and under another (`--graph`, or its own with
`--set`), and print the metrics side by side (runtime/whatif.py; docs/whatif.md)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import attrs
from rich.markup import escape
from rich.table import Table

from roundhouse.errors import RoundhouseError, RoundhouseErrors, TraceError, UsageError, print_warning
from roundhouse.runtime.compiler import Override, compile_file
from roundhouse.runtime.engine import all_jobs_ended
from roundhouse.runtime.simulate import load_cluster, load_profile, new_world
from roundhouse.runtime.simulation import own_elements
from roundhouse.runtime.snapshot_paths import file_kind, is_snapshot, saved_state_kind
from roundhouse.runtime.whatif import (
    METRICS,
    WORLD_SETTINGS,
    check_journal_file,
    whatif,
    whatif_snapshot,
)
from roundhouse.runtime.world import World
from roundhouse.tools.common import add_overrides, overrides, seconds
from roundhouse.tools.outputs.console import forgiving
from roundhouse.tools.outputs.stdout_result import result_console, text_of, write_result
from roundhouse.tools.results import compile_with_trace, in_units


def register(sub) -> None:
    p = sub.add_parser(
        "whatif", help="simulate forward from a live scheduler's journal or a simulation's snapshot, under its graph and another"
    )
    p.add_argument(
        "journal",
        metavar="JOURNAL_OR_SNAPSHOT",
        help="the live scheduler's journal (its --journal file; it may still be running), or a simulation's snapshot "
        "(`roundhouse run GRAPH --until TIME --snapshot FILE`, or Simulation.save)",
    )
    p.add_argument("--graph", help="the other graph to compare with (default: the run's own, with --set)")
    add_overrides(p, "override an argument or setting of the other graph (element.field=value); repeatable")
    p.add_argument("--run-graph", help="the run's graph, if it is no longer where the journal says")
    add_overrides(p, "a --set the scheduler was started with; repeatable", "--run-set")
    p.add_argument("--run-trace", help="the scheduler's --trace, if it was given one")
    p.add_argument("--cluster", help="the run's cluster, if the scheduler was given --cluster")
    p.add_argument("--horizon", default="30d", help="simulate at most this far ahead (default 30d)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(handler=whatif_command)


def whatif_command(args) -> int:
    horizon, run_overrides, other_overrides = _own_options(args)
    if args.graph is not None and Path(args.graph).is_dir():
        raise UsageError(f"--graph {args.graph}: is a folder; give a .sched file")
    if args.graph is not None and not Path(args.graph).exists():
        raise UsageError(f"--graph {args.graph}: no such file; give a .sched file")
    for flag, value in (("--graph", args.graph), ("--run-graph", args.run_graph)):
        if value is not None:
            _refuse_a_state_as_graph(flag, value)
    if Path(args.journal).is_dir():
        # (A run's --out folder is what a new user has at hand; it records the run, not a state
        # the run could go on from.)
        ran = (Path(args.journal) / "summary.json").is_file()
        raise UsageError(
            f"{args.journal}: is a folder"
            + (" of a run's results, which hold no state to simulate on from" if ran else "")
            + "; give a live scheduler's journal file (its --journal) or a simulation's snapshot file (Simulation.save, "
            "docs/simulation-api.md)"
            + ("; `roundhouse run GRAPH --until TIME --snapshot FILE` saves a run's state at TIME" if ran else "")
        )
    if not Path(args.journal).exists():
        raise UsageError(
            f"{args.journal}: no such file; give a simulation's snapshot (Simulation.save) or a live scheduler's journal "
            "(its --journal file)"
        )
    kind = file_kind(Path(args.journal))
    if kind:  # (a named pipe would be read until a writer closes it, perhaps never)
        raise UsageError(
            f"{args.journal}: is {kind}, not a file; give a simulation's snapshot (Simulation.save) or a live "
            "scheduler's journal (its --journal file)"
        )

    def run_graph_file(journaled: str) -> Path:
        """The run's graph: --run-graph if given, else as the journal names it."""
        if args.run_graph:
            if not Path(args.run_graph).is_file():
                raise UsageError(f"--run-graph {args.run_graph}: no such file")
            return Path(args.run_graph)
        from roundhouse.runtime.serve import journaled_graph

        found = journaled_graph(journaled, args.journal)
        if not found.is_file():
            raise UsageError(
                f"the run's graph {journaled} is not there (the journal {args.journal} names it); give it with --run-graph"
            )
        return found

    def compile_run_graph(path: str, then=None):
        # (The run's graph as serve compiled it: the same --set, --trace and --cluster.)
        try:
            with own_elements():  # (its element files are its own: the other graph's may define classes of the same names)
                return compile_with_trace(run_graph_file(path), run_overrides, args.run_trace, args.cluster, "--run-trace", then)
        except RoundhouseError as err:
            if args.run_trace is None and _about_a_trace(err):
                raise UsageError(f"{err}\n  hint: {_RUN_TRACE_HINT}") from None
            raise

    snapshot_file = is_snapshot(args.journal)
    if not snapshot_file:  # (before anything else is read: a CSV or an image is said to be neither)
        check_journal_file(args.journal)
    if snapshot_file:  # (a snapshot holds its own world: what only a journal's run needs is refused)
        given = [
            flag
            for flag, value in (
                ("--cluster", args.cluster),
                ("--run-graph", args.run_graph),
                ("--run-set", args.run_set),
                ("--run-trace", args.run_trace),
            )
            if value not in (None, [])  # (an empty one too: an unset shell variable, say)
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)}: only for a live scheduler's journal; {args.journal} is a simulation's snapshot, which holds its own graph and cluster"
            )
    other = None
    if args.graph is not None:
        with own_elements():  # (as the run's: each side's element files are its own)
            other = compile_file(args.graph, other_overrides)
    elif args.overrides and snapshot_file:  # the simulation's own graph (and trace), other arguments
        from roundhouse.runtime.simulation import graph_of_snapshot
        from roundhouse.runtime.snapshot import read_header

        header, _ = read_header(args.journal)
        other = graph_of_snapshot(header, list(args.overrides))  # (checked above as written, naming --set)
    elif args.overrides:  # the run's own graph with other arguments
        from roundhouse.runtime.whatif import open_journal

        journal, meta = open_journal(args.journal)
        journal.db.close()
        other = compile_run_graph(meta["graph"], other_overrides)

    def load_world(graph) -> World:
        # The same world as the live scheduler's and a simulation's (elastic and pair profiles too).
        profile = load_profile(graph)
        return new_world(graph, load_cluster(graph, args.cluster, profile), profile)

    def warn(text: str) -> None:
        # (Before the other graph is simulated, for its figures are of the run's cluster. Said of
        # a --graph only: the run's own graph with --set has the settings the run had.)
        if args.graph is not None:
            print_warning(f"warning: {text}", forgiving(sys.stderr))

    if snapshot_file:
        point, projections = whatif_snapshot(args.journal, other, horizon, warn)
        run_file = Path(point["graph"])
    else:
        point, projections = whatif(args.journal, other, compile_run_graph, load_world, horizon, warn)
        run_file = run_graph_file(point["graph"])
    other_file = None if other is None else Path(args.graph) if args.graph is not None else run_file
    sides = _sides(run_file, other_file, args.graph is not None, bool(args.overrides))
    if args.json:
        out = [_as_dict(p) | side.as_json() for p, side in zip(projections, sides, strict=True)]
        write_result(_json_text({"from": point, "projections": out}, args.journal, point["kind"]) + "\n", "the comparison")
        return 0
    write_result(_table_text(point, projections, [side.header for side in sides]), "the comparison")
    return 0


def _own_options(args) -> tuple[float, list[Override], list[Override]]:
    """The horizon, --run-set and --set, checked with the command's other options that need no
    file read (an empty path, a world's setting in --set) before any graph is compiled or
    journal opened, and all their problems said at once."""
    problems: list[UsageError] = []

    def checked(check, default):
        try:
            return check()
        except UsageError as err:
            problems.append(err)
            return default

    def horizon() -> float:
        value = seconds(args.horizon, "--horizon", positive=True)
        if value is None or value == float("inf"):
            raise UsageError(f"--horizon {args.horizon}: must be a finite duration")
        return value

    found = checked(horizon, 0.0)
    run_overrides = checked(lambda: overrides(args.run_set, "--run-set"), [])
    other_overrides = checked(lambda: overrides(args.overrides), [])
    # (Either way the other graph goes on from the run's world: what built that world is the run's.)
    fixed = [o for o in other_overrides if o.target in _WORLD_SETTINGS]
    if fixed:
        journal = Path(args.journal)
        # (read only if a plain file: a named pipe's first bytes might never come)
        which = "snapshot" if journal.is_file() and is_snapshot(journal) else "run"
        problems.append(
            UsageError(
                f"{fixed[0].label}: the {which}'s {fixed[0].target} is its own (the other graph goes on from the {which}'s world)"
            )
        )
    # (An empty path is the current folder to pathlib: say what is missing, not "a directory".)
    if not args.journal.strip():
        problems.append(
            UsageError(
                "JOURNAL_OR_SNAPSHOT: got an empty path; give a live scheduler's journal file or a simulation's snapshot file"
            )
        )
    for flag, value, what in (
        ("--graph", args.graph, "a .sched file"),
        ("--run-graph", args.run_graph, "the run's .sched file"),
        ("--run-trace", args.run_trace, "the scheduler's --trace file"),
    ):
        if value is not None and not value.strip():
            problems.append(UsageError(f"{flag}: got an empty path; give {what}"))
    if len(problems) > 1:
        raise RoundhouseErrors(problems)
    if problems:
        raise problems[0]
    return found, run_overrides, other_overrides


def _refuse_a_state_as_graph(flag: str, path: str) -> None:
    """A snapshot or a journal given where a .sched file goes (two snapshots to compare, say):
    said so, rather than read as a graph's text that is not UTF-8. (A pipe, `--graph <(...)`,
    is not read here: what this read, the compiler would not.)"""
    what = saved_state_kind(path)
    if what:
        raise UsageError(
            f"{flag} {path}: {what}, not a .sched file; whatif simulates from the snapshot or journal given as its "
            f"first argument (JOURNAL_OR_SNAPSHOT), and {flag} names a graph's .sched file"
        )


def _json_text(comparison: dict, journal: str, kind: str = "journal") -> str:
    """The comparison as JSON. A value that is not a finite number, which JSON cannot hold (a
    journal's damage its checks missed), is a UsageError naming where it is, never invalid JSON.
    `kind`: what the file read is (a journal or a snapshot)."""
    try:
        return json.dumps(comparison, indent=2, allow_nan=False)
    except ValueError:
        where, value = _not_finite(comparison) or ("a value", "not finite")
        raise UsageError(
            f"{journal}: cannot print the comparison as JSON: {where} is {value}, not a finite number (is the {kind} damaged?)"
        ) from None


def _not_finite(value, where: str = "") -> tuple[str, str] | None:
    """Where in `value` (as a path like projections[0].metrics.avg_jct_s) the first number that
    is not finite is, and the number."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, str(value)
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _not_finite(item, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}".lstrip("."))
        if found:
            return found
    return None


# Settings the run's world was built with (a snapshot's, or a journal's run's), which the
# other graph's side keeps.
_WORLD_SETTINGS = WORLD_SETTINGS


_RUN_TRACE_HINT = "if the scheduler was given --trace, give the same with --run-trace"


def _about_a_trace(err: RoundhouseError) -> bool:
    """Whether compiling the run's graph failed on a trace (the file its TraceSource names):
    the scheduler may have been given another with --trace."""
    return isinstance(err, TraceError) or "TraceSource" in str(err)


@attrs.frozen
class _Side:
    """How one side of the comparison is named: `graph`, its graph's file name (the distinct
    ends of the two paths when two files share a name); `given`, what gave it; `header`, its
    column's title (the file name with what gave it, when both sides have the same)."""

    graph: str
    given: str
    file: str
    header: str

    def as_json(self) -> dict:
        return {"graph": self.graph, "given": self.given, "file": self.file}


def _sides(run_file: Path, other_file: Path | None, graph_given: bool, sets: bool) -> list[_Side]:
    """The run's side and, if there is one, the other's (`graph_given`: by --graph, else the run's
    own graph with --set)."""
    run_file = _whole(run_file)
    if other_file is None:
        return [_Side(run_file.name, "as run", str(run_file), run_file.name)]
    other_file = _whole(other_file)
    given = ("--graph" + (" with --set" if sets else "")) if graph_given else "with --set"
    names = [run_file.name, other_file.name]
    headers = list(names)
    if names[0] == names[1] and run_file != other_file:  # two files of one name: the ends that differ
        names = headers = _distinct_ends(run_file, other_file)
    elif names[0] == names[1]:  # the same file: what gave each side
        headers = [f"{names[0]} (as run)", f"{names[1]} ({given})"]
    return [
        _Side(names[0], "as run", str(run_file), headers[0]),
        _Side(names[1], given, str(other_file), headers[1]),
    ]


def _whole(path: Path) -> Path:
    """`path` made whole, its links followed; a pipe's (`--graph <(...)`) as given: followed, its
    link names the kernel's pipe (`pipe:[1761021]`), no file."""
    return path.absolute() if file_kind(path) else path.resolve()


def _distinct_ends(a: Path, b: Path) -> list[str]:
    """The shortest ends of two paths (of one file name) that differ."""
    k = 1
    while k < min(len(a.parts), len(b.parts)) and a.parts[-k:] == b.parts[-k:]:
        k += 1
    return [str(Path(*a.parts[-k:])), str(Path(*b.parts[-k:]))]


def _as_dict(p) -> dict:
    return {"graph": p.graph, "end_s": p.end_s, "stop": p.stop, "metrics": p.metrics}


def _table_text(point: dict, projections, headers: list[str]) -> str:
    """The comparison as the table people read, laid out for standard output (its width, and
    colours if it is a terminal)."""
    console = result_console()
    _print(console, point, projections, headers)
    return text_of(console)


def _print(console, point: dict, projections, headers: list[str]) -> None:
    # A journal's clock is its last round's; a snapshot's, the boundary after its last round.
    if point["kind"] == "journal":
        at = f"round {point['round']} at t={point['now_s']:g}s"
    else:
        rounds = point["rounds"]
        at = f"after {rounds:,} round{'' if rounds == 1 else 's'}, at t={point['now_s']:g}s,"
    # (Paths are printed as they are: rich would read [brackets] in them as markup.)
    console.print(
        f"from {point[point['kind']]}: {at} of {point['graph']} on {point['cluster']}: {point['jobs']:,} job(s) seen, "
        f"{point['unfinished']:,} unfinished, {point['running']:,} running"
        + (f"; {point['gpus_online']:,} of {point['gpus']:,} GPUs online" if point["gpus_online"] < point["gpus"] else ""),
        markup=False,
    )
    # (A side that stopped before its last job finished has no makespan: it is more than the
    # span it ran, which its cell says.)
    ran = [p.end_s - point["now_s"] for p in projections]
    span = max((p.metrics["makespan_s"] or ran[i]) for i, p in enumerate(projections))
    show = in_units(span)
    table = Table(title="simulated from here on", show_header=True)
    table.add_column("metric")
    for header in headers:
        table.add_column(escape(header), justify="right", overflow="fold")  # (a name cut short is no name)
    if len(projections) == 2:
        table.add_column("difference", justify="right")
    for key, label, unit in METRICS:
        values = [p.metrics[key] for p in projections]
        cells = [_cell(v, unit, show) for v in values]
        if key == "makespan_s":
            cells = [f"> {show(ran[i])}" if v is None and ran[i] > 0 else cells[i] for i, v in enumerate(values)]
        if len(values) == 2:
            a, b = values
            if a is None or b is None:
                cells.append("—")
            elif unit == "s":
                cells.append(("+" if b >= a else "-") + show(abs(b - a)) + (f" ({(b - a) / a:+.0%})" if a else ""))
            elif unit == "%":
                cells.append(f"{round((b - a) * 100, 1) + 0.0:+.1f} points")
            else:
                cells.append(f"{b - a:+d}")
        table.add_row(label, *cells)
    console.print(table)
    for p, header in zip(projections, headers, strict=True):
        if not all_jobs_ended(p.stop):
            console.print(f"{header}: stopped early: {p.stop}", markup=False)


def _cell(value, unit: str, show) -> str:
    if value is None:
        return "—"
    if unit == "s":
        return show(value)
    if unit == "%":
        return f"{value:.1%}"
    return str(value)
