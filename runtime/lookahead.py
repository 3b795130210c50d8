"""Look-ahead runs: the state at the start of a round, forked, simulated forward.

A control element ticked first in its round (the synthesizer, elements/control.py) asks the
round context for a `Fork`: the world (job table, GPU occupancy, clock), the backend's own state
when it is the simulator, every element's private state and the round's events, frozen as one
pickled blob. The running world is not touched. `Fork.run` unpacks a fresh copy, lets the
caller adjust the copied graph (select a candidate, say), and simulates forward from the
round's start to a horizon with no new arrivals: what the jobs now in the system would see.
A fork of a live run takes the live world's books and simulates them with the simulator.

A fork is plain bytes, so that a process pool can run several candidates at once from one copy.
"""

from __future__ import annotations

import copyreg
import io
import os
import pickle
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.runtime.backends.sim import Simulator
from roundhouse.traces.jobs import FINISHED, PENDING, read_only

if TYPE_CHECKING:
    from roundhouse.runtime.compiler import CompiledGraph
    from roundhouse.runtime.context import Round
    from roundhouse.runtime.engine import Engine
    from roundhouse.runtime.world import World


@attrs.frozen
class Outlook:
    """What the jobs in the system at the fork see over the horizon [start, end]."""

    jobs: int  # jobs in the system at the fork (admitted or waiting to be)
    finished: int  # of them, finished by the end
    # Mean over those jobs of their time in the system within the horizon: the area under the
    # number of jobs in the system, which a policy minimising average JCT keeps small.
    time_in_system_s: float
    # Mean over the jobs not yet started at the fork of their wait within the horizon.
    wait_s: float
    waiting: int


class Fork:
    """The state at the start of round `round_index` (time `now`), pickled. What never changes
    during a run (cluster, profile, throughput model, settings, the graph's structure, what
    elements declare `fixed`) is pickled once per run, as `Shared`, and referred to."""

    def __init__(self, state: bytes, now: float, round_index: int, quiet: bool, shared: Shared):
        self.state = state
        self.now = now
        self.round_index = round_index
        # No job waits and no source has one due at this boundary: until the next arrival,
        # every choice of policy runs the same jobs where they are.
        self.quiet = quiet
        self.shared = shared

    def __getstate__(self) -> dict:
        # (Sent to a pool's processes, which have the shared objects already: see `install`.)
        return {**self.__dict__, "shared": self.shared.key}

    @classmethod
    def of(cls, engine: Engine, ctx: Round) -> Fork:
        from roundhouse.runtime.snapshot import ForkError, unforkable_elements

        for name, class_name, why in unforkable_elements(engine.graph):
            raise ForkError(f"element '{name}' ({class_name}) cannot be forked: {why}")
        shared = Shared.of(engine)
        backend = engine.backend if isinstance(engine.backend, Simulator) else None
        state = (engine.graph, engine.world, backend, list(engine._completed), ctx.events)
        due = [getattr(s, "next_arrival_s", lambda: -np.inf)() for s in engine._sources]
        waiting = np.count_nonzero(engine.world.jobs.column("status") == PENDING)
        submitted = ctx.events.submitted is not None and ctx.events.submitted.height > 0  # (live)
        quiet = not waiting and not submitted and all(t > ctx.now + 1e-9 for t in due)
        return cls(shared.dumps(state), ctx.now, ctx.round_index, quiet, shared)

    def run(self, horizon_s: float, adjust: Callable[[CompiledGraph], None] | None = None) -> Outlook:
        """Simulate from the round's start to `now + horizon_s` (or until every job in the
        system has finished) without new arrivals, after `adjust(graph)` on the copied graph."""
        from roundhouse.runtime.engine import Engine

        shared = self.shared if isinstance(self.shared, Shared) else _INSTALLED[self.shared]
        graph, world, backend, completed, events = shared.loads(self.state)
        _refresh(world)
        settings = graph.settings
        if backend is None:  # a live world's books, simulated from here
            backend = Simulator.for_graph(world, settings)
            backend.jump_to(self.now)
        if adjust is not None:
            adjust(graph)
        status = world.jobs.column("status")
        present = (status != FINISHED).nonzero()[0]
        unstarted = present[np.isnan(world.jobs.column("first_start_s")[present])]
        known = len(world.jobs)
        end = self.now + horizon_s
        engine = Engine(graph, world, backend, until=end)
        engine._completed = completed
        # The round's own arrivals join (the running world sees them this round too); later
        # ones are not known: the sources are silenced and count as exhausted.
        ctx = engine._context(events, self.round_index)
        engine._ctx = ctx
        engine._tick_all(ctx)
        arrived = np.arange(known, len(world.jobs), dtype=np.int64)
        present, unstarted = np.concatenate([present, arrived]), np.concatenate([unstarted, arrived])
        engine._wiring = [
            (
                el,
                ins,
                outs,
                (crossing[0], lambda batch: engine._no_arrivals) if el.category == "source" and crossing else crossing,
            )
            for el, ins, outs, crossing in engine._wiring
        ]
        engine._sources = []
        round_s = float(settings.round)
        while not engine._stop_reason(ctx):
            backend.advance()
            engine.skip_idle_rounds()
            ctx = engine._context(engine.fold_in(), int(round(backend.now / round_s)))
            engine._ctx = ctx
            engine._tick_all(ctx)
        return outlook(world, present, unstarted, self.now, end)


