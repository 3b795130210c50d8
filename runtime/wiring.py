"""Wiring: connecting elements' ports and checking the graph's structure (unknown ports, port
type mismatches, fan-in, unconnected required inputs and outputs, one pool, a launcher, no cycles, each
source's jobs reaching the pool by one path). Every problem is collected with its place in the file,
so that all are reported at once."""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from roundhouse.errors import Location, SchedError, did_you_mean
from roundhouse.runtime import registry
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.dsl.flat import port_key
from roundhouse.runtime.dsl.loader import Decl, Edge, FlatGraph
from roundhouse.runtime.element import Element, Port
from roundhouse.runtime.types import Events, Jobs, Plan
from roundhouse.runtime.values import element_refs


@attrs.frozen
class Connection:
    src: str
    src_port: str
    dst: str
    dst_port: str
    location: Location | None


class Wiring:
    """Checks of one flat graph's connections; problems go to `errors`."""

    def __init__(self, flat: FlatGraph, errors: list[SchedError], given: dict[tuple[str, str], str] | None = None):
        self.flat = flat
        self.errors = errors
        self.file_location = Location(flat.path, 1, 1, 1)
        # The arguments given on the command line, (element, field) -> the option ("--set x.f=..."):
        # a problem with the elements one names is that option's, not the file's.
        self.given = given or {}

    def check_references(self, elements: dict[str, Element]) -> None:
        holder_of: dict[str, str] = {}
        for name, el in elements.items():
            for field in attrs.fields(type(el)):
                for ref in element_refs(getattr(el, field.name)):
                    where = (name, field.name, ref.name)
                    if ref.name not in elements and ref.name in self.flat.instances:
                        self.errors.append(self._names_instance(el, field.name, where, elements))
                    elif ref.name not in elements:
                        self.errors.append(
                            self.at_argument(
                                *where,
                                f"argument '{field.name}' of {type(el).__name__} names no element '{ref.name}'",
                                hint=did_you_mean(ref.name, self._writable(name, field.name, elements)),
                            )
                        )
                    elif field.name in type(el).holds:
                        if ref.name == name:
                            self.errors.append(self.at_argument(*where, f"'{name}' names itself as one of its own candidates"))
                            continue
                        if ref.name in holder_of:
                            self.errors.append(
                                self.at_argument(
                                    *where,
                                    f"'{ref.name}' is already a candidate of '{holder_of[ref.name]}': "
                                    "an element is ticked by one holder",
                                )
                            )
                        holder_of[ref.name] = name
                        self._check_candidate(el, elements[ref.name], where)
        for e in self.flat.edges:
            for end in (e.src, e.dst):
                if end in holder_of:
                    self.errors.append(
                        SchedError(
                            f"'{end}' is a candidate of '{holder_of[end]}', which ticks it: it cannot be connected itself",
                            e.location,
                            hint=f"connect '{holder_of[end]}' in its place",
                        )
                    )

    def _names_instance(self, el: Element, field: str, where: tuple[str, str, str], elements: dict[str, Element]) -> SchedError:
        """An argument naming a compound instance: it stands for the elements its elementclass
        expands into, none of which is the one element the argument asks for."""
        instance = where[2]
        class_name, declared_at = self.flat.instances[instance]
        inside = sorted({type(e).__name__ for n, e in elements.items() if n.startswith(instance + "/")})
        example = inside[0] if inside else "Class"
        return self.at_argument(
            *where,
            f"argument '{field}' of {type(el).__name__} names '{instance.rpartition('/')[2]}', an instance of "
            f"elementclass {class_name} (declared at {declared_at}), not one element",
            hint=f"declare the element you mean by itself ({example.lower()} :: {example};) and name that"
            + (f" ({class_name} holds {', '.join(inside)})" if inside else ""),
        )

    def _check_candidate(self, holder: Element, candidate: Element, where: tuple[str, str, str]) -> None:
        """A candidate is ticked in its holder's place: it has the holder's ports."""

        def shape(el: Element) -> str:
            ins = ", ".join(f"{p.name} ({p.type.__name__})" for p in el.inputs) or "nothing"
            outs = ", ".join(f"{p.name} ({p.type.__name__})" for p in el.outputs) or "nothing"
            return f"takes {ins} and gives {outs}"

        if shape(holder) != shape(candidate):
            self.errors.append(
                self.at_argument(
                    *where,
                    f"'{candidate.name}' ({type(candidate).__name__}) cannot be a candidate of '{holder.name}' "
                    f"({type(holder).__name__}): it {shape(candidate)}, where '{holder.name}' {shape(holder)}",
                )
            )

    def at_argument(self, name: str, field: str, item: str | None, message: str, hint: str | None = None) -> SchedError:
        """A problem with the `item` that element `name`'s argument `field` names: at the place
        the file writes it, or, given on the command line, said as that option's."""
        given = self.given.get((name, field))
        if given is not None:
            return SchedError(f"{given}: {message}", hint=hint)
        return SchedError(message, self.argument_location(name, field, item), hint=hint)

    def _writable(self, name: str, field: str, elements: dict[str, Element]) -> set[str]:
        """The names of elements that argument `field` of element `name` can write: those
        declared by name in the graph, and, in an elementclass's body, those declared by name
        in it, as written there. (An anonymous element's name, `Fifo@3`, is none the language
        can write.)"""
        scopes = {""}
        if "/" in name and (name, field) not in self.given:
            scopes.add(name.rpartition("/")[0] + "/")
        rests = (other[len(scope) :] for other in elements for scope in scopes if other.startswith(scope))
        return {rest for rest in rests if rest and "/" not in rest and "@" not in rest}

    def argument_location(self, name: str, field: str, item: str | None = None) -> Location:
        """Where element `name` writes argument `field`: the `item` it names, if given and in a list."""
        decl = self.flat.decls[name]
        arg = next((a for a in decl.args if a.name == field), None)
        if arg is None:
            return decl.location
        if arg.value.kind == "list":
            named = (v.location for v in arg.value.items if v.kind == "reference" and v.word == item)
            return next(named, arg.value.location)
        return arg.value.location

    @staticmethod
    def references(el: Element) -> list[str]:
        """The names of the elements `el`'s arguments name."""
        out: list[str] = []
        for field in attrs.fields(type(el)):
            out.extend(ref.name for ref in element_refs(getattr(el, field.name)))
        return out

    @staticmethod
    def held(elements: dict[str, Element]) -> frozenset[str]:
        """The elements another element ticks itself (its candidates; see Element.holds)."""
        out: set[str] = set()
        for el in elements.values():
            for field in type(el).holds:
                out.update(ref.name for ref in element_refs(getattr(el, field)))
        return frozenset(out)

    # --- connections ---
    def connections(self, elements: dict[str, Element]) -> list[Connection]:
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

    def _port(self, el: Element, ref: ast.PortRef | None, side: str, edge: Edge) -> Port | None:
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

    def check_structure(self, elements: dict[str, Element], connections: list[Connection]) -> None:
        into: dict[tuple[str, str], list[Connection]] = defaultdict(list)
        for c in connections:
            into[(c.dst, c.dst_port)].append(c)
        for (dst, port_name), conns in into.items():
            port = elements[dst].input(port_name)
            assert port is not None  # connections are made only between declared ports
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
        held = self.held(elements)
        out_of = {(c.src, c.src_port) for c in connections}
        for name, el in elements.items():
            if name in held:  # its holder's ports are connected in its place
                continue
            decl = self.flat.decls[name]
            for port in el.inputs:
                if port.required and (name, port.name) not in into:
                    self._unconnected(el, port, "input", decl.location, _type_hint(port.type))
            # What an element gives and nobody takes is lost: a source would draw jobs that
            # never reach the pool, a policy would rank for no placer. Events are the exception:
            # they report what happened, and a graph need not watch them (sinks are optional).
            for port in el.outputs:
                if port.type is not Events and (name, port.name) not in out_of:
                    self._unconnected(el, port, "output", decl.location, _output_hint(type(el), port))
        self.errors.extend(_plans_carried_out_twice(elements, connections))
        pools = [elements[n] for n in in_written_order((n for n, el in elements.items() if el.category == "pool"), self.flat)]
        if not pools:
            self.errors.append(
                SchedError("the graph has no pool: every scheduler needs one JobPool of admitted jobs", self.file_location)
            )
        for extra in pools[1:]:
            self.errors.append(self._second_pool(self.flat.decls[pools[0].name], self.flat.decls[extra.name]))
        if not any(el.category == "launch" for el in elements.values()):
            self.errors.append(
                SchedError("the graph has no launcher: add a Launch element to carry out its plans", self.file_location)
            )

    @staticmethod
    def _second_pool(first: Decl, extra: Decl) -> SchedError:
        """A second pool; one declared at the place of the first (in an elementclass of two
        instances) is said by the instances, at the second's."""
        if first.location != extra.location or not first.within or not extra.within:
            return SchedError(
                f"a graph has exactly one pool; '{extra.name}' is a second (first at {first.location})", extra.location
            )
        # (the instances, from the innermost out, that are declared at different places)
        pairs = zip(reversed(first.within), reversed(extra.within))
        (one, one_at), (other, other_at) = next(((a, b) for a, b in pairs if a[1] != b[1]), (first.within[-1], extra.within[-1]))
        return SchedError(
            f"a graph has exactly one pool; '{extra.name}' is a second, after '{first.name}': both are declared at "
            f"{first.location}, in an elementclass with two instances, '{one}' (at {one_at}) and '{other}' (here)",
            other_at,
        )

    def _unconnected(self, el: Element, port: Port, side: str, location: Location, hint: str | None) -> None:
        """Reports a port nothing connects to; one that a compound instance's port stands for is
        reported once, at the instance, as that instance's port."""
        for op in self.flat.open_ports:
            inner = el.input(port_key(op.inner_port)) if side == "input" else el.output(port_key(op.inner_port))
            if op.inner == el.name and op.side == side and inner is port:
                # An instance inside another that is itself unconnected: name the outermost.
                while outer := next(
                    (o for o in self.flat.open_ports if (o.inner, o.side, port_key(o.inner_port)) == (op.instance, side, op.key)),
                    None,
                ):
                    op = outer
                message = f"'{op.instance}' ({op.class_name}) {side} [{op.key}] ({port.type.__name__}) is not connected"
                if not any(e.message == message and e.location == op.location for e in self.errors):
                    self.errors.append(SchedError(message, op.location, hint=hint))
                return
        message = f"'{el.name}' ({type(el).__name__}) {side} [{port.name}] ({port.type.__name__}) is not connected"
        self.errors.append(SchedError(message, location, hint=hint))

    def check_flow(self, graph: Topology, elements: dict[str, Element], connections: list[Connection]) -> None:
        """No cycles, and then (in a graph without) each source's jobs reaching the pool by one path."""
        found = len(self.errors)
        self.check_cycles(graph, connections)
        if len(self.errors) == found:
            self.errors.extend(jobs_given_twice(elements, connections))

    def check_cycles(self, graph: Topology, connections: list[Connection]) -> None:
        cycle = graph.find_cycle()
        if cycle is None:
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


