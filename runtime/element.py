"""The element: one small class per scheduling idea, configured by validated fields.

An element declares typed input and output ports, a category, and configuration fields
(attrs, with validators). Each round the engine calls `tick(ctx, **inputs)`; the element reads
its inputs and the read-only round context and returns its outputs: the value itself when it
has one output port, a dict by port name when it has several, None when it has none. It keeps
its own private state (set up in `start`) and never changes the world: sources emit new
jobs (a `JobBatch`) and launchers the round's final `Plan`, which the engine applies
(runtime/engine.py).

Its docstring has one fixed shape, from which `roundhouse elements NAME` and the docs are
generated (see `parse_doc`)::

    One-line synopsis.

    Description, any number of paragraphs.

    Ports:
        active: what the port carries.
    Arguments:
        backfill: what the field does.
    Counters:
        ranked: what the counter counts.
    Cost: O(n log n) over the pool's jobs n per round.
    See also: Fifo, Srtf
    Paper: Tiresias (NSDI'19) §3.

Every port, argument and counter is listed (or the section says `none`). Entries that a family
of elements shares are written once, in the docstring of the family's base class (see
`element_family`). `Cost:` is what a round costs the element, as an algorithm's complexity
(docs/cost-model.md); a family may state it for its members, and the library's own elements
must state it (elements of one's own may leave it out).
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import sys
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import attrs

from roundhouse.errors import Location
from roundhouse.runtime.values import INT64_MAX, Duration, Rate

if TYPE_CHECKING:
    import numpy as np

    from roundhouse.runtime.context import RoundContext

CATEGORIES = (
    "source",
    "admission",
    "pool",
    "policy",
    "solver",
    "mechanism",
    "placement",
    "launch",
    "sink",
    "control",
)

SECTIONS = ("Ports", "Arguments", "Counters", "Cost", "See also", "Paper")


@attrs.frozen
class Port:
    name: str
    type: type
    required: bool = True  # inputs: must be connected
    multi: bool = False  # inputs: several connections, merged with `type.merge`


def In(name: str, type_: type, *, required: bool = True, multi: bool = False) -> Port:
    return Port(name, type_, required, multi)


def Out(name: str, type_: type) -> Port:
    return Port(name, type_)


@attrs.frozen
class Doc:
    """An element's documentation, parsed from its docstring."""

    synopsis: str
    description: str
    ports: dict[str, str]
    arguments: dict[str, str]
    counters: dict[str, str]
    see_also: tuple[str, ...]
    paper: str
    cost: str = ""  # per-round cost, as a complexity (required of the library's elements)
    # An input port's own text where an output port has its name (PolluxAgent's `plan` in and
    # out): the docstring lists the input's entry first, and `ports` holds the output's.
    input_ports: dict[str, str] = attrs.field(factory=dict)

    def port(self, direction: str, name: str) -> str:
        """The text of a port ("in" or "out")."""
        if direction == "in" and name in self.input_ports:
            return self.input_ports[name]
        return self.ports.get(name, "")


def _no_tick(self: Element, ctx: RoundContext, **inputs: Any) -> Any:
    raise NotImplementedError(f"{type(self).__name__} does not define tick()")


