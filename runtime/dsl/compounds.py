"""Compound instances: their parameters bound and substituted, and their bodies spliced into the
flat graph (runtime/dsl/loader.py expands the bodies).

Inside an instance `c` of an elementclass, `input` and `output` are elements named `c/input`
and `c/output`, whose port k is written `input [k] -> ...` and `... -> [k] output`; a
connection into `c [k]` is joined to what `c/input [k]` connects to, and what `c/output [k]`
receives leaves by the connections out of `c [k]`. A port of an instance that nothing
outside connects to is kept as an `OpenPort`, so that the structure check reports the instance
rather than the element inside it.
"""

from __future__ import annotations

from collections import defaultdict

import attrs

from roundhouse.errors import Location, SchedError, did_you_mean
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.dsl.flat import Edge, OpenPort, port_key


def splice(compounds: dict[str, tuple[str, Location]], edges: list[Edge]) -> tuple[list[Edge], list[OpenPort], list[SchedError]]:
    """The edges with every instance in `compounds` (full name -> elementclass, declaration)
    spliced out, the ports of instances left open, and connections to ports that do not exist."""
    open_ports: list[OpenPort] = []
    errors: list[SchedError] = []
    pending = _Edges(edges)
    for full, (class_name, declared_at) in compounds.items():
        for into, out_of, side in ((full, full + "/input", "input"), (full + "/output", full, "output")):
            incoming = pending.take(dst=into)
            outgoing = pending.take(src=out_of)
            if not incoming and not outgoing:
                continue
            if side == "input":
                inside = _by_port(outgoing, source=True)  # what `input [k]` leads to
                outside, known = incoming, set(inside)
                open_ports += _open(full, class_name, side, declared_at, inside, {port_key(e.dst_port) for e in incoming})
            else:
                inside = _by_port(incoming, source=False)  # what reaches `output [k]`
                outside, known = outgoing, set(inside)
                open_ports += _open(full, class_name, side, declared_at, inside, {port_key(e.src_port) for e in outgoing})
            for outer in outside:
                k = port_key(outer.dst_port if side == "input" else outer.src_port)
                if k not in inside:
                    errors.append(_no_port(full, class_name, side, k, known, outer))
                    continue
                for inner in inside[k]:
                    if side == "input":  # the outer edge comes in, the inner one leads on
                        pending.add(Edge(outer.src, outer.src_port, inner.dst, inner.dst_port, outer.location))
                    else:  # the inner edge reaches the output, the outer one leads on
                        pending.add(Edge(inner.src, inner.src_port, outer.dst, outer.dst_port, outer.location))
    return pending.in_order(), open_ports, errors


class _Edges:
    """The edges being spliced, in order, found by either end: taking an instance's edges out
    and adding the ones that replace them costs the edges concerned, not the whole graph (a
    graph of thousands of instances is spliced in moments). Edges added go last, those taken
    out keep the others' order."""

    def __init__(self, edges: list[Edge]) -> None:
        self.edges: dict[int, Edge] = {}  # (insertion-ordered: the edges' order)
        self.added = 0
        self.by_src: dict[str, list[int]] = defaultdict(list)
        self.by_dst: dict[str, list[int]] = defaultdict(list)
        for e in edges:
            self.add(e)

    def add(self, edge: Edge) -> None:
        self.added += 1
        key = self.added
        self.edges[key] = edge
        self.by_src[edge.src].append(key)
        self.by_dst[edge.dst].append(key)

    def take(self, src: str | None = None, dst: str | None = None) -> list[Edge]:
        """The edges (still here) that leave `src`, or enter `dst`, in order, taken out."""
        keys = self.by_src.pop(src, []) if src is not None else self.by_dst.pop(dst or "", [])
        return [self.edges.pop(k) for k in sorted(keys) if k in self.edges]

    def in_order(self) -> list[Edge]:
        return list(self.edges.values())


