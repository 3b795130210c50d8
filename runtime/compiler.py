"""The compiler: a flat graph of declarations becomes configured elements in tick order.

parse -> resolve classes in the registry -> build configurations (converted, validated) ->
build a networkx graph -> check unknown ports, port type mismatches, fan-in, unconnected
required inputs, cycles, exactly one pool, at least one launcher -> topological order.
Every problem found is reported at once, each at its file, line and column.
`roundhouse check` runs all of this without running anything.
"""

from __future__ import annotations

import os
import types
import typing
from collections import defaultdict
from pathlib import Path
from typing import Any

import attrs
import networkx as nx

from roundhouse.errors import Location, SchedError, SchedErrors, did_you_mean
from roundhouse.runtime import registry
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.dsl.loader import Decl, FlatGraph, load
from roundhouse.runtime.dsl.parser import parse_value
from roundhouse.runtime.element import Element, type_name
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.values import Duration, ElementRef, FilePath, IdRange, Multiplier, Rate, describe


@attrs.frozen
class Connection:
    src: str
    src_port: str
    dst: str
    dst_port: str
    location: Location | None


@attrs.define
class CompiledGraph:
    path: str
    settings: GraphSettings
    elements: dict[str, Element]  # in tick (topological) order
    connections: list[Connection]
    graph: nx.MultiDiGraph
    decls: dict[str, Decl]
    setting_locations: dict[str, Location] = attrs.field(factory=dict)

    def sources_of(self, element: str, port: str) -> list[tuple[str, str]]:
        return [(c.src, c.src_port) for c in self.connections if c.dst == element and c.dst_port == port]

    def producer_of(self, element: str, port: str) -> str | None:
        got = self.sources_of(element, port)
        return got[0][0] if got else None

    def by_class(self, class_name: str) -> list[Element]:
        return [e for e in self.elements.values() if type(e).__name__ == class_name]


@attrs.frozen
class Override:
    """A `--set target=value` from the command line: `element.field` or a graph setting.
    `flag` is the option that gave it (`--set`, or `--vary` for one value of a sweep)."""

    text: str
    flag: str = "--set"

    @property
    def label(self) -> str:
        return f"{self.flag} {self.text}"

    @property
    def target(self) -> str:
        return self.text.split("=", 1)[0].strip()

    @property
    def value_text(self) -> str:
        return self.text.split("=", 1)[1].strip() if "=" in self.text else ""


def compile_file(path: str | Path, overrides: list[str] | tuple[str, ...] = (), text: str | None = None) -> CompiledGraph:
    flat = load(path, text)
    return compile_graph(flat, [o if isinstance(o, Override) else Override(o) for o in overrides])


def compile_graph(flat: FlatGraph, overrides: list[Override] = ()) -> CompiledGraph:
    return _Compiler(flat, list(overrides)).run()


# --- converting literals to typed argument values ---

_KIND_TEXT = {
    "number": "a number",
    "duration": "a duration",
    "rate": "a rate",
    "multiplier": "a multiplier",
    "range": "a range",
    "string": "a string",
    "bool": "a boolean",
    "list": "a list",
    "reference": "a name",
}

_EXPECTS = {
    int: "a whole number",
    float: "a number",
    bool: "true or false",
    str: "a word or a string",
    Duration: "a duration such as 300s or 5min",
    Rate: "a rate such as 8/h",
    Multiplier: "a multiplier such as 1.2x",
    IdRange: "a range such as 3000..4000",
    FilePath: 'a file path in quotes, such as "traces/x.csv"',
    ElementRef: "the name of an element",
}