class Element:
    """Base of all elements. Subclasses are declared with the `@element` decorator."""

    category: ClassVar[str] = ""
    inputs: ClassVar[tuple[Port, ...]] = ()
    outputs: ClassVar[tuple[Port, ...]] = ()
    doc: ClassVar[Doc]
    # Set by `@element` / `@element_family` (attrs); declared so that the type checker knows
    # every element class is an attrs class.
    __attrs_attrs__: ClassVar[tuple[attrs.Attribute, ...]]
    _family_doc: ClassVar[Doc]
    # Fields naming elements that this one ticks itself (a control element's candidates): the
    # engine does not tick those, and their ports are not connected (runtime/wiring.py).
    holds: ClassVar[tuple[str, ...]] = ()
    # The elements its arguments name (ElementRef), by name: set by the compiler.
    peers: dict[str, Element] = {}

    # Set by the compiler: the instance's name in the graph (e.g. "admit", "Las@2"), and where
    # the graph declares it (for messages about it).
    name: str = "?"
    declared_at: Location | None = None
    # Set by the compiler: where each argument given to it was written (its value's place in the
    # file), or the command-line option that gave it ("--set src.rate=8/h"); an argument left at
    # its default has no entry. Run-time errors about an argument use it (`argument_error`).
    arguments_at: dict[str, Location | str] = {}

    # What a fork of the simulation copies (runtime/snapshot.py; docs/writing-elements.md). `state`
    # names every attribute the element sets outside its configuration that changes as rounds
    # pass (deep-copied into a fork, saved in snapshots); `fixed` names those set in `start` and
    # never changed after (shared by forks, saved in snapshots). `state = ()` says there is none.
    # An element that declares no `state`, sets an attribute neither names, or says
    # `forkable = False` cannot be forked, and `roundhouse check --fork` says so.
    state: ClassVar[tuple[str, ...] | None] = None
    fixed: ClassVar[tuple[str, ...]] = ()
    forkable: ClassVar[bool] = True
    # Event skipping: whether `quiet_until` also answers after a round whose plan changed
    # something (for the world as that plan left it), not only after one that changed nothing.
    quiet_after_change: ClassVar[bool] = False

    def start(self, ctx: RoundContext) -> None:
        """Called once before the first round: clear private state, read files, seed RNGs."""

    # `tick(ctx, **inputs)`: each element declares its own input ports as keyword parameters
    # and its own return type (`def tick(self, ctx, active: Active) -> Ranking`), so the base
    # fixes no signature that they would have to repeat.
    tick: Callable[..., Any] = _no_tick

    def finish(self, ctx: RoundContext) -> dict[str, Any]:
        """Called once after the last round; returns reports (tables, dicts) by name."""
        return {}

    def exhausted(self) -> bool:
        """Sources: True once no job will come any more. Others: always True."""
        return True

    def coming_job_ids(self) -> np.ndarray | None:
        """Sources: the ids of every job it will emit, when they are known once it has started
        (None: not known ahead, as jobs submitted live are not). The engine refuses, before the
        first round, two sources that would emit one id."""
        return None

    def goal_met(self, ctx: RoundContext) -> bool:
        """Sinks: True once what they measure is complete (the run may stop)."""
        return False

    # Sinks: what the run's stop reason says when `goal_met` stops it, after the sink's name.
    goal = "its goal is met"

    def goal_met_in_books(self, ctx: RoundContext) -> bool:
        """Sinks: whether the world's books already show what they measure complete, before
        their next tick counts it. Event skipping asks it of a round whose completions would
        otherwise wait (runtime/skipping.py): such a round is ticked, so that the run stops in
        it, as it would round by round."""
        return False

    def quiet_until(self, ctx: RoundContext) -> float | None:
        """Event skipping (runtime/skipping.py): asked after a round whose plan changed nothing
        (and, when every element of the graph sets `quiet_after_change`, after any round),
        right after the round's last tick. Returns a time before which ticking the element again
        would emit the same outputs and leave its state and counters as they are, provided
        nothing happens meanwhile (no arrival, no completion, no other change to its inputs
        than running jobs making progress); `inf` if only such an event can change them. None
        (the default): not declared, and the engine ticks the graph every round."""
        return None

    def completions_wait(self, ctx: RoundContext) -> bool:
        """Event skipping, asked with `quiet_until`: whether a completion of a job running now
        may reach this element at a later tick (in that tick's events) rather than in a tick of
        its own, with the same results and counters, provided nothing else happens meanwhile.
        The engine then passes rounds whose only events are such completions, while every
        element says so. False (the default): each completion is ticked in its round."""
        return False

    def arrivals_wait(self, ctx: RoundContext) -> bool:
        """Event skipping, asked with `completions_wait` (and again after each round passed this
        way): whether a round in which every job in the system runs on what it asks for, and the
        jobs arriving all find room on free GPUs, may be carried out in passing
        (runtime/passing.py), with the same results and counters. In such a round the sources and
        admission gates are ticked as usual, the policy ranks only the arrivals
        (`rank_arrivals`), the placer places only them (`place_arrivals`) and the launcher
        carries the plan out; the pool receives the arrivals at its next tick (`join_later`), the
        other elements the round's events in their next tick's. For the policy and the placer
        the answer also says that their output's order does not matter meanwhile. False (the
        default): such rounds are ticked."""
        return False

    @functools.cached_property
    def counters(self) -> dict[str, float]:
        """Counters (Click's read handlers): documented under `Counters:`. (Made on first use
        and then a plain attribute: elements bump them every round.)"""
        return {}

    @classmethod
    def input(cls, key: str | int) -> Port | None:
        return _find_port(cls.inputs, key)

    @classmethod
    def output(cls, key: str | int) -> Port | None:
        return _find_port(cls.outputs, key)

    @classmethod
    def fields(cls) -> tuple[attrs.Attribute, ...]:
        return attrs.fields(cls)

    def config(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in attrs.fields(type(self))}


