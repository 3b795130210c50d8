"""Plan checking: a plan accounts for every running job exactly once and launches waiting jobs
on free, online GPUs, each at most once; everything is checked before anything changes. A plan
that fails is a bug in the element that made it, reported with that element's name.

PlanCheck checks the accounting of running jobs, the launches and space-sharing pairs itself,
and binds as its methods the checks of a plan's CPU and memory allocations
(runtime/plan_resources.py) and of its resizes (runtime/plan_resizes.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime import plan_resizes, plan_resources
from roundhouse.runtime.plan_errors import PlanError
from roundhouse.runtime.plan_resources import share_weights
from roundhouse.runtime.rowsets import isin_rows, without
from roundhouse.runtime.types import Plan
from roundhouse.traces.jobs import FINISHED, PENDING, RUNNING

if TYPE_CHECKING:
    from roundhouse.runtime.world import World


# Names other modules take from here: the error every check raises, and the rule the check and
# the allocators spread a job's cores and memory by (both in modules of their own).
__all__ = ["PlanCheck", "PlanError", "share_weights"]


class PlanCheck:
    """Checks plans against one world's books."""

    def __init__(self, world: World):
        self.world = world

    # CPU and memory allocations (runtime/plan_resources.py), and resizes of running jobs
    # (runtime/plan_resizes.py).
    _check_resources = plan_resources.check_resources
    _resizes_named_once = plan_resizes.resizes_named_once
    _check_resizes = plan_resizes.check_resizes

    def __call__(self, plan: Plan) -> None:
        """Raise PlanError unless the plan accounts for every running job exactly once and
        launches pending jobs on free GPUs. Checks everything before anything changes."""
        keep, suspend = plan.keep, plan.suspend
        complete = plan.complete
        ending = _check_complete(self, complete) if len(complete) else complete
        if len(ending):
            suspend = np.concatenate([suspend, ending])  # running jobs ended now, for the checks below
        resized = plan.resize_rows
        if len(suspend) or len(resized):
            mentioned = np.concatenate((keep, suspend, resized))
            mentioned.sort(kind="stable")  # (sorted runs: a merge, not a quicksort)
        else:
            mentioned = keep
        # Kept, suspended and completed running jobs, together, must be exactly the running
        # ones (which implies each names a running job, once). Placers list them in order;
        # another order is sorted before it is judged.
        running = self.world.running_rows
        # (Counting flags is cheaper than numpy's reductions, min/max/any/all, at these sizes.)
        if len(mentioned) != len(running) or np.count_nonzero(mentioned != running):
            if not np.array_equal(np.sort(mentioned, kind="stable"), running):
                if len(resized):
                    self._resizes_named_once(plan, keep, suspend)
                self._explain_mismatch(keep, suspend, resized)
        if len(resized):
            self._check_resizes(plan, suspend)
        rows, gpus, counts = plan.launch_rows, plan.launch_gpus, plan.launch_counts
        if not len(rows):
            if plan.alloc_rows is not None:
                self._check_resources(plan, suspend)
            return
        if len(complete) and isin_rows(rows, complete).any():
            raise PlanError(f"plan launches job {self._job(rows[isin_rows(rows, complete)][0])}, which it also completes")
        n, n_gpus = len(self.world.jobs), self.world.cluster.n_gpus
        # Sorted, the ends show a row or GPU id out of range, and neighbours one given twice.
        ordered = np.sort(rows) if len(rows) > 1 else rows
        if ordered[0] < 0 or ordered[-1] >= n:
            raise PlanError(f"plan launches {_no_row(ordered, n)}")
        if len(rows) > 1 and np.count_nonzero(ordered[1:] == ordered[:-1]):
            raise PlanError(f"plan launches job {self._job(ordered[1:][ordered[1:] == ordered[:-1]][0])} twice")
        if len(gpus) != len(rows) and counts[counts.argmin()] < 1:  # (as many GPUs as launches: one each)
            raise PlanError(f"plan launches job {self._job(rows[counts < 1][0])} on no GPU")
        ordered_gpus = np.sort(gpus) if len(gpus) > 1 else gpus
        if ordered_gpus[0] < 0 or ordered_gpus[-1] >= n_gpus:
            raise PlanError(f"plan uses GPU {gpus[(gpus < 0) | (gpus >= n_gpus)][0]}, which does not exist")
        status = self.world.jobs.writable["status"][rows]
        if np.count_nonzero(status):  # PENDING is 0: only launches of jobs that are not waiting need a look
            launchable = (status == PENDING) | ((status == RUNNING) & isin_rows(rows, suspend))
            if np.count_nonzero(launchable) < len(rows):
                row, what = rows[~launchable][0], status[~launchable][0]
                reason = "has finished" if what == FINISHED else "is running (resize it, or suspend it to launch it elsewhere)"
                raise PlanError(f"plan launches job {self._job(row)}, which {reason}")
        counted = gpus  # GPUs of launches that count towards occupancy (a pair's second does not)
        if plan.launch_partner is not None:
            first = self.partners(plan)
            counted = gpus if first.all() else gpus[first.repeat(counts)]
        if len(resized):
            counted = np.concatenate((counted, plan.resize_gpus))
        if len(counted) > 1:  # (sorted GPU ids: a GPU given twice has an equal neighbour)
            ordered = ordered_gpus if counted is gpus else np.sort(counted)
            twice = ordered[1:] == ordered[:-1]
            if np.count_nonzero(twice):
                raise PlanError(f"plan puts two jobs (or one twice) on GPU {int(ordered[1:][twice][0])}")
        if not self.world.all_online and not self.world.online[gpus].all():
            off = gpus[~self.world.online[gpus]][0]
            raise PlanError(f"plan puts job {self._job(rows.repeat(counts)[gpus == off][0])} on GPU {off}, which is offline")
        for holder in (self.world.holder, self.world.co_holder):
            if holder is None:
                continue
            holders = holder[gpus]
            ok = holders < 0
            if len(suspend):
                ok |= isin_rows(holders, suspend)
            if len(resized):  # GPUs a resized job gives up (the resize check saw that it keeps none twice)
                ok |= isin_rows(holders, resized) & ~np.isin(gpus, plan.resize_gpus)
            if np.count_nonzero(ok) < len(ok):
                owner = rows.repeat(counts)[~ok][0]
                raise PlanError(
                    f"plan puts job {self._job(owner)} on GPU {gpus[~ok][0]}, which job {self._job(holders[~ok][0])} holds"
                )
        if plan.alloc_rows is not None:
            self._check_resources(plan, suspend)

    def partners(self, plan: Plan) -> np.ndarray:
        """Space sharing: each launch with a partner names a job launched in the same plan on
        exactly the same GPUs, which names it back. Returns which launches come first in their
        pair (the other shares its GPUs)."""
        rows, partner, counts, starts = plan.launch_rows, plan.launch_partner, plan.launch_counts, plan.launch_starts
        first = np.ones(len(rows), dtype=bool)
        if partner is None:
            return first
        paired = np.flatnonzero(partner >= 0)
        if not len(paired):
            return first
        position = {int(r): i for i, r in enumerate(rows.tolist())}
        for i in paired.tolist():
            j = position.get(int(partner[i]))
            if j is None or partner[j] != rows[i] or j == i:
                raise PlanError(
                    f"plan launches job {self._job(rows[i])} to share GPUs with job {self._job(partner[i])}, "
                    "which is not launched in the same plan as its partner"
                )
            same = counts[i] == counts[j] and np.array_equal(
                plan.launch_gpus[starts[i] : starts[i] + counts[i]], plan.launch_gpus[starts[j] : starts[j] + counts[j]]
            )
            if not same:
                raise PlanError(f"plan launches jobs {self._job(rows[i])} and {self._job(rows[j])} as partners on different GPUs")
            first[max(i, j)] = False
        return first

    def _job(self, row) -> int:
        return int(self.world.jobs.writable["job_id"][row])

    def _explain_mismatch(self, keep: np.ndarray, suspend: np.ndarray, resized: np.ndarray) -> None:
        n = len(self.world.jobs)
        for name, rows in (("keep", keep), ("suspend", suspend)):
            if len(rows) and (rows.min() < 0 or rows.max() >= n):
                raise PlanError(f"plan's {name} list names {_no_row(np.sort(rows), n)}")
            not_running = rows[self.world.jobs.writable["status"][rows] != RUNNING] if len(rows) else rows
            if len(not_running):
                raise PlanError(f"plan asks to {name} job {self._job(not_running[0])}, which is not running")
        missing = without(self.world.running_rows, np.concatenate([keep, suspend, resized]))
        if len(missing):
            raise PlanError(f"running job {self._job(missing[0])} is neither kept nor suspended (nor resized)")
        raise PlanError("plan keeps or suspends a job twice")


def _no_row(ordered: np.ndarray, n: int) -> str:
    """A row out of the job table's range, of rows in order, as a plan's error names it."""
    row = int(ordered[0] if ordered[0] < 0 else ordered[-1])
    return f"row {row}, which is not a row of the job table (rows 0 to {n - 1}, one per job in the system)"


def _check_complete(check: PlanCheck, complete: np.ndarray) -> np.ndarray:
    """Checks a plan's completions; returns those of running jobs."""
    jobs = check.world.jobs
    if complete.min() < 0 or complete.max() >= len(jobs):
        raise PlanError(f"plan completes {_no_row(np.sort(complete), len(jobs))}")
    ordered = np.sort(complete)
    if (ordered[1:] == ordered[:-1]).any():
        raise PlanError(f"plan completes job {check._job(ordered[1:][ordered[1:] == ordered[:-1]][0])} twice")
    status = jobs.writable["status"][complete]
    if (status == FINISHED).any():
        raise PlanError(f"plan completes job {check._job(complete[status == FINISHED][0])}, which has finished")
    return complete[status == RUNNING]