def _by_port(edges: list[Edge], source: bool) -> dict[str | int, list[Edge]]:
    grouped: dict[str | int, list[Edge]] = defaultdict(list)
    for e in edges:
        grouped[port_key(e.src_port if source else e.dst_port)].append(e)
    return grouped


def _open(
    full: str, class_name: str, side: str, declared_at: Location, inside: dict[str | int, list[Edge]], connected: set
) -> list[OpenPort]:
    """The inner ends of the instance's ports that nothing outside connects to."""
    return [
        OpenPort(
            full,
            class_name,
            side,
            k,
            declared_at,
            e.dst if side == "input" else e.src,
            e.dst_port if side == "input" else e.src_port,
        )
        for k, inner in inside.items()
        if k not in connected
        for e in inner
    ]


def _no_port(full: str, class_name: str, side: str, key, known: set, edge: Edge) -> SchedError:
    port_ref = edge.dst_port if side == "input" else edge.src_port
    shown = ", ".join(str(k) for k in sorted(known, key=str)) or "none"
    return SchedError(
        f"'{full}' ({class_name}) has no {side} port [{key}]; its {side} ports: {shown}",
        port_ref.location if port_ref is not None else edge.location,
    )


def bind_params(definition: ast.ElementClass, args, node: ast.Node, errors: list[SchedError]) -> dict[str, ast.Value] | None:
    """The values of an instance's parameters, from its arguments and the defaults; None (the
    problems added to `errors`) when they do not bind."""
    params = {p.name: p for p in definition.params}
    bound: dict[str, ast.Value] = {}
    ok = True
    order = [p.name for p in definition.params]
    seen_keyword = False
    for i, a in enumerate(args):
        if a.name is None and seen_keyword:  # (as an element's arguments: which parameter it gives is no guess)
            errors.append(SchedError("a positional argument cannot follow a keyword argument", a.location))
            ok = False
            continue
        seen_keyword = seen_keyword or a.name is not None
        name = a.name if a.name is not None else (order[i] if i < len(order) else None)
        if name is not None and name in bound:
            errors.append(SchedError(f"{definition.name}: parameter '{name}' is given twice", a.location))
            ok = False
            continue
        if a.name is None:
            if i >= len(order):
                errors.append(SchedError(f"{definition.name} takes {len(order)} parameter(s)", a.location))
                ok = False
                continue
            bound[order[i]] = a.value
        elif a.name not in params:
            errors.append(
                SchedError(f"{definition.name} has no parameter '{a.name}'", a.location, hint=did_you_mean(a.name, params))
            )
            ok = False
        else:
            bound[a.name] = a.value
    for p in definition.params:
        if p.name not in bound:
            if p.default is None:
                errors.append(SchedError(f"{definition.name} needs parameter '{p.name}'", node.class_location or node.location))
                ok = False
            else:
                bound[p.name] = p.default
    return bound if ok else None


def unbound(definition: ast.ElementClass) -> dict[str, ast.Value]:
    """Parameters bound to themselves: an elementclass's body expanded without an instance
    keeps `$name` where an instance would give a value."""
    return {p.name: ast.Value("param", p.name, p.location, f"${p.name}") for p in definition.params}


def substitute(
    value: ast.Value, env: dict[str, ast.Value] | None, owner: str | None, errors: list[SchedError]
) -> ast.Value | None:
    """A value with the parameters of `env` (those of elementclass `owner`; None outside one)
    replaced by their values; None (the problem added to `errors`) for an unknown parameter."""
    if value.kind == "param":
        if env is None:
            errors.append(SchedError(f"${value.value} is used outside an elementclass", value.location))
            return None
        if value.word not in env:
            errors.append(
                SchedError(
                    f"elementclass {owner} has no parameter ${value.value}", value.location, hint=did_you_mean(value.word, env)
                )
            )
            return None
        return env[value.word]
    if value.kind == "list":
        items = [substitute(v, env, owner, errors) for v in value.items]
        if any(v is None for v in items):
            return None
        return attrs.evolve(value, value=tuple(items))
    return value