def in_written_order(names: Iterable[str], flat: FlatGraph) -> list[str]:
    """Elements in the order they are written, to tell which of two came first (the graph's own
    order is not the text's: named elements come before the anonymous ones of chains). An
    element of a compound instance is where its outermost instance is; files come in the order
    their elements are declared."""
    files = {path: i for i, path in enumerate(dict.fromkeys(d.location.path for d in flat.decls.values()))}

    def written_at(name: str) -> tuple[int, int, int]:
        decl = flat.decls[name]
        at = decl.within[0][1] if decl.within else decl.location
        return files.get(at.path, len(files)), at.line, at.column

    return sorted(names, key=written_at)


def _plans_carried_out_twice(elements: dict[str, Element], connections: list[Connection]) -> list[SchedError]:
    """A plan given to two elements is carried out twice: the second finds running the jobs the
    first launched, which its plan neither keeps nor suspends (a run would fail in its first
    round). Each is said at its second connection."""
    first: dict[tuple[str, str], Connection] = {}
    errors = []
    for c in connections:
        port = elements[c.src].output(c.src_port)
        if port is None or port.type is not Plan:
            continue
        if (c.src, c.src_port) not in first:
            first[(c.src, c.src_port)] = c
            continue
        one = first[(c.src, c.src_port)]
        errors.append(
            SchedError(
                f"'{c.src}' [{c.src_port}] gives its plan to '{one.dst}' (at {one.location}) and to '{c.dst}' too: "
                "a plan is carried out once",
                c.location,
                hint="connect it to one element; two launchers each need a plan of their own",
            )
        )
    return errors


