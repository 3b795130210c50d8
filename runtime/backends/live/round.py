"""What the live backend's rooms share within a run: the clock (round boundaries on the wall
clock) and the news (what happened since the last round boundary, for the next poll)."""

from __future__ import annotations

import math
import statistics
import time
from collections import deque

import attrs

# How far past a run's last round its next boundary is looked for: a round journaled at a
# boundary is followed by the next one, not by itself (a clock's sum may land a hair short of it).
_PAST_THE_LAST_S = 1e-3


def boundary_at_or_after(t: float, round_s: float) -> float:
    """The first of a run's round boundaries (t=0, the run's start, and every `round_s` after)
    at or after `t`, in run seconds."""
    return math.ceil(t / round_s - 1e-9) * round_s


def next_boundary(last: float, round_s: float, at_least: float = -math.inf) -> float:
    """Where a run goes on after its last round, at `last` (run seconds): the first of its round
    boundaries after it, and at or after `at_least` (a resumed scheduler's wall clock). A run
    stopped mid-round (its last round cut short at the stop) goes on at the boundary it would
    have reached, on its schedule, as a restarted `serve` does and `whatif` projects."""
    return boundary_at_or_after(max(at_least, last + _PAST_THE_LAST_S), round_s)


@attrs.define
class Clock:
    """Round time and wall time. t=0 is the journal's epoch (a resumed run keeps it), so a
    round's time `now` is its boundary in seconds since the run began and `k` its index. The
    epoch is None until the run begins (while `serve` waits for its agents)."""

    round_s: float
    epoch: float | None = None
    now: float = 0.0
    k: int = 0

    def now_s(self) -> float:
        """The wall clock, in run seconds (between boundaries); 0 before the run begins, so that
        a job submitted while `serve` waits for its agents arrives at round 0."""
        if self.epoch is None:
            return 0.0
        return time.time() - self.epoch

    def boundary_after(self, wall: float) -> float:
        return boundary_at_or_after(wall - self._started(), self.round_s)

    def next_boundary(self) -> float:
        """The boundary a resumed run goes on at: the next after its last round (`now`), and
        not before the wall clock (should it have stepped back, the former)."""
        return next_boundary(self.now, self.round_s, at_least=self.now_s())

    def at(self, boundary: float) -> None:
        """Move to the round boundary `boundary` (run seconds)."""
        self.now = boundary
        self.k = int(round(boundary / self.round_s))

    def wall(self, boundary: float) -> float:
        return self._started() + boundary

    def _started(self) -> float:
        assert self.epoch is not None, "the run's clock has not begun"
        return self.epoch


@attrs.define
class News:
    """What the backend learned since the last poll; the next poll reports it and clears it."""

    finished: list[tuple[int, float]] = attrs.field(factory=list)  # (row, time), done
    failed: list[tuple[int, float]] = attrs.field(factory=list)  # (row, time), failed for good
    requeued: list[int] = attrs.field(factory=list)  # rows that lost their GPUs without a plan
    metrics: dict[int, dict[str, float]] = attrs.field(factory=dict)
    joined: list[str] = attrs.field(factory=list)
    lost: list[str] = attrs.field(factory=list)

    def clear(self) -> None:
        self.finished, self.failed, self.requeued = [], [], []
        self.metrics, self.joined, self.lost = {}, [], []


@attrs.define
class SendLags:
    """Per round that sent launches or revocations (the last 100 such): seconds from the round's
    boundary on the wall clock to the last of them handed to the socket (the poll, the graph's
    tick and the journal's write-ahead included)."""

    recent: deque[float] = attrs.field(factory=lambda: deque(maxlen=100))
    rounds: int = 0

    def add(self, lag_s: float) -> None:
        self.recent.append(lag_s)
        self.rounds += 1

    def figures(self) -> dict[str, float]:
        """What `status` reports: how many rounds sent, and the lags of the recent ones."""
        recent = self.recent
        return {
            "send_rounds": self.rounds,
            "send_lag_median_s": statistics.median(recent) if recent else 0.0,
            "send_lag_max_s": max(recent, default=0.0),
            "send_lag_last_s": recent[-1] if recent else 0.0,
        }
