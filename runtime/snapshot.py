"""Forking a running simulation in memory, and snapshots of it on disk.

A simulation's whole state is the engine's (its counters, the round context, events carried to
the next round), the world's (job table, GPU holders, clock totals), the backend's (the clock,
GPUs busy checkpointing, jobs about to start) and every element's own state. The world and the
job table copy themselves as arrays (their `__deepcopy__`); an element's state is what its
class declares (`Element.state` and `Element.fixed`, runtime/element.py), so forking needs no
per-element code. Everything else is copied by `copy.deepcopy` with one memo, which keeps
sharing intact: a ranking an element holds still names rows of the fork's own job table, and
the backend's running set is still the world's.

What never changes during a run is shared, not copied: the compiled graph's configuration,
the cluster, the throughput profile and model, the settings.

There is one way to fork, `fork_engine`: between two rounds (`Simulation.fork`), and inside a
round for a look-ahead (runtime/lookahead.py, the synthesizer), from a simulation or from a live
run's books or a replayed journal's (any backend but the simulator left out: the copy
simulates with the simulator). `pack` pickles such a fork for a pool's processes, with what is
shared referred to (each process holds it once). A copy only to read the world from
(`copy_books`: the world as of the clock, `Simulation.world_now`) shares the elements instead,
so they need not be forkable.

A snapshot file is one JSON header line, then the state as two pickles (see `save` for the
fields and `FORMAT_VERSION` for when it changes). Two snapshots of one state are the same bytes,
whether the state is a run's, a fork's of it or one loaded from its snapshot (`_Pickler`): a
fork keeps what the original shares (the simulator's running set is its world's) and what it
keeps read-only, and what is no part of the state (the time a solver took) is not saved. Only
open snapshots you made: unpickling runs whatever the file asks for, as with any pickle.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import inspect
import io
import itertools
import json
import math
import os
import pickle
import sys
import textwrap
import time
import weakref
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.element import Element
from roundhouse.runtime.element_failures import describe_element
from roundhouse.runtime.snapshot_paths import read_snapshot_bytes, target_to_write
from roundhouse.runtime.state_copies import deep_copy
from roundhouse.traces.jobs import JobReader

if TYPE_CHECKING:
    from roundhouse.runtime.compiler import CompiledGraph
    from roundhouse.runtime.engine import Engine

FORMAT_NAME = "roundhouse-snapshot"
# Version 1: header line (JSON), then pickle 1 (the cluster), then pickle 2 (engine, world,
# backend and element states, with the graph, its elements, profile, throughput model and
# settings as references to the ones rebuilt from the header).
# Version 2: as 1, with every string, bytes object and plain dtype in either pickle written as a
# persistent id, a one-item tuple of the value (`_Pickler`), which version 1's readers refuse.
# Version 1 files load still (their persistent ids are the references alone).
FORMAT_VERSION = 2

# Attributes every element has outside its configuration and declarations.
_BASE_ATTRIBUTES = frozenset({"name", "declared_at", "arguments_at", "counters", "peers"})


class ForkError(RoundhouseError):
    """A simulation that cannot be forked or saved (an element without declared state)."""


class SnapshotError(RoundhouseError):
    """A snapshot file that cannot be read: not a snapshot, corrupt, or of a newer format."""


# --- which elements can be forked --------------------------------------------------------------
_ASSIGNED: dict[type, frozenset[str]] = {}


def assigned_attributes(cls: type[Element]) -> frozenset[str]:
    """Attributes the element's own code sets on `self` (`self.x = ...` anywhere in its class and
    its bases below Element), other than its configuration fields and the base attributes."""
    got = _ASSIGNED.get(cls)
    if got is None:
        got = _ASSIGNED[cls] = _scan(cls)
    return got


def _scan(cls: type[Element]) -> frozenset[str]:
    found: set[str] = set()
    for klass in cls.__mro__:
        if klass in (Element, object) or not issubclass(klass, Element):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            while targets:
                t = targets.pop()
                if isinstance(t, (ast.Tuple, ast.List)):
                    targets.extend(t.elts)
                elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    found.add(t.attr)
    return frozenset(found - _config_names(cls) - _BASE_ATTRIBUTES)


def _config_names(cls: type[Element]) -> frozenset[str]:
    return frozenset(f.name for f in attrs.fields(cls))


def fork_problem(cls: type[Element]) -> str | None:
    """Why elements of this class cannot be forked, or None when they can."""
    if not cls.forkable:
        return "it says it cannot be forked (forkable = False)"
    if cls.state is None:
        found = sorted(assigned_attributes(cls))
        add = f"state = ({', '.join(repr(a) for a in found)}{',' if len(found) == 1 else ''})" if found else "state = ()"
        return f"it declares no state: add `{add}` to the class (docs/writing-elements.md, 'State and forking')"
    undeclared = sorted(assigned_attributes(cls) - set(cls.state) - set(cls.fixed))
    if undeclared:
        return (
            f"it sets attribute(s) {', '.join(undeclared)} that neither its `state` nor its `fixed` names: "
            "add each to `state` (changes as rounds pass) or `fixed` (set in start, never changed after)"
        )
    return None


def unforkable_elements(graph: CompiledGraph) -> list[tuple[str, str, str]]:
    """The graph's elements that cannot be forked: (graph name, class name, why), in tick order."""
    out = []
    for name, el in graph.elements.items():
        why = fork_problem(type(el))
        if why is not None:
            out.append((name, type(el).__name__, why))
    return out


