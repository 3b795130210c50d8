"""`roundhouse check FILE...`: parse, compile and check graphs without running anything."""

from __future__ import annotations

import sys

from roundhouse.errors import RoundhouseError, SchedError, TraceError
from roundhouse.runtime import registry
from roundhouse.runtime.compiler import CompiledGraph, compile_file
from roundhouse.runtime.simulate import load_cluster
from roundhouse.runtime.snapshot import forks_world, unforkable_elements
from roundhouse.tools.common import error_text
from roundhouse.traces.formats import check_trace_header


def register(sub) -> None:
    p = sub.add_parser("check", help="check .sched files (syntax, classes, arguments, ports, types, cycles, traces' columns)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument(
        "--fork",
        action="store_true",
        help="also check that every element can be forked (as `roundhouse whatif` and the Simulation API's fork need); "
        "automatic for a graph with an element that forks the world (the synthesizer)",
    )
    p.set_defaults(handler=check)


def check(args) -> int:
    failed = 0
    for path in args.files:
        # Each graph sees only the element files it requires, as when it is checked alone.
        with registry.scope():
            failed += not _check_one(path, args.fork)
    return 2 if failed else 0


def _check_one(path: str, fork: bool) -> bool:
    try:
        graph = compile_file(path)
        cluster = load_cluster(graph, None) if graph.settings.cluster else None
    except RoundhouseError as err:
        print(error_text(err), file=sys.stderr)
        return False
    problems = _trace_problems(graph)
    if fork or forks_world(graph):
        for name, class_name, why in unforkable_elements(graph):
            problems.append(
                SchedError(f"element '{name}' ({class_name}) cannot be forked: {why}", graph.elements[name].declared_at)
            )
    for problem in problems:
        print(error_text(problem), file=sys.stderr)
    if problems:
        return False
    where = f", cluster {cluster.describe()}" if cluster else ""
    print(f"{path}: ok ({len(graph.elements)} elements, {len(graph.connections)} connections{where})")
    return True


def _trace_problems(graph: CompiledGraph) -> list[SchedError]:
    """Each TraceSource's trace, as far as its header goes (the columns a run needs), at the
    argument that names it. Only the header: a trace of millions of jobs is checked as fast."""
    problems = []
    for name, el in graph.elements.items():
        if type(el).__name__ != "TraceSource":
            continue
        decl = graph.decls.get(name)
        arg = (
            next((a for i, a in enumerate(decl.args) if a.name == "path" or (a.name is None and i == 0)), None) if decl else None
        )
        try:
            check_trace_header(el.path, el.format)
        except TraceError as err:
            shown = arg.value.value if arg is not None and arg.value.kind == "string" else err.path
            where = shown if err.row is None else f"{shown}:{err.row}"
            what = f"column '{err.column}': {err.message}" if err.column else err.message
            location = arg.value.location if arg is not None else el.declared_at
            problems.append(SchedError(f"argument 'path' of TraceSource: {where}: {what}", location))
    return problems
