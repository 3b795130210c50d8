"""The compiler: a flat graph of declarations becomes configured elements in tick order.

Arguments are converted and validated by runtime/arguments.py; connections and the graph's
structure are checked by runtime/wiring.py; the graph's settings and the command line's
overrides are read by runtime/compiler_settings.py.

parse -> resolve classes in the registry -> build configurations (converted, validated) ->
build the graph of connections -> check unknown ports, port type mismatches, fan-in, unconnected
required inputs and outputs, cycles, exactly one pool, at least one launcher, each source's jobs
reaching the pool by one path -> topological order.
Every problem found is reported at once, each at its file, line and column. An element class
the graph has no instance of is checked as far as it can be without one (`_check_body`).
`roundhouse check` runs all of this without running anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from roundhouse.errors import QUOTED_WIDTH, Location, SchedError, SchedErrors, UsageError, did_you_mean, source_line
from roundhouse.runtime import compiler_settings, registry
from roundhouse.runtime.arguments import NeedsInstance, as_built, convert, is_sequence, raised, tuple_positions, validate
from roundhouse.runtime.cluster import spec_shown
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.dsl.loader import Body, Decl, FlatGraph, load
from roundhouse.runtime.element import Element
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.values import FilePath, element_refs, format_duration
from roundhouse.runtime.wiring import Connection, Topology, Wiring, in_written_order


def _working_folder() -> str:
    try:
        return os.getcwd()
    except OSError:  # (removed while we run: relative paths then name nothing, and are kept as written)
        return ""


# Settings added after graphs' keys were first made, with the value that leaves them unset.
_ADDED_SETTINGS = {"gpu_types": ""}


@attrs.define
class CompiledGraph:
    path: str
    settings: GraphSettings
    elements: dict[str, Element]  # in tick (topological) order
    connections: list[Connection]
    graph: Topology
    decls: dict[str, Decl]
    setting_locations: dict[str, Location] = attrs.field(factory=dict)
    # The option that gave each setting given on the command line ("--vary cluster").
    setting_flags: dict[str, str] = attrs.field(factory=dict)
    # Elements another element ticks itself (its candidates, see Element.holds).
    held: frozenset[str] = frozenset()
    # The working folder when it was compiled: a graph given by a relative path has relative
    # file paths (profile, traces) resolved from here.
    cwd: str = attrs.field(factory=_working_folder)

    # The connections into each input, (element, port) -> [(source, its port)], built when first
    # asked for and again when `connections` is replaced or grows (see `sources_of`).
    _into: tuple[list[Connection], int, dict[tuple[str, str], list[tuple[str, str]]]] | None = attrs.field(
        default=None, init=False, eq=False, repr=False
    )

    def __repr__(self) -> str:
        # (attrs' own would print every setting and element, with their arguments: pages of text)
        cluster = f", cluster {spec_shown(self.settings.cluster)}" if self.settings.cluster else ""
        return (
            f"CompiledGraph({Path(self.path).name}: {len(self.elements):,} elements, {len(self.connections):,} connections, "
            f"round {format_duration(self.settings.round)}{cluster})"
        )

    def sources_of(self, element: str, port: str) -> list[tuple[str, str]]:
        # (An index rather than a scan per call: the engine asks once per input, and a graph
        # may have thousands of elements.)
        connections = self.connections
        if self._into is None or self._into[0] is not connections or self._into[1] != len(connections):
            into: dict[tuple[str, str], list[tuple[str, str]]] = {}
            for c in connections:
                into.setdefault((c.dst, c.dst_port), []).append((c.src, c.src_port))
            self._into = (connections, len(connections), into)
        return list(self._into[2].get((element, port), ()))

    def producer_of(self, element: str, port: str) -> str | None:
        got = self.sources_of(element, port)
        return got[0][0] if got else None

    def by_class(self, class_name: str) -> list[Element]:
        return [e for e in self.elements.values() if type(e).__name__ == class_name]

    def key(self) -> str:
        """What identifies the graph, for a snapshot or a live run's journal to be matched with
        it: its settings, each element's class and arguments, and its connections (a SHA-256,
        shortened). Files are named by their whole paths: the same graph gives the same key
        however its own path was spelled (relative or not)."""
        settings = self._whole_paths(attrs.asdict(self.settings))
        # Settings added since keys were first made count only when set: a graph that leaves
        # them unset keeps the key its journals and snapshots were made with.
        for name, unset in _ADDED_SETTINGS.items():
            if settings.get(name) == unset:
                del settings[name]
        text = json.dumps(
            {
                "settings": settings,
                "elements": {name: [type(el).__name__, self._whole_paths(el.config())] for name, el in self.elements.items()},
                "connections": [[c.src, c.src_port, c.dst, c.dst_port] for c in self.connections],
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _whole_paths(self, value: Any) -> Any:
        """`value` with each relative file path in it made whole (an absolute one is kept as
        written, so that the keys of graphs given by absolute paths stay as they were)."""
        if isinstance(value, FilePath):
            return value if os.path.isabs(value) else os.path.normpath(os.path.join(self.cwd, value))
        if isinstance(value, dict):
            return {k: self._whole_paths(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._whole_paths(v) for v in value]
        return value


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


def compile_file(
    path: str | Path, overrides: Sequence[str | Override] = (), text: str | None = None, required: list[str] | None = None
) -> CompiledGraph:
    """The graph of a `.sched` file (or of `text`, as if at `path`); the resolved paths of the
    Python files it requires are added to `required`, if given (runtime/dsl/loader.py `load`)."""
    if text is None:
        refuse_empty_graph_path(path)
    flat = load(path, text, required)
    return compile_graph(flat, [o if isinstance(o, Override) else Override(o) for o in overrides])


def refuse_empty_graph_path(path: str | Path) -> None:
    """An empty graph path (often an unset shell variable) is said to be empty: to pathlib it
    is the current folder, which the loader would call a directory it cannot read."""
    if isinstance(path, str) and not path.strip():
        raise UsageError("the graph path is empty: give a .sched file")


def compile_graph(flat: FlatGraph, overrides: Sequence[Override] = ()) -> CompiledGraph:
    return _Compiler(flat, list(overrides)).run()


class _Compiler:
    def __init__(self, flat: FlatGraph, overrides: list[Override]):
        self.flat = flat
        self.overrides = overrides
        self.errors: list[SchedError] = []
        self._setting_flags: dict[str, str] = {}  # setting name -> the option that gave it
        self._setting_labels: dict[str, str] = {}  # setting name -> the option and its text (--set round=1min)

    def fail_if_errors(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise SchedErrors(self.errors)

    def run(self) -> CompiledGraph:
        element_overrides, setting_overrides = self._split_overrides()
        # Two files that set a setting differently, neither importing the other: said before
        # all else, as loading the graph would, unless a --set decides between them.
        clashes = [err for name, errs in self.flat.setting_clashes.items() if name not in setting_overrides for err in errs]
        if clashes:
            self.errors += clashes
            self.fail_if_errors()
        settings = self._settings(setting_overrides)
        elements: dict[str, Element] = {}
        for decl in self.flat.decls.values():
            built = self._build(decl, element_overrides.get(decl.name, []))
            if built is not None:
                elements[decl.name] = built
        for body in self.flat.bodies:
            self._check_body(body)
        self.fail_if_errors()
        given = {(name, field): label for name, sets in element_overrides.items() for field, _, label in sets}
        wiring = Wiring(self.flat, self.errors, given)
        wiring.check_references(elements)
        _check_named_elements(elements, self.flat, wiring, self.errors)
        connections = wiring.connections(elements)
        self.fail_if_errors()
        wiring.check_structure(elements, connections)
        self.fail_if_errors()
        graph = Topology(elements, ((c.src, c.dst) for c in connections))
        order_index = {name: i for i, name in enumerate(self.flat.decls)}
        wiring.check_flow(graph, elements, connections)
        self.fail_if_errors()
        for el in elements.values():
            el.peers = {name: elements[name] for name in wiring.references(el)}
        # A control element without inputs (a synthesizer) ticks first in its round, before any
        # element has acted on it; otherwise the order of declaration breaks ties.
        first = {n for n, el in elements.items() if el.category == "control" and not el.inputs}
        order = graph.order(key=lambda n: (n not in first, order_index[n]))
        return CompiledGraph(
            path=self.flat.path,
            settings=settings,
            elements={n: elements[n] for n in order},
            connections=connections,
            graph=graph,
            decls=self.flat.decls,
            held=wiring.held(elements),
            # Where each setting was written; one given with --set has no place in a file.
            setting_locations={
                name: st.value.location for name, st in self.flat.settings.items() if name not in setting_overrides
            },
            setting_flags=dict(self._setting_flags),
        )

    # The graph's settings and the command line's overrides (runtime/compiler_settings.py).
    _split_overrides = compiler_settings.split_overrides
    _settings = compiler_settings.graph_settings
    _cluster_path = compiler_settings.cluster_path

    # --- elements ---
    def _build(self, decl: Decl, overrides, open_params: bool = False) -> Element | None:
        """The element `decl` declares, configured; None, the problems reported, if it cannot
        be. With `open_params` (an element class's body without an instance), an argument that
        takes a parameter is for the instance to give: only its name is checked, and then the
        element is not configured but stands for its class (`_unconfigured`)."""
        cls = registry.get(decl.class_name)
        element = self.flat.decls.get(decl.class_name)
        if cls is None and element is not None:  # (`o(backfill=true)` in a chain, `o` declared with its class)
            self.errors.append(
                SchedError(
                    f"'{decl.class_name}' is an element (declared at {element.location}), not an element class: "
                    "an element's arguments are given where it is declared",
                    decl.class_location,
                    hint=f"write them there ({decl.class_name} :: {element.class_name}(...)) and the name alone here",
                )
            )
            return None
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
        # Where each argument is given: its value in the file, or the --set's label.
        places: dict[str, Location | str] = {}
        # Arguments whose validators read other fields: checked once all are known.
        deferred: list[tuple[attrs.Attribute, Any, Location | None, str]] = []
        for position, arg in enumerate(decl.args):
            if arg.name is None:
                if seen_keyword:
                    self.errors.append(SchedError("a positional argument cannot follow a keyword argument", arg.location))
                    ok = False
                    continue
                if position >= len(fields):
                    n = len(fields)
                    most = "no arguments" if not n else f"at most {n} argument{'s' if n > 1 else ''}"
                    self.errors.append(SchedError(f"{cls.__name__} takes {most}", arg.location))
                    ok = False
                    continue
                field = fields[position]
            else:
                seen_keyword = True
                field = by_name.get(arg.name)
                if field is None:
                    hint = _unknown_argument_hint(arg.name, by_name, cls)
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
            if open_params and _takes_parameter(arg.value):
                kwargs[field.name] = _OPEN
                continue
            value = self._argument(cls, field, arg.value, None, arg.value.location, deferred)
            kwargs[field.name] = value
            places[field.name] = arg.value.location
            if value is _BAD:
                ok = False
        for field_name, value_node, label in overrides:
            field = by_name.get(field_name)
            if field is None:
                self.errors.append(
                    SchedError(
                        f"{label}: {cls.__name__} '{decl.name}' has no argument '{field_name}'",
                        hint=_unknown_argument_hint(field_name, by_name, cls),
                    )
                )
                ok = False
                continue
            value = self._argument(cls, field, value_node, os.getcwd(), None, deferred, prefix=f"{label}: ")
            kwargs[field.name] = value
            places[field.name] = label
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
        if ok and deferred:
            ok = _validate_together(cls, fields, kwargs, deferred, self.errors, decl)
        if not ok:
            return None
        if any(v is _OPEN for v in kwargs.values()):
            return _unconfigured(cls, decl)
        try:
            instance = cls(**kwargs)
        except Exception as err:  # (its validators and __attrs_post_init__ are the user's code)
            self.errors.append(_arguments_together(cls, decl, raised(err), overrides))
            return None
        instance.name = decl.name
        instance.declared_at = decl.location
        instance.arguments_at = places
        return instance

    def _check_body(self, body: Body) -> None:
        """An element class the graph has no instance of (flat.py `Body`), checked for what does
        not depend on an instance: its elements' classes and arguments (as `_build` with
        `open_params`), and its connections' ports and types, the ports its own `input` and
        `output` lead to inside included. What its `input` and `output` connect to outside, and
        what stays unconnected, are an instance's, and are not checked."""
        found = len(self.errors)
        elements: dict[str, Element] = {}
        for decl in body.graph.decls.values():
            built = self._build(decl, [], open_params=True)
            if built is not None:
                elements[decl.name] = built
        wiring = _BodyWiring(body.graph, self.errors)
        wiring.connections(elements)
        wiring.open_ends(elements, *body.ports)
        # A class used inside others is expanded in each: each of its problems is reported once.
        seen = {(e.message, e.location) for e in self.errors[:found]}
        new, self.errors[found:] = self.errors[found:], []
        for err in new:
            if (err.message, err.location) not in seen:
                seen.add((err.message, err.location))
                self.errors.append(err)

    def _argument(self, cls, field, value_node, base_dir, location, deferred, prefix=""):
        """An argument's value (`_BAD` if it does not do); a file path relative to `base_dir`, or
        (None) to the folder of the file that writes it (`_convert_as_written`)."""
        what = f"argument '{field.name}' of {cls.__name__}"
        try:
            if base_dir is None:
                value = _convert_as_written(value_node, field.type, what)
            else:
                value = convert(value_node, field.type, base_dir, what)
        except SchedError as err:
            self.errors.append(err if not prefix else SchedError(prefix + err.message))
            return _BAD
        try:
            problem = validate(field, value)
        except NeedsInstance:  # (its validator reads another field)
            deferred.append((field, value, location, prefix))
            return value
        if problem:
            self.errors.append(SchedError(f"{prefix}{what} {problem}", location))
            return _BAD
        return value


