"""Sinks: what a run measures and reports."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np
import polars as pl

from roundhouse.runtime.element import Element, In, element, job_ids
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Events
from roundhouse.runtime.values import IdRange, number
from roundhouse.traces.jobs import FINISHED

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


JOB_COLUMNS = (
    "job_id",
    "arrival_s",
    "first_start_s",
    "finish_s",
    "jct_s",
    "queue_s",
    "responsiveness_s",
    "run_s",
    "gpus",
    "preemptions",
    "launches",
    "service_gpu_s",
    "model",
    "batch_size",
    "duration_s",
    "status",
    "queue_after_preemption_s",
    "comm_s",
    "machine_starts",
    "rack_starts",
    "network_starts",
)
# How a start's GPUs are spread (Dally's machine, rack and network tiers), in column order.
START_TIERS = ("machine", "rack", "network")
_TIER_COUNTERS = tuple(f"{tier}_starts" for tier in START_TIERS)
# Launches whose tiers are worked out together: a round's few launches are copied to the end of
# growing arrays, and the tiers' passes are made over many rounds' launches at once.
START_BATCH = 1 << 16
# Room the arrays of launches not yet counted start with (they double when full).
_PENDING_ROOM = 64


@element
class JobMetrics(Element):
    """Per-job outcomes and the run's summary: JCT, responsiveness, queueing, communication, makespan, utilization.

    JCT is finish minus arrival; responsiveness is first start minus arrival (Blox §4.2); queueing
    is the time a job spent without GPUs (JCT minus time holding GPUs), of which the time after
    its first start is its wait after preemptions. Exposed communication is the time a job held
    GPUs minus the time its work would have taken at its placements' compute rates (the
    communication model's share, the wait for a previous holder's checkpoint and the restore;
    Dally's "communication latency"). Each start
    is counted by the tier its GPUs span: one machine, one rack, or several racks (network). The
    summary gives the mean, median, p95 and p99 of JCT and queueing, the mean of the wait after
    preemptions and the mean, p95 and total of exposed communication over the finished jobs,
    and the mean and median of responsiveness over the jobs that started (it counts both; a
    figure over no job is null). A job unfinished when the run ends (`--until`) is listed
    without a finish and is in no JCT or queueing figure, and its finish in no makespan. With
    `track`, only jobs whose id is in the range count, and the run may stop once as many of them have finished as
    the range names ids (the steady-state window of Blox and Gavel, e.g. `track=3000..4000`): ids missing
    from the trace keep the run going until every job has finished. A range that none of the
    jobs that arrived is in adds `jobs_arrived` to the summary, how many did.

    A job that fails for good (live runs: its process kept crashing) is listed with status
    `failed` and no finish time, and counts in no JCT.

    Ports:
        events: the round's events (completions, launches, suspensions).
    Arguments:
        track: job ids to measure (half-open: 3000..4000 is 3000 to 3999); all jobs if omitted.
    Counters:
        finished: jobs finished so far (failed ones included).
        machine_starts: starts on one machine (counted a batch of launches at a time; all
            of them once the run ends).
        rack_starts: starts on one rack, several machines (as machine_starts).
        network_starts: starts across racks (as machine_starts).
        tracked_finished: tracked jobs finished so far.
        failed: jobs that failed for good so far.
        launched: launches seen so far.
        suspended: suspensions seen so far.
    Cost: O(e) over the round's events e (launches' tiers, from the GPUs each names, worked out
        for many rounds' launches at once; those of rounds carried out in passing at its next
        tick), plus O(t) over the tracked jobs t in a round whose completions wait, once all have
        arrived (event skipping asks whether they closed the window); O(J) over all jobs J once,
        at the end (the job table).
    See also: Launch
    Paper: Blox (EuroSys'24) §4.2 (JCT and responsiveness); Gavel (OSDI'20) §7.1; Dally (IEEE BigData'25)
    §IV (queueing delay, communication latency, allocations per tier).
    """

    # (The launches not yet counted are three arrays filled from the front, not a list of each
    # round's: a fork copies three arrays, whatever the rounds since the last count.)
    state = (
        "_starts",
        "_pending_rows",
        "_pending_gpus",
        "_pending_counts",
        "_pending_launches",
        "_pending_gpu_count",
        "_seen",
        "_tracked",
        "_open",
    )

    category = "sink"
    inputs = (In("events", Events, multi=True),)

    track: IdRange | None = attrs.field(default=None, validator=job_ids)

    def start(self, ctx: RoundContext) -> None:
        self.counters.update(finished=0, tracked_finished=0, failed=0, launched=0, suspended=0)
        self.counters.update({f"{tier}_starts": 0 for tier in START_TIERS})
        self._starts = np.zeros((0, len(START_TIERS)), dtype=np.int64)  # per job row, per tier
        self._pending_rows: np.ndarray  # (`_clear_pending`)
        self._pending_gpus: np.ndarray
        self._pending_counts: np.ndarray
        self._pending_launches: int  # (rows and counts used)
        self._pending_gpu_count: int  # (GPUs used)
        self._clear_pending()
        self._seen, self._tracked = 0, np.zeros(0, dtype=np.int64)  # (`_tracked_rows`)
        self._open = -1  # a tracked job not finished when last looked at (-1: none known)

    def tick(self, ctx: RoundContext, events: Events) -> None:
        counters = self.counters
        if len(events.launched):
            self._note_starts(ctx, events)
            counters["launched"] += len(events.launched)
        if len(events.suspended):
            counters["suspended"] += len(events.suspended)
        if len(events.failed):
            counters["failed"] += len(events.failed)
        if len(events.finished):
            counters["finished"] += len(events.finished)
            if self.track is not None:
                ids = ctx.jobs.column("job_id")[events.finished]
                inside = (ids >= self.track.start) & (ids < self.track.stop)
                counters["tracked_finished"] += int(np.count_nonzero(inside))
            else:
                counters["tracked_finished"] += len(events.finished)

    def _note_starts(self, ctx: RoundContext, events: Events) -> None:
        """Keep a round's launches for `_count_starts` (as the events hold them: a value sent
        on a port is not changed afterwards, as the explanation record relies on too)."""
        rows, gpus, counts = events.launched, events.launched_gpus, events.launched_counts
        if len(counts) != len(rows):  # (hand-made events: the GPUs the launched jobs hold now)
            rows, gpus, counts = held_gpus(ctx, rows)
        n, used = self._pending_launches, self._pending_gpu_count
        self._pending_rows = _filled(self._pending_rows, n, rows)
        self._pending_counts = _filled(self._pending_counts, n, counts)
        self._pending_gpus = _filled(self._pending_gpus, used, gpus)
        self._pending_launches, self._pending_gpu_count = n + len(rows), used + len(gpus)
        if self._pending_launches >= START_BATCH:
            self._count_starts(ctx)

    def _count_starts(self, ctx: RoundContext) -> None:
        """Count the pending launches' starts by the tier their GPUs span, all at once."""
        pending = self._pending_launches
        if not pending:
            return
        rows, counts = self._pending_rows[:pending], self._pending_counts[:pending]
        gpus = self._pending_gpus[: self._pending_gpu_count]
        self._clear_pending()
        n = len(ctx.jobs)
        if len(self._starts) < n:
            grown = np.zeros((max(n, 2 * len(self._starts)), len(START_TIERS)), dtype=np.int64)
            grown[: len(self._starts)] = self._starts
            self._starts = grown
        tier = np.zeros(len(rows), dtype=np.int64)
        if len(gpus) > len(rows):  # (one GPU each: every start is on one machine)
            first = counts.cumsum() - counts
            cluster = ctx.cluster
            node, rack = cluster.gpu_node[gpus], cluster.gpu_rack[gpus]
            tier[np.minimum.reduceat(node, first) != np.maximum.reduceat(node, first)] = 1
            tier[np.minimum.reduceat(rack, first) != np.maximum.reduceat(rack, first)] = 2
        # A job may start more than once in a batch: cells are counted, not assigned.
        np.add.at(self._starts.reshape(-1), rows * len(START_TIERS) + tier, 1)
        for name, k in zip(_TIER_COUNTERS, np.bincount(tier, minlength=len(START_TIERS)).tolist()):
            self.counters[name] += k

    def _clear_pending(self) -> None:
        """No launches left to count by tier: (rows, their GPUs one launch after another, counts),
        each the front of its array."""
        self._pending_rows = np.zeros(_PENDING_ROOM, dtype=np.int64)
        self._pending_gpus = np.zeros(_PENDING_ROOM, dtype=np.int64)
        self._pending_counts = np.zeros(_PENDING_ROOM, dtype=np.int64)
        self._pending_launches, self._pending_gpu_count = 0, 0

    def goal_met(self, ctx: RoundContext) -> bool:
        return self.track is not None and self.counters["tracked_finished"] >= len(self.track)

    goal = "every tracked job finished"

    quiet_after_change = True

    def quiet_until(self, ctx: RoundContext) -> float:
        return float("inf")  # it counts events only

    def completions_wait(self, ctx: RoundContext) -> bool:
        # Counted later, the same: the round whose completions finish what it tracks is ticked
        # (`goal_met_in_books`), and the run stops in it.
        return True

    def arrivals_wait(self, ctx: RoundContext) -> bool:
        return True  # (it counts the round's launches and completions at its next tick)

    def goal_met_in_books(self, ctx: RoundContext) -> bool:
        # (Read from the world's books: the counters lag behind completions that wait and
        # rounds carried out in passing.)
        if self.track is None:
            return False
        status = ctx.jobs.column("status")
        if self._open >= 0 and status[self._open] != FINISHED:  # (asked after every fold: one look, mostly)
            return False
        if len(self._tracked) + len(ctx.jobs) - self._seen < len(self.track):
            return False  # (too few rows yet to hold every tracked job: looked at once they may)
        tracked = self._tracked_rows(ctx)
        if len(tracked) < len(self.track):
            return False
        open_ = (status[tracked] != FINISHED).nonzero()[0]
        self._open = int(tracked[open_[0]]) if len(open_) else -1
        return not len(open_)

    def _tracked_rows(self, ctx: RoundContext) -> np.ndarray:
        """Rows of the tracked jobs in the job table (which only grows: each row is looked at once)."""
        assert self.track is not None
        n = len(ctx.jobs)
        if self._seen < n:
            ids = ctx.jobs.column("job_id")[self._seen : n]
            new = ((ids >= self.track.start) & (ids < self.track.stop)).nonzero()[0]
            if len(new):
                self._tracked = np.concatenate([self._tracked, new + self._seen])
            self._seen = n
        return self._tracked

    def finish(self, ctx: RoundContext) -> dict:
        self._count_starts(ctx)
        n = len(ctx.jobs)
        starts = np.zeros((n, len(START_TIERS)), dtype=np.int64)
        starts[: min(n, len(self._starts))] = self._starts[:n]
        jobs = job_table(ctx, self.track, starts)
        summary = summarize(jobs, ctx)
        if self.track is not None and not jobs.height and len(ctx.jobs):
            # (as the note at the run's end says: jobs arrived, none of them in the range)
            summary["jobs_arrived"] = len(ctx.jobs)
        return {"jobs": jobs, "summary": summary}


