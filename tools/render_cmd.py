"""`roundhouse render GRAPH -o FILE`: draw a graph with Graphviz (svg, png, pdf or dot)."""

from __future__ import annotations

from pathlib import Path

from roundhouse.errors import UsageError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.files import writing
from roundhouse.tools.graph_drawing import FORMATS, DotMissing, draw


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
    with writing(out):
        out.write_bytes(data)
    return 0