def _convert_as_written(value: ast.Value, annotation: Any, what: str) -> Any:
    """`convert`, each file path in `value` relative to the folder of the file that writes it:
    a path an instance gives an elementclass is its own file's, not the elementclass's. A list
    whose paths are written in several files (an elementclass's list holding an instance's
    value) is converted an item at a time."""
    folders = {_folder(v) for v in _strings(value)}
    if len(folders) <= 1:
        return convert(value, annotation, folders.pop() if folders else "", what)
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    for option in [a for a in typing.get_args(annotation) if a is not type(None)] if union else [annotation]:
        if not is_sequence(option):
            continue
        positions = tuple_positions(option)
        if positions is None:
            (item_type, *_) = typing.get_args(option) or (Any,)
            items = [_convert_as_written(v, item_type, what) for v in value.items]
        elif len(positions) == len(value.items):
            items = [_convert_as_written(v, t, what) for v, t in zip(value.items, positions)]
        else:
            break  # (the length is wrong: said as `convert` says it)
        return tuple(items) if option is tuple or typing.get_origin(option) is tuple else items
    return convert(value, annotation, "", what)


def _strings(value: ast.Value) -> list[ast.Value]:
    if value.kind == "list":
        return [s for v in value.items for s in _strings(v)]
    return [value] if value.kind == "string" else []


