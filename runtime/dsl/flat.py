"""The flat graph a `.sched` file and its imports load into (runtime/dsl/loader.py): its
elements as declared, its connections, the ports of compound instances left open, and the
bodies of the element classes it has no instance of (to be checked as far as they can be)."""

from __future__ import annotations

import attrs

from roundhouse.errors import Location, SchedError
from roundhouse.runtime.dsl import ast


@attrs.frozen
class Decl:
    """One element of the flat graph, with its arguments as written (parameters substituted)."""

    name: str
    class_name: str
    args: tuple[ast.Arg, ...]
    location: Location
    class_location: Location
    base_dir: str  # folder of the declaring file
    # The compound instances it is inside, outermost first: (instance, where it is declared).
    # An error in the arguments an instance gives names its line beside the library's.
    within: tuple[tuple[str, Location], ...] = ()


@attrs.frozen
class Edge:
    src: str
    src_port: ast.PortRef | None
    dst: str
    dst_port: ast.PortRef | None
    location: Location


@attrs.frozen
class OpenPort:
    """A port of a compound instance that nothing outside connects to, and the port of the
    element inside that it stands for (so that a check names the instance, not its insides)."""

    instance: str
    class_name: str
    side: str  # "input" or "output"
    key: str | int
    location: Location  # the instance's declaration
    inner: str
    inner_port: ast.PortRef | None


@attrs.define
class FlatGraph:
    path: str
    settings: dict[str, ast.Setting]
    decls: dict[str, Decl]
    edges: list[Edge]
    files: list[str]
    open_ports: list[OpenPort] = attrs.field(factory=list)
    bodies: list[Body] = attrs.field(factory=list)
    # Settings two files set differently, neither importing the other: an error unless the
    # command line sets them (runtime/compiler.py), which then decides between neither file.
    setting_clashes: dict[str, list[SchedError]] = attrs.field(factory=dict)
    # The compound instances the graph's elements are expanded from: name -> (its elementclass,
    # where it is declared), so that an argument naming one is told it names no one element.
    instances: dict[str, tuple[str, Location]] = attrs.field(factory=dict)


@attrs.frozen
class Body:
    """An element class the graph has no instance of, expanded as an instance named after it
    would be, so that what does not depend on an instance is checked (runtime/compiler.py): its
    elements `Name/inner` (an argument that takes a parameter keeps `$param`), and connections,
    those that enter at `input` from `Name/input` and those that leave at `output` to
    `Name/output`. It is not part of the graph."""

    name: str
    graph: FlatGraph

    @property
    def ports(self) -> tuple[str, str]:
        """The elementclass's own `input` and `output`, as its connections name them."""
        return f"{self.name}/input", f"{self.name}/output"


def port_key(port: ast.PortRef | None) -> str | int:
    """A connection's port as written: `[name]` or `[N]`, or 0 where none is named."""
    return 0 if port is None else port.key
