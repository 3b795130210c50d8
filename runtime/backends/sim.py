"""The simulator backend: exact round semantics, all running jobs advanced at once.

Round k covers [kR, (k+1)R).
- Jobs arriving inside a round become visible at the next boundary (the sources see to that).
- A running job progresses at its placement's throughput; one that finishes inside a round
  finishes at its exact time, and its GPUs stay idle until the round ends.
- A suspended job occupies its GPUs for `checkpoint` seconds after the boundary, plus
  `checkpoint_per_gpu` for each GPU it held (Dally's simulator charges 1 s per GPU); a launched job
  starts once all its GPUs are free, then spends `restore` seconds before it progresses. A job
  that keeps its GPUs pays nothing (its lease is renewed). A job the plan completes frees its
  GPUs at the boundary, at no cost.
- A resized job (an elastic job given other GPUs or another batch size) keeps its progress and
  pauses: it starts again once all its new GPUs are free, then after `resize_in_place` seconds
  (an in-place change, about 1 s in ONES) or `resize_restart` seconds (a checkpoint and
  restart, 20 s or more). It holds its new GPUs meanwhile. A pause longer than the round goes
  on into the next.
- Attained service counts GPU-seconds held, restore and resize time included.
"""

from __future__ import annotations

import numpy as np

from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.repeated_sums import repeated_sum, running_sums
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Events, Plan
from roundhouse.runtime.world import World, compute_seconds

# Relative slack when deciding that a job finishes inside a round, so that float rounding in
# accumulated progress never pushes an exact finish into the next round.
_EPS = 1e-9
# A quiet round (the same jobs running as in the last one) skips the per-job finish test when
# the earliest finish computed then lies beyond the round's end by this relative margin, far
# more than the rounding that accumulated progress can add.
_SURE = 1e-6
_ONE_AT_A_TIME = 16  # quiet rounds counted one by one before the rest are counted in blocks
_NO_PROGRESS = Progress.empty()
# Clock and round below this, in whole seconds, keep every book a whole number that adds exactly.
_WHOLE = 2.0**40


