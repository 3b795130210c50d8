"""The syntax tree of a `.sched` file: immutable records, each with its source location."""

from __future__ import annotations

import attrs

from roundhouse.errors import Location


@attrs.frozen
class Value:
    """A literal. `kind` is one of: number, duration, rate, multiplier, range, string, bool,
    list, reference (a bare name: another element, or a word such as a mode), param ($name)."""

    kind: str
    value: object
    location: Location
    text: str = ""

    @property
    def items(self) -> tuple[Value, ...]:
        """The values of a list (kind "list")."""
        assert isinstance(self.value, tuple), self.kind
        return self.value

    @property
    def word(self) -> str:
        """The text of a string, a reference or a parameter's name (kinds "string", "reference", "param")."""
        assert isinstance(self.value, str), self.kind
        return self.value


@attrs.frozen
class Arg:
    name: str | None  # None for a positional argument
    value: Value
    location: Location


@attrs.frozen
class PortRef:
    key: str | int
    location: Location


@attrs.frozen
class Node:
    """One element in a chain: a reference `name`, a declaration `name :: Class(args)`,
    or an anonymous instance `Class(args)` (then `name` is None)."""

    name: str | None
    class_name: str | None
    args: tuple[Arg, ...] | None  # None when written without parentheses
    location: Location
    class_location: Location | None = None


@attrs.frozen
class Endpoint:
    in_port: PortRef | None
    node: Node
    out_port: PortRef | None


@attrs.frozen
class Chain:
    endpoints: tuple[Endpoint, ...]
    arrows: tuple[Location, ...]  # the location of each `->`, between consecutive endpoints
    location: Location


@attrs.frozen
class Setting:
    name: str
    value: Value
    location: Location


@attrs.frozen
class Import:
    path: str
    location: Location


@attrs.frozen
class Require:
    path: str
    location: Location


@attrs.frozen
class Param:
    name: str  # without the `$`
    default: Value | None
    location: Location


@attrs.frozen
class ElementClass:
    name: str
    params: tuple[Param, ...]
    body: tuple[Chain, ...]
    location: Location


Statement = Setting | Import | Require | ElementClass | Chain


@attrs.frozen
class Program:
    path: str
    statements: tuple[Statement, ...]