def rounds_add_exactly(ctx: RoundContext) -> bool:
    """Event skipping: whether each round adds exactly `round_s` to a running job's run time
    (and `held` times that to its service), as rounds of whole seconds do while the clock stays
    where sums of whole numbers are exact. An element that settles, at its next tick, the rounds
    event skipping did not tick can then replay them addition by addition, as their ticks would
    have, to the bit."""
    r = float(ctx.round_s)
    return r == math.floor(r) and ctx.now < 2.0**50


def _find_port(ports: tuple[Port, ...], key: str | int) -> Port | None:
    if isinstance(key, int):
        return ports[key] if 0 <= key < len(ports) else None
    for p in ports:
        if p.name == key:
            return p
    return None


def _configure_fields(cls, fields):
    # Configuration is fixed once built; only private state (plain attributes) changes. Field
    # types written as strings are evaluated in the element's module, where they were imported.
    namespace = vars(sys.modules[cls.__module__])
    out = []
    for f in fields:
        kind = eval(f.type, namespace) if isinstance(f.type, str) else f.type  # noqa: S307
        out.append(f.evolve(on_setattr=attrs.setters.frozen, type=kind))
    return out


# --- bounds for element arguments that size or number what an element makes -------------------
# Beyond these an argument is a typo, and would otherwise fail deep inside a run (a MemoryError,
# an int64 overflow, an infinite loop) instead of at its place in the `.sched` file.
MAX_JOBS = 10_000_000  # jobs one element generates or reads
MAX_JOB_ID = INT64_MAX  # job ids are int64
MAX_START_ID = MAX_JOB_ID - MAX_JOBS  # so that start_id + jobs is still a job id
MAX_SECONDS = Duration(100 * 365 * 86400.0)  # a century: durations of jobs, bursts and windows
MAX_RATE = Rate(1e6)  # arrivals per second (3.6e9/h)


def job_ids(instance, attribute, value) -> None:
    """Validator for an IdRange of job ids: within 0..MAX_JOB_ID, and holding one at least (an
    empty range tracks nothing: its sink's goal would be met before any job ran)."""
    if value is not None and not (0 <= value.start and value.stop <= MAX_JOB_ID):
        raise ValueError(f"must be a range of job ids within 0..{MAX_JOB_ID}, got {value}")
    if value is not None and value.stop <= value.start:
        raise ValueError(f"must hold one job id at least (start..stop, stop excluded), got {value}")


E = TypeVar("E", bound=type[Element])