def outlook(world: World, present: np.ndarray, unstarted: np.ndarray, start: float, end: float) -> Outlook:
    finish = world.jobs.column("finish_s")[present]
    done = ~np.isnan(finish)
    stay = np.where(done, np.minimum(finish, end), end) - start
    first = world.jobs.column("first_start_s")[unstarted]
    wait = np.where(np.isnan(first), end, np.minimum(first, end)) - start
    return Outlook(
        jobs=len(present),
        finished=int(done.sum()),
        time_in_system_s=float(stay.mean()) if len(stay) else 0.0,
        wait_s=float(wait.mean()) if len(wait) else 0.0,
        waiting=len(unstarted),
    )


class Shared:
    """What forks of one run share, by reference: kept in this process, pickled once for a
    pool's processes (`install`)."""

    _BY_ENGINE: dict[int, Shared] = {}

    def __init__(self, objects: list[object], key: str):
        self.objects = objects
        self.key = key
        self._ids = {id(o): i for i, o in enumerate(objects)}

    @classmethod
    def of(cls, engine: Engine) -> Shared:
        got = cls._BY_ENGINE.get(id(engine))
        if got is None or got.objects[0] is not engine.world.cluster:
            world, graph = engine.world, engine.graph
            objects: list[object] = [world.cluster, world.profile, world.throughput, graph.settings, graph.graph, graph.decls]
            for el in graph.elements.values():
                objects += [el.__dict__[a] for a in type(el).fixed if a in el.__dict__]
            got = cls._BY_ENGINE[id(engine)] = cls(objects, f"{os.getpid()}:{id(engine)}:{time.time_ns()}")
        return got

    def dumps(self, state: object) -> bytes:
        buffer = io.BytesIO()
        pickler = _Pickler(buffer, self._ids)
        pickler.dispatch_table = _DISPATCH
        pickler.dump(state)
        return buffer.getvalue()

    def loads(self, data: bytes):
        unpickler = pickle.Unpickler(io.BytesIO(data))
        unpickler.persistent_load = self.objects.__getitem__  # type: ignore[method-assign]
        return unpickler.load()

    def blob(self) -> bytes:
        """The shared objects themselves, for `install` in another process."""
        return dumps(self.objects)


class _Pickler(pickle.Pickler):
    def __init__(self, file, ids: dict[int, int]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._shared_ids = ids

    def persistent_id(self, obj: object) -> int | None:
        return self._shared_ids.get(id(obj))


_INSTALLED: dict[str, Shared] = {}


def install(key: str, blob: bytes) -> None:
    """In a pool's process: the shared objects of the forks it will be sent (its initializer)."""
    _INSTALLED[key] = Shared(pickle.loads(blob), key)


def dumps(state: object) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(state)
    return buffer.getvalue()


def _mapping_proxy(items: dict) -> MappingProxyType:
    return MappingProxyType(items)


# Read-only mappings (profile indexes) pickle as the dict they show.
_DISPATCH = {**copyreg.dispatch_table, MappingProxyType: lambda m: (_mapping_proxy, (dict(m),))}


def _refresh(world: World) -> None:
    """Read-only faces are views of the arrays they show; a copy made by pickling holds copies
    instead, so they are made again."""
    world.jobs._faces.clear()
    world.holder_face, world.online_face = read_only(world.holder), read_only(world.online)
    if world.co_holder is not None:
        world.co_holder_face = read_only(world.co_holder)
