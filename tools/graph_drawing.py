"""Drawing a compiled graph with Graphviz: one record-like node per element, coloured by
category (what `roundhouse render` writes and `roundhouse report` embeds)."""

from __future__ import annotations

import html
from pathlib import Path

import attrs
import graphviz
import numpy as np

from roundhouse.errors import SchedError, UsageError, shown_text
from roundhouse.runtime.arguments import convert
from roundhouse.runtime.compiler import CompiledGraph
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.values import describe, element_refs

FORMATS = ("svg", "png", "pdf", "dot")


# Fill colours by category (DESIGN §3).
COLOURS = {
    "source": "#d8ecff",
    "admission": "#e4f3d4",
    "pool": "#fff2c2",
    "policy": "#ffd9c2",
    "solver": "#f7d0e8",
    "mechanism": "#e6dcff",
    "placement": "#d2f2ee",
    "launch": "#ffd0d0",
    "sink": "#e8e8e8",
    "control": "#f0e6c8",
}


class DotMissing(UsageError):
    """Graphviz's `dot` is not installed: nothing but the .dot text can be written."""


def draw(graph: CompiledGraph, fmt: str) -> bytes:
    """The graph as a file of format `fmt` (one of FORMATS). A UsageError when Graphviz's `dot`
    is missing (DotMissing) or fails, quoting what it said."""
    dot = to_dot(graph)
    if fmt == "dot":
        return dot.source.encode()
    try:
        return dot.pipe(format=fmt, quiet=True)  # (what dot says is quoted when it fails)
    except graphviz.ExecutableNotFound:
        raise DotMissing("Graphviz's 'dot' program is not installed (apt-get install graphviz)") from None
    except graphviz.CalledProcessError as err:
        said = "; ".join(line.strip() for line in _text(err.stderr).splitlines() if line.strip())
        raise UsageError(
            f"Graphviz's 'dot' failed to draw the graph as {fmt} (exit status {err.returncode})" + (f": {said}" if said else "")
        ) from None
    except OSError as err:
        raise UsageError(f"Graphviz's 'dot' could not be run: {err.strerror or err}") from None


def _text(output: bytes | str | None) -> str:
    return output.decode("utf-8", errors="replace") if isinstance(output, bytes) else output or ""


def to_dot(graph: CompiledGraph) -> graphviz.Digraph:
    """One record-like node per element (class, name, arguments, ports), coloured by category,
    with edges drawn port to port."""
    name = Path(graph.path).stem
    title = _escaped(name)
    # (The graph's id too: one ending in a backslash would escape its closing quote.)
    dot = graphviz.Digraph(name=title, graph_attr={"rankdir": "LR", "fontname": "Helvetica", "label": title, "labelloc": "t"})
    dot.attr("node", shape="plaintext", fontname="Helvetica", fontsize="10")
    dot.attr("edge", fontname="Helvetica", fontsize="9")
    for el_name, el in graph.elements.items():
        dot.node(_node_id(el_name), label=_label(el_name, el, graph.decls.get(el_name)))
    for c in graph.connections:
        port = graph.elements[c.src].output(c.src_port)
        src_type = port.type.__name__ if port is not None else ""  # (a connection's port always exists)
        dot.edge(f"{_node_id(c.src)}:out_{c.src_port}:e", f"{_node_id(c.dst)}:in_{c.dst_port}:w", label=src_type)
    # Elements named in another's arguments have no connection of their own (a switch ticks
    # its candidates, the synthesizer steers its switches): a dashed edge, labelled with the
    # argument, ties each to the element that names it.
    for el_name, el in graph.elements.items():
        for field in attrs.fields(type(el)):
            for ref in element_refs(getattr(el, field.name)):
                if ref.name in graph.elements:
                    dot.edge(_node_id(el_name), _node_id(ref.name), label=field.name, style="dashed", color="#777777")
    return dot


def _escaped(text: str) -> str:
    """Text for a plain Graphviz label, drawn as written: in labels Graphviz reads a backslash
    as the start of an escape (`\\n`, `\\l`, `\\G`, ...), so each is doubled; a control character is
    written as its escape (`shown_text`)."""
    return shown_text(text).replace("\\", "\\\\")