def jobs_given_twice(elements: dict[str, Element], connections: list[Connection]) -> list[SchedError]:
    """A source whose jobs reach the pool by two paths gives it every job twice (a run would
    fail in its first round, when a plan launches a job twice). Jobs travel over the ports that
    carry `Jobs`; a port's value is given whole to each connection out of it, so two paths
    part where one port is connected to two elements that each lead on to the pool. (Two
    different ports of one element may each carry part of its jobs: paths that part there are
    not refused. A switch's candidates are not connected: it is one step of one path.) Each
    such port is said once, with the first source that reaches it, at its second connection.
    The graph has one pool and no cycles (checked before)."""
    pool = next(name for name, el in elements.items() if el.category == "pool")
    carried = [c for c in connections if _carries(elements[c.src], c.src_port, Jobs)]
    # (Connections are looked up by their ends, each read a few times: a graph of thousands of
    # elements is checked in time that grows with its size.)
    into: dict[str, list[Connection]] = defaultdict(list)
    for c in carried:
        into[c.dst].append(c)
    reaches = {pool}  # the elements from which jobs go on to the pool
    stack = [pool]
    while stack:
        for c in into[stack.pop()]:
            if c.src not in reaches:
                reaches.add(c.src)
                stack.append(c.src)
    out_of: dict[str, list[Connection]] = defaultdict(list)
    for c in carried:
        if c.dst in reaches:
            out_of[c.src].append(c)

    def to_pool(c: Connection) -> list[Connection]:
        path = [c]
        while path[-1].dst != pool:
            path.append(out_of[path[-1].dst][0])
        return path

    errors = []
    said: set[tuple[str, str]] = set()
    sources = [name for name, el in elements.items() if el.category == "source" and name in reaches]
    for source in sources:
        # (the first path by which jobs come from the source to each element, breadth first:
        # each element's last step on it)
        came: dict[str, Connection | None] = {source: None}
        queue = [source]
        for name in queue:
            by_port: dict[str, list[Connection]] = defaultdict(list)
            for c in out_of[name]:
                by_port[c.src_port].append(c)
                if c.dst not in came:
                    came[c.dst] = c
                    queue.append(c.dst)
            for port, out in by_port.items():
                if len(out) < 2 or (name, port) in said:
                    continue
                said.add((name, port))
                one, other = (_came_to(came, name) + to_pool(c) for c in out[:2])
                errors.append(
                    SchedError(
                        f"'{source}' gives its jobs to the pool '{pool}' by two paths, so every job would arrive "
                        f"twice: {_path(one)} (at {out[0].location}) and {_path(other)} (at {out[1].location})",
                        out[1].location,
                        hint=f"'{name}' [{port}] gives every job to each element it is connected to: connect it to "
                        "one (a gate and the pool take several connections, so several sources can share them)",
                    )
                )
    return errors


