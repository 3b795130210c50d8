"""The round context: what an element may ask of the round it is ticked in.

`RoundContext` is the whole interface: the clock, the graph's settings, the cluster's shape,
read-only views of the job table and of who holds which GPU, the throughput model and profile
look-ups, a seeded generator, job preparation for sources, and `explain`, through which an
element says why it decided what it did (runtime/explain.py). Nothing in it changes the world:
elements change it only through what they emit (runtime/engine.py says how the engine applies
that). `Round` is the engine's implementation.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from roundhouse.runtime.explain import Number
from roundhouse.runtime.output_checks import check_own_explanation
from roundhouse.traces.jobs import JobBatch, JobReader

if TYPE_CHECKING:
    import polars as pl

    from roundhouse.runtime.cluster import Cluster
    from roundhouse.runtime.progress_log import ProgressReader
    from roundhouse.runtime.settings import GraphSettings
    from roundhouse.runtime.types import Events
    from roundhouse.runtime.world import World
    from roundhouse.traces.throughput import ThroughputModel


class RoundContext(Protocol):
    """What an element may read during a round. Every array it hands out is read-only."""

    settings: GraphSettings
    now: float  # the round's boundary, seconds since the run began
    round_index: int
    round_s: float
    events: Events  # what happened since the last round
    jobs: JobReader
    cluster: Cluster
    profile: Any  # the throughput profile (traces/profiles.py)
    throughput: ThroughputModel
    reference_gpu: str

    @property
    def holder(self) -> np.ndarray:
        """Job row holding each GPU, -1 where free (as of the start of this round)."""

    @property
    def co_holder(self) -> np.ndarray | None:
        """Space sharing: the second job row on each GPU (-1 where none), or None while no pair has run."""

    @property
    def online(self) -> np.ndarray | None:
        """Which GPUs can run jobs; None when all can (as in a simulation)."""

    @property
    def running_rows(self) -> np.ndarray:
        """Rows of the running jobs, sorted."""

    @property
    def pairs(self) -> Any:
        """The pair-throughput table (two jobs sharing GPUs)."""

    @property
    def busy_gpu_s(self) -> float:
        """GPU-seconds held by jobs since the run began."""

    @property
    def first_arrival_s(self) -> float:
        """Arrival time of the first job seen (inf before any)."""

    def gpus_of(self, row: int) -> np.ndarray:
        """The GPU ids a running job holds (empty if it holds none)."""

    def rng(self, seed: int | None = None) -> np.random.Generator:
        """A seeded generator for the element being ticked."""

    def prepare(self, trace: pl.DataFrame, origin: str, profile: Any = None) -> tuple[JobBatch, set[str]]:
        """Sources: a canonical trace frame as job specs for this cluster (with another
        profile if given); returns the batch and the models the profile does not know."""

    @property
    def explaining(self) -> bool:
        """Whether the run records reasons (elements may skip working out their numbers)."""

    def explain(self, reason: int | np.ndarray, rows: np.ndarray, a: Number = 0, b: Number = 0, c: Number = 0) -> None:
        """The ticked element says why these job rows are where they are: a `Reason` code (or
        one per row) and its numbers (runtime/explain.py's MEANINGS), each a constant, an
        array by row, or a function of the positions (in `rows`) of the rows whose reason
        changed, so that numbers are worked out only for those. Nothing when not recording."""

    def progress_reader(self) -> ProgressReader:
        """A reader of the job rows the world adds progress to from now on (runtime/progress_log.py),
        for an element that keeps something per job that moves only with progress. Close it when
        it is no longer read."""

    def fork(self) -> Any:
        """Control elements ticked first in a round (a synthesizer): the state at the round's
        start (world, clock, every element) as a frozen starting point for look-ahead
        simulations (runtime/lookahead.py). The running world is not touched."""


class Round:
    """The engine's round context (see RoundContext)."""

    def __init__(self, world: World, settings: GraphSettings, now: float, round_index: int, events: Events):
        self._world = world
        self.settings = settings
        self.now = float(now)
        self.round_index = round_index
        self.round_s = float(settings.round)
        self.events = events
        self.jobs = world.jobs.reader
        self.cluster = world.cluster
        self.profile = world.profile
        self.throughput = world.throughput
        self.reference_gpu = world.reference_gpu
        self.element: Any = None  # the element being ticked (set by the engine; names its generator)
        self._record = world.explain
        self.fork: Callable[[], Any] = _no_fork  # (set by the engine)

    @property
    def holder(self) -> np.ndarray:
        return self._world.holder_face

    @property
    def online(self) -> np.ndarray | None:
        world = self._world
        return None if world.all_online else world.online_face  # None keeps placers' fast path

    @property
    def co_holder(self) -> np.ndarray | None:
        return self._world.co_holder_face

    @property
    def pairs(self) -> Any:
        return self._world.pairs

    @property
    def running_rows(self) -> np.ndarray:
        return self._world.running_rows.view()  # (a view of a read-only owner stays read-only)

    @property
    def busy_gpu_s(self) -> float:
        return self._world.busy_gpu_s

    @property
    def first_arrival_s(self) -> float:
        return self._world.first_arrival_s

    def progress_reader(self) -> ProgressReader:
        return self._world.progress_log.open()

    def gpus_of(self, row: int) -> np.ndarray:
        gpus = self._world.gpus_of(int(row))  # a new array: writing it would change nothing
        gpus.setflags(write=False)
        return gpus

    def rng(self, seed: int | None = None) -> np.random.Generator:
        """The element's own seed, else one derived from the graph's seed and the element's
        name (stable across runs and Python versions)."""
        if seed is None:
            name = getattr(self.element, "name", "")
            seed = (int(self.settings.seed) * 1_000_003 + zlib.crc32(name.encode())) % (2**63)
        return np.random.default_rng(seed)

    def prepare(self, trace: pl.DataFrame, origin: str, profile: Any = None) -> tuple[JobBatch, set[str]]:
        return self._world.prepare(trace, origin, profile)

    @property
    def explaining(self) -> bool:
        return self._record is not None

    def explain(self, reason: int | np.ndarray, rows: np.ndarray, a: Number = 0, b: Number = 0, c: Number = 0) -> None:
        record = self._record
        if record is not None:
            if not type(self.element).__module__.startswith("roundhouse."):  # (the library's calls are tested)
                check_own_explanation(reason, rows, len(self.jobs))
            record.note(record.ids[self.element.name], reason, rows, a, b, c, self.now)


def _no_fork() -> Any:
    raise RuntimeError("this round context has no engine to fork")