def _folder(value: ast.Value) -> str:
    """The folder of the file a literal is written in."""
    return str(Path(value.location.path).parent)


def _check_named_elements(elements: dict[str, Element], flat: FlatGraph, wiring: Wiring, errors: list[SchedError]) -> None:
    """What an element asks of the elements its arguments name (`reference_problem`: a
    synthesizer's switches must be switches), each at the place that names it (or said as the
    --set's that gives it); and at most one element that forks the world (it must tick first in
    its round, before any other)."""
    for name, el in elements.items():
        problem = getattr(el, "reference_problem", None)
        if problem is None:
            continue
        for field in attrs.fields(type(el)):
            for ref in element_refs(getattr(el, field.name)):
                if ref.name in elements:
                    why = problem(field.name, elements[ref.name])
                    if why is not None:
                        errors.append(wiring.at_argument(name, field.name, ref.name, why))
    forking = in_written_order((name for name, el in elements.items() if getattr(type(el), "forks_world", False)), flat)
    for name in forking[1:]:
        first = forking[0]
        errors.append(
            SchedError(
                f"'{name}' ({type(elements[name]).__name__}) is a second element that forks the world, after "
                f"'{first}' ({type(elements[first]).__name__}): a graph may have one, which forks at the start "
                "of its round, before any other element has ticked",
                flat.decls[name].location,
                hint="give one synthesizer all the switches",
            )
        )