def forks_world(graph: CompiledGraph) -> bool:
    """Whether the graph has an element that forks the world as it runs (the synthesizer: its
    class says `forks_world = True`), so that every element of the graph must be forkable."""
    return any(getattr(type(el), "forks_world", False) for el in graph.elements.values())


def _element_state(el: Element) -> dict[str, Any]:
    """The element's state and fixed attributes (and counters), by name; a ForkError if it
    cannot be forked or holds an attribute it does not declare."""
    cls = type(el)
    # (The source scan of `fork_problem` only when something is wrong: forks are frequent.)
    why = fork_problem(cls) if cls.state is None or not cls.forkable else None
    held = el.__dict__
    if why is None:
        declared = set(cls.state or ()) | set(cls.fixed)
        stray = sorted(set(held) - declared - _config_names(cls) - _BASE_ATTRIBUTES)
        if stray:
            why = f"it holds attribute(s) {', '.join(stray)} that neither its `state` nor its `fixed` names"
    if why is not None:
        raise ForkError(f"element {describe_element(el)} cannot be forked: {why}")
    return {name: held[name] for name in (*(cls.state or ()), *cls.fixed, "counters") if name in held}


def check_states(graph: CompiledGraph) -> None:
    """A ForkError if an element holds what a fork would refuse (as `fork_engine` does), for a
    fork not made: a synthesizer's quiet decisions report it as its busy ones do."""
    for el in graph.elements.values():
        _element_state(el)


# --- forking in memory -------------------------------------------------------------------------
class Shared:
    """What the forks of one run share, by reference: what never changes during a run (the
    cluster, the throughput profile and model, the settings, the compiled graph's structure,
    every element's configuration and `fixed` attributes). Kept in this process; pickled once
    for a pool's processes (`blob`, `install`), which then receive forks as bytes alone."""

    # A run's forks share its cluster, and all the rest. Held weakly: kept while something
    # refers to it (a fork packed, a synthesizer's pool), and no longer than the run. (While it
    # lives it holds its cluster, whose id no other object can then have.)
    _BY_CLUSTER: weakref.WeakValueDictionary[int, Shared] = weakref.WeakValueDictionary()

    def __init__(self, objects: list[object], key: str):
        self.objects = objects
        self.key = key
        self.ids = {id(o): i for i, o in enumerate(objects)}
        self._blob: bytes | None = None

    @classmethod
    def of(cls, engine: Engine) -> Shared:
        got = cls._BY_CLUSTER.get(id(engine.world.cluster))
        if got is None or got.objects[0] is not engine.world.cluster or got.objects[4] is not engine.graph.graph:
            world, graph = engine.world, engine.graph
            objects: list[object] = [world.cluster, world.profile, world.throughput, graph.settings, graph.graph, graph.decls]
            for el in graph.elements.values():
                held = el.__dict__
                objects += [held[a] for a in (*_config_names(type(el)), *type(el).fixed) if a in held]
            got = cls._BY_CLUSTER[id(engine.world.cluster)] = cls(objects, f"{os.getpid()}:{id(engine)}:{time.time_ns()}")
        return got

    def blob(self) -> bytes:
        """The shared objects themselves, for `install` in another process (pickled once: they
        never change during a run)."""
        if self._blob is None:
            buffer = io.BytesIO()
            _ForkPickler(buffer, Shared([], self.key), set()).dump(self.objects)
            self._blob = buffer.getvalue()
        return self._blob


