"""The backend interface shared by the simulator and the live ZeroMQ backend (DESIGN §7)."""

from __future__ import annotations

from typing import Protocol

import attrs
import numpy as np

from roundhouse.runtime.types import Events, Plan


@attrs.frozen
class Progress:
    """Work done by running jobs since the last poll, columnar (rows are job-table rows)."""

    rows: np.ndarray
    done: np.ndarray  # iterations
    service: np.ndarray  # GPU-seconds held
    run_s: np.ndarray  # wall-clock seconds held
    # Optional, from a backend that repeats one round's progress while the same jobs run: the
    # four steps (done, service, run_s, and compute seconds: done over the launch's compute
    # rate) as the rows of one array, which the world adds in one pass per round.
    block: np.ndarray | None = None

    @classmethod
    def empty(cls) -> Progress:
        z = np.zeros(0)
        return cls(np.zeros(0, dtype=np.int64), z, z, z)


class Backend(Protocol):
    """What the engine needs from whatever runs the jobs."""

    @property
    def now(self) -> float:
        """The current round boundary (seconds since the run began)."""

    def poll(self) -> tuple[Events, Progress]:
        """What happened since the last poll: completions with exact times, and progress."""

    def apply(self, plan: Plan) -> None:
        """Carry out a checked plan at the current boundary: suspend, complete (stop the job for
        good; its GPUs are free at once, and it is not reported as finished again), launch.
        Raises PlanError, before it changes anything, for a plan it cannot carry out."""

    def advance(self) -> None:
        """Move to the next round boundary (simulated: jump; live: wait for the wall clock)."""