def _validate_together(cls, fields, kwargs, deferred, errors: list[SchedError], decl: Decl) -> bool:
    """Run again, with every other argument's value known (given, or its default), the
    validators that read other fields; each complaint is reported at its argument (and, for one
    written in an element class's body, where the instance is declared). One that reads what is
    known only once the element is built is left to building it."""
    known = {f.name: f.default for f in fields if f.default is not attrs.NOTHING and not isinstance(f.default, attrs.Factory)}  # type: ignore[arg-type]
    known.update({k: v for k, v in kwargs.items() if v is not _REPLACED and v is not _OPEN})
    known = as_built(fields, known)
    ok = True
    for field, value, location, prefix in deferred:
        try:
            problem = validate(field, value, known)
        except NeedsInstance:
            continue
        if problem:
            # (an argument the instance gives is pointed at where it is written, on the instance's line)
            at_instance = bool(decl.within) and location is not None and _same_line(location, decl.within[-1][1])
            hint = None if at_instance else _instance_hint(decl)
            errors.append(SchedError(f"{prefix}argument '{field.name}' of {cls.__name__} {problem}", location, hint=hint))
            ok = False
    return ok


_BAD = object()
_REPLACED = object()
_OPEN = object()  # an argument that takes a parameter of an element class without an instance