def element(cls: E) -> E:
    """Declare an element class: make its fields attrs fields, check its docstring, register it."""
    if cls.category not in CATEGORIES:
        raise TypeError(f"{cls.__name__}.category must be one of {CATEGORIES}, got {cls.category!r}")
    _check_ports(cls)
    _check_tick_parameters(cls)
    cls = _guard_fields(attrs.define(kw_only=True, slots=False, eq=False, field_transformer=_configure_fields)(cls))
    cls.doc = parse_doc(cls)
    if cls.tick is _no_tick:  # (rather than a check that passes and a run that fails in its first round)
        raise TypeError(
            f"{cls.__name__} defines no tick: write `def tick(self, ctx{''.join(', ' + p.name for p in cls.inputs)})`"
        )
    from roundhouse.runtime.arguments import check_default

    for field in attrs.fields(cls):
        check_default(cls, field)
    if not getattr(cls.finish, "_checks_counters", False):
        cls.finish = _checking_counters(cls.finish)  # type: ignore[method-assign]
    # What an element of one's own emits is checked each round (the library's are tested).
    if not cls.__module__.startswith("roundhouse.") and not getattr(cls.tick, "_checks_outputs", False):
        cls.tick = _checking_outputs(cls.tick)
    if not cls.__module__.startswith("roundhouse.") and not getattr(cls.goal_met, "_checks_goal", False):
        cls.goal_met = _checking_goal(cls.goal_met)  # type: ignore[method-assign]
    from roundhouse.runtime import registry

    registry.register(cls)
    return cls


def _check_ports(cls: type[Element]) -> None:
    """Each port is an `In` or `Out` whose type is a class (a port type of runtime/types.py):
    TypeError naming the class and the port otherwise, when its file is imported, rather than
    when a graph is checked or run."""
    for kind, ports in (("inputs", cls.inputs), ("outputs", cls.outputs)):
        make = "In" if kind == "inputs" else "Out"
        if isinstance(ports, Port):  # (`inputs = (In(...))`: the parentheses make no tuple)
            shown = ports.type.__name__ if isinstance(ports.type, type) else repr(ports.type)
            raise TypeError(
                f"{cls.__name__}.{kind} must be a tuple of {make}(name, type), got the one port {ports.name!r}: "
                f"a single port needs its comma, `{kind} = ({make}({ports.name!r}, {shown}),)`"
            )
        if not isinstance(ports, tuple | list):
            raise TypeError(f"{cls.__name__}.{kind} must be a tuple of {make}(name, type), got {ports!r}")
        for port in ports:
            if not isinstance(port, Port):
                raise TypeError(f"{cls.__name__}.{kind}: {port!r} is not a port: write {make}(name, type)")
            if not isinstance(port.type, type):
                shown = port.type if isinstance(port.type, str) else repr(port.type)
                raise TypeError(
                    f"{cls.__name__}: the type of port '{port.name}' is {port.type!r}, not a class: give the class "
                    f"itself, {make}({port.name!r}, {shown}), imported from roundhouse.runtime.types"
                )
        # (A graph connects a port by its name: the second of two alike would never be connected.)
        names = [port.name for port in ports]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise TypeError(
                f"{cls.__name__}.{kind}: port name(s) {', '.join(map(repr, twice))} given twice: each port of a side "
                "needs a name of its own"
            )


def _check_tick_parameters(cls: type[Element]) -> None:
    """The engine calls `tick(ctx, **inputs)`: a tick that cannot be called so (no context, an
    input port not taken by its name, a parameter that is no port and has no default) is a
    TypeError naming the class when its file is imported, rather than Python's complaint at
    its first tick."""
    ports = [port.name for port in cls.inputs]
    wanted = ", ".join(["self", "ctx", *ports])
    # (The engine calls tick on the element: a static or class method gets no element as `self`,
    # and its parameters then read one place off, whatever they are named.)
    kind = inspect.getattr_static(cls, "tick", None)
    if isinstance(kind, staticmethod | classmethod):
        raise TypeError(
            f"{cls.__name__}.tick is a {type(kind).__name__}, and the engine calls tick on the element, with the "
            f"round's context and one keyword argument per input port: tick must be an instance method, "
            f"`def tick({wanted})` without @{type(kind).__name__}"
        )
    try:
        signature = inspect.signature(cls.tick)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None, None, **dict.fromkeys(ports))  # (self, ctx and the ports, as the engine calls it)
    except TypeError:
        raise TypeError(
            f"{cls.__name__}.tick{signature} cannot be called as the engine calls it, with the round's context "
            f"and one keyword argument per input port: write `def tick({wanted})`"
        ) from None