def _filled(kept: np.ndarray, used: int, more: np.ndarray) -> np.ndarray:
    """`kept`, whose first `used` items count, with `more` after them: the same array while it has
    room, else one twice as long or more (zeros after the items: a snapshot of it is the same
    bytes however it grew)."""
    end = used + len(more)
    if end > len(kept):
        grown = np.zeros(max(end, 2 * len(kept)), dtype=np.int64)
        grown[:used] = kept[:used]
        kept = grown
    kept[used:end] = more
    return kept


def held_gpus(ctx: RoundContext, launched: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The launched jobs (in row order), the GPUs each holds (grouped by job) and how many."""
    holder = ctx.holder
    gpus = np.flatnonzero(isin_rows(holder, launched))
    rows = holder[gpus]
    if ctx.co_holder is not None:
        co = np.flatnonzero(isin_rows(ctx.co_holder, launched))
        gpus, rows = np.concatenate([gpus, co]), np.concatenate([rows, ctx.co_holder[co]])
    order = np.argsort(rows, kind="stable")
    rows, gpus = rows[order], gpus[order]
    leads = np.ones(len(rows), dtype=bool)
    np.not_equal(rows[1:], rows[:-1], out=leads[1:])
    first = np.flatnonzero(leads)
    return rows[first], gpus, np.diff(np.append(first, len(rows)))


def job_table(ctx: RoundContext, track: IdRange | None, starts: np.ndarray | None = None) -> pl.DataFrame:
    """One row per (tracked) job the run has seen, finished or not; `starts` (job rows x
    START_TIERS) counts each job's starts by the tier they spanned."""
    table = ctx.jobs
    ids = table.column("job_id")
    rows: np.ndarray | slice = slice(None)  # (every job: the columns themselves, no copies)
    if track is not None:
        rows = np.flatnonzero((ids >= track.start) & (ids < track.stop))
    col = lambda name: table.column(name)[rows]  # noqa: E731
    arrival, first, finish = col("arrival_s"), col("first_start_s"), col("finish_s")
    failed = col("failed")
    finish = np.where(failed, np.nan, finish)
    jct = finish - arrival
    queue = jct - col("run_s")
    responsiveness = first - arrival
    if starts is None:
        starts = np.zeros((len(ids), len(START_TIERS)), dtype=np.int64)
    starts = starts[rows]
    from roundhouse.traces.jobs import STATUS_NAMES

    # Column by column, from the arrays (a million jobs: no Python object per cell). NaN marks
    # "not yet" (not started, not finished): those cells are empty.
    floats = lambda name, values: pl.Series(name, values, nan_to_null=True)  # noqa: E731
    status = pl.Series("status", np.where(failed, len(STATUS_NAMES), col("status")))
    frame = pl.DataFrame(
        [
            pl.Series("job_id", col("job_id")),
            floats("arrival_s", arrival),
            floats("first_start_s", first),
            floats("finish_s", finish),
            floats("jct_s", jct),
            floats("queue_s", queue),
            floats("responsiveness_s", responsiveness),
            floats("run_s", col("run_s")),
            pl.Series("gpus", col("gpus")),
            pl.Series("preemptions", col("preemptions")),
            pl.Series("launches", col("launches")),
            floats("service_gpu_s", col("service")),
            pl.Series("model", _model_names(ctx, col).tolist(), dtype=pl.String),  # (from numpy, None first fails)
            pl.Series("batch_size", col("batch_size")),
            floats("duration_s", col("duration_s")),
            status.replace_strict(list(range(len(STATUS_NAMES) + 1)), [*STATUS_NAMES, "failed"], return_dtype=pl.String),
            # Waiting after the first start: between each preemption and the next start.
            floats("queue_after_preemption_s", _waited_after_preemption(queue, responsiveness, jct, col("preemptions"))),
            floats("comm_s", _exposed_communication(ctx, col("run_s"), col("compute_s"))),
            *(pl.Series(f"{tier}_starts", starts[:, k]) for k, tier in enumerate(START_TIERS)),
        ]
    )
    job_ids = frame["job_id"]
    return frame if job_ids.is_sorted() else frame.sort("job_id")


# Differences of equal sums that come out within this share of their terms are rounding: 0.
_ROUNDING = 1e-9


def _waited_after_preemption(
    queue: np.ndarray, responsiveness: np.ndarray, jct: np.ndarray, preemptions: np.ndarray
) -> np.ndarray:
    """The queueing after the first start: 0 for a job never preempted, and the rounding of
    the difference of two sums (queueing and first wait) taken as 0."""
    waited = queue - responsiveness
    rounding = np.abs(waited) <= _ROUNDING * np.abs(jct)
    return np.where((preemptions == 0) | rounding, np.where(np.isnan(waited), np.nan, 0.0), np.maximum(waited, 0.0))


def _exposed_communication(ctx: RoundContext, run_s: np.ndarray, compute_s: np.ndarray) -> np.ndarray:
    """Time run beyond time computing: 0 on a cluster without network tiers (no communication
    model), and the rounding of the difference of two sums taken as 0."""
    if getattr(ctx.cluster, "tiers", None) is None:
        return np.zeros(len(run_s))
    comm = run_s - compute_s
    return np.where(comm <= _ROUNDING * np.abs(run_s), 0.0, comm)


def _model_names(ctx: RoundContext, col) -> np.ndarray:
    """Each job's model as the throughput profile names it; where that profile does not know it,
    as the communication or the CPU and memory profile does (Dally's and Synergy's models are
    mostly not in the throughput profile), else none. (The job table keeps no other spelling of
    the trace's name.)"""
    names = col("model")
    missing = np.array([m is None for m in names.tolist()], dtype=bool)
    if not missing.any():
        return names
    names = names.copy()
    table = ctx.throughput.communication
    if table is not None and ctx.jobs.has_column("comm_model"):
        rows = col("comm_model")
        named = missing & (rows >= 0)
        if named.any():
            names[named] = np.array(table.models, dtype=object)[rows[named]]
            missing &= ~named
    rows = col("resource_model") if ctx.jobs.has_column("resource_model") else np.full(len(names), -1)
    named = missing & (rows >= 0)
    if named.any():
        names[named] = np.array(ctx.throughput.resources.models, dtype=object)[rows[named]]
    return names


def summarize(jobs: pl.DataFrame, ctx: RoundContext) -> dict:
    # (Only the columns read below: a million jobs' whole table is not copied.)
    finished = jobs.select("finish_s", "jct_s", "queue_s", "comm_s", "queue_after_preemption_s").filter(
        pl.col("finish_s").is_not_null()
    )
    started = jobs.select("first_start_s", "responsiveness_s").filter(pl.col("first_start_s").is_not_null())
    jct = finished["jct_s"].to_numpy()
    responsiveness = started["responsiveness_s"].to_numpy()
    queue = finished["queue_s"].to_numpy()
    comm = finished["comm_s"].to_numpy()
    stat = lambda f, a: float(f(a)) if len(a) else None  # noqa: E731
    span = ctx.now - (ctx.first_arrival_s if np.isfinite(ctx.first_arrival_s) else 0.0)
    makespan = number(finished["finish_s"].max()) - number(jobs["arrival_s"].min()) if finished.height else None
    return {
        "jobs_tracked": jobs.height,
        "jobs_finished": finished.height,
        "jobs_started": started.height,
        "jobs_failed": int((jobs["status"] == "failed").sum()),
        "avg_jct_s": stat(np.mean, jct),
        "median_jct_s": stat(np.median, jct),
        "p95_jct_s": stat(lambda a: np.percentile(a, 95), jct),
        "p99_jct_s": stat(lambda a: np.percentile(a, 99), jct),
        "avg_responsiveness_s": stat(np.mean, responsiveness),
        "median_responsiveness_s": stat(np.median, responsiveness),
        "avg_queue_s": stat(np.mean, queue),
        "makespan_s": makespan,
        "utilization": float(ctx.busy_gpu_s / (ctx.cluster.n_gpus * span)) if span > 0 else None,
        **resource_utilization(ctx, span),
        "preemptions": int(jobs["preemptions"].sum()),
        "end_s": float(ctx.now),
        "median_queue_s": stat(np.median, queue),
        "p95_queue_s": stat(lambda a: np.percentile(a, 95), queue),
        "p99_queue_s": stat(lambda a: np.percentile(a, 99), queue),
        # (over the finished jobs that started: one finished before it ever ran has no such wait)
        "avg_queue_after_preemption_s": stat(np.mean, finished["queue_after_preemption_s"].drop_nulls().to_numpy()),
        "avg_comm_s": stat(np.mean, comm),
        "p95_comm_s": stat(lambda a: np.percentile(a, 95), comm),
        "total_comm_s": float(comm.sum()),
        **{f"{tier}_starts": int(jobs[f"{tier}_starts"].sum()) for tier in START_TIERS},
    }


def resource_utilization(ctx: RoundContext, span: float) -> dict:
    """CPU cores and memory held with GPUs, as fractions of the cluster's over the run (as GPU
    utilization counts GPUs held): core-seconds over cores x span, likewise for memory."""
    from roundhouse.traces.jobs import resource_seconds

    cluster = ctx.cluster
    cpus, memory = float(np.sum(cluster.node_cpus)), float(np.sum(cluster.node_memory_gb))
    if span <= 0:
        return {"cpu_utilization": None, "memory_utilization": None}
    cpu_s, memory_s = resource_seconds(ctx.jobs)
    return {
        "cpu_utilization": cpu_s / (cpus * span) if cpus > 0 else None,
        "memory_utilization": memory_s / (memory * span) if memory > 0 else None,
    }


@element
class LinkBandwidth(Element):
    """The intra-node link bandwidth each multi-GPU job sees on the GPUs it is launched on.

    For every launch of a job on two or more GPUs of one node whose topology is known (see
    runtime/topologies.py), records the mean bandwidth of the links between its GPUs (for two
    GPUs, their link). Reports each such launch and the average over them.

    Ports:
        events: the round's events (launches).
    Arguments:
        none
    Counters:
        launches: single-node multi-GPU launches measured so far.
    Cost: O(l k^2) over the round's launches l of k GPUs each (the links among a launch's
        GPUs); running jobs that were not launched cost nothing.
    See also: BandwidthAwareIntraNode, RandomIntraNode, JobMetrics
    Paper: Blox (EuroSys'24) §5.3, Table 4 (average bandwidth observed by single-node multi-GPU jobs).
    """

    state = ("_seen",)
    # On nodes of no known topology the links are unknown: `check` and `run` warn of it
    # (runtime/cluster_warnings.py), saying this.
    without_topology: ClassVar[str] = "it will measure no launch"

    category = "sink"
    inputs = (In("events", Events, multi=True),)

    def start(self, ctx: RoundContext) -> None:
        self._seen: list[tuple[int, int, float, float]] = []
        self.counters["launches"] = 0

    def tick(self, ctx: RoundContext, events: Events) -> None:
        if not len(events.launched):
            return
        from roundhouse.runtime.topologies import mean_link_gbps

        cluster = ctx.cluster
        gpus = ctx.jobs.column("held")[events.launched]
        for row in events.launched[gpus >= 2].tolist():
            ids = ctx.gpus_of(row)
            nodes = cluster.gpu_node[ids]
            if (nodes != nodes[0]).any():
                continue
            gbps = mean_link_gbps(cluster.node_link_gbps[nodes[0]], cluster.gpu_local[ids])
            if np.isnan(gbps):
                continue
            self._seen.append((int(ctx.jobs.column("job_id")[row]), len(ids), gbps, ctx.now))
            self.counters["launches"] += 1

    def finish(self, ctx: RoundContext) -> dict:
        frame = pl.DataFrame(
            self._seen, schema={"job_id": pl.Int64, "gpus": pl.Int64, "gbps": pl.Float64, "time_s": pl.Float64}, orient="row"
        )
        by_size = {f"avg_gbps_{g}gpu": float(v) for g, v in frame.group_by("gpus").agg(pl.col("gbps").mean()).sort("gpus").rows()}
        return {
            "links": frame,
            "bandwidth": {
                "launches": frame.height,
                "avg_gbps": number(frame["gbps"].mean()) if frame.height else None,
                **by_size,
            },
        }