class Simulator:
    def __init__(
        self,
        world: World,
        round_s: float,
        checkpoint_s: float = 0.0,
        restore_s: float = 0.0,
        checkpoint_per_gpu_s: float = 0.0,
        now: float = 0.0,
        resize_in_place_s: float = 1.0,
        resize_restart_s: float = 20.0,
    ):
        """`now`: the first boundary (a simulation that takes over a world mid-run starts there)."""
        self.world = world
        self.round_s = float(round_s)
        self.checkpoint_s = float(checkpoint_s)
        self.checkpoint_per_gpu_s = float(checkpoint_per_gpu_s)
        self.restore_s = float(restore_s)
        self.resize_in_place_s = float(resize_in_place_s)
        self.resize_restart_s = float(resize_restart_s)
        self._now = float(now)
        self._gpu_free_at = np.zeros(world.cluster.n_gpus)
        # Jobs launched this round, and when each starts progressing (after GPUs free, restore).
        self._ready_rows = np.zeros(0, dtype=np.int64)
        self._ready_at = np.zeros(0)
        self._paused = np.zeros(0, dtype=bool)  # which of them pause for a resize (those carry over)
        self._events: Events | None = None
        self._full_rows = np.zeros(0, dtype=np.int64)  # (compared by identity: no running set is this one)
        self._full: Progress | None = None
        self._full_rate = np.zeros(0)
        self._earliest_finish = -np.inf  # of the jobs in _full_rows, as last computed
        self._finish: tuple | None = None  # (boundary, rows, remaining work, finish times), as last computed
        self._progress = _NO_PROGRESS
        # Whether a job progressed or finished in the last round advanced: every running job may
        # wait a whole round for GPUs a checkpoint holds, or for a resize (runtime/stalls.py).
        self.moved = True

    @classmethod
    def for_graph(cls, world: World, settings, now: float = 0.0) -> Simulator:
        """A simulator with a graph's costs (checkpoint, restore, resizes) from its settings."""
        return cls(
            world,
            settings.round,
            settings.checkpoint,
            settings.restore,
            settings.checkpoint_per_gpu,
            now=now,
            resize_in_place_s=settings.resize_in_place,
            resize_restart_s=settings.resize_restart,
        )

    @property
    def now(self) -> float:
        return self._now

    def jump_to(self, t: float) -> None:
        """Move the clock to the boundary `t` (>= now) when nothing is running."""
        self._now = float(t)

    def poll(self) -> tuple[Events, Progress]:
        events = self._events if self._events is not None else Events(time=self._now)
        progress = self._progress
        self._events, self._progress = None, _NO_PROGRESS
        return events, progress

    def apply(self, plan: Plan) -> None:
        """Called with a checked plan before the world's books change (so suspended jobs
        still hold their GPUs)."""
        now = self._now
        charges = self.checkpoint_s > 0 or self.checkpoint_per_gpu_s > 0
        if charges and len(plan.suspend):
            freed = isin_rows(self.world.holder, plan.suspend)
            if self.world.co_holder is not None:  # space sharing: a GPU's second job checkpoints too
                freed |= isin_rows(self.world.co_holder, plan.suspend)
            cost = self.checkpoint_s
            if self.checkpoint_per_gpu_s > 0:
                # Each GPU waits for its whole gang's checkpoint: per GPU held, by the job holding it.
                held = self.world.jobs.column("held")
                cost = cost + self.checkpoint_per_gpu_s * held[self.world.holder[freed]]
            self._gpu_free_at[freed] = now + cost
        if len(self._ready_rows):  # pauses carried over from the last round, unless this plan ends or redoes them
            gone = np.concatenate((plan.suspend, plan.complete, plan.resize_rows))
            if len(gone):
                stay = ~isin_rows(self._ready_rows, np.sort(gone))
                self._ready_rows, self._ready_at, self._paused = self._ready_rows[stay], self._ready_at[stay], self._paused[stay]
        parts = [(self._ready_rows, self._ready_at, self._paused)] if len(self._ready_rows) else []
        if len(plan.launch_rows) and (charges or self.restore_s > 0):
            # (Without either cost a launched job starts at the boundary, as running ones do.)
            free_at = np.maximum.reduceat(self._gpu_free_at[plan.launch_gpus], plan.launch_starts)
            parts.append((plan.launch_rows, np.maximum(free_at, now) + self.restore_s, np.zeros(len(free_at), bool)))
        if len(plan.resize_rows):
            free_at = np.maximum.reduceat(self._gpu_free_at[plan.resize_gpus], plan.resize_starts)
            in_place = plan.resize_in_place if plan.resize_in_place is not None else np.ones(len(plan.resize_rows), bool)
            pause = np.where(in_place, self.resize_in_place_s, self.resize_restart_s)
            parts.append((plan.resize_rows, np.maximum(free_at, now) + pause, np.ones(len(free_at), bool)))
        if parts:
            rows, at, paused = (np.concatenate([p[i] for p in parts]) for i in range(3))
            order = rows.argsort()
            self._ready_rows, self._ready_at, self._paused = rows[order], at[order], paused[order]

    def advance(self) -> None:
        world = self.world
        now, end = self._now, self._now + self.round_s
        rows = world.running_rows
        self.moved = bool(len(rows))
        if not len(rows):
            self._progress, self._events = _NO_PROGRESS, Events(time=end)
        elif rows is self._full_rows and not len(self._ready_rows) and self._earliest_finish > end + _SURE * max(1.0, end):
            # The same jobs as last round, none starting late, and none can finish this round.
            self._progress, self._events = self._full_round(), Events(time=end)
        else:
            jobs = world.jobs
            if len(self._ready_rows):
                if rows is not self._full_rows:
                    self._full_rows, self._full_rate, self._full = rows, jobs.column("rate")[rows], None
                remaining = jobs.column("work")[rows] - jobs.column("done")[rows]
                starts = np.empty(len(rows))
                starts.fill(now)
                starts[rows.searchsorted(self._ready_rows)] = self._ready_at
                start: np.ndarray | float = starts
                finish_at = start + remaining / self._full_rate
                self._earliest_finish = finish_at[finish_at.argmin()]  # (an index lookup: cheaper than .min())
            else:
                start = now
                remaining, finish_at = self._finish_times(rows)
            rate = self._full_rate
            deadline = self.finish_deadline(end)
            if not len(self._ready_rows) and self._earliest_finish > deadline:
                self._progress, self._events = self._full_round(), Events(time=end)  # everyone runs the round through
            else:
                finished = finish_at <= deadline
                block = np.empty((4, len(rows)))
                done, service, run_s, compute_s = block
                if isinstance(start, float):  # every job from the boundary: a whole round, but for the few that finish
                    ending = finished.nonzero()[0]
                    np.multiply(rate, max(end - start, 0.0), out=done)
                    done[ending] = remaining[ending]
                    run_s.fill(end - now)
                    run_s[ending] = finish_at[ending] - now
                else:
                    held_until = np.where(finished, finish_at, end)
                    done[:] = np.where(finished, remaining, rate * np.maximum(held_until - start, 0.0))
                    np.subtract(held_until, now, out=run_s)
                    self.moved = bool(done.any())  # (else every job runs from the boundary, at a rate above 0)
                np.multiply(jobs.column("held")[rows], run_s, out=service)
                compute_seconds(done, jobs.column("compute_rate")[rows], out=compute_s)
                self._progress = Progress(rows, done, service, run_s, block)
                self._events = Events(time=end, finished=rows[finished], finished_at=finish_at[finished])
        if len(self._ready_rows):  # a resize's pause that outlasts the round goes on into the next
            later = self._paused & (self._ready_at > end)
            if (~self._paused & (self._ready_at > end)).any():
                # A launch's wait ends with its round: such a job starts at `end`, before the
                # finish worked out from its wait, so that finish is forgotten.
                self._earliest_finish = -np.inf
            self._ready_rows, self._ready_at, self._paused = self._ready_rows[later], self._ready_at[later], self._paused[later]
        self._now = end

    def next_finish_s(self) -> float:
        """When the first running job would finish, running from now on as they are (-inf when
        not known: some wait to start, after a checkpoint, restore or resize)."""
        rows = self.world.running_rows
        if not len(rows):
            return np.inf
        if rows is not self._full_rows:
            if len(self._ready_rows):
                return -np.inf
            self._finish_times(rows)
        return float(self._earliest_finish)

    def _finish_times(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The running jobs' remaining work, and when each finishes running from now on (none
        waiting to start); the first of those times is kept. Worked out once per boundary and
        running set (asked before the round's end, then when it is advanced)."""
        if self._finish is not None and self._finish[0] == self._now and self._finish[1] is rows:
            return self._finish[2], self._finish[3]
        jobs = self.world.jobs
        if rows is not self._full_rows:
            self._full_rows, self._full_rate, self._full = rows, jobs.column("rate")[rows], None
        remaining = jobs.column("work")[rows] - jobs.column("done")[rows]
        finish_at = self._now + remaining / self._full_rate
        self._earliest_finish = finish_at[finish_at.argmin()]  # (an index lookup: cheaper than .min())
        self._finish = (self._now, rows, remaining, finish_at)
        return remaining, finish_at

    def advance_quiet(self, rounds: int) -> tuple[int, Progress]:
        """Event skipping: advance up to `rounds` whole rounds in which the running jobs go on as
        they are and none finishes (each a round that `advance` would take its quiet path for).
        Returns how many it advanced and one round's progress, which the world adds that many
        times (the same additions as round by round)."""
        rows = self.world.running_rows
        if len(self._ready_rows):
            return 0, _NO_PROGRESS
        if not len(rows):
            self._now = repeated_sum(self._now, self.round_s, rounds)
            return rounds, _NO_PROGRESS
        if rows is not self._full_rows:
            self._finish_times(rows)
        k = self._rounds_before(self._earliest_finish, rounds)
        return k, (self._full_round() if k else _NO_PROGRESS)

    def _rounds_before(self, earliest: float, rounds: int) -> int:
        """Advance the clock by whole rounds (at most `rounds`) that end surely before
        `earliest`, a finish; returns how many. The first few one at a time (a finish is often
        near), then in blocks of the same running sums."""
        now, k = self._now, 0
        while k < min(rounds, _ONE_AT_A_TIME):
            end = now + self.round_s
            if not earliest > end + _SURE * max(1.0, end):
                self._now = now
                return k
            now, k = end, k + 1
        for ends in running_sums(now, self.round_s, rounds - k):
            before = earliest > ends + _SURE * np.maximum(1.0, ends)
            n = len(ends) if before.all() else int(before.argmin())
            if n:
                now, k = float(ends[n - 1]), k + n
            if n < len(ends):
                break
        self._now = now
        return k

    def _full_round(self) -> Progress:
        """Progress of the running jobs over a whole round, made once for each running set (a
        new array whenever it changes)."""
        if self._full is None:
            rows, r, jobs = self._full_rows, self.round_s, self.world.jobs
            block = np.empty((4, len(rows)))
            done, service, run_s, compute_s = block
            np.multiply(self._full_rate, r, out=done)
            np.multiply(jobs.column("held")[rows], r, out=service)
            run_s.fill(r)
            compute_seconds(done, jobs.column("compute_rate")[rows], out=compute_s)
            self._full = Progress(rows, done, service, run_s, block)
        return self._full

    # --- rounds carried out in bulk (runtime/bulk.py) ---
    def runs_whole_rounds(self) -> bool:
        """Whether every job runs whole rounds that add whole numbers to its books, and finishes
        at its start plus its remaining work, wherever it runs: rounds alike (`_rounds_alike`),
        one unit of work per second everywhere (no profile, nothing slowing down)."""
        return self._rounds_alike() and self.world._plain()

    def runs_fixed_rounds(self) -> bool:
        """Whether every job's progress over a whole round is a fixed step while it runs on the
        same GPUs (its launch's rate times the round), and it finishes at the clock plus its
        remaining work over that rate: rounds alike, and no communication model (whose rates
        are worked out with the rates without it)."""
        world = self.world
        return self._rounds_alike() and not world._any_comm and world.throughput.communication is None

    def _rounds_alike(self) -> bool:
        """No checkpoint, restore or resize to wait for, no shared GPUs, no loss curves, and
        rounds and clock in whole seconds."""
        world = self.world
        return (
            self.restore_s == 0
            and self.checkpoint_s == 0
            and self.checkpoint_per_gpu_s == 0
            and not len(self._ready_rows)
            and self.round_s.is_integer()
            and self._now.is_integer()
            and max(self.round_s, self._now) < _WHOLE
            and world.co_holder is None
            and "loss_speed" not in world.jobs.writable
        )

    @staticmethod
    def finish_deadline(end):
        """The latest finish time that `advance` counts as within a round that ends at `end` (a
        float or an array): the end and a relative tolerance, for rounding in the clock's sums.
        (The same operations either way, so the same answer; a float, as `advance` asks every
        round, without a numpy call.)"""
        if isinstance(end, float):
            return end + _EPS * max(1.0, end)
        return end + _EPS * np.maximum(1.0, end)

    def resume(self, now: float, events: Events | None, progress: Progress) -> None:
        """Take up the run at the boundary `now`, after rounds carried out elsewhere, with the last
        of them's completions and their progress waiting for the next poll."""
        self._now = float(now)
        self._events, self._progress = events, progress
        self._full_rows, self._full, self._finish = np.zeros(0, dtype=np.int64), None, None
