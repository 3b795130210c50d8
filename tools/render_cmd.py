"""`roundhouse render GRAPH -o FILE`: draw a graph with Graphviz (svg, png, pdf or dot). A graph
`roundhouse check GRAPH` refuses is refused, with check's messages: it is checked by the same
code, and nothing is drawn."""

from __future__ import annotations

import re

from roundhouse.errors import EXIT_USER_ERROR, UsageError
from roundhouse.tools.graph_checks import check_graph, print_problems
from roundhouse.tools.graph_drawing import FORMATS, DotMissing, draw
from roundhouse.tools.outputs.output_place import refuse_extension_alone, refuse_unwritable_place
from roundhouse.tools.outputs.whole_file import output_file, write_whole


def register(sub) -> None:
    p = sub.add_parser("render", help="draw a graph with Graphviz (a graph `check` refuses is refused)")
    p.add_argument("graph", help="the .sched file")
    p.add_argument("-o", "--output", required=True, help="output file: .svg, .png, .pdf or .dot")
    p.set_defaults(handler=render)


def render(args) -> int:
    out = output_file(args.output)
    fmt = out.suffix.lstrip(".").lower()
    refuse_extension_alone(out, args.output, FORMATS, "graph")
    refuse_unwritable_place(out)  # (before the graph is checked, which reads its traces whole; a folder is no unknown format)
    if fmt not in FORMATS:
        # (a name with an extension of another format is told so, not that its format is unknown)
        said = f".{fmt} is not a format render writes" if fmt else "cannot tell the format"
        raise UsageError(f"-o {args.output}: {said}; end the name in {', '.join('.' + f for f in FORMATS)}")
    # (as `check GRAPH` checks it: render has no --cluster, so a bad cluster setting is refused
    # rather than replaced, and a graph that names no cluster has its elements left unstarted)
    checked = check_graph(args.graph)
    if print_problems(checked):
        return EXIT_USER_ERROR
    graph = checked.graph
    assert graph is not None  # (a graph that did not compile is a problem)
    try:
        data = draw(graph, fmt)
    except DotMissing as err:
        raise UsageError(
            f"{err}; or write the graph as a .dot file (-o {out.with_suffix('.dot')}), which needs no Graphviz"
        ) from None
    if fmt == "pdf":
        data = _undated(data)
    write_whole(out, data)
    return 0


# The dates in a PDF's document information dictionary: Graphviz's cairo stamps the time it
# drew the file there, whatever SOURCE_DATE_EPOCH says.
_PDF_DATE = re.compile(rb"/(?:CreationDate|ModDate)\s*\(D:[^()\\]*\)")


def _undated(pdf: bytes) -> bytes:
    """The PDF without its dates, so that the same graph gives the same file: each is blanked
    with spaces of its length, which keeps every offset of the cross-reference table right (a
    date is optional, and spaces between a dictionary's entries mean nothing)."""
    return _PDF_DATE.sub(lambda m: b" " * len(m.group()), pdf)