def _checking_outputs(tick: Callable[..., Any]) -> Callable[..., Any]:
    """`tick`, then a check that it left its arguments and its `fixed` attributes as they were
    (`check_arguments_kept`, `check_fixed_kept`) and of what it returned beyond its type, which
    the engine checks: the keys of a dict of several output ports, and the contents of a Ranking
    (runtime/output_checks.py, `check_own_output`)."""

    @functools.wraps(tick)
    def checked(self: Element, ctx: RoundContext, *args: Any, **inputs: Any) -> Any:
        from roundhouse.runtime.output_checks import (
            check_arguments_kept,
            check_fixed_kept,
            check_own_output,
            keep_arguments,
            keep_fixed,
        )

        keep_arguments(self)
        keep_fixed(self)
        out = tick(self, ctx, *args, **inputs)
        check_arguments_kept(self, ctx)  # type: ignore[arg-type]
        check_fixed_kept(self, ctx)  # type: ignore[arg-type]
        check_own_output(self, ctx, out)  # type: ignore[arg-type]
        return out

    checked._checks_outputs = True  # type: ignore[attr-defined]
    return checked


def _checking_goal(goal_met: Callable[..., Any]) -> Callable[..., bool]:
    """A sink's `goal_met`, asked after every round: what it raises is the element's failure (the
    engine asks it outside the element's tick), and an answer that is not True or False (a
    string, an array) is refused naming the element, rather than read as its truth."""

    @functools.wraps(goal_met)
    def checked(self: Element, ctx: RoundContext) -> bool:
        from roundhouse.runtime.element_failures import call_element, element_failure
        from roundhouse.runtime.output_checks import describe_value

        met = call_element(self, "goal_met", ctx, goal_met, self, ctx)  # type: ignore[arg-type]
        if type(met).__name__ not in ("bool", "bool_"):  # (Python's or numpy's)
            raise element_failure(self, ctx, f"its goal_met returned {describe_value(met)}, not True or False")  # type: ignore[arg-type]
        return bool(met)

    checked._checks_goal = True  # type: ignore[attr-defined]
    return checked