def _unknown_argument_hint(name: str, by_name: dict, cls: type[Element]) -> str:
    """What an argument the class does not have suggests, in the file and in a --set alike."""
    return did_you_mean(name, by_name) or (
        f"its arguments: {', '.join(by_name)}" if by_name else f"{cls.__name__} takes no arguments"
    )


def _takes_parameter(value: ast.Value) -> bool:
    return value.kind == "param" or (value.kind == "list" and any(_takes_parameter(v) for v in value.items))


def _unconfigured(cls: type[Element], decl: Decl) -> Element:
    """An element of an element class's body that waits for an instance's parameters: it stands
    for its class (its ports, for the connections' checks) and is never configured or run."""
    element = object.__new__(cls)
    element.name = decl.name
    element.declared_at = decl.location
    return element


class _BodyWiring(Wiring):
    """Wiring of an element class's body: also the connections at its own `input` and `output`."""

    def open_ends(self, elements: dict[str, Element], inlet: str, outlet: str) -> None:
        """The port inside that each connection from `input` enters and each one into `output` leaves."""
        for e in self.flat.edges:
            if e.src == inlet and e.dst in elements:
                self._port(elements[e.dst], e.dst_port, "input", e)
            if e.dst == outlet and e.src in elements:
                self._port(elements[e.src], e.src_port, "output", e)


def _arguments_together(cls: type[Element], decl: Decl, complaint: str, overrides) -> SchedError:
    """An element's arguments that do not fit together. Where the complaint names an argument
    given with --set, it is that option's error (as one in a single argument given with --set
    is), on the command line rather than at the element's line; else it is the file's."""
    message = f"{cls.__name__} '{decl.name}': {complaint}"
    named = [label for field, _, label in overrides if re.search(rf"\b{re.escape(field)}\b", complaint)]
    if named:
        return SchedError(f"{', '.join(named)}: {message}", hint=f"'{decl.name}' is declared at {decl.location}")
    given = ", ".join(label for _, _, label in overrides)
    hints = [f"its arguments include {given}" if given else None, _instance_hint(decl)]
    return SchedError(message, decl.class_location, hint="; ".join(h for h in hints if h) or None)


def _same_line(a: Location, b: Location) -> bool:
    return (a.path, a.line) == (b.path, b.line)


def _instance_hint(decl: Decl) -> str | None:
    """Where the compound instance an element is inside is declared: the arguments it gives
    are there, not on the line of the element class's body that an error points at."""
    if not decl.within:
        return None
    instance, declared_at = decl.within[-1]
    line = (source_line(declared_at) or "").strip()
    written = f": {line}" if line and len(line) <= QUOTED_WIDTH else ""
    return f"in '{instance}', declared at {declared_at}{written}"