_INSTALLED: dict[str, Shared] = {}  # in a pool's process, for as long as it runs
# In this process, the shared objects of forks unpacked here: held by their `Packed`, no longer.
_IN_USE: weakref.WeakValueDictionary[str, Shared] = weakref.WeakValueDictionary()


def install(key: str, blob: bytes) -> None:
    """In a pool's process: the shared objects of the forks it will be sent (its initializer)."""
    _INSTALLED[key] = Shared(pickle.loads(blob), key)


class Packed:
    """A fork's whole state, as bytes, with what its run shares by reference, for a pool's
    processes. Each `unpack` gives an independent engine; a process unpacks the bytes once it has
    the shared objects (`install`)."""

    def __init__(self, data: bytes, shared: Shared | str, now: float):
        self.data = data
        self.shared = shared
        self.now = now

    def __getstate__(self) -> dict:
        # (Sent to a pool's processes, which have the shared objects already: see `install`.)
        return {**self.__dict__, "shared": self.shared.key if isinstance(self.shared, Shared) else self.shared}

    def unpack(self) -> Engine:
        if isinstance(self.shared, Shared):
            _IN_USE[self.shared.key] = self.shared  # (where `_shared_object` finds them)
        elif self.shared not in _INSTALLED:
            raise KeyError(f"no shared objects installed under {self.shared!r}")
        return pickle.loads(self.data)


def pack(engine: Engine) -> Packed:
    """A fork of the engine (`fork_engine`, not run) as bytes, for other processes: what its run
    shares is referred to, not copied (a process has it once: `install`)."""
    shared = Shared.of(engine)
    buffer = io.BytesIO()
    _ForkPickler(buffer, shared, {id(engine.on_round)} if engine.on_round is not None else set()).dump(engine)
    return Packed(buffer.getvalue(), shared, engine.backend.now)


