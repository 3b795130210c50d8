"""The round context: what an element may read, and the two doors out of it.

Elements read the world through read-only arrays here. Two kinds of element cross the graph's
boundary, each through one narrow method: sources bring jobs in (`register_jobs`), launchers
hand a plan to the backend (`submit`). Nothing else changes the world.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.types import Events, Jobs, JobView, Plan

if TYPE_CHECKING:
    from roundhouse.runtime.cluster import Cluster
    from roundhouse.runtime.settings import GraphSettings
    from roundhouse.runtime.world import JobBatch, World


def _read_only(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.setflags(write=False)
    return v


class ReadOnlyJobs:
    """The job table as elements see it: columns as read-only arrays, views of rows."""

    __slots__ = ("_table",)

    def __init__(self, table):
        self._table = table

    def __len__(self) -> int:
        return len(self._table)

    def column(self, name: str) -> np.ndarray:
        return _read_only(self._table.column(name))

    def has_column(self, name: str) -> bool:
        return self._table.has_column(name)

    @property
    def type_rates(self) -> np.ndarray:
        """(jobs, GPU types): throughput of each job on each type at its requested GPU count."""
        return _read_only(self._table.type_rates)

    def view(self, rows, kind: type[JobView] = JobView) -> JobView:
        """A view of these rows as a port value of type `kind` (Jobs, Active)."""
        return kind(self._table, rows)

    def row_of(self, job_id: int) -> int | None:
        return self._table.row_of(job_id)


class RoundContext:
    """Read-only facts for one round, plus the boundary doors for sources and launchers."""

    def __init__(
        self,
        world: World,
        settings: GraphSettings,
        now: float,
        round_index: int,
        events: Events,
        submit: Callable[[Plan], Events],
        register: Callable[[JobBatch], np.ndarray],
        elements: dict | None = None,
    ):
        self._world = world
        self.settings = settings
        self.now = float(now)
        self.round_index = round_index
        self.round_s = float(settings.round)
        self.events = events
        self.jobs = ReadOnlyJobs(world.jobs)
        self.cluster: Cluster = world.cluster
        self.profile = world.profile
        self.reference_gpu = world.reference_gpu
        self._submit = submit
        self._register = register
        self._elements = elements or {}
        self.element = None  # the element being ticked (set by the engine)

    @property
    def holder(self) -> np.ndarray:
        """Job row holding each GPU, -1 where free (as of the start of this round)."""
        return _read_only(self._world.holder)

    @property
    def online(self) -> np.ndarray | None:
        """Which GPUs can run jobs (a live node may be lost); None when all can, as in a
        simulation, so that placers keep their fast path."""
        world = self._world
        return None if world.all_online else _read_only(world.online)

    @property
    def co_holder(self) -> np.ndarray | None:
        """Space sharing: the second job row on each GPU (-1 where none), or None while no
        pair has run."""
        co = self._world.co_holder
        return None if co is None else _read_only(co)

    @property
    def pairs(self):
        """The pair-throughput table (two jobs sharing GPUs), loaded on first use."""
        return self._world.pairs

    @property
    def running_rows(self) -> np.ndarray:
        return _read_only(self._world.running_rows)

    @property
    def busy_gpu_s(self) -> float:
        """GPU-seconds held by jobs since the run began."""
        return self._world.busy_gpu_s

    @property
    def first_arrival_s(self) -> float:
        """Arrival time of the first job seen (inf before any)."""
        return self._world.first_arrival_s

    def gpus_of(self, row: int) -> np.ndarray:
        """The GPU ids a running job holds (empty if it holds none)."""
        return self._world.gpus_of(int(row))

    def peer(self, ref):
        """Another element of the graph, named by an element argument (an ElementRef), for
        elements that consult a helper element (a solver and its throughput estimator)."""
        return self._elements[ref.name if hasattr(ref, "name") else str(ref)]

    def rng(self, seed: int | None = None) -> np.random.Generator:
        """A generator for the current element: its own seed, else one derived from the
        graph's seed and the element's name (stable across runs and Python versions)."""
        if seed is None:
            name = getattr(self.element, "name", "")
            seed = (int(self.settings.seed) * 1_000_003 + zlib.crc32(name.encode())) % (2**63)
        return np.random.default_rng(seed)

    # --- the boundary ---
    def register_jobs(self, batch: JobBatch) -> Jobs:
        """Sources: bring these jobs into the world; returns them as a Jobs value."""
        self._require("source", "register_jobs")
        rows = self._register(batch)
        return Jobs(self._world.jobs, rows)

    def submit(self, plan: Plan) -> Events:
        """Launchers: hand the round's plan to the backend; returns this round's events."""
        self._require("launch", "submit")
        return self._submit(plan)

    def _require(self, category: str, what: str) -> None:
        element = self.element
        if element is not None and element.category != category:
            raise RuntimeError(f"{type(element).__name__} ({element.category}) may not call ctx.{what}()")
