"""Dally (IEEE BigData'25): network-sensitive priority.

A job's network sensitivity Nw_sens = W_compl / T_norm compares the share of its work done with
the share of its ideal (communication-free) running time spent. Its value is the job's
work-weighted harmonic-mean placement efficiency compute / (compute + communication), so a job
that has run on poor placements has a low value and is served first, to get the better
consolidated offers. The starvation clock that Dally's tie-break and its delay placer read is
here too (`StarvationClock`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from roundhouse.elements.policies.base import Policy
from roundhouse.runtime.element import element
from roundhouse.runtime.types import Active, Ranking

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


def network_sensitivity(done: np.ndarray, run_s: np.ndarray, ideal_rate: np.ndarray) -> np.ndarray:
    """Nw_sens = W_compl / T_norm per job, 0 for jobs that never ran.

    W_compl = done / work and T_norm = run_s / (work / ideal_rate), so the work cancels:
    Nw_sens = (done / ideal_rate) / run_s, the ideal time of the work done over the time taken.
    """
    done = np.asarray(done, dtype=np.float64)
    run_s = np.asarray(run_s, dtype=np.float64)
    ideal = done / np.where(ideal_rate > 0, ideal_rate, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(run_s > 0, ideal / np.where(run_s > 0, run_s, 1.0), 0.0)


class StarvationClock:
    """Per job row, when its starvation clock last started: at arrival, at every start and
    at every loss of all its GPUs (Dally's `lastResourceAssignment`).

    The clock is read at round boundaries: a change the owner did not make itself (a start by
    another element, a loss) is stamped at the first round that sees it.
    """

    def __init__(self) -> None:
        self.since = np.zeros(0)
        self._known = np.zeros(0, dtype=bool)
        self._holding = np.zeros(0, dtype=bool)

    def update(self, ctx: RoundContext) -> None:
        n = len(ctx.jobs)
        if len(self._known) < n:
            extra = n - len(self._known)
            self.since = np.concatenate([self.since, np.zeros(extra)])
            self._known = np.concatenate([self._known, np.zeros(extra, dtype=bool)])
            self._holding = np.concatenate([self._holding, np.zeros(extra, dtype=bool)])
        new = ~self._known
        if new.any():
            self.since[new] = ctx.jobs.column("arrival_s")[new]
            self._known[:] = True
        holding = ctx.jobs.column("held") > 0
        changed = holding != self._holding  # started elsewhere, or lost all its GPUs
        self.since[changed] = ctx.now
        self._holding = holding.copy()

    def lost(self, rows: np.ndarray, now: float) -> None:
        """The owner took all their GPUs from `rows` at `now`."""
        self.since[rows] = now
        self._holding[rows] = False

    def started(self, rows: np.ndarray, now: float) -> None:
        """The owner launched `rows` at `now`."""
        self.since[rows] = now
        self._holding[rows] = True


@element
class NetworkSensitive(Policy):
    """Rank jobs by network sensitivity, lowest first: Dally's priority.

    Nw_sens = W_compl / T_norm, where W_compl = done / work is the share of the job's work
    done and T_norm = run_s / (work / reference_rate) the share of its ideal running time
    spent (run_s counts only time holding GPUs; the ideal is the job's communication-free,
    consolidated rate, as the paper's compute time per iteration x iterations). The work
    cancels: Nw_sens = (done / reference_rate) / run_s, the job's work-weighted harmonic-mean
    placement efficiency compute / (compute + communication). The ideal time is the job's own
    compute time on its own GPUs, as Dally's simulator takes it (compute time per iteration x
    iterations / GPUs); the paper's text does not divide by the GPU count, a reading under which
    a job's Nw_sens would be its GPU count times its efficiency, ranking wide jobs after narrow
    ones whatever their placements. A job that never ran has Nw_sens = 0 and ranks first. Ties go to the job holding fewer GPUs, then to the one whose
    starvation clock started earlier (its last arrival, start or loss of all its GPUs), then
    to the lower job id. Every job asks for its own GPU count; a job that does not fit is
    skipped (backfill).

    Ports:
        ranking: the jobs, least network-sensitive first.
    Arguments:
        none
    Counters:
        never_ran: ranked jobs that have never run, in the last round.
    Cost: O(n log n) over the pool's jobs n (a lexicographic sort), plus O(J) over the job table
        J (the starvation clocks, each job's read from whether it holds GPUs).
    See also: DelayPlacer, TiresiasLas
    Paper: Dally (IEEE BigData'25) §III-B (Nw_sens); cluster-sim DallyInterJobScheduler (tie-breaks).
    """

    state = ("_clock",)
    # Without network tiers every job that ran is as sensitive as the next (no communication
    # slows it): `check` and `run` warn of such a cluster (runtime/useless_runs.py).
    needs_tiers: ClassVar[bool] = True

    def start(self, ctx: RoundContext) -> None:
        self._clock = StarvationClock()
        self.counters["never_ran"] = 0

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        self._clock.update(ctx)
        rows = active.rows
        sens = network_sensitivity(active.done, active.run_s, active.reference_rate)
        order = np.lexsort((active.job_id, self._clock.since[rows], active.held, sens))
        self.counters["never_ran"] = int(np.count_nonzero(active.run_s == 0))
        return Ranking(rows[order], active.gpus[order], backfill=True)