def convert(value: ast.Value, annotation: Any, base_dir: str, what: str) -> Any:
    """A literal as a value of the field's type; SchedError at the literal when it does not fit."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        for option in options:
            try:
                return convert(value, option, base_dir, what)
            except SchedError:
                continue
        expected = " or ".join(_EXPECTS.get(o, type_name(o)) for o in options)
        raise _mismatch(value, expected, what)
    if origin in (list, tuple):
        (item_type, *_) = typing.get_args(annotation) or (Any,)
        if value.kind != "list":
            raise _mismatch(value, f"a list of {type_name(item_type)} in [brackets]", what)
        return [convert(v, item_type, base_dir, what) for v in value.value]
    kind, raw = value.kind, value.value
    if annotation is Any or annotation is object:
        return [convert(v, Any, base_dir, what) for v in raw] if kind == "list" else raw
    if annotation is bool:
        if kind == "bool":
            return raw
    elif annotation is int:
        if kind == "number" and isinstance(raw, int):
            return raw
    elif annotation is float:
        if kind == "number":
            return float(raw)
    elif annotation is Duration:
        if kind == "duration":
            return raw
        if kind == "number":
            return Duration(raw)
    elif annotation is Rate:
        if kind == "rate":
            return raw
    elif annotation is Multiplier:
        if kind in ("multiplier", "number"):
            return Multiplier(raw)
    elif annotation is IdRange:
        if kind == "range":
            return raw
    elif annotation is FilePath:
        if kind == "string":
            path = raw if os.path.isabs(raw) else os.path.normpath(os.path.join(base_dir, raw))
            return FilePath(path)
    elif annotation is str:
        if kind in ("string", "reference"):
            return raw
    elif annotation is ElementRef:
        if kind == "reference":
            return ElementRef(raw)
    expected = _EXPECTS.get(annotation, type_name(annotation))
    raise _mismatch(value, expected, what)


def _mismatch(value: ast.Value, expected: str, what: str) -> SchedError:
    shown = value.text or describe(value.value)
    return SchedError(f"{what} expects {expected}, got {shown} ({_KIND_TEXT.get(value.kind, value.kind)})", value.location)


def _validate(field: attrs.Attribute, value: Any) -> str | None:
    """Run a field's validator alone; returns its complaint, if any."""
    if field.validator is None:
        return None
    try:
        field.validator(None, field, value)
    except (ValueError, TypeError) as err:
        return str(err)
    return None


