"""Plan checking: a plan accounts for every running job exactly once and launches waiting jobs
on free, online GPUs, each at most once; everything is checked before anything changes. A plan
that fails is a bug in the element that made it, reported with that element's name."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.allocation import shared_halves
from roundhouse.runtime.rowsets import isin_rows, without
from roundhouse.runtime.types import Plan
from roundhouse.traces.jobs import FINISHED, PENDING, RUNNING

if TYPE_CHECKING:
    from roundhouse.runtime.world import World


class PlanError(RoundhouseError):
    """A plan that cannot be carried out (double-booked GPU, unknown job, ...)."""


def _largest(a: np.ndarray):
    """The largest entry of a non-empty array (an index lookup: cheaper than `a.max()`)."""
    return a[a.argmax()]


def share_weights(job: np.ndarray, gpus: np.ndarray, share: np.ndarray) -> np.ndarray:
    """How a job's CPU cores and memory, all its machines together, are spread over its GPUs: by
    each machine's GPU-proportional share per GPU, so that the job's proportional share fits on
    every machine even where machines differ. The allocators (elements/placement/synergy.py)
    spread what they give this way, and the plan check below spreads what it checks this way.

    The parts are pieces of jobs: a GPU each (the plan check) or a job's GPUs on one machine
    (the allocators). `job`: each piece's job, an index 0, 1, ...; `gpus`: its GPUs; `share`:
    (pieces, 2), the cores and GB per GPU of its machine. Returns (pieces, 2): each piece's part
    of its job's cores and of its memory (a job's parts add up to 1)."""
    n = int(job.max()) + 1 if len(job) else 0
    weighted = gpus[:, None] * share
    total = np.stack([np.bincount(job, weights=weighted[:, k], minlength=n) for k in (0, 1)], axis=1)[job]
    weighted = weighted / np.where(total > 0, total, 1.0)
    # Where all of a job's machines give the same share per GPU, the split by GPU count is the
    # same spread; its arithmetic is kept there, so that results on such clusters do not move
    # by a rounding. (Summed piece by piece in order, as a sum over machines in machine order.)
    by_count = gpus / np.maximum(np.bincount(job, weights=gpus, minlength=n), 1)[job]
    some = np.zeros((n, 2))
    some[job] = share  # (one piece's share per job, whichever: its machines are alike if all have it)
    unlike = np.stack([np.bincount(job, weights=share[:, k] != some[job, k], minlength=n) for k in (0, 1)], axis=1)
    return np.where((unlike == 0)[job], by_count[:, None], weighted)


def _per_gpu_weights(owner: np.ndarray, cpu: np.ndarray, memory: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`share_weights` of GPUs, from the job holding each and its share of cores and of memory."""
    _, job = np.unique(owner, return_inverse=True)
    w = share_weights(job, np.ones(len(owner)), np.stack([cpu, memory], axis=1))
    return w[:, 0], w[:, 1]


