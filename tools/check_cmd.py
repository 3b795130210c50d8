"""`roundhouse check FILE...`: parse, compile and check graphs without running anything."""

from __future__ import annotations

import sys

from roundhouse.errors import RoundhouseError, SchedError, TraceError
from roundhouse.runtime import registry
from roundhouse.runtime.compiler import CompiledGraph, compile_file
from roundhouse.runtime.simulate import load_cluster
from roundhouse.runtime.snapshot import forks_world, unforkable_elements
from roundhouse.tools.common import error_text


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
            _check_trace_header(el.path, el.format)
        except TraceError as err:
            shown = arg.value.value if arg is not None and arg.value.kind == "string" else err.path
            where = shown if err.row is None else f"{shown}:{err.row}"
            what = f"column '{err.column}': {err.message}" if err.column else err.message
            location = arg.value.location if arg is not None else el.declared_at
            problems.append(SchedError(f"argument 'path' of TraceSource: {where}: {what}", location))
    return problems


def _check_trace_header(path, format: str) -> None:
    """A TraceError if a run could not read the trace for what its header says: the file is
    missing or unreadable, its format cannot be told, or (a canonical trace, read as a run reads
    it but without its rows) its header is not one the schema takes. Another format's columns
    were what told it apart, and its reader checks them."""
    import polars as pl

    from roundhouse.traces import canonical
    from roundhouse.traces.csvtext import check_trace_file, read_bytes, read_cells, read_text
    from roundhouse.traces.formats import detect_format
    from roundhouse.traces.schema import validate

    check_trace_file(path)  # (what `--trace` checks of a trace before a run)
    found = detect_format(path) if format == "auto" else format
    if found != "canonical":
        return
    if canonical.is_parquet(path) or read_bytes(path)[:4] == b"PAR1":
        try:
            frame = pl.read_parquet(path, n_rows=0)
        except (pl.exceptions.PolarsError, OSError, ValueError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise TraceError(str(path), f"cannot be read as Parquet: {first}") from None
        validate(frame, str(path))
    else:
        cells = read_cells(path, text=_header_only(read_text(path)))
        validate(cells.frame, str(path), cells.lines)


def _header_only(text: str) -> str:
    """The text up to the end of its first line that is neither blank nor a comment."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        line = text[start:end].strip()
        if line and not line.startswith("#"):
            return text[:end]
        start = end
    return text
