"""Least attained service."""

from __future__ import annotations

import numpy as np

from roundhouse.elements.policies.base import KeyOrder
from roundhouse.runtime.element import element
from roundhouse.runtime.types import Active


@element
class Las(KeyOrder):
    """Rank jobs by attained service (GPU-seconds received), least first.

    Ties go to the job admitted first (the pool keeps admission order, which is arrival order
    behind a first-in first-out gate). New jobs have received nothing, so they rank first and
    preempt the longest-served running jobs: good responsiveness, many preemptions at high load.

    Ports:
        active: admitted, unfinished jobs.
        ranking: the jobs, least attained service first.
    Arguments:
        backfill: let lower-ranked jobs run when a higher one does not fit.
    Counters:
        none
    See also: Fifo, Srtf, TiresiasLas
    Paper: Blox (EuroSys'24) schedulers/las.py and Table 7; Tiresias (NSDI'19) §3.1.
    """

    backfill: bool = True

    def key(self, active: Active) -> np.ndarray:
        return active.service
