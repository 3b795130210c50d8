"""Sinks for policy objectives: cost, SLO violations, finish-time fairness, effective throughput.

JobMetrics (sinks.py) reports completion times; the sinks here measure what the optimisation
policies (Gavel's cost, SLO, finish-time-fairness and hierarchical policies) aim at. Each watches
the world round by round (the running jobs, their GPU types and progress) and reports per-job
tables and a summary at the end of the run.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs
import numpy as np
import polars as pl

from roundhouse.errors import SchedError
from roundhouse.runtime.element import Element, In, element, element_family, job_ids, rounds_add_exactly
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Events
from roundhouse.runtime.values import IdRange, non_empty, number
from roundhouse.traces.jobs import FINISHED, LIVE_COLUMNS, SPEC_COLUMNS

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


# Hourly on-demand prices per GPU on Google Cloud in 2020, as the Gavel notes assume (the paper
# gives none): an assumption, not a measurement. Override with `prices=[...]`.
GCP_2020_PRICES = ["V100:2.48", "P100:1.46", "K80:0.45"]


def parse_prices(values) -> dict[str, float]:
    """`["V100:2.48", ...]` as {"V100": 2.48, ...}; ValueError naming the bad entry. A price is
    a finite number of dollars, 0 or more; one written with a nonzero digit that reads as 0
    (`1e-400`, below the smallest float) is refused, not taken as free. GPU types match
    case-insensitively, as a cluster's do, so two entries for one type (in any spelling) are an
    error, not one silently kept."""
    out: dict[str, float] = {}
    given: dict[str, str] = {}  # lower-case type -> the entry that priced it
    for item in values:
        name, sep, number = str(item).partition(":")
        try:
            price = float(number)
        except ValueError:
            price = None
        if not sep or not name.strip() or price is None or not (math.isfinite(price) and price >= 0):
            raise ValueError(
                f'each price must be written "TYPE:DOLLARS_PER_GPU_HOUR" with a finite price of 0 or more '
                f'(e.g. "V100:2.48"), got {item!r}'
            )
        if price == 0 and any(c in "123456789" for c in number.strip().lower().partition("e")[0]):
            raise ValueError(f"{item!r} is too small to tell from 0 (write 0 for a free GPU type)")
        key = name.strip().lower()
        if key in given:
            raise ValueError(f"GPU type {name.strip()!r} is priced twice: {given[key]!r} and {item!r}")
        given[key] = str(item)
        out[name.strip()] = price
    return out


# The prices CostMetrics counts dollars at: 0 (free), or a positive price within these bounds,
# in dollars per GPU-hour. Far beyond any GPU's price either way: at the most, a million GPUs
# would have to be held for over 1e280 hours before the sum overflowed to inf; at the least, the
# price per GPU-second stays a normal float (a far smaller one would lose its digits, or read as 0).
COST_PRICE_RANGE = (1e-12, 1e12)


def cost_prices(instance, attribute, value) -> None:
    """CostMetrics' `prices` argument: parse_prices's form, each price 0 or within
    COST_PRICE_RANGE (the solvers, which see only the prices' ratios, take any scale)."""
    low, high = COST_PRICE_RANGE
    for name, price in parse_prices(value).items():
        if price and not low <= price <= high:
            raise ValueError(
                f"{name}'s price {price:g} is not a price in dollars per GPU-hour: give 0 (free) or a price "
                f"from {low:g} to {high:g}"
            )


def type_prices(prices: dict[str, float], gpu_types, who: str) -> np.ndarray:
    """The price of each of `gpu_types` (a cluster's) from `parse_prices`'s dict, matched
    case-insensitively; SchedError naming the types without one."""
    by_name = {name.lower(): price for name, price in prices.items()}
    missing = [t for t in gpu_types if t.lower() not in by_name]
    if missing:
        raise SchedError(f'{who}: no price for GPU type {", ".join(missing)} (give prices=["{missing[0]}:..."])')
    return np.array([by_name[t.lower()] for t in gpu_types], dtype=np.float64)


def refuse_unknown_types(prices: dict[str, float], gpu_types, who: str) -> None:
    """SchedError naming the GPU types `prices` (from `parse_prices`) names that the cluster's
    `gpu_types` lack (matched case-insensitively): a misspelt or wrong type would otherwise go
    unseen. Only for prices a user gave: the default ones price Gavel's three types for any of
    its clusters."""
    have = {name.lower() for name in gpu_types}
    extra = [t for t in prices if t.lower() not in have]
    if extra:
        raise SchedError(
            f"{who}: prices name GPU type {', '.join(extra)}, which the cluster does not have (its types: {', '.join(gpu_types)})"
        )


def slo_deadlines(ctx: RoundContext, rows: np.ndarray) -> np.ndarray:
    """Each job's deadline in seconds: arrival + slo_s; else arrival + slo_factor times its
    isolated duration on the reference type (Gavel's SLO factor, from a Gavel trace); else inf."""
    table = ctx.jobs
    arrival = table.column("arrival_s")[rows]
    slo = table.column("slo_s")[rows]
    deadline = np.where(np.isfinite(slo), arrival + slo, np.inf)
    if table.has_column("slo_factor"):
        factor = table.column("slo_factor")[rows].astype(np.float64)
        isolated = table.column("work")[rows] / table.column("reference_rate")[rows]
        deadline = np.where(np.isfinite(deadline), deadline, np.where(np.isfinite(factor), arrival + factor * isolated, np.inf))
    return deadline


def _grown(a: np.ndarray, n: int) -> np.ndarray:
    """`a` with at least `n` rows, new rows zero."""
    if len(a) >= n:
        return a
    out = np.zeros((n,) + a.shape[1:], dtype=a.dtype)
    out[: len(a)] = a
    return out


def known_at_arrival(instance, attribute, value) -> None:
    """A job column to group by: one known when the job arrives (its trace's), not one the
    runtime writes as the job runs (`finish_s`, `status`, ...), nor `loss`, which changes with
    its progress: read each round, such a value would move a job from group to group."""
    if value in LIVE_COLUMNS or value == "loss":
        raise ValueError(
            f"names {value!r}, a column that changes as the job runs; give one known at a job's arrival: "
            f"{', '.join(SPEC_COLUMNS)}, or another column of its trace (such as entity)"
        )


def _tracked(ctx: RoundContext, track: IdRange | None) -> np.ndarray:
    ids = ctx.jobs.column("job_id")
    rows = np.arange(len(ids))
    return rows if track is None else rows[(ids >= track.start) & (ids < track.stop)]


@element_family
class _ObjectiveSink(Element):
    """A sink that measures an objective from the round's events and the job table.

    Ports:
        events: the round's events.
    """

    category = "sink"
    inputs = (In("events", Events, multi=True),)


@element_family
class _RoundWatcher(_ObjectiveSink):
    """Remembers which jobs ran in the round just begun (type, GPU share) and, one tick later,
    how much GPU time and work they got in it."""

    def start(self, ctx: RoundContext) -> None:
        self._rows = np.zeros(0, dtype=np.int64)
        self._type = np.zeros(0, dtype=np.int64)
        self._partner = np.zeros(0, dtype=np.int64)
        self._service = np.zeros(0)
        self._done = np.zeros(0)

    def _last_round(self, ctx: RoundContext):
        """(rows, GPU type, GPU-seconds charged, iterations) of the round just ended."""
        rows = self._rows
        service = ctx.jobs.column("service")[rows] - self._service
        done = ctx.jobs.column("done")[rows] - self._done
        return rows, self._type, self._gpu_seconds(service), done

    def _passed_rounds(self, step: np.ndarray, rounds: int) -> list[np.ndarray]:
        """GPU-seconds charged, round by round, for the `rounds` whole rounds since the last tick
        that event skipping did not tick (nothing happened in them, and `rounds_add_exactly`):
        each added `step` (the GPUs held then, times the round) to the remembered jobs' service,
        as the simulator adds it, so that the differences are those their ticks would have taken."""
        service, charged = self._service, []
        for _ in range(rounds):
            after = service + step
            charged.append(self._gpu_seconds(after - service))
            service = after
        self._service = service
        return charged

    def _remember(self, ctx: RoundContext) -> None:
        rows = np.array(ctx.running_rows)
        self._rows = rows
        self._type = ctx.jobs.column("placed_type")[rows]
        self._partner = ctx.jobs.column("partner")[rows]
        self._service = ctx.jobs.column("service")[rows].copy()
        self._done = ctx.jobs.column("done")[rows].copy()

    def _gpu_seconds(self, service: np.ndarray) -> np.ndarray:
        """GPU-seconds each job of the last round is charged: its own, or, on a shared GPU, half
        of the pair's (the GPUs were held as long as either job held them)."""
        paired = self._partner >= 0
        if not paired.any():
            return service
        mate = np.searchsorted(self._rows, self._partner[paired])  # running rows are sorted
        out = service.copy()
        out[paired] = 0.5 * np.maximum(service[paired], service[mate])
        return out


@element
class CostMetrics(_RoundWatcher):
    """Total cost of the run: GPU-hours held on each type at that type's hourly price.

    A job pays for the GPUs it holds (restore time included) at its type's price per GPU-hour;
    two jobs sharing GPUs split them (paid once, for as long as either holds them). Reports
    cost per job and the total, by GPU type.

    Arguments:
        prices: hourly price per GPU of each type, as "TYPE:DOLLARS": 0 (free) or from 1e-12 to 1e12 dollars (default: 2020 GCP on-demand, an assumption).
        track: job ids to report (half-open range); all jobs if omitted (the total counts all jobs).
    Counters:
        cost_usd: dollars spent so far.
    Cost: O(r) over running jobs r (the GPU-hours each holds this round). Event skipping passes
        the rounds in which nothing happens (rounds of whole seconds); each is charged at the
        next tick, O(r) apiece, with the same additions as its own tick.
    See also: MinCost, MinCostSLO, SloMetrics
    Paper: Gavel (OSDI'20) §4.2 (cost policies) and §7.3 (cost experiment).
    """

    state = ("_cost", "_done", "_gpu_s", "_partner", "_rows", "_service", "_step", "_ticked", "_type")
    fixed = ("_price",)

    prices: list[str] = attrs.field(factory=lambda: list(GCP_2020_PRICES), validator=cost_prices)
    track: IdRange | None = attrs.field(default=None, validator=job_ids)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        types = ctx.cluster.gpu_types
        who, prices = f"{self.name} (CostMetrics)", parse_prices(self.prices)
        if self.prices != GCP_2020_PRICES:
            refuse_unknown_types(prices, types, who)
        per_hour = type_prices(prices, types, who)
        self._price = per_hour / 3600.0  # dollars per GPU-second
        self._cost = np.zeros(1024)
        self._gpu_s = np.zeros((1024, len(types)))
        self._ticked: int | None = None  # the round asked about event skipping, until the next tick
        self._step = np.zeros(0)  # what each remembered job's service gains in a round passed
        self.counters["cost_usd"] = 0.0

    def tick(self, ctx: RoundContext, events: Events) -> None:
        if self._ticked is not None and len(self._rows):
            for gpu_s in self._passed_rounds(self._step, ctx.round_index - self._ticked - 1):
                self._charge(ctx, gpu_s)
        self._ticked = None
        rows, _, gpu_s, _ = self._last_round(ctx)
        if len(rows):
            self._charge(ctx, gpu_s)
        self._remember(ctx)

    def _charge(self, ctx: RoundContext, gpu_s: np.ndarray) -> None:
        """The remembered jobs pay for a round's GPU-seconds."""
        rows, gpu_type = self._rows, self._type
        n = len(ctx.jobs)
        if n > len(self._cost):
            self._cost, self._gpu_s = _grown(self._cost, 2 * n), _grown(self._gpu_s, 2 * n)
        spent = gpu_s * self._price[gpu_type]
        np.add.at(self._cost, rows, spent)
        np.add.at(self._gpu_s, (rows, gpu_type), gpu_s)
        self.counters["cost_usd"] += float(spent.sum())

    quiet_after_change = True

    def quiet_until(self, ctx: RoundContext) -> float | None:
        # Until an event, when the rounds passed meanwhile can be replayed at the next tick.
        if not rounds_add_exactly(ctx):
            return None
        self._ticked = ctx.round_index
        self._step = ctx.jobs.column("held")[self._rows] * float(ctx.round_s)  # (as the simulator's round adds)
        return math.inf

    def finish(self, ctx: RoundContext) -> dict:
        rows = _tracked(ctx, self.track)
        n = len(ctx.jobs)
        self._cost, self._gpu_s = _grown(self._cost, n), _grown(self._gpu_s, n)
        cost, gpu_s = self._cost[:n], self._gpu_s[:n]
        types = ctx.cluster.gpu_types
        jobs = pl.DataFrame(
            {"job_id": ctx.jobs.column("job_id")[rows], "cost_usd": cost[rows]}
            | {f"{t}_gpu_h": gpu_s[rows, i] / 3600.0 for i, t in enumerate(types)}
        ).sort("job_id")
        summary = {
            "total_cost_usd": float(cost.sum()),
            "tracked_cost_usd": float(cost[rows].sum()),
        } | {f"{t}_cost_usd": float((gpu_s[:, i] * self._price[i]).sum()) for i, t in enumerate(types)}
        return {"costs": jobs, "cost": summary}


@element
class SloMetrics(_ObjectiveSink):
    """SLO violations: jobs that finished after their deadline, or had not finished when it passed.

    A job's deadline is its arrival plus its `slo_s`, or plus `slo_factor` times its isolated
    duration on the reference type (Gavel's traces); jobs without either have no SLO. A job
    still unfinished when the run ends (`--until`, a time limit) violates its SLO only if its
    deadline has passed by then; one whose deadline is still ahead is reported as open (status
    `open` in the per-job table, counted in `open` of the summary), neither met nor violated.
    A job that fails for good (live runs: its process kept crashing) never finishes: it
    violates its SLO (status `failed`, with no finish time). `violation_pct` is violations
    over all jobs with an SLO, open ones included.

    Arguments:
        track: job ids to report (half-open range); all jobs if omitted.
    Counters:
        violations: jobs that finished after their deadline, or failed, so far; at the end of the run, plus the unfinished jobs whose deadline had passed (all jobs: the summary's count when track is omitted).
    Cost: O(f) over jobs f finishing this round; rounds without completions change nothing
        (event skipping passes them).
    See also: MinCostSLO, CostMetrics, JobMetrics
    Paper: Gavel (OSDI'20) §4.2 (SLOs) and §7.3 (cost experiment: SLO violations).
    """

    state = ()

    track: IdRange | None = attrs.field(default=None, validator=job_ids)

    def start(self, ctx: RoundContext) -> None:
        self.counters["violations"] = 0

    def tick(self, ctx: RoundContext, events: Events) -> None:
        if len(events.finished):
            deadline = slo_deadlines(ctx, events.finished)
            late = events.finished_at > deadline + 1e-9
            if len(events.failed):  # (they leave the system unfinished: no deadline is met)
                late |= np.isfinite(deadline) & isin_rows(events.finished, events.failed)
            self.counters["violations"] += int(late.sum())

    quiet_after_change = True

    def quiet_until(self, ctx: RoundContext) -> float:
        return math.inf  # it counts completions only

    def _outcomes(self, ctx: RoundContext, rows: np.ndarray):
        """(deadline, finish time, late, open, failed) of each job: late if it finished after
        its deadline, failed for good, or is unfinished with its deadline passed; open if
        unfinished before it. A failed job has no finish time (NaN)."""
        deadline = slo_deadlines(ctx, rows)
        failed = ctx.jobs.column("failed")[rows]
        finish = np.where(failed, np.nan, ctx.jobs.column("finish_s")[rows])
        has = np.isfinite(deadline)
        finished = np.isfinite(finish)
        late = has & (failed | np.where(finished, finish > deadline + 1e-9, deadline <= ctx.now))
        return deadline, finish, late, has & ~finished & ~late, failed

    def finish(self, ctx: RoundContext) -> dict:
        # The counter, over every job, as the summary counts them (at the end, the unfinished
        # jobs whose deadline has passed are late too).
        self.counters["violations"] = int(self._outcomes(ctx, np.arange(len(ctx.jobs)))[2].sum())
        rows = _tracked(ctx, self.track)
        deadline, finish, late, still_open, failed = self._outcomes(ctx, rows)
        has = np.isfinite(deadline)
        status = np.where(failed, "failed", np.where(late, "violated", np.where(still_open, "open", "met")))
        jobs = (
            pl.DataFrame(
                {
                    "job_id": ctx.jobs.column("job_id")[rows][has],
                    "deadline_s": deadline[has],
                    "finish_s": finish[has],
                    "violated": late[has],
                    "status": status[has],
                }
            )
            .with_columns(pl.col("finish_s").fill_nan(None))
            .sort("job_id")
        )
        with_slo = int(has.sum())
        return {
            "deadlines": jobs,
            "slo": {
                "jobs_with_slo": with_slo,
                "violations": int(late.sum()),
                "open": int(still_open.sum()),
                "violation_pct": float(100.0 * late.sum() / with_slo) if with_slo else None,
            },
        }


@element
class FinishTimeFairnessMetrics(_ObjectiveSink):
    """Finish-time fairness rho per job: its completion time over the time it would take alone
    on a 1/n share of the cluster.

    n is the average number of jobs in the system over the job's lifetime (arrival to finish),
    the number counted as the scheduler sees it, at each round's boundary: a job from the
    boundary at which it is first seen (its arrival's, or the next) to the one at which its
    completion is (as Themis counts it); at least 1. The 1/n share gives the job each type's
    GPUs in proportion (at most its own GPU count), at its profiled throughputs, as MinMaxRho's
    X_iso does: a type with fewer GPUs than the job asks for adds nothing (the job cannot run
    there). The work is what the job did: all it declared, or less for a job ended early (a
    plan's `complete`, as LossTermination's). rho < 1: the job did better than its fair share;
    rho > 1: worse. Only finished jobs have a rho: not one still waiting or running when the run
    ends (`--until`), nor one that failed for good (live runs), which have no completion time,
    nor one ended before it did any work. The summary gives how many jobs have a rho (`jobs`)
    and how many of those measured do not (`without_rho`), and over the former the mean,
    median, p95 (linear interpolation) and largest rho and `unfair_pct`, the percentage with
    rho above 1.

    Arguments:
        track: job ids to report (half-open range); all jobs if omitted.
    Counters:
        none
    Cost: O(n) over the job table (the jobs in the system, integrated over time). Event skipping
        passes the rounds in which nothing happens; each adds its point at the next tick, O(1)
        apiece, as its own tick would have.
    See also: MinMaxRho, Themis, JobMetrics
    Paper: Gavel (OSDI'20) §4.2 and Fig. 10 (FTF); Themis (NSDI'20) §3 (finish-time fairness).
    """

    state = ("_area", "_in_system", "_ticked", "_times")

    track: IdRange | None = attrs.field(default=None, validator=job_ids)

    def start(self, ctx: RoundContext) -> None:
        self._times = [ctx.now]
        self._area = [0.0]  # integral over time of the number of jobs in the system
        self._in_system = 0
        self._ticked: int | None = None  # the round asked about event skipping, until the next tick

    def tick(self, ctx: RoundContext, events: Events) -> None:
        if self._ticked is not None and self._in_system:
            # The rounds event skipping passed: their points, at the clock's readings (the
            # backend adds a round to its clock each round), as their ticks would have added them.
            # (With no job in the system the count stays flat: the points would change nothing.)
            for _ in range(ctx.round_index - self._ticked - 1):
                now = self._times[-1] + ctx.round_s
                self._area.append(self._area[-1] + (now - self._times[-1]) * self._in_system)
                self._times.append(now)
        self._ticked = None
        self._area.append(self._area[-1] + (ctx.now - self._times[-1]) * self._in_system)
        self._times.append(ctx.now)
        self._in_system = len(ctx.jobs) - int(np.count_nonzero(ctx.jobs.column("status") == FINISHED))

    quiet_after_change = True

    def quiet_until(self, ctx: RoundContext) -> float:
        self._ticked = ctx.round_index  # (the rounds passed from here are added at the next tick)
        return math.inf

    def finish(self, ctx: RoundContext) -> dict:
        rows = _tracked(ctx, self.track)
        table = ctx.jobs
        arrival, finish = table.column("arrival_s")[rows], table.column("finish_s")[rows]
        # The work each job did: all it declared, or less for one ended early (a plan's
        # `complete`, as LossTermination's): its time alone is that work's. A failed job has no
        # completion time, and one ended before it did any work no time alone to compare with.
        work = table.column("done")[rows]
        done = np.isfinite(finish) & ~table.column("failed")[rows] & (work > 0)
        without = len(rows) - int(np.count_nonzero(done))
        rows, arrival, finish, work = rows[done], arrival[done], finish[done], work[done]
        times, area = np.array(self._times), np.array(self._area)
        span = np.maximum(finish - arrival, 1e-9)
        n_avg = np.maximum((np.interp(finish, times, area) - np.interp(arrival, times, area)) / span, 1.0)
        # The isolated rates as the solvers (MinMaxRho) see them: 0 on a type with fewer GPUs
        # than the job asks for, where its share would be time it cannot use.
        from roundhouse.elements.policies.gavel.formulation import Columns, job_throughputs

        rates = job_throughputs(ctx, rows, Columns.of(ctx.cluster))
        capacity = np.asarray(ctx.cluster.gpus_by_type, dtype=np.float64)
        sf = table.column("gpus")[rows].astype(np.float64)
        share = capacity[None, :] / n_avg[:, None] / sf[:, None]
        share = share / np.maximum(share.sum(axis=1, keepdims=True), 1.0)
        isolated = work / np.maximum((rates * share).sum(axis=1), 1e-300)
        rho = (finish - arrival) / isolated
        jobs = pl.DataFrame(
            {
                "job_id": table.column("job_id")[rows],
                "jct_s": finish - arrival,
                "isolated_s": isolated,
                "avg_jobs": n_avg,
                "rho": rho,
            }
        ).sort("job_id")
        stat = lambda f: float(f(rho)) if len(rho) else None  # noqa: E731
        return {
            "rho_per_job": jobs,
            "rho": {
                "jobs": len(rho),
                "without_rho": without,
                "avg_rho": stat(np.mean),
                "median_rho": stat(np.median),
                "p95_rho": stat(lambda a: np.percentile(a, 95)),
                "max_rho": stat(np.max),
                "unfair_pct": stat(lambda a: 100.0 * np.mean(a > 1.0)),
            },
        }


@element
class EffectiveThroughput(_RoundWatcher):
    """Effective throughput of the cluster over time, in reference-GPU equivalents.

    Each round, every job contributes the work it did (iterations over its isolated throughput on
    the reference type, times its GPU count): how many reference GPUs running it at full speed
    would have done the same. Reports a per-round series and its time average, from the first
    round in which a job did work to the last (rounds with no job in the system, which the
    clock jumps over, count as rounds of no work), in total and, with `by`, per value of a job
    column (e.g. per user or entity): one column per value, named by the value, except a value
    that is itself `time_s`, `total` or `(none)`, whose column is named `BY=VALUE`
    (`user=total`) so that it does not take the place of those. Jobs without a value (their
    column empty: no text, or a missing number) are a group of their own, as Hierarchical takes
    them to be an entity of their own: its column, `(none)`, comes after the values' (and a
    value spelt `None` or `nan` is a value like any other).

    Arguments:
        by: a job column known at the job's arrival, from its trace, to break the series down by (e.g. "user").
    Counters:
        none
    Cost: O(r) over running jobs r; with `by`, O(r log r + r v) over them and the v values of `by`
        among them (array passes, one a value).
    See also: Hierarchical, MaxThroughput, JobMetrics
    Paper: Gavel (OSDI'20) §7.3 and Fig. 11 (effective throughput of hierarchical policies).
    """

    state = ("_done", "_last_index", "_partner", "_rows", "_series", "_service", "_type")

    by: str | None = attrs.field(default=None, validator=[non_empty, known_at_arrival])

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self._series: list[tuple[float, float, dict[str | None, float]]] = []  # (time_s, total, work by value)
        self._last_index: int | None = None  # the round index of the last tick

    def tick(self, ctx: RoundContext, events: Events) -> None:
        rows, _, _, done = self._last_round(ctx)
        last = getattr(self, "_last_index", None)  # (None in a state saved by an earlier version)
        if self._series and last is not None and ctx.round_index > last + 1:
            # Rounds not ticked: the clock jumped over them, with no job in the system (nothing
            # ran), each a point of no work, as its tick would have added. (Were jobs running
            # meanwhile, their work is the tick's own point's: the sum over the points is kept.)
            for k in range(last, ctx.round_index - 1):
                self._series.append((ctx.now - (ctx.round_index - k) * ctx.round_s, 0.0, {}))
        self._last_index = ctx.round_index
        if len(self._series) or len(rows):
            table = ctx.jobs
            work = done / table.column("reference_rate")[rows] * table.column("gpus")[rows] / ctx.round_s
            # (Each value's work apart from the two columns every point has: a value spelt like
            # one of them is named apart at the end, when all the values are known.)
            # (None: the jobs without a value, a group of their own)
            by_value: dict[str | None, float] = {}
            if self.by is not None and len(rows):
                # (a missing value: None in a text column, NaN in a number column, or an empty
                # text, as Hierarchical reads a missing entity)
                raw = self._groups(table)[rows].tolist()
                labels = [None if v is None or v != v or v == "" else str(v) for v in raw]
                missing = np.array([g is None for g in labels], dtype=bool)
                if not missing.all():
                    named = np.array([g for g in labels if g is not None])
                    values, group = np.unique(named, return_inverse=True)  # (sorted, as the columns are)
                    named_work = work[~missing]
                    for k, g in enumerate(values.tolist()):
                        by_value[g] = float(named_work[group == k].sum())  # (each value's jobs in row order, as summed before)
                if missing.any():
                    by_value[None] = float(work[missing].sum())
            self._series.append((ctx.now - ctx.round_s, float(work.sum()), by_value))
        self._remember(ctx)

    def _groups(self, table) -> np.ndarray:
        # Columns come from the traces, so `by` can only be checked once jobs exist.
        try:
            return table.column(self.by)
        except KeyError as err:  # its message names the column and the nearest ones
            # (at the element's line: a tick's error carries no place of its own)
            raise SchedError(f"{self.name} (EffectiveThroughput): by={self.by!r}: {err.args[0]}", self.declared_at) from None

    def finish(self, ctx: RoundContext) -> dict:
        series = self._frame()
        while series.height and series["total"][-1] == 0.0:
            series = series.head(series.height - 1)
        mean = number(series["total"].mean()) if series.height else None
        return {"throughput_series": series, "throughput": {"avg_effective_throughput": mean, "rounds": series.height}}

    def _frame(self) -> pl.DataFrame:
        """The series: `time_s`, `total`, a column per value of `by` (0 in rounds it did no
        work) and `(none)` for the jobs without one; a value spelt like one of those three gets
        a column of its own, `BY=VALUE`."""
        if not self._series:
            return pl.DataFrame({"time_s": [], "total": []})
        points = [_point(p) for p in self._series]
        values = sorted({g for _, _, by_value in points for g in by_value if g is not None})
        without = any(None in by_value for _, _, by_value in points)
        fixed = ("time_s", "total", NO_VALUE)
        taken = {*fixed, *values}
        names = {}
        for g in values:
            name = g
            if g in fixed:
                name = f"{self.by}={g}"
                while name in taken:  # (another value already spelt so)
                    name = f"{self.by}={name}"
                taken.add(name)
            names[g] = name
        columns: dict[str, list[float]] = {"time_s": [t for t, _, _ in points], "total": [w for _, w, _ in points]}
        for g in values:
            columns[names[g]] = [by_value.get(g, 0.0) for _, _, by_value in points]
        if without:
            columns[NO_VALUE] = [by_value.get(None, 0.0) for _, _, by_value in points]
        return pl.DataFrame(columns, schema={name: pl.Float64 for name in columns})


# EffectiveThroughput's column for the jobs without a value of `by`.
NO_VALUE = "(none)"


def _point(point) -> tuple[float, float, dict[str | None, float]]:
    """A point of EffectiveThroughput's series as (time_s, total, work by value); a state saved
    by an earlier version holds each as one dict of all its columns."""
    if isinstance(point, dict):
        return point["time_s"], point["total"], {k: v for k, v in point.items() if k not in ("time_s", "total")}
    return point
