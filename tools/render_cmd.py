"""`roundhouse render GRAPH -o FILE`: draw a graph with Graphviz (svg, png, pdf or dot)."""

from __future__ import annotations

import re
from pathlib import Path

from roundhouse.errors import UsageError
from roundhouse.runtime.compiler import compile_file
from roundhouse.tools.graph_drawing import FORMATS, DotMissing, draw
from roundhouse.tools.outputs.whole_file import write_whole


def register(sub) -> None:
    p = sub.add_parser("render", help="draw a graph with Graphviz")
    p.add_argument("graph", help="the .sched file")
    p.add_argument("-o", "--output", required=True, help="output file: .svg, .png, .pdf or .dot")
    p.set_defaults(handler=render)


def render(args) -> int:
    out = Path(args.output)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise UsageError(f"-o {args.output}: cannot tell the format; end the name in {', '.join('.' + f for f in FORMATS)}")
    graph = compile_file(args.graph)
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