def _came_to(came: dict[str, Connection | None], name: str) -> list[Connection]:
    """The path from the source to `name` that `came` holds as each element's last step."""
    path: list[Connection] = []
    while (step := came[name]) is not None:
        path.append(step)
        name = step.src
    return path[::-1]


def _carries(el: Element, port_name: str, port_type: type) -> bool:
    port = el.output(port_name)
    return port is not None and port.type is port_type


def _path(path: list[Connection]) -> str:
    return " -> ".join([path[0].src] + [c.dst for c in path])


class Topology:
    """Who feeds whom: the elements (in declaration order) and one edge per connection. (A
    graph has tens of elements: plain lists, rather than a graph library to import at start-up.)"""

    def __init__(self, nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> None:
        self.nodes: list[str] = list(nodes)
        self.successors: dict[str, list[str]] = {n: [] for n in self.nodes}
        for src, dst in edges:
            self.successors[src].append(dst)

    def order(self, key: Callable[[str], Any]) -> list[str]:
        """A topological order that takes, among the elements ready, the one of smallest `key`."""
        waiting = dict.fromkeys(self.nodes, 0)
        for targets in self.successors.values():
            for dst in targets:
                waiting[dst] += 1
        ready = [(key(n), n) for n in self.nodes if not waiting[n]]
        heapq.heapify(ready)
        out = []
        while ready:
            _, node = heapq.heappop(ready)
            out.append(node)
            for dst in self.successors[node]:
                waiting[dst] -= 1
                if not waiting[dst]:
                    heapq.heappush(ready, (key(dst), dst))
        return out

    def find_cycle(self) -> list[tuple[str, str]] | None:
        """The edges of a cycle (the first a depth-first search meets, from the elements in
        declaration order), or None."""
        done: set[str] = set()
        for root in self.nodes:
            if root in done:
                continue
            path = [root]
            on_path = {root}
            nexts = [iter(self.successors[root])]
            while nexts:
                dst = next(nexts[-1], None)
                if dst is None:
                    done.add(path[-1])
                    on_path.discard(path.pop())
                    nexts.pop()
                elif dst in on_path:
                    start = path.index(dst)
                    cycle = path[start:] + [dst]
                    return list(zip(cycle[:-1], cycle[1:]))
                elif dst not in done:
                    path.append(dst)
                    on_path.add(dst)
                    nexts.append(iter(self.successors[dst]))
        return None


def _output_hint(cls: type, port) -> str | None:
    """What an unconnected output is for: its own documentation where it names where it goes
    (LossTermination's `converged`: to Launch's `finish` port, which takes the same type as
    the gates do), else the elements that take its type."""
    own = cls.doc.port("out", port.name) if hasattr(cls, "doc") else ""
    if "(to " in own:  # (a port whose text says where it goes, in the documentation's way)
        return f"[{port.name}] is {own}"
    return _taker_hint(port.type)


def _taker_hint(port_type: type) -> str | None:
    takers = [cls.__name__ for cls in registry.classes() if any(p.type is port_type for p in cls.inputs)]
    if takers:
        return f"{port_type.__name__} goes into e.g. " + ", ".join(takers[:4])
    return None


def _type_hint(port_type: type) -> str | None:
    makers = defaultdict(list)
    for cls in registry.classes():
        for p in cls.outputs:
            if p.type is port_type:
                makers[port_type].append(cls.__name__)
    if makers[port_type]:
        return f"{port_type.__name__} comes from e.g. " + ", ".join(makers[port_type][:4])
    return None
