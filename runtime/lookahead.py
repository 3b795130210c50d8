"""Look-ahead runs: the state at the start of a round, forked, simulated forward.

A control element ticked first in its round (the synthesizer, elements/control.py) asks the
round context for a `Fork`: the engine forked as any fork is (runtime/snapshot.py's
`fork_engine`: the world, the backend's own state, every element's declared state and the
round's events), the running world untouched. `Fork.run` takes a fresh copy of it, lets the caller adjust the copied
graph (select a candidate, say), plays the round again from its start and simulates forward to
a horizon with no later arrivals (`Engine.look_ahead`, with event skipping): what the jobs now
in the system would see. A fork of a live run is made the same way, its live backend left
out: the copy simulates the live world's books with the simulator.

A pool's processes are sent the fork as bytes (`pack`), to run several candidates at once.

A fork costs about as much as a short look-ahead: a caller that runs nothing in a quiet round
(`Fork.quiet`) asks for it inside `only_if_busy()`, and no copy is made then.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.runtime.element_failures import describe_element
from roundhouse.runtime.snapshot import ForkError, Packed, check_states, fork_engine, pack, unforkable_elements
from roundhouse.traces.jobs import FINISHED, PENDING

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


# Set inside `only_if_busy`: a fork asked for in a quiet round is not made (`Fork.of`).
_ONLY_IF_BUSY: contextvars.ContextVar[bool] = contextvars.ContextVar("only_if_busy", default=False)


@contextlib.contextmanager
def only_if_busy() -> Iterator[None]:
    """Forks asked for inside are made only in rounds that are not quiet (`Fork.quiet`): a
    caller that simulates nothing in a quiet round (the synthesizer) need not pay for a copy."""
    token = _ONLY_IF_BUSY.set(True)
    try:
        yield
    finally:
        _ONLY_IF_BUSY.reset(token)


class Fork:
    """The state at the start of round `round_index` (time `now`): a fork of the engine
    (runtime/snapshot.py's `fork_engine`) that is never run itself; each `run` runs a copy."""

    def __init__(self, base: Engine | None, now: float, round_index: int, quiet: bool, arriving: bool):
        self.base: Engine | None = base
        self._packed: Packed | None = None
        self.now = now
        self.round_index = round_index
        # No job waits and no source has one due at this boundary: until the next arrival,
        # every choice of policy runs the same jobs where they are.
        self.quiet = quiet
        self.arriving = arriving  # jobs join this round (a source has some due, or submitted live)

    def packed(self) -> Packed:
        """The fork as bytes (what a pool's process is sent)."""
        if self._packed is None:
            self._packed = pack(self._base())
        return self._packed

    def _base(self) -> Engine:
        if self.base is None:
            raise ForkError(
                f"the fork of round {self.round_index} cannot be run: it was not made (a quiet round, asked for only if busy)"
            )
        return self.base

    def __getstate__(self) -> dict:
        return {**self.__dict__, "base": None, "_packed": self.packed()}

    @classmethod
    def of(cls, engine: Engine, ctx: Round) -> Fork:
        for name, _, why in unforkable_elements(engine.graph):
            raise ForkError(f"element {describe_element(engine.graph.elements[name])} cannot be forked: {why}")
        due = [getattr(s, "next_arrival_s", lambda: -np.inf)() for s in engine.graph.elements.values() if s.category == "source"]
        waiting = np.count_nonzero(engine.world.jobs.column("status") == PENDING)
        submitted = ctx.events.submitted is not None and ctx.events.submitted.height > 0  # (live)
        arriving = submitted or any(t <= ctx.now + 1e-9 for t in due)
        quiet = not waiting and not arriving
        if quiet and _ONLY_IF_BUSY.get():
            check_states(engine.graph)  # (what forking it would refuse)
            return cls(None, ctx.now, ctx.round_index, quiet, arriving)
        return cls(fork_engine(engine, ctx.now), ctx.now, ctx.round_index, quiet, arriving)

    def run(self, horizon_s: float, adjust: Callable[[CompiledGraph], None] | None = None) -> Outlook:
        """Simulate from the round's start to `now + horizon_s` (or until every job in the
        system has finished) without new arrivals, after `adjust(graph)` on the copied graph.
        A sink's goal does not end it (a `JobMetrics(track=...)` whose jobs have all finished):
        the jobs still in the system would otherwise count as unfinished at the horizon, and
        the choice that finishes the tracked jobs first would look the worst."""
        engine = fork_engine(self.base) if self.base is not None else self.packed().unpack()
        world = engine.world
        if adjust is not None:
            adjust(engine.graph)
        status = world.jobs.column("status")
        present = (status != FINISHED).nonzero()[0]
        unstarted = present[np.isnan(world.jobs.column("first_start_s")[present])]
        known = len(world.jobs)
        end = self.now + horizon_s
        engine.look_ahead(end, goals=False)
        # The round's own arrivals join (the running world sees them this round too); later
        # ones are not known.
        stop = engine.play_round()
        engine.stop_arrivals()
        arrived = np.arange(known, len(world.jobs), dtype=np.int64)
        present, unstarted = np.concatenate([present, arrived]), np.concatenate([unstarted, arrived])
        while not stop:
            stop = engine.step()
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