class _ForkPickler(pickle.Pickler):
    """Pickles the shared objects as references to them and what is left out as None. (A
    reducer override, not a persistent id: it is not asked about the many plain values, such
    as the job table's strings, so it costs little.)"""

    def __init__(self, file, shared: Shared, left_out: set[int]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._shared = shared
        self._left_out = left_out

    def reducer_override(self, obj: object) -> Any:
        if id(obj) in self._left_out:
            return (_none, ())
        at = self._shared.ids.get(id(obj))
        if at is not None:
            return (_shared_object, (self._shared.key, at))
        if type(obj) is MappingProxyType:  # (profile indexes: pickled as the dict they show)
            return (_mapping_proxy, (dict(obj),))
        return NotImplemented


def _shared_object(key: str, at: int) -> object:
    shared = _INSTALLED.get(key)
    return (shared if shared is not None else _IN_USE[key]).objects[at]


def _none() -> None:
    return None


def _shared(engine: Engine) -> list[object]:
    """What forks share: never changed during a run."""
    world = engine.world
    return [world.cluster, world.profile, world.throughput, engine.graph.settings, engine.on_round, engine.graph.graph]


def fork_engine(engine: Engine, now: float | None = None) -> Engine:
    """An independent copy of a begun engine, with its world, backend and elements: between two
    rounds, running both on gives each what running the original on would have; inside a round
    (a look-ahead, runtime/lookahead.py), the state as of the round's start. Only the simulator's
    state is copied: any other backend (a live cluster's sockets and threads, a journal being
    replayed: runtime/whatif.py) is left out, and the copy simulates its books from `now` with
    the simulator. The one way to fork: `pack` sends such a copy to other processes."""
    from roundhouse.runtime.backends.sim import Simulator

    states = {name: _element_state(el) for name, el in engine.graph.elements.items()}
    memo: dict[int, Any] = {id(obj): obj for obj in _shared(engine)}
    # (Any backend but the simulator holds what cannot be copied, or would go on reporting
    # another run's rounds: the fork's books move on in the simulator, from the same clock.)
    simulated = isinstance(engine.backend, Simulator)
    if not simulated:
        memo[id(engine.backend)] = None
    copy.deepcopy(engine.world, memo)  # first: element states refer to its job table
    elements = {}
    for name, el in engine.graph.elements.items():
        new = object.__new__(type(el))
        new.__dict__.update(el.__dict__)  # configuration and fixed attributes: shared
        memo[id(el)] = new
        elements[name] = new
    for new in elements.values():
        if new.peers:  # (the elements it names are the fork's own)
            new.peers = {name: elements[name] for name in new.peers}
    for name, state in states.items():
        cls = type(engine.graph.elements[name])
        for attr, value in state.items():
            if attr not in cls.fixed:
                elements[name].__dict__[attr] = _copy_state(engine.graph.elements[name], attr, value, memo)
    memo[id(engine.graph)] = attrs.evolve(engine.graph, elements=elements)
    fork = copy.deepcopy(engine, memo)
    _keep_read_only(memo)
    if not simulated:
        fork.backend = Simulator.for_graph(fork.world, fork.graph.settings)
        fork.backend.jump_to(engine.backend.now if now is None else now)
    return fork


def _keep_read_only(memo: dict[int, Any]) -> None:
    """Arrays read-only in the original are read-only in the copy too (`copy.deepcopy` makes
    every array it copies writeable): the copy is the same state, down to what may be written,
    and saves to the same bytes (pickle writes a read-only array's data as bytes, a writeable
    one's as a bytearray). The memo keeps every original it copied (under its own id)."""
    for original in memo.get(id(memo), ()):
        if type(original) is np.ndarray and not original.flags.writeable:
            got = memo.get(id(original))
            if type(got) is np.ndarray and got is not original:
                got.setflags(write=False)


def _copy_state(el: Element, attr: str, value: object, memo: dict[int, Any]) -> object:
    """A copy of one attribute of an element's state; a ForkError naming the element (its class,
    where the graph declares it) and the attribute if it holds what cannot be copied (a lock,
    an open file)."""
    try:
        return deep_copy(value, memo)
    except Exception as err:
        raise ForkError(
            f"element {describe_element(el)} cannot be forked: its state attribute {attr} holds what cannot "
            f"be copied ({type(err).__name__}: {err})"
        ) from None


def copy_books(engine: Engine) -> Engine:
    """A copy of a begun engine, between two rounds, to read its world from, not to run: the
    world, the backend and the engine's own state are copied as `fork_engine` copies them, but
    the elements are not (the copy refers to the original's), so they need not be forkable.
    Only the copy's books may move on (`Engine.fold_in`): ticking an element of it would change
    the original's. (`Simulation.world_now` and `Simulation.jobs`.)"""
    memo: dict[int, Any] = {id(obj): obj for obj in _shared(engine)}
    memo[id(engine.graph)] = engine.graph
    memo.update((id(el), el) for el in engine.graph.elements.values())
    return copy.deepcopy(engine, memo)


def _mapping_proxy(items: dict) -> MappingProxyType:
    return MappingProxyType(items)


# --- snapshots on disk -------------------------------------------------------------------------
class _Pickler(pickle.Pickler):
    """Writes a snapshot's pickles so that two snapshots of one state are the same bytes, whether
    the state is the run's own, a fork's or a loaded one's: `refs` (objects rebuilt from the
    header, by id, and the name each is referred to by) as references, strings, bytes and plain
    dtypes by value, arrays as `_canonical_array` says, a job table's reader and torch's tensors'
    data as what they are rather than where they are.

    Pickle writes an object met again as a reference to the first, by identity: which equal
    strings are one object is no part of the state, and differs between a run and a loaded one
    (whose names are interned or not as loading made them, and whose rebuilt graph holds strings
    of its own). So every string, bytes object and plain dtype is written as a persistent id, a
    one-item tuple of the first equal value met, the same tuple for every equal value: written
    whole the first time, by its memo entry after (`_Unpickler` gives back its item). (The C
    pickler asks `persistent_id` about every object, strings too, before its memo: one call an
    object, as the references alone took, where Python's pickler makes several in Python.)"""

    def __init__(self, file, refs: dict[int, str] | None = None):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        # (The names as objects of their own: a reference's name is written as it is, and must
        # not be the object a string of the state is, as an interned "cluster" could be.)
        self._refs = {at: name.encode().decode() for at, name in (refs or {}).items()}
        self._values: dict[object, tuple[object]] = {}
        self._item: object = _NOTHING  # the item of the value's tuple about to be written whole

    def persistent_id(self, obj: object) -> Any:
        if obj is None:  # (the most frequent object by far)
            return None
        kind = type(obj)
        if kind is str or kind is bytes:
            key: object = obj
        else:
            dtype = _IS_DTYPE.get(kind)
            if dtype is None:
                dtype = _IS_DTYPE[kind] = issubclass(kind, np.dtype)
            if not dtype:
                return self._refs.get(id(obj))
            # (A plain dtype: loading makes each one an object of its own. Any other, by identity.)
            dt: Any = obj
            if dt.fields is not None or dt.subdtype is not None or dt.metadata is not None:
                return None
            key = (kind, dt.str)
        if obj is self._item:  # (the tuple's item itself, written whole once)
            self._item = _NOTHING
            return None
        got = self._values.get(key)
        if got is None:
            got = self._values[key] = (obj,)
            self._item = obj
        return got

    def reducer_override(self, obj: object) -> Any:
        if type(obj) is np.ndarray:
            return _canonical_array(obj)
        if type(obj) is JobReader:
            # (A job table's reader is made afresh with the table, not saved with it: what else
            # holds it, such as the engine's empty arrivals, holds the loaded table's, as before.)
            return getattr, (obj._table, "reader")
        storage = sys.modules.get("torch.storage")
        if storage is not None and type(obj) is storage.TypedStorage:
            return _torch_storage_reduce(obj)
        return NotImplemented


_NOTHING = object()
_IS_DTYPE: dict[type, bool] = {}  # (whether objects of a type are numpy dtypes, by type)


def _torch_storage_reduce(storage: Any) -> Any:
    """A torch tensor's data (an element's network: the ONES predictor's) by its bytes. (Torch
    pickles it as a file of its own that names it by its address in memory, which differs from
    process to process.) Other devices' data: as torch pickles it."""
    import torch

    data = storage._untyped_storage
    if data.device.type != "cpu":
        return NotImplemented
    return _torch_storage, (torch.empty(0, dtype=torch.uint8).set_(data).numpy().tobytes(), storage.dtype)


def _torch_storage(data: bytes, dtype: Any) -> Any:
    """A torch tensor's data, from `_torch_storage_reduce`."""
    import torch

    flat = torch.empty(len(data), dtype=torch.uint8)
    flat.numpy()[:] = np.frombuffer(data, dtype=np.uint8)
    return torch.storage.TypedStorage(wrap_storage=flat.untyped_storage(), dtype=dtype, _internal=True)


def _canonical_array(arr: np.ndarray) -> Any:
    """An array that numpy would pickle by its items (not contiguous in memory: a broadcast, a
    strided view), pickled as a contiguous copy, as loading gives it back: with its data as one
    block, and read-only if it is (pickle writes a read-only array's data as bytes, a writeable
    one's as a bytearray, and loads it so). Other arrays: as numpy pickles them."""
    if arr.flags.c_contiguous or arr.flags.f_contiguous or arr.dtype.hasobject or arr.dtype.itemsize == 0:
        return NotImplemented
    flat = np.array(arr, order="C")  # (a copy of its own, whose flags can be set)
    flat.setflags(write=arr.flags.writeable)
    return flat.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


class _Unpickler(pickle.Unpickler):
    """Reads what `_Pickler` writes: a one-item tuple is a value (version 2), a name one of
    `refs` (versions 1 and 2)."""

    def __init__(self, file, refs: dict[str, object]):
        super().__init__(file)
        self._objects = refs

    def persistent_load(self, pid: Any) -> object:
        if type(pid) is tuple and len(pid) == 1:
            return pid[0]
        if type(pid) is not str or pid not in self._objects:
            raise pickle.UnpicklingError(f"unknown reference {pid!r}")
        return self._objects[pid]


def _references(engine: Engine) -> dict[str, object]:
    world = engine.world
    refs: dict[str, object] = {
        "graph": engine.graph,
        "settings": engine.graph.settings,
        "profile": world.profile,
        "throughput": world.throughput,
        "cluster": world.cluster,
        "on_round": engine.on_round,
        # (The record of why each job waited or ran, kept by `roundhouse run --out`: the run's
        # output, not its state, and as large as the run is long. Loaded, a run keeps none.)
        "explain": world.explain,
    }
    refs.update({f"element:{name}": el for name, el in engine.graph.elements.items()})
    return refs


_SAVES = itertools.count()  # (this process's saves, for their partial files' names)


def save(engine: Engine, path: str | Path, header: dict[str, Any]) -> None:
    """Write the engine's whole state to `path`. `header` says how to rebuild what is shared
    (the graph's text and path, `--set` overrides); the file's first line is a JSON object with
    `format`, `version`, those fields and the payload's length and SHA-256. A SnapshotError if a
    file of the header's `code` changed since the simulation imported it (`_check_code_kept`)."""
    states = {name: _element_state(el) for name, el in engine.graph.elements.items()}
    refs = {id(obj): key for key, obj in _references(engine).items() if obj is not None}
    buf = io.BytesIO()
    try:
        _Pickler(buf).dump(engine.world.cluster)
        _Pickler(buf, refs).dump({"engine": engine, "elements": states})
    except Exception as err:  # (an element's state holds what pickle cannot write)
        raise SnapshotError(_unpicklable(path, engine.graph.elements, states, refs, err)) from None
    # (After the pickles: objects of a file imported again since fail there, naming the element.)
    _check_code_kept(path, header)
    payload = buf.getvalue()
    head = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        **header,
        "graph_key": engine.graph.key(),
        "now_s": engine.backend.now,
        "rounds": engine.rounds,
        "jobs": len(engine.world.jobs),
        "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    # Written whole beside the file, then renamed over it: a save that fails (a full disk, an
    # interruption) leaves an earlier snapshot of that name as it was.
    target = target_to_write(path)
    # (Named for this process and this save: two processes, or threads, saving to one path each
    # write their own, and the last to finish is the file.)
    part = target.with_name(f"{target.name}.{os.getpid()}-{next(_SAVES)}.partial")
    try:
        part.write_bytes(json.dumps(head).encode() + b"\n" + payload)
        os.replace(part, target)
    except OSError as err:
        raise SnapshotError(f"snapshot {path}: cannot write it ({err.strerror or err})") from None
    finally:  # (after a failure, or anything else that stops the save: never left behind)
        with contextlib.suppress(OSError):
            part.unlink(missing_ok=True)


def _check_code_kept(path: str | Path, header: dict[str, Any]) -> None:
    """Each file of the header's `code` (the element files the graph requires and the user's
    modules they import, by the SHA-256 of the text the simulation imported) still holds that
    text: a SnapshotError naming the first that changed or is gone. A snapshot records no code,
    only its digest, and a load imports the files as they are then (`check_code` refuses any
    other): a snapshot saved after an edit would load only with the edited code, which is not
    the code that made its state, or not at all. (Refused here, while the run is still there to
    be made again from the edited file, not at a load later, as an edit after the save.)"""
    from roundhouse.runtime.user_modules import file_digest

    for file, digest in header.get("code", {}).items():
        try:
            now = file_digest(file)
            what = "has changed"
        except OSError as err:
            now, what = "", f"cannot be read ({err.strerror or err})"
        if now != digest:
            raise SnapshotError(
                f"snapshot {path}: not saved: {file} {what} since this simulation imported it; the simulation runs "
                "the code the file held then, and a snapshot is loaded with the code on disk, so it would not load "
                "as this run; put that version back to save it, or build the simulation again from the file as it "
                "is now"
            )


def _unpicklable(
    path: str | Path, elements: dict[str, Element], states: dict[str, dict[str, Any]], refs: dict[int, str], err: Exception
) -> str:
    """Why a snapshot cannot be written, naming the element whose state pickle cannot write."""
    why = f"{type(err).__name__}: {err}"
    if "not the same object" in str(err):
        why += (
            " (the file defining it was imported again since this simulation was built, because it or a module it "
            "imports changed: objects of the earlier version cannot be saved; build the simulation again to save it)"
        )
    for name, state in states.items():
        for attr, value in state.items():
            try:
                _Pickler(io.BytesIO(), refs).dump(value)
            except Exception:
                return f"snapshot {path}: cannot save state attribute {attr} of element {describe_element(elements[name])}: {why}"
    return f"snapshot {path}: cannot save the simulation's state: {why}"


def read_header(path: str | Path) -> tuple[dict[str, Any], bytes]:
    """The header and payload of a snapshot file; a SnapshotError naming the file and what is
    wrong: not a snapshot, a newer format, cut short or changed."""
    where = f"snapshot {path}"
    data = read_snapshot_bytes(path)
    line, _, payload = data.partition(b"\n")
    try:
        header = json.loads(line.decode())
    except (UnicodeDecodeError, ValueError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise SnapshotError(f"{where}: not a Roundhouse snapshot (line 1 is not a '{FORMAT_NAME}' header)")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SnapshotError(f"{where}: line 1: 'version' must be an integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise SnapshotError(
            f"{where}: line 1: format version {version} is newer than this Roundhouse reads "
            f"(version {FORMAT_VERSION}); open it with the Roundhouse that wrote it ({header.get('roundhouse', '?')}) or newer"
        )
    if version < 1:
        raise SnapshotError(f"{where}: line 1: unknown format version {version}")
    size, digest = header.get("payload_bytes"), header.get("payload_sha256")
    if size is None or digest is None:
        raise SnapshotError(f"{where}: line 1: the header lacks 'payload_bytes' and 'payload_sha256'")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:  # (true and false are ints to Python)
        raise SnapshotError(f"{where}: line 1: 'payload_bytes' must be a number of bytes (0 or more), got {size!r}")
    if not isinstance(digest, str):
        raise SnapshotError(f"{where}: line 1: 'payload_sha256' must be a SHA-256 in hex, got {digest!r}")
    if len(payload) != size:
        raise SnapshotError(f"{where}: corrupt: the state after line 1 is {len(payload)} bytes, the header says {size}")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise SnapshotError(f"{where}: corrupt: the state after line 1 does not match the header's SHA-256")
    _check_run_fields(header, where)
    return header, payload


def _check_run_fields(header: dict[str, Any], where: str) -> None:
    """The header's description of the run (the checksum covers only the state after it)."""
    wanted = {
        "graph_path": (lambda v: isinstance(v, str), "a path"),
        "graph_text": (lambda v: isinstance(v, str), "the graph's text"),
        "overrides": (lambda v: isinstance(v, list) and all(isinstance(o, str) for o in v), "a list of --set texts"),
        "trace": (lambda v: v is None or isinstance(v, str), "a path or null"),
        "cluster": (lambda v: v is None or isinstance(v, str), "a cluster spec or null"),
        "code": (
            lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(d, str) for k, d in v.items()),
            "an object of file paths and their SHA-256",
        ),
        "until": (
            lambda v: v is None or (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0),
            "a time in seconds or null",
        ),
    }
    for key, (fits, what) in wanted.items():
        if key in header and not fits(header[key]):
            raise SnapshotError(f"{where}: line 1: '{key}' must be {what}, got {header[key]!r}")


def check_code(path: str | Path, header: dict[str, Any]) -> None:
    """The code a snapshot's state was made by (its header's `code`: each Python file its graph
    requires and the user's modules those import, by SHA-256) is the code on disk still: a
    SnapshotError names a file changed or gone since. (Its state holds objects of those files'
    classes, which the code now would run with, or could not read at all.)"""
    from roundhouse.runtime.user_modules import file_digest

    for file, digest in header.get("code", {}).items():
        try:
            now = file_digest(file)
        except OSError as err:
            raise SnapshotError(
                f"snapshot {path}: cannot read {file}, whose code its state was made by ({err.strerror or err})"
            ) from None
        if now != digest:
            raise SnapshotError(
                f"snapshot {path}: {file} has changed since the snapshot was saved, and its state was made by the "
                "code the file held then; put that version back to load it"
            )


def load_cluster(path: str | Path, payload: bytes):
    """The snapshot's cluster (its first pickle), and where the second begins."""
    buf = io.BytesIO(payload)
    try:
        cluster = _Unpickler(buf, {}).load()
    except Exception as err:  # (a checksum-valid file from another build: report, don't trace)
        raise SnapshotError(f"snapshot {path}: cannot read its cluster: {type(err).__name__}: {err}") from None
    return cluster, buf.tell()


def restore(path: str | Path, payload: bytes, offset: int, fresh: Engine) -> Engine:
    """The saved engine, rebuilt around `fresh` (an engine made from the snapshot's header:
    its graph, elements, profile and throughput model take the saved ones' places)."""
    buf = io.BytesIO(payload)
    buf.seek(offset)
    try:
        saved = _Unpickler(buf, _references(fresh)).load()
    except Exception as err:
        raise SnapshotError(f"snapshot {path}: cannot read its state: {type(err).__name__}: {err}") from None
    for name, state in saved["elements"].items():
        el = fresh.graph.elements.get(name)
        if el is None:
            raise SnapshotError(f"snapshot {path}: its state names element '{name}', which its graph does not declare")
        cls = type(el)
        # (A save keeps only what the class declares: anything else was kept by other code, which
        # the element's code now would not read, or would fail on later in the run.)
        undeclared = sorted(set(state) - set(cls.state or ()) - set(cls.fixed) - {"counters"})
        if undeclared:
            raise SnapshotError(
                f"snapshot {path}: element {describe_element(el)} kept other state when it was saved: its state has "
                f"{', '.join(undeclared)}, which {cls.__name__} does not declare now{_saved_by(path)}; open it with the "
                "Roundhouse that wrote it"
            )
        el.__dict__.update(state)
    return saved["engine"]


def _saved_by(path: str | Path) -> str:
    """Which Roundhouse wrote the snapshot, if its header says and it is not this one."""
    from roundhouse import __version__

    try:
        with open(path, "rb") as f:
            wrote = json.loads(f.readline()).get("roundhouse")
    except (OSError, ValueError, AttributeError):
        return ""
    return (
        f" (the snapshot was saved by Roundhouse {wrote}; this is {__version__})"
        if isinstance(wrote, str) and wrote != __version__
        else ""
    )