class _Compiler:
    def __init__(self, flat: FlatGraph, overrides: list[Override]):
        self.flat = flat
        self.overrides = overrides
        self.errors: list[SchedError] = []
        self._setting_flags: dict[str, str] = {}  # setting name -> the option that gave it
        self.file_location = Location(flat.path, 1, 1, 1)

    def fail_if_errors(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise SchedErrors(self.errors)

    def run(self) -> CompiledGraph:
        element_overrides, setting_overrides = self._split_overrides()
        settings = self._settings(setting_overrides)
        elements: dict[str, Element] = {}
        for decl in self.flat.decls.values():
            built = self._build(decl, element_overrides.get(decl.name, []))
            if built is not None:
                elements[decl.name] = built
        self.fail_if_errors()
        self._check_references(elements)
        connections = self._connections(elements)
        self.fail_if_errors()
        self._check_structure(elements, connections)
        self.fail_if_errors()
        graph = nx.MultiDiGraph()
        order_index = {name: i for i, name in enumerate(self.flat.decls)}
        for name, el in elements.items():
            graph.add_node(name, element=el)
        for c in connections:
            graph.add_edge(c.src, c.dst, src_port=c.src_port, dst_port=c.dst_port, location=c.location)
        self._check_cycles(graph, connections)
        self.fail_if_errors()
        order = list(nx.lexicographical_topological_sort(graph, key=lambda n: order_index[n]))
        return CompiledGraph(
            path=self.flat.path,
            settings=settings,
            elements={n: elements[n] for n in order},
            connections=connections,
            graph=graph,
            decls=self.flat.decls,
            # Where each setting was written; one given with --set has no place in a file.
            setting_locations={
                name: st.value.location for name, st in self.flat.settings.items() if name not in setting_overrides
            },
        )

    # --- overrides and settings ---
    def _split_overrides(self):
        per_element: dict[str, list[tuple[str, ast.Value, str]]] = defaultdict(list)
        per_setting: dict[str, ast.Value] = {}
        for o in self.overrides:
            if "=" not in o.text or not o.target:
                self.errors.append(SchedError(f"{o.label}: write {o.flag} element.field=value or {o.flag} setting=value"))
                continue
            try:
                value = parse_value(o.value_text, where=f"{o.flag} {o.target}")
            except SchedError as err:
                self.errors.append(SchedError(f"{o.label}: bad value: {err.message}", hint=err.hint))
                continue
            if "." in o.target:
                element, field = o.target.rsplit(".", 1)
                if element not in self.flat.decls:
                    self.errors.append(
                        SchedError(
                            f"{o.label}: the graph has no element '{element}'",
                            hint=did_you_mean(element, self.flat.decls),
                        )
                    )
                    continue
                per_element[element].append((field, value, o.label))
            else:
                per_setting[o.target] = value
                self._setting_flags[o.target] = f"{o.flag} {o.target}"
        return per_element, per_setting

    def _settings(self, overrides: dict[str, ast.Value]) -> GraphSettings:
        fields = {f.name: f for f in attrs.fields(GraphSettings)}
        values: dict[str, Any] = {}
        given: dict[str, tuple[ast.Value, Location | None]] = {
            name: (s.value, s.location) for name, s in self.flat.settings.items()
        }
        for name, value in overrides.items():
            given[name] = (value, None)
        for name, (value, location) in given.items():
            field = fields.get(name)
            if field is None:
                where = self._setting_flags[name] if location is None else None
                self.errors.append(
                    SchedError(
                        f"unknown setting '{name}'" + (f" ({where})" if where else ""),
                        location,
                        hint=did_you_mean(name, fields) or f"settings are: {', '.join(fields)}",
                    )
                )
                continue
            base_dir = str(Path(self.flat.path).parent) if location is not None else os.getcwd()
            try:
                converted = convert(value, field.type, base_dir, f"setting '{name}'")
            except SchedError as err:
                self.errors.append(err if location is not None else SchedError(f"{self._setting_flags[name]}: {err.message}"))
                continue
            complaint = _validate(field, converted)
            if complaint:
                self.errors.append(SchedError(f"setting '{name}' {complaint}", value.location))
                continue
            values[name] = converted
        try:
            return GraphSettings(**values)
        except (ValueError, TypeError) as err:
            self.errors.append(SchedError(f"settings do not fit together: {err}", self.file_location))
            return GraphSettings()

    # --- elements ---
    def _build(self, decl: Decl, overrides) -> Element | None:
        cls = registry.get(decl.class_name)
        if cls is None:
            known = registry.names()
            self.errors.append(
                SchedError(
                    f"unknown element class '{decl.class_name}'",
                    decl.class_location,
                    hint=did_you_mean(decl.class_name, known) or "run 'roundhouse elements' for the list",
                )
            )
            return None
        fields = [f for f in attrs.fields(cls) if f.init]
        by_name = {f.name: f for f in fields}
        kwargs: dict[str, Any] = {}
        ok = True
        seen_keyword = False
        overridden = {field_name for field_name, _, _ in overrides}
        for position, arg in enumerate(decl.args):
            if arg.name is None:
                if seen_keyword:
                    self.errors.append(SchedError("a positional argument cannot follow a keyword argument", arg.location))
                    ok = False
                    continue
                if position >= len(fields):
                    self.errors.append(SchedError(f"{cls.__name__} takes at most {len(fields)} argument(s)", arg.location))
                    ok = False
                    continue
                field = fields[position]
            else:
                seen_keyword = True
                field = by_name.get(arg.name)
                if field is None:
                    hint = did_you_mean(arg.name, by_name) or (
                        f"its arguments: {', '.join(by_name)}" if by_name else f"{cls.__name__} takes no arguments"
                    )
                    self.errors.append(SchedError(f"{cls.__name__} has no argument '{arg.name}'", arg.location, hint=hint))
                    ok = False
                    continue
            if field.name in kwargs:
                self.errors.append(SchedError(f"argument '{field.name}' is given twice", arg.location))
                ok = False
                continue
            if field.name in overridden:
                kwargs[field.name] = _REPLACED  # --set gives this argument; the file's value is not used
                continue
            value = self._argument(cls, field, arg.value, decl.base_dir, arg.value.location)
            kwargs[field.name] = value
            if value is _BAD:
                ok = False
        for field_name, value_node, label in overrides:
            field = by_name.get(field_name)
            if field is None:
                self.errors.append(
                    SchedError(
                        f"{label}: {cls.__name__} '{decl.name}' has no argument '{field_name}'",
                        hint=did_you_mean(field_name, by_name),
                    )
                )
                ok = False
                continue
            value = self._argument(cls, field, value_node, os.getcwd(), None, prefix=f"{label}: ")
            kwargs[field.name] = value
            if value is _BAD:
                ok = False
        missing = [f.name for f in fields if f.default is attrs.NOTHING and f.name not in kwargs]
        if missing:
            self.errors.append(
                SchedError(
                    f"{cls.__name__} needs argument(s) {', '.join(repr(m) for m in missing)}",
                    decl.class_location,
                    hint=f"e.g. {decl.class_name}({missing[0]}=...)",
                )
            )
            return None
        if not ok:
            return None
        try:
            instance = cls(**kwargs)
        except (ValueError, TypeError) as err:
            self.errors.append(SchedError(f"{cls.__name__} '{decl.name}': {err}", decl.class_location))
            return None
        instance.name = decl.name
        instance.declared_at = decl.location
        return instance

    def _argument(self, cls, field, value_node, base_dir, location, prefix=""):
        what = f"argument '{field.name}' of {cls.__name__}"
        try:
            value = convert(value_node, field.type, base_dir, what)
        except SchedError as err:
            self.errors.append(err if not prefix else SchedError(prefix + err.message))
            return _BAD
        complaint = _validate(field, value)
        if complaint:
            self.errors.append(SchedError(f"{prefix}{what} {complaint}", location))
            return _BAD
        return value

    def _check_references(self, elements: dict[str, Element]) -> None:
        for name, el in elements.items():
            for field in attrs.fields(type(el)):
                value = getattr(el, field.name)
                if isinstance(value, ElementRef) and value.name not in elements:
                    decl = self.flat.decls[name]
                    arg = next((a for a in decl.args if a.name == field.name), None)
                    self.errors.append(
                        SchedError(
                            f"argument '{field.name}' of {type(el).__name__} names no element '{value.name}'",
                            arg.value.location if arg else decl.location,
                            hint=did_you_mean(value.name, elements),
                        )
                    )

    # --- connections ---
    def _connections(self, elements: dict[str, Element]) -> list[Connection]:
        out: list[Connection] = []
        for e in self.flat.edges:
            if e.src not in elements or e.dst not in elements:
                continue  # the element itself was reported
            src, dst = elements[e.src], elements[e.dst]
            out_port = self._port(src, e.src_port, "output", e)
            in_port = self._port(dst, e.dst_port, "input", e)
            if out_port is None or in_port is None:
                continue
            if out_port.type is not in_port.type:
                self.errors.append(
                    SchedError(
                        f"type mismatch: '{e.src}' [{out_port.name}] gives {out_port.type.__name__}, "
                        f"but '{e.dst}' [{in_port.name}] takes {in_port.type.__name__}",
                        e.location,
                        hint=_type_hint(in_port.type),
                    )
                )
                continue
            out.append(Connection(e.src, out_port.name, e.dst, in_port.name, e.location))
        return out

    def _port(self, el: Element, ref: ast.PortRef | None, side: str, edge) -> Any:
        ports = el.outputs if side == "output" else el.inputs
        cls_name = type(el).__name__
        if not ports:
            direction = "from" if side == "output" else "into"
            self.errors.append(
                SchedError(
                    f"'{el.name}' ({cls_name}) has no {side} ports, so nothing can be connected {direction} it",
                    edge.location,
                )
            )
            return None
        key = 0 if ref is None else ref.key
        port = el.output(key) if side == "output" else el.input(key)
        if port is None:
            names = [p.name for p in ports]
            hint = did_you_mean(str(key), names) if isinstance(key, str) else None
            self.errors.append(
                SchedError(
                    f"'{el.name}' ({cls_name}) has no {side} port [{key}]; its {side} ports: "
                    + ", ".join(f"[{i}] {n}" for i, n in enumerate(names)),
                    ref.location if ref is not None else edge.location,
                    hint=hint,
                )
            )
        return port

    def _check_structure(self, elements: dict[str, Element], connections: list[Connection]) -> None:
        into: dict[tuple[str, str], list[Connection]] = defaultdict(list)
        for c in connections:
            into[(c.dst, c.dst_port)].append(c)
        for (dst, port_name), conns in into.items():
            port = elements[dst].input(port_name)
            pairs = [(c.src, c.src_port) for c in conns]
            if len(set(pairs)) != len(pairs):
                dup = next(c for i, c in enumerate(conns) if (c.src, c.src_port) in pairs[:i])
                self.errors.append(SchedError(f"'{dup.src}' is connected to '{dst}' [{port_name}] twice", dup.location))
            elif len(conns) > 1 and not port.multi:
                first = conns[0]
                self.errors.append(
                    SchedError(
                        f"'{dst}' [{port_name}] takes one connection, but it is also connected from "
                        f"'{first.src}' (at {first.location})",
                        conns[1].location,
                    )
                )
        for name, el in elements.items():
            for port in el.inputs:
                if port.required and (name, port.name) not in into:
                    decl = self.flat.decls[name]
                    self.errors.append(
                        SchedError(
                            f"'{name}' ({type(el).__name__}) input [{port.name}] ({port.type.__name__}) is not connected",
                            decl.location,
                            hint=_type_hint(port.type),
                        )
                    )
        pools = [el for el in elements.values() if el.category == "pool"]
        if not pools:
            self.errors.append(
                SchedError("the graph has no pool: every scheduler needs one JobPool of admitted jobs", self.file_location)
            )
        for extra in pools[1:]:
            first = self.flat.decls[pools[0].name].location
            self.errors.append(
                SchedError(
                    f"a graph has exactly one pool; '{extra.name}' is a second (first at {first})",
                    self.flat.decls[extra.name].location,
                )
            )
        if not any(el.category == "launch" for el in elements.values()):
            self.errors.append(
                SchedError("the graph has no launcher: add a Launch element to carry out its plans", self.file_location)
            )

    def _check_cycles(self, graph: nx.MultiDiGraph, connections: list[Connection]) -> None:
        try:
            cycle = nx.find_cycle(graph)
        except nx.NetworkXNoCycle:
            return
        names = [edge[0] for edge in cycle] + [cycle[0][0]]
        src, dst = cycle[-1][0], cycle[-1][1]
        where = next((c.location for c in connections if c.src == src and c.dst == dst), self.file_location)
        self.errors.append(
            SchedError(
                "cycle: " + " -> ".join(names),
                where,
                hint="a graph is ticked once per round in order; feed information back through the world state instead",
            )
        )


_BAD = object()
_REPLACED = object()


def _type_hint(port_type: type) -> str | None:
    makers = defaultdict(list)
    for cls in registry.classes():
        for p in cls.outputs:
            if p.type is port_type:
                makers[port_type].append(cls.__name__)
    if makers[port_type]:
        return f"{port_type.__name__} comes from e.g. " + ", ".join(makers[port_type][:4])
    return None