def _node_id(name: str) -> str:
    """A Graphviz id for an element: letters and digits kept, '_' doubled and any other
    character written as its code, so that different names (`AcceptAll@1`, `AcceptAll_1`)
    never share a node."""
    return "n_" + "".join(ch if ch.isascii() and ch.isalnum() else "__" if ch == "_" else f"_{ord(ch):x}_" for ch in name)


# An argument is drawn cut to this many characters (a list of thousands of values would make a
# node wider than any page, and a label Graphviz refuses: it reads at most 16384 characters of one).
ARGUMENT_CHARACTERS = 100


def _cut(text: str) -> str:
    """An argument's text as drawn: whole, or, when longer than ARGUMENT_CHARACTERS, its start
    and its end (a list's last values, a path's file name) with an ellipsis between them."""
    if len(text) <= ARGUMENT_CHARACTERS:
        return text
    head = ARGUMENT_CHARACTERS * 3 // 5
    return text[:head] + "\u2026" + text[len(text) - (ARGUMENT_CHARACTERS - head - 1) :]


def _html(text: str) -> str:
    """Text for an HTML-like Graphviz label, drawn as written: markup characters escaped, and
    each backslash doubled (Graphviz reads a backslash in such a label too, dropping one of
    two and replacing `\\G`, `\\N` and others with the graph's or the node's name)."""
    return html.escape(shown_text(text)).replace("\\", "\\\\")


def _label(name: str, el, decl) -> str:
    esc = _html
    colour = COLOURS.get(el.category, "#ffffff")
    written = _written(el, decl)
    args = [
        _cut(f"{f.name}={written.get(f.name) or describe(getattr(el, f.name))}")
        for f in attrs.fields(type(el))
        if _shown(f, getattr(el, f.name))
    ]
    ins = "".join(f'<TR><TD PORT="in_{p.name}" BGCOLOR="white">{esc(p.name)}</TD></TR>' for p in el.inputs)
    outs = "".join(f'<TR><TD PORT="out_{p.name}" BGCOLOR="white">{esc(p.name)}</TD></TR>' for p in el.outputs)
    side = lambda rows: f'<TD><TABLE BORDER="0" CELLSPACING="2">{rows}</TABLE></TD>' if rows else "<TD></TD>"  # noqa: E731
    title = f'<B>{esc(name)}</B><BR/>{esc(type(el).__name__)}<BR/><FONT POINT-SIZE="8">{esc(el.category)}</FONT>'
    arg_rows = "".join(
        f'<TR><TD COLSPAN="3" ALIGN="LEFT" BGCOLOR="white"><FONT POINT-SIZE="9">{esc(a)}</FONT></TD></TR>' for a in args
    )
    return (
        f'<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" BGCOLOR="{colour}">'
        f"<TR>{side(ins)}<TD>{title}</TD>{side(outs)}</TR>{arg_rows}</TABLE>>"
    )


def _written(el, decl) -> dict[str, str]:
    """Arguments as the graph writes them (`service=wall_seconds`, `round=90min`, a path as
    given, not resolved against the graph's folder, which would draw differently from wherever
    `render` is run): each one whose written value still gives the value the element holds (a
    `--set` may have replaced it; then the held value is drawn)."""
    if decl is None:
        return {}
    fields = [f for f in attrs.fields(type(el)) if f.init]
    by_name = {f.name: f for f in fields}
    out = {}
    for position, arg in enumerate(decl.args):
        field = by_name.get(arg.name) if arg.name is not None else fields[position] if position < len(fields) else None
        if field is None or field.type is None:
            continue
        try:
            value = convert(arg.value, field.type, decl.base_dir, field.name)
        except SchedError:
            continue
        if _same(value, getattr(el, field.name, None)):
            out[field.name] = _as_written(arg.value)
    return out


def _as_written(value: ast.Value) -> str:
    if value.kind == "list":
        return "[" + ", ".join(_as_written(v) for v in value.items) + "]"
    return value.text or describe(value.value)


def _shown(field, value) -> bool:
    """Arguments are drawn when required or different from their default."""
    default = field.default
    if default is attrs.NOTHING or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return True
    return not _same(value, default)


def _same(a, b) -> bool:
    """Whether two values are equal, for values whose `==` is no truth value too (an element of
    one's own may hold a NumPy array: its `==` compares item by item)."""
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (an `==` that gives what cannot be a truth value)
        try:
            return bool(np.array_equal(a, b))
        except Exception:  # noqa: BLE001
            return False
