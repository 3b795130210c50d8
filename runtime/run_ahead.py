"""An engine set to run ahead of its run, on a fork: a look-ahead (runtime/lookahead.py) or a
what-if's projection (runtime/whatif.py) bounds it in time and drops the run's per-round hook,
may stop its arrivals (it knows only the jobs in the system), and may take over a world that
another graph has run.

Engine binds these functions as its methods (runtime/engine.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from roundhouse.runtime.context import Round
    from roundhouse.runtime.element import Element
    from roundhouse.runtime.engine import Engine
    from roundhouse.runtime.types import Jobs


def look_ahead(engine: Engine, until: float, goals: bool = True) -> None:
    """Simulate ahead to `until` without the run's per-round hook (runtime/lookahead.py); with
    `goals` false no sink's goal ends it (what-if's projections, runtime/whatif.py)."""
    engine.until = engine._skipping.until = until
    engine.on_round = None
    engine._sinks = engine._sinks if goals else []


def stop_arrivals(engine: Engine) -> None:
    """From the next round on, no new jobs: the sources tick no more (their ports carry no
    jobs) and count as exhausted (a look-ahead knows only the jobs in the system)."""
    silent = {id(el) for el in engine._sources}
    engine._wiring = [
        (Silenced(w[0], engine._no_arrivals), w[1], w[2], None) if id(w[0]) in silent else w for w in engine._wiring
    ]
    engine._skipping.asked = [e for e in engine._skipping.asked if id(e) not in silent]
    engine._sources = engine._skipping.sources = []
    engine._passing.roles = None


def carry_in(engine: Engine, rows: np.ndarray) -> None:
    """Take over a world another graph has run (runtime/whatif.py): these jobs already in it
    enter this graph at the next round, as arrivals of the first source to tick, and from
    then on a source's jobs that the world already has are not added again."""
    engine._carried = np.asarray(rows, dtype=np.int64)
    engine._taken_over = True


class Silenced:
    """A source in a look-ahead: ticked in its place, it adds no jobs (`Engine.stop_arrivals`)."""

    category = "source"

    def __init__(self, source: Element, none: Jobs):
        self.name = source.name
        self._none = none

    def tick(self, ctx: Round) -> Jobs:
        return self._none
