"""Least attained service."""

from __future__ import annotations

import attrs
import numpy as np

from roundhouse.elements.policies.base import KeyOrder
from roundhouse.runtime.element import element
from roundhouse.runtime.types import Active
from roundhouse.runtime.values import one_of


@element
class Las(KeyOrder):
    """Rank jobs by attained service, least first: GPU-seconds received, or wall-clock seconds
    held.

    Ties go to the job admitted first (the pool keeps admission order, which is arrival order
    behind a first-in first-out gate). New jobs have received nothing, so they rank first and
    preempt the longest-served running jobs: good responsiveness, many preemptions at high load.
    Service is measured in GPU-seconds by default, as Tiresias' 2D attained service (a job on
    four GPUs attains service four times as fast as a job on one); `service=wall_seconds`
    counts the seconds a job has held its GPUs, whatever their number, as Blox's LAS does.

    Ports:
        ranking: the jobs, least attained service first.
    Arguments:
        service: gpu_seconds (GPUs x seconds held, as Tiresias) or wall_seconds (seconds held, as Blox).
    Counters:
        none
    Cost: from 8,192 jobs in a pool's view, O(n + r log r) over the pool's jobs n and the r the world
        added progress to, that joined or that left: last tick's order is kept and mended, those r
        taken out, sorted by their new service and merged back in, in a few copies of the order's
        arrays; no other job's service is read. Below 8,192 jobs, O(n): the plain O(n log n) sort
        waits until the order is read, and a placer with room for every job reads only the
        newcomers' order, O(k log k). Skipped while no
        running job's service can pass another job's (event skipping), and while every job runs
        (its order does not matter then); in a round carried out in passing it ranks only the k
        arrivals, O(k log k).
    See also: Fifo, Srtf, TiresiasLas
    Paper: Tiresias (NSDI'19) §3.1 (2D attained service); Blox (EuroSys'24) schedulers/las.py and Table 7.
    """

    service: str = attrs.field(default="gpu_seconds", validator=one_of("gpu_seconds", "wall_seconds"))

    exact_ties = True  # equal services at equal speeds grow by the same additions
    keys_move_with_progress = True  # (a job attains service only as it progresses)

    def key(self, active: Active) -> np.ndarray:
        return active.service if self.service == "gpu_seconds" else active.run_s

    def key_speed(self, active: Active) -> np.ndarray:
        held = active.held
        return held.astype(np.float64) if self.service == "gpu_seconds" else (held > 0).astype(np.float64)
