"""World state: which job holds which GPU, which GPUs are online, the job table's live fields,
and the clock's totals. The runtime is its only writer: the engine folds the backend's events
in (arrivals, progress, completions, failures, lost GPUs) and carries out checked plans, at one
point of the round each. Elements read it through read-only views (runtime/context.py).

`World` holds the state and how a job stops holding its GPUs. What it does with the state is in
modules of their own, one idea each, whose functions it binds as its methods: called so, such a
function costs what a method of World's own would, with no call in between on the paths the
engine takes every round.

- folding in the backend's events: runtime/world_events.py;
- carrying out a checked plan: runtime/plan_books.py (plan checking is runtime/plans.py);
- how fast launches run: runtime/launch_rates.py;
- pairs of jobs sharing GPUs: runtime/space_sharing.py;
- copies for forks, and snapshot files: runtime/world_copies.py.

The job vocabulary (columns, status codes, views) is traces/jobs.py; how fast a job runs where
it is placed is traces/throughput.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.errors import Location
from roundhouse.runtime import plan_books, world_copies, world_events
from roundhouse.runtime.allocation import close_allocations
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.launch_rates import launch_rates, plain, rates
from roundhouse.runtime.plan_books import book_launches
from roundhouse.runtime.plans import PlanCheck, PlanError
from roundhouse.runtime.progress_log import ProgressLog
from roundhouse.runtime.rowsets import isin_rows, without
from roundhouse.runtime.space_sharing import leave_shared_gpus
from roundhouse.runtime.world_events import add_progress, compute_seconds
from roundhouse.traces.jobs import FINISHED, RUNNING, JobBatch, JobTable, read_only
from roundhouse.traces.prepare import prepare_jobs
from roundhouse.traces.throughput import ThroughputModel

if TYPE_CHECKING:
    from roundhouse.runtime.explain import Recorder

# Besides World: names other modules import from here, kept here for them.
__all__ = ["World", "PlanError", "FINISHED", "RUNNING", "add_progress", "book_launches", "compute_seconds"]


class World:
    """The cluster, the job table, which job holds which GPU, and the clock's totals."""

    # GPU-seconds that pairs of jobs sharing GPUs both counted in their service: `busy_gpu_s`
    # takes them off, so that a shared GPU counts once (runtime/space_sharing.py).
    shared_gpu_s = 0.0

    def __init__(self, cluster: Cluster, profile, reference_gpu: str = "V100", pairs=None, elastic=None):
        self.cluster = cluster
        self.profile = profile
        self.reference_gpu = reference_gpu
        # Where the reference GPU was given: its line in the graph, or the option; None for the default.
        self.reference_at: Location | str | None = None
        self.throughput = ThroughputModel(profile, cluster, pairs, elastic=elastic)
        self.jobs = JobTable(len(cluster.gpu_types))
        self._cols = self.jobs.writable  # the world is the job table's writer
        self._check = PlanCheck(self)

        # Who holds which GPU: the job's row, -1 for a free GPU.
        self.holder = np.full(cluster.n_gpus, -1, dtype=np.int64)
        # The second job on each GPU, when two share it (space sharing). It stays None until a
        # plan first launches a pair, so that a run without pairs never touches it.
        self.co_holder: np.ndarray | None = None
        # The running jobs' rows, sorted and read-only (see `_set_running`).
        self.running_rows = np.zeros(0, dtype=np.int64)
        self.running_rows.setflags(write=False)
        # GPUs that can run jobs (in live runs: those on a registered node that can be reached).
        self.online = np.ones(cluster.n_gpus, dtype=bool)
        self.all_online = True
        # Read-only faces of the arrays above, for the round context. They are made once: they
        # follow the arrays, which change in place.
        self.holder_face, self.online_face = read_only(self.holder), read_only(self.online)
        self.co_holder_face: np.ndarray | None = None

        # The clock's totals: jobs not finished yet, the first arrival, the last finish.
        self.unfinished = 0
        self.first_arrival_s = np.inf
        self.last_finish_s = 0.0
        # Models the throughput profile does not know, among the jobs' (for the run's notes), in
        # name order: a set's order follows the process's string hashes, and would make a loaded
        # run's snapshot differ from the run's.
        self.unknown_models: tuple[str, ...] = ()
        # Epochs of progress a job loses per doubling of its batch size beyond twice in one resize
        # (runtime/resizing.py).
        self.batch_jump_penalty = 0.0
        # Whether any job so far has a profiled model, slows down when spread, or runs under the
        # communication model (a cluster with network tiers). While none does, every launch runs
        # at one unit of work per second (runtime/launch_rates.py's fast path).
        self._any_model = False
        self._any_slowdown = False
        self._any_comm = False
        # Why each job is where it is (runtime/explain.py's Recorder), if the run records it. It is
        # kept here so that it is forked with the world.
        self.explain: Recorder | None = None
        # Which jobs progress was added to, for the elements that read it (runtime/progress_log.py).
        self.progress_log = ProgressLog()
        # The time the world is as of, where it is known: set on a copy brought up to the clock
        # (`Simulation.world_now`), which a projection from it checks (`simulate_ahead`). A
        # running engine's own world is between two rounds' facts, so there it stays None.
        self.as_of: float | None = None
        # The boundary at which the world's last round began, whose arrivals it has: set with
        # `as_of`, so that a projection from the copy under a graph of other rounds passes over
        # only the jobs the world has seen (`simulate_ahead`).
        self.last_round_s: float | None = None

    # Forks and snapshot files (runtime/world_copies.py).
    __deepcopy__ = world_copies.deep_copy
    __getstate__ = world_copies.get_state
    __setstate__ = world_copies.set_state

    # Folding in the backend's events (runtime/world_events.py).
    add_jobs = world_events.add_jobs
    apply_progress = world_events.apply_progress
    apply_finished = world_events.apply_finished
    apply_failed = world_events.apply_failed
    apply_requeued = world_events.apply_requeued
    set_online = world_events.set_online
    apply_metrics = world_events.apply_metrics

    # Carrying out a checked plan (runtime/plan_books.py).
    check_plan = plan_books.check_plan
    apply_plan = plan_books.apply_plan
    complete = plan_books.complete

    # How fast launches run (runtime/launch_rates.py; its functions are imported by name, as
    # the module is named for its first).
    launch_rates = launch_rates
    _plain = plain
    _rates = rates

    def __repr__(self) -> str:  # (what a notebook wants at a glance, not an object's address)
        return f"World({len(self.jobs):,} jobs, {self.unfinished:,} unfinished, {len(self.running_rows):,} running, on {self.cluster.describe()})"

    @property
    def busy_gpu_s(self) -> float:
        """GPU-seconds held by jobs since the run began: their attained service, summed (no running
        total to keep), less the time pairs both held their shared GPUs (each GPU counts once)."""
        return float(self.jobs.column("service").sum()) - self.shared_gpu_s

    @property
    def pairs(self):
        """The pair-throughput table (space sharing), loaded on first use."""
        return self.throughput.pairs

    def gpus_of(self, row: int) -> np.ndarray:
        """The GPUs a job holds, alone or shared."""
        if self.co_holder is not None:
            return ((self.holder == row) | (self.co_holder == row)).nonzero()[0]
        return (self.holder == row).nonzero()[0]

    def prepare(self, trace, origin: str, profile=None) -> tuple[JobBatch, set[str]]:
        """A canonical trace frame as job specs for this world's cluster and profile (or
        another profile); returns the batch and the models the profile does not know."""
        model = self.throughput if profile is None else ThroughputModel(profile, self.cluster, elastic=self.throughput.elastic)
        batch, unknown = prepare_jobs(
            trace, model, self.reference_gpu, self.cluster.n_gpus, origin, getattr(self, "reference_at", None)
        )
        # (the run's summary names them; jobs prepared under another profile, TraceSource's empty
        # one for timing=duration, run for their durations by choice, not for want of a profile)
        if profile is None and not unknown.issubset(self.unknown_models):
            self.unknown_models = tuple(sorted(unknown.union(self.unknown_models)))
        return batch, unknown

    # --- jobs that stop running: completed, failed, suspended or requeued ---
    def _set_running(self, rows: np.ndarray) -> None:
        """The running jobs' rows, sorted, as a read-only array that owns its data (a new one
        whenever it changes), so that no view of it handed out can be made writeable again."""
        if rows.base is not None:
            rows = rows.copy()
        rows.setflags(write=False)
        self.running_rows = rows

    def _leave(self, rows: np.ndarray, times: np.ndarray) -> None:
        """Jobs leave the system at `times`: their GPUs are free and they stop counting."""
        if len(rows) == 0:
            return
        cols = self._cols
        cols["status"][rows] = FINISHED
        cols["finish_s"][rows] = times
        self._release(rows)
        self.unfinished -= len(rows)
        self.last_finish_s = max(self.last_finish_s, float(times.max()))

    def _release(self, rows: np.ndarray, leave_running_rows: bool = False) -> None:
        """These jobs stop running (their status already says how): their GPUs are free, and
        a space-sharing partner that stays keeps its GPUs to itself. `leave_running_rows`: the
        caller sets `running_rows` itself."""
        cols = self._cols
        cols["held"][rows] = 0
        close_allocations(cols, rows)
        # Once a pair has run, what these jobs held is copied before it is cleared: a partner
        # that stays may take it.
        freed = None
        if self.co_holder is not None:
            freed = (cols["cpus_held"][rows], cols["memory_held_gb"][rows])
        cols["cpus_held"][rows] = 0.0
        cols["memory_held_gb"][rows] = 0.0
        cols["rate"][rows] = 0.0
        cols["placed_type"][rows] = -1
        self.holder[isin_rows(self.holder, rows)] = -1
        if not leave_running_rows:
            self._set_running(without(self.running_rows, rows))
        if freed is not None:
            leave_shared_gpus(self, rows, freed)
