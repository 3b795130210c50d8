"""First in, first out."""

from __future__ import annotations

import numpy as np

from roundhouse.elements.policies.base import KeyOrder
from roundhouse.runtime.element import element
from roundhouse.runtime.types import Active


@element
class Fifo(KeyOrder):
    """Rank jobs by arrival time, earliest first (ties: the job admitted first).

    With `backfill=false` (the default) a job that does not fit blocks the jobs behind it, as in
    a strict queue; with `backfill=true` smaller jobs behind it may run meanwhile.

    Ports:
        ranking: the jobs, earliest arrival first.
    Counters:
        none
    Cost: from 8,192 jobs in a pool's view, O(n + r log r) over the pool's jobs n and the r that
        joined, left or progressed: last tick's order is kept and mended, in a few copies of the
        order's arrays. Below 8,192 jobs, O(n): the plain O(n log n) sort waits until the order is
        read, and a placer with room for every job reads only the newcomers' order, O(k log k).
    See also: Las, Srtf, YarnCS
    Paper: Blox (EuroSys'24) schedulers/fifo.py; Philly (ATC'19).
    """

    backfill: bool = False
    keys_move_with_progress = True  # (an arrival time never moves)

    def key(self, active: Active) -> np.ndarray:
        return active.arrival_s

    def key_speed(self, active: Active) -> np.ndarray:
        return np.zeros(len(active))