class PlanCheck:
    """Checks plans against one world's books."""

    def __init__(self, world: World):
        self.world = world

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
            raise PlanError("plan launches a job row that does not exist")
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

    def _check_resources(self, plan: Plan, suspend: np.ndarray) -> None:
        """A plan's CPU and memory allocations: each names a job it launches or keeps, once,
        with amounts of 0 or more; and no machine gives its jobs more cores or memory than it
        has once the plan is carried out (a job's allocation spread over its GPUs like its
        GPU-proportional share; launches the plan names no allocation for at that share, which
        the two launches of a space-sharing pair split half and half)."""
        rows, cpus, memory = plan.alloc_rows, plan.alloc_cpus, plan.alloc_memory_gb
        assert rows is not None and cpus is not None and memory is not None  # (Plan checks they come together)
        if not len(rows):
            return
        world = self.world
        cols = world.jobs.writable
        if rows.min() < 0 or rows.max() >= len(world.jobs):
            raise PlanError("plan gives CPU and memory to a job row that does not exist")
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        if np.count_nonzero(ordered[1:] == ordered[:-1]):
            raise PlanError(f"plan gives CPU and memory to job {self._job(ordered[1:][ordered[1:] == ordered[:-1]][0])} twice")
        bad = ~(np.isfinite(cpus) & (cpus >= 0) & np.isfinite(memory) & (memory >= 0))
        if bad.any():
            i = int(bad.nonzero()[0][0])
            raise PlanError(
                f"plan gives job {self._job(rows[i])} {cpus[i]:g} CPU cores and {memory[i]:g} GB of memory "
                "(each must be a finite number, 0 or more)"
            )
        named_ok = isin_rows(rows, plan.launch_rows) | isin_rows(rows, plan.keep) | isin_rows(rows, plan.resize_rows)
        if not named_ok.all():
            raise PlanError(
                f"plan gives CPU and memory to job {self._job(rows[~named_ok][0])}, which it neither launches, keeps nor resizes"
            )
        cluster = world.cluster
        share_cpu, share_memory = world.throughput.gpu_shares()
        per_cpu, per_memory = np.zeros(cluster.n_gpus), np.zeros(cluster.n_gpus)
        named_cpu, named_memory = cpus[order], memory[order]

        def named(job_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            pos = np.minimum(np.searchsorted(ordered, job_rows), len(ordered) - 1)
            return ordered[pos] == job_rows, named_cpu[pos], named_memory[pos]

        # Each GPU's part of its job's allocation (`share_weights`, as the allocators spread it),
        # so that a job on machines of different shapes gives each no more than its room allows.
        # Resized jobs count on their new GPUs (below, as launches), not on those they give up.
        leaving = np.concatenate((suspend, plan.resize_rows)) if len(plan.resize_rows) else suspend
        kept_gpus, kept_owner = [], []
        for holder in (world.holder, world.co_holder):  # jobs that keep their GPUs
            if holder is None:
                continue
            on = ((holder >= 0) & ~isin_rows(holder, leaving)).nonzero()[0]
            kept_gpus.append(on)
            kept_owner.append(holder[on])
        if kept_gpus:
            on, h = np.concatenate(kept_gpus), np.concatenate(kept_owner)
            w_cpu, w_memory = _per_gpu_weights(h, share_cpu[on], share_memory[on])
            hit, c, m = named(h)
            np.add.at(per_cpu, on, np.where(hit, c, cols["cpus_held"][h]) * w_cpu)
            np.add.at(per_memory, on, np.where(hit, m, cols["memory_held_gb"][h]) * w_memory)
        # Launches and resizes take new GPUs: what the plan names, else their GPUs' share (half
        # of it each for a space-sharing pair: runtime/allocation.py `proportional_resources`).
        paired = plan.launch_partner >= 0 if plan.launch_partner is not None else np.zeros(len(plan.launch_rows), bool)
        for job_rows, counts, gpus, halved in (
            (plan.launch_rows, plan.launch_counts, plan.launch_gpus, paired),
            (plan.resize_rows, plan.resize_counts, plan.resize_gpus, np.zeros(len(plan.resize_rows), bool)),
        ):
            if len(gpus):
                owner = job_rows.repeat(counts)
                w_cpu, w_memory = _per_gpu_weights(owner, share_cpu[gpus], share_memory[gpus])
                default_cpu, default_memory = shared_halves((share_cpu[gpus], share_memory[gpus]), halved.repeat(counts))
                hit, c, m = named(job_rows)
                hit, c, m = hit.repeat(counts), c.repeat(counts), m.repeat(counts)
                np.add.at(per_cpu, gpus, np.where(hit, c * w_cpu, default_cpu))
                np.add.at(per_memory, gpus, np.where(hit, m * w_memory, default_memory))
        gpus, counts = plan.launch_gpus, plan.launch_counts
        for what, per_gpu, capacity in (
            ("CPU cores", per_cpu, cluster.node_cpus),
            ("GB of memory", per_memory, cluster.node_memory_gb),
        ):
            used = np.bincount(cluster.gpu_node, weights=per_gpu, minlength=cluster.n_nodes)
            over = used > np.asarray(capacity, dtype=np.float64) * (1 + 1e-9) + 1e-9
            if over.any():
                node = int(over.nonzero()[0][0])
                on_node = cluster.gpu_node == node
                jobs = np.unique(
                    np.concatenate([h[on_node][h[on_node] >= 0] for h in (world.holder, world.co_holder) if h is not None])
                )
                jobs = np.union1d(jobs[~isin_rows(jobs, leaving)], plan.launch_rows.repeat(counts)[on_node[gpus]])
                jobs = np.union1d(jobs, plan.resize_rows.repeat(plan.resize_counts)[on_node[plan.resize_gpus]])
                names = ", ".join(str(self._job(r)) for r in jobs[:5].tolist())
                raise PlanError(
                    f"plan gives the jobs on machine {node} ({names}) {used[node]:g} {what}, more than its {capacity[node]:g}"
                )

    def _resizes_named_once(self, plan: Plan, keep: np.ndarray, suspend: np.ndarray) -> None:
        """A resize of a job that is not running, or of one the plan also keeps or suspends."""
        rows = plan.resize_rows
        if rows.min() < 0 or rows.max() >= len(self.world.jobs):
            raise PlanError("plan resizes a job row that does not exist")
        status = self.world.jobs.writable["status"][rows]
        if (status != RUNNING).any():
            bad = rows[status != RUNNING][0]
            what = "has finished" if status[status != RUNNING][0] == FINISHED else "is waiting (launch it instead)"
            raise PlanError(f"plan resizes job {self._job(bad)}, which is not running: it {what}")
        twice = rows[isin_rows(rows, np.sort(np.concatenate((keep, suspend))))]
        if len(twice):
            raise PlanError(f"plan resizes job {self._job(twice[0])} and also keeps or suspends it")
        ordered = np.sort(rows)
        if np.count_nonzero(ordered[1:] == ordered[:-1]):
            raise PlanError(f"plan resizes job {self._job(ordered[1:][ordered[1:] == ordered[:-1]][0])} twice")

    def _check_resizes(self, plan: Plan, suspend: np.ndarray) -> None:
        """Resizes name running jobs (the accounting above saw to that) and give each at least
        one existing, online GPU that is free, its own, or given up in this plan, within the
        job's limits (`max_gpus`, `max_batch_size` columns, where the job has them)."""
        world, cols = self.world, self.world.jobs.writable
        rows, gpus, counts = plan.resize_rows, plan.resize_gpus, plan.resize_counts
        if counts[counts.argmin()] < 1:
            raise PlanError(f"plan resizes job {self._job(rows[counts < 1][0])} to no GPU")
        n_gpus = world.cluster.n_gpus
        if _largest(gpus.view(np.uint64)) >= n_gpus:
            raise PlanError(f"plan resizes onto GPU {gpus[(gpus < 0) | (gpus >= n_gpus)][0]}, which does not exist")
        owner = rows.repeat(counts)
        per_gpu = np.bincount(gpus, minlength=n_gpus)
        if _largest(per_gpu) > 1:
            gpu = int(np.argmax(per_gpu))
            raise PlanError(
                f"plan resizes job {self._job(owner[gpus == gpu][-1])} onto GPU {gpu}, which it gives another job too"
            )
        if not world.all_online and not world.online[gpus].all():
            off = ~world.online[gpus]
            raise PlanError(f"plan resizes job {self._job(owner[off][0])} onto GPU {gpus[off][0]}, which is offline")
        for holder in (world.holder, world.co_holder):
            if holder is None:
                continue
            holders = holder[gpus]
            # Free, the job's own, or a GPU that a suspended or another resized job gives up.
            ok = (holders < 0) | (holders == owner) | isin_rows(holders, suspend) | isin_rows(holders, rows)
            if np.count_nonzero(ok) < len(ok):
                raise PlanError(
                    f"plan resizes job {self._job(owner[~ok][0])} onto GPU {gpus[~ok][0]}, "
                    f"which job {self._job(holders[~ok][0])} holds (busy)"
                )
        if "max_gpus" in cols:
            limit = cols["max_gpus"][rows].astype(np.float64)
            over = counts > np.where(np.isnan(limit) | (limit <= 0), np.inf, limit)
            if over.any():
                i = int(over.nonzero()[0][0])
                raise PlanError(f"plan resizes job {self._job(rows[i])} to {counts[i]} GPUs, past its limit of {int(limit[i])}")
        if plan.resize_batch is not None:
            batch = plan.resize_batch
            if (batch < 0).any():
                raise PlanError(f"plan resizes job {self._job(rows[batch < 0][0])} to a negative batch size")
            if "max_batch_size" in cols:
                limit = cols["max_batch_size"][rows].astype(np.float64)
                over = batch > np.where(np.isnan(limit) | (limit <= 0), np.inf, limit)
                if over.any():
                    i = int(over.nonzero()[0][0])
                    raise PlanError(
                        f"plan resizes job {self._job(rows[i])} to batch size {batch[i]}, past its limit of {int(limit[i])}"
                    )
            small = (batch > 0) & (batch < counts)
            if small.any():
                i = int(small.nonzero()[0][0])
                raise PlanError(
                    f"plan resizes job {self._job(rows[i])} to batch size {batch[i]} on {counts[i]} GPUs (under one sample per GPU)"
                )

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
                raise PlanError(f"plan's {name} list names a job row that does not exist")
            not_running = rows[self.world.jobs.writable["status"][rows] != RUNNING] if len(rows) else rows
            if len(not_running):
                raise PlanError(f"plan asks to {name} job {self._job(not_running[0])}, which is not running")
        missing = without(self.world.running_rows, np.concatenate([keep, suspend, resized]))
        if len(missing):
            raise PlanError(f"running job {self._job(missing[0])} is neither kept nor suspended (nor resized)")
        raise PlanError("plan keeps or suspends a job twice")


def _check_complete(check: PlanCheck, complete: np.ndarray) -> np.ndarray:
    """Checks a plan's completions; returns those of running jobs."""
    jobs = check.world.jobs
    if complete.min() < 0 or complete.max() >= len(jobs):
        raise PlanError("plan completes a job row that does not exist")
    ordered = np.sort(complete)
    if (ordered[1:] == ordered[:-1]).any():
        raise PlanError(f"plan completes job {check._job(ordered[1:][ordered[1:] == ordered[:-1]][0])} twice")
    status = jobs.writable["status"][complete]
    if (status == FINISHED).any():
        raise PlanError(f"plan completes job {check._job(complete[status == FINISHED][0])}, which has finished")
    return complete[status == RUNNING]
