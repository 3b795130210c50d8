"""Shortest remaining time first (an oracle: it knows every job's remaining work)."""

from __future__ import annotations

import numpy as np

from roundhouse.elements.policies.base import KeyOrder
from roundhouse.runtime.element import element
from roundhouse.runtime.types import Active

# Remaining times are compared to the millisecond (the precision of generated traces' times).
REMAINING_DECIMALS = 3


@element
class Srtf(KeyOrder):
    """Rank jobs by remaining run time, shortest first (an oracle policy).

    Remaining time is the job's remaining work at its reference throughput (isolated,
    consolidated, on the reference GPU type), to the millisecond. Ties go to the job admitted
    first (two jobs of one duration but different models tie, though their work over their
    throughput differs in the last bits).

    Ports:
        ranking: the jobs, shortest remaining time first.
    Counters:
        none
    Cost: O(n + r log n) over the pool's jobs n and the r whose remaining time moved (the running
        ones and the new): the last round's order kept for the others, those r sorted and merged
        in. Below 8,192 jobs, O(n): the plain O(n log n) sort waits until the order is read, and a
        placer with room for every job reads only the newcomers' order, O(k log k). Skipped while
        no two remaining times can swap (event skipping).
    See also: Las, Fifo, Srsf
    Paper: Tiresias (NSDI'19) §5.1 (SRTF baseline); Blox (EuroSys'24) schedulers/srtf.py.
    """

    keys_move_with_progress = True  # (remaining work moves only as the job progresses)

    def key(self, active: Active) -> np.ndarray:
        # (rounded: work / rate is a rounding error away from the duration it was made from)
        return np.round(active.remaining_s, REMAINING_DECIMALS)

    def key_speed(self, active: Active) -> np.ndarray:
        return -active.column("rate") / active.reference_rate  # (rate is 0 for waiting jobs)