def _checking_counters(finish: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """`finish`, then a check that every counter the element set is documented under
    `Counters:`. (Counters are made as the run goes, so they are checked at its end.)"""

    @functools.wraps(finish)
    def checked(self: Element, ctx: RoundContext) -> dict[str, Any]:
        reports = finish(self, ctx)
        if reports is not None and not isinstance(reports, dict):  # (None: nothing to report)
            from roundhouse.runtime.element_failures import element_failure
            from roundhouse.runtime.output_checks import describe_value

            raise element_failure(
                self,
                ctx,
                f"its finish() returned {describe_value(reports)}, not a dict of reports by name "
                "(return {} for none; docs/writing-elements.md)",
            )
        counters = self.__dict__.get("counters")  # (not made: none set)
        undocumented = sorted(str(k) for k in counters or () if k not in type(self).doc.counters)
        if undocumented:
            from roundhouse.runtime.element_failures import element_failure

            raise element_failure(
                self,
                ctx,  # type: ignore[arg-type]
                f"it set counter(s) that its docstring does not document under `Counters:`: {', '.join(undocumented)} "
                "(document each as `    name: what it counts`; docs/writing-elements.md)",
            )
        return reports

    checked._checks_counters = True  # type: ignore[attr-defined]
    return checked


def element_family(cls: E) -> E:
    """Declare a base class whose ports, configuration fields and documentation its elements
    share. It is not an element itself (not registered). Its docstring may have `Ports:`,
    `Arguments:` and `Counters:` sections, each entry naming what the family declares; every
    element built on it inherits those entries unless it documents the same name itself, and
    may leave out a section it has nothing of its own to add to."""
    cls = _guard_fields(attrs.define(kw_only=True, slots=False, eq=False, field_transformer=_configure_fields)(cls))
    cls._family_doc = parse_doc(cls, family=True)
    return cls


class FrozenArgumentError(attrs.exceptions.FrozenAttributeError):
    """An element set one of its arguments (configuration is fixed once the graph is built)."""

    def __init__(self, name: str) -> None:
        self.msg = f"argument {name!r} cannot change once the graph is built"
        AttributeError.__init__(self, self.msg)  # (attrs' own takes no message)
        self.name = name


def _guard_fields(cls: E) -> E:
    """Refuse setting a configuration field as attrs' frozen fields do, and store private state
    (the other attributes) directly. attrs' own hook looks every name up among the hooked
    fields and catches the KeyError of a name that is none of them: several times the cost of
    the store, paid by the state elements write every round."""
    fields = frozenset(f.name for f in attrs.fields(cls))
    store = object.__setattr__

    def __setattr__(self, name: str, value: object) -> None:
        if name in fields:
            raise FrozenArgumentError(name)
        store(self, name, value)

    cls.__setattr__ = __setattr__  # type: ignore[method-assign]
    return cls


def _inherited(cls: type[Element]) -> list[Doc]:
    """The documentation of the families `cls` is built on, the outermost first."""
    return [base.__dict__["_family_doc"] for base in reversed(cls.__mro__[1:]) if "_family_doc" in base.__dict__]


def type_name(annotation: Any) -> str:
    """How an argument's type is written in the reference."""
    from roundhouse.runtime import values

    names = {
        int: "integer",
        float: "number",
        bool: "boolean",
        str: "word or string",
        values.Duration: "duration",
        values.Rate: "rate",
        values.Multiplier: "multiplier",
        values.IdRange: "range",
        values.FilePath: "path",
        values.ElementRef: "element",
    }
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(type_name(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(c) for c in typing.get_args(annotation) if c is not None)
    positions = typing.get_args(annotation)
    if origin is tuple and positions and positions[-1] is not Ellipsis:
        return f"list of {len(positions)}: " + ", ".join(type_name(a) for a in positions)
    if origin in (list, tuple):
        (item, *_) = positions or (Any,)
        return f"list of {type_name(item)}"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


_SECTION_RE = re.compile(r"^(Ports|Arguments|Counters|Cost|See also|Paper):\s*(.*)$")


_OTHER_HEADINGS = {"args": "Arguments", "params": "Arguments", "parameters": "Arguments", "attributes": "Arguments"}
_OTHER_HEADINGS |= {"references": "Paper", "reference": "Paper", "see": "See also", "inputs": "Ports", "outputs": "Ports"}


def _near_headings(lines: list[str], missing: list[str]) -> str:
    """A note on the lines written as headings that are near a missing section's (`See Also:`,
    `Counter:`): the section is matched exactly, so such a line is read as text of the one above."""
    import difflib

    notes = []
    for line in lines:
        m = re.match(r"^([A-Za-z][A-Za-z ]*):", line)
        if m is None or _SECTION_RE.match(line):
            continue
        written = m.group(1).lower()
        said = _OTHER_HEADINGS.get(written)  # (the names other docstring styles give them)
        near = [said.lower()] if said in missing else difflib.get_close_matches(written, [s.lower() for s in missing], 1, 0.7)
        if near:
            section = next(s for s in missing if s.lower() == near[0])
            notes.append(f"the line '{line.strip()}' is not a section: write its heading as `{section}:`")
    return f" ({'; '.join(notes)})" if notes else ""


def parse_doc(cls: type[Element], family: bool = False) -> Doc:
    """Parse the fixed docstring shape, with the entries of the families `cls` is built on; a
    missing section or undocumented name is a TypeError. A family's own docstring needs only
    the sections it shares (`family=True`)."""
    text = inspect.cleandoc(cls.__doc__ or "")
    where = f"docstring of {'element family' if family else 'element'} {cls.__name__}"
    families = _inherited(cls)
    if not text:
        raise TypeError(f"{where} is missing")
    lines = text.splitlines()
    head: list[str] = []
    i = 0
    while i < len(lines) and not _SECTION_RE.match(lines[i]):
        head.append(lines[i])
        i += 1
    paragraphs = "\n".join(head).strip().split("\n\n")
    synopsis = " ".join(paragraphs[0].split())
    description = "\n\n".join(" ".join(p.split()) for p in paragraphs[1:] if p.strip())
    sections: dict[str, list[str]] = {}
    current = None
    for line in lines[i:]:
        m = _SECTION_RE.match(line)
        if m:
            current = m.group(1)
            if current in sections:
                raise TypeError(f"{where}: section '{current}:' appears twice")
            sections[current] = [m.group(2)] if m.group(2) else []
        elif current is not None:
            sections[current].append(line)
    # A family's members may leave out a section their families fill in; a family needs none.
    optional = SECTIONS if family else ("Ports", "Arguments", "Counters") if families else ()
    cost = " ".join(s.strip() for s in sections.get("Cost", ())).strip()
    for inherited in reversed(families):  # the nearest family's cost, unless the element states its own
        cost = cost or inherited.cost
    if cost or not cls.__module__.startswith("roundhouse."):
        optional = (*optional, "Cost")  # required of the library's own elements only
    missing = [s for s in SECTIONS if s not in sections and s not in optional]
    if missing:
        raise TypeError(f"{where}: missing section(s) {', '.join(s + ':' for s in missing)}{_near_headings(lines, missing)}")

    both = {p.name for p in cls.inputs} & {p.name for p in cls.outputs}
    input_ports: dict[str, str] = {}
    for inherited in families:
        input_ports.update(inherited.input_ports)

    def entries(section: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for inherited in families:  # a member's own entries replace its families' ones
            out.update({"Ports": inherited.ports, "Arguments": inherited.arguments, "Counters": inherited.counters}[section])
        body = [ln for ln in sections.get(section, ()) if ln.strip()]
        if len(body) == 1 and body[0].strip().lower() == "none":
            return out
        key = None
        own: set[str] = set()
        own_inputs: set[str] = set()
        for ln in body:
            m = re.match(r"^\s{4}(\w+):\s*(.*)$", ln)
            if m:
                key = m.group(1)
                if key in own:
                    if section != "Ports" or key not in both or key in own_inputs:
                        raise TypeError(f"{where}: '{key}' is documented twice in section '{section}:'")
                    # A port both in and out: its first entry was the input's.
                    input_ports[key] = out[key]
                    own_inputs.add(key)
                own.add(key)
                out[key] = m.group(2).strip()
            elif key is not None and ln.startswith("      "):
                out[key] = (out[key] + " " + ln.strip()).strip()
            else:
                raise TypeError(f"{where}: cannot read line {ln.strip()!r} in section '{section}:'")
        return out

    ports = entries("Ports")
    arguments = entries("Arguments")
    counters = entries("Counters")
    declared_ports = [p.name for p in (*cls.inputs, *cls.outputs)]
    declared_args = [f.name for f in attrs.fields(cls)]
    for kind, documented, declared in (("port", ports, declared_ports), ("argument", arguments, declared_args)):
        undocumented = [n for n in declared if n not in documented and not family]
        unknown = [n for n in documented if n not in declared]
        if undocumented:
            raise TypeError(f"{where}: {kind}(s) not documented: {', '.join(undocumented)}")
        if unknown:
            raise TypeError(f"{where}: documents unknown {kind}(s): {', '.join(unknown)}")
    see_also = " ".join(s.strip() for s in sections.get("See also", ())).strip()
    paper = " ".join(s.strip() for s in sections.get("Paper", ())).strip()
    if not family and (not synopsis or not paper):
        needed = "a synopsis line" if not synopsis else "an entry after 'Paper:' ('Paper: none.' for an element from no paper)"
        raise TypeError(f"{where}: needs {needed}")
    return Doc(
        synopsis=synopsis,
        description=description,
        ports=ports,
        arguments=arguments,
        counters=counters,
        see_also=tuple(s.strip() for s in see_also.split(",") if s.strip() and s.strip().lower() != "none"),
        paper=paper,
        cost=cost,
        input_ports=input_ports,
    )
