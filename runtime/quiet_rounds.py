"""The rounds ahead that need no tick, passed before the next round is ticked: quiet rounds
skipped, rounds that wait for an event, and rounds carried out in passing, one at a time or in
bulk (runtime/skipping.py, passing.py, bulk.py). Idle rounds passed count towards a stall
(runtime/stalls.py) as ticked ones do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roundhouse.runtime.stalls import STALL_ROUNDS, StalledError, ranked_by, stall_message
from roundhouse.runtime.types import Events

if TYPE_CHECKING:
    from roundhouse.runtime.engine import Engine


def pass_quiet(engine: Engine, round_s: float) -> Events:
    """Pass the rounds ahead that need no tick (runtime/skipping.py); returns the events of
    the next round to tick, folded into the world, with the completions that waited."""
    events, waited = engine._poll(), []
    while True:
        if engine._skipping.quiet(engine.backend, events, bool(engine._completed)):
            idle = engine._idle_rounds
            skipped = engine._skipping.pass_quiet_rounds(engine.backend, STALL_ROUNDS - idle if idle else None)
            engine._rounds += skipped
            if idle:  # (the state of the last ticked round, which counted as idle)
                engine._idle_rounds += skipped
                if engine._idle_rounds >= STALL_ROUNDS:
                    asked = getattr(engine, "_asked", [])  # (an engine from an older snapshot has none)
                    rankers = ranked_by(engine._wiring)
                    raise StalledError(stall_message(engine.world, engine.backend.now - round_s, engine._order, asked, rankers))
        elif engine._skipping.may_wait(engine.backend, events, bool(engine._completed)):
            waited.append(engine._fold(events))  # (into the world's books at once)
            if engine.goal_in_books() or not engine._skipping.pass_waiting_round(engine.backend):
                return Events.merge(waited)
            engine._rounds += 1
        elif engine._passing.may_pass(engine, events):
            folded = engine._fold(events)
            if engine.goal_in_books():
                return Events.merge([*waited, folded]) if waited else folded
            if engine._bulk.may_carry(engine):  # (this round and those after it, as far as they may pass)
                carried, after = engine._bulk.carry(engine, folded)
                if after == "front":  # an arrival finds no room: that round is ticked, from the pool on
                    return engine._passing.ticked_with(Events.merge([*waited, carried]) if waited else carried)
                if after == "tick":  # a sink's goal is met: that round is ticked
                    return Events.merge([*waited, carried]) if waited else carried
                waited.append(carried)
            else:
                passed = engine._passing.pass_round(engine, folded)
                if passed is None:  # an arrival finds no room: the round is ticked, from the pool on
                    return engine._passing.ticked_with(Events.merge([*waited, folded]) if waited else folded)
                waited += (folded, passed)
        else:
            folded = engine._fold(events)
            return Events.merge([*waited, folded]) if waited else folded
        events = engine._poll()
