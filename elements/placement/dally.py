"""Dally (IEEE BigData'25): delay scheduling for consolidation, with auto-tuned timers.

Free GPUs are offered to waiting jobs in ranking order. A job takes an offer on one machine
whenever one has room; otherwise it declines until it has starved for its machine timer, then
takes one rack, declines until its (cumulative) rack timer, then takes GPUs anywhere. A declined
offer passes to the next job. `DelayTuner` sets the timers from the waits that past placements
accepted (the paper's Algorithm 2). The GPUs on offer, and what one job decides (Algorithm 1),
are in dally_offers.py.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from roundhouse.elements.placement import dally_offers
from roundhouse.elements.placement.dally_offers import _Free, lease_prices
from roundhouse.elements.placement.placer import Placer
from roundhouse.elements.placement.reasons import explain_placement
from roundhouse.elements.policies.dally import StarvationClock
from roundhouse.errors import SchedError
from roundhouse.runtime.element import element
from roundhouse.runtime.explain import Reason
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan, Ranking
from roundhouse.runtime.values import Duration, format_duration, non_negative, one_of, positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext

LEVELS = ("machine", "rack")
_NO_ROWS = np.zeros(0, dtype=np.int64)

# DelayPlacer's defaults for the timers' and the auto-tuner's arguments: Dally-manual's timers,
# the paper's tuner.
MACHINE_WAIT, RACK_WAIT, HISTORY = 12 * 3600.0, 24 * 3600.0, 24 * 3600.0
_DEFAULTS: dict[str, object] = {
    "machine_wait": MACHINE_WAIT,
    "rack_wait": RACK_WAIT,
    "history": HISTORY,
    "sigma": "sample",
    "machine_floor": 0.0,
    "rack_floor": 0.0,
    "capped": False,
}


def _not_default(placer: DelayPlacer, names: tuple[str, ...]) -> list[str]:
    """Those of the placer's arguments `names` that are given a value other than their default."""
    return [n for n in names if getattr(placer, n) is not None and getattr(placer, n) != _DEFAULTS[n]]


def _check_arguments(placer: DelayPlacer) -> None:
    """Refuse arguments that contradict one another or would have no effect."""
    if placer.tuned and placer.mode != "delay":
        raise ValueError(f"tuned=true needs mode=delay (mode={placer.mode} sets its own timers)")
    fixed = _not_default(placer, ("machine_wait", "rack_wait"))
    if fixed and placer.mode != "delay":
        raise ValueError(f"{fixed[0]} has no effect with mode={placer.mode}, which sets its own timers")
    if fixed and placer.tuned:
        raise ValueError(f"{fixed[0]} has no effect with tuned=true: the auto-tuner sets the timers")
    tuner = _not_default(placer, ("history", "sigma", "machine_floor", "rack_floor", "capped"))
    if tuner and not placer.tuned:
        raise ValueError(f"{tuner[0]} is an auto-tuner argument and has no effect without tuned=true")
    if placer.timeline and not placer.tuned:
        raise ValueError(
            "timeline reports the auto-tuner's timers and has no effect without tuned=true "
            "(fixed timers are the placer's arguments)"
        )
    if placer.rack_timer < placer.machine_timer:
        rack = _named(placer, "rack_wait", placer.rack_timer)
        machine = _named(placer, "machine_wait", placer.machine_timer)
        raise ValueError(
            f"{rack} is shorter than {machine}: the rack timer counts the whole wait, machine wait included; "
            f"set rack_wait to at least {_written(placer.machine_timer)}"
        )
    if placer.tuned:
        _check_floors(placer)


def _written(seconds: float) -> str:
    """A duration as a .sched file writes it, in hours from an hour up (24h rather than 1d)."""
    hours = seconds / 3600.0
    return f"{hours:g}h" if hours >= 1 else format_duration(seconds)


def _named(placer: DelayPlacer, name: str, seconds: float) -> str:
    """A timer argument and its value, saying when it is the default (not written)."""
    return f"{name} ({_written(seconds)})" if getattr(placer, name) is not None else f"the default {name} ({_written(seconds)})"


def _check_floors(placer: DelayPlacer) -> None:
    """Refuse tuned floors that can have no effect: one above its cap, or a rack floor below the
    machine floor (the rack timer counts the whole wait, so it would have passed already)."""
    window = HISTORY if placer.history is None else float(placer.history)
    machine, rack = float(placer.machine_floor or 0.0), float(placer.rack_floor or 0.0)
    if placer.capped:
        for name, floor, cap, what in (
            ("machine_floor", machine, 0.8 * window, "0.8 x history"),
            ("rack_floor", rack, window, "history"),
        ):
            if floor > cap:
                raise ValueError(
                    f"{name} ({_written(floor)}) is above its cap, {what} ({_written(cap)}): with capped=true the cap "
                    f"always wins, so the floor has no effect; lower {name} or lengthen history"
                )
    if 0 < rack < machine:
        raise ValueError(
            f"rack_floor ({_written(rack)}) is below machine_floor ({_written(machine)}): the rack timer counts the whole "
            f"wait, machine wait included, so the rack floor has no effect; set rack_floor to at least {_written(machine)}"
        )


class DelayTuner:
    """Dally's auto-tuner (Algorithm 2): per (level, GPU demand), the waits of the jobs that
    accepted an offer at that level in the last `window` seconds; a level's timer is their
    mean + 2 standard deviations.

    `sigma`: "sample" (divide by n - 1: the paper's "two sample standard deviations"; one entry
    has 0) or "population" (divide by n, as the authors' simulator). An empty list gives 0.
    The timers are then clamped: at least `machine_floor` / `rack_floor`, and with `capped` at
    most 0.8 x window (machine) and window (rack). The paper gives no clamps; the authors'
    simulator uses floors of 6 and 12 leases, the caps, and drops waits shorter than one lease
    (`min_wait`).
    """

    def __init__(
        self,
        window: float,
        sigma: str = "sample",
        machine_floor: float = 0.0,
        rack_floor: float = 0.0,
        capped: bool = False,
        min_wait: float = 0.0,
    ) -> None:
        if sigma not in ("sample", "population"):
            raise ValueError(f"sigma must be 'sample' or 'population', got {sigma!r}")
        self.window = float(window)
        self.ddof = 1 if sigma == "sample" else 0
        self.machine_floor = float(machine_floor)
        self.rack_floor = float(rack_floor)
        self.capped = capped
        self.min_wait = float(min_wait)
        self._lists: dict[tuple[str, int], deque[tuple[float, float]]] = {}
        # Each list's mean + 2 sigma while the list stays as it is (asked for every offer declined).
        self._values: dict[tuple[str, int], float] = {}

    def record(self, level: str, demand: int, wait: float, now: float) -> None:
        """A job wanting `demand` GPUs accepted at `level` after waiting `wait` seconds."""
        if wait < self.min_wait:
            return
        self._lists.setdefault((level, demand), deque()).append((now, float(wait)))
        self._values.pop((level, demand), None)

    def waits(self, level: str, demand: int, now: float) -> list[float]:
        """The waits still in the window at `now` (older records are dropped)."""
        entries = self._in_window(level, demand, now)
        return [w for _, w in entries] if entries else []

    def value(self, level: str, demand: int, now: float) -> float:
        """mean + 2 sigma of the level's waits in the window (0 for none)."""
        entries = self._in_window(level, demand, now)
        if not entries:
            return 0.0
        value = self._values.get((level, demand))
        if value is None:  # (a wait was recorded or dropped since it was worked out)
            waits = [w for _, w in entries]
            spread = float(np.std(waits, ddof=self.ddof)) if len(waits) > self.ddof else 0.0
            value = self._values[(level, demand)] = float(np.mean(waits)) + 2.0 * spread
        return value

    def _in_window(self, level: str, demand: int, now: float) -> deque[tuple[float, float]] | None:
        """The list's records after those older than the window are dropped."""
        entries = self._lists.get((level, demand))
        if entries and entries[0][0] < now - self.window:
            self._values.pop((level, demand), None)
            while entries and entries[0][0] < now - self.window:
                entries.popleft()
        return entries

    def timers(self, demand: int, now: float) -> tuple[float, float]:
        """(machine timer, cumulative rack timer) for a job wanting `demand` GPUs."""
        t_mc = max(self.machine_floor, self.value("machine", demand, now))
        t_rk = max(self.rack_floor, self.value("rack", demand, now))
        if self.capped:
            t_mc = min(0.8 * self.window, t_mc)
            t_rk = min(self.window, t_rk)
        return t_mc, t_rk


def fewest_machines_in_rack(cluster, available: np.ndarray, rack: int, demand: int) -> np.ndarray:
    """`demand` GPUs marked in `available` (`rack` has room for them) on the fewest machines of
    `rack`: those with the most available first, the lowest-numbered among equals, and on them
    the lowest-numbered GPUs (DelayPlacer's choice within a rack, for other placers)."""
    free = _Free(cluster, available)
    return free.cheapest(free.in_rack(rack, demand), demand)


def tightest_rack(cluster, available: np.ndarray, demand: int) -> int:
    """The rack whose GPUs marked in `available` hold `demand` on the fewest machines; among
    equals the one with the fewest such GPUs (best fit), then the lowest-numbered; -1 if no
    rack has room."""
    free = _Free(cluster, available)
    fits = np.flatnonzero(free.rack >= demand)
    if not len(fits):
        return -1
    needed = free.machines_needed(free.node, demand)[fits]
    return int(fits[np.lexsort((fits, free.rack[fits], needed))[0]])


def fewest_racks(cluster, available: np.ndarray, demand: int) -> np.ndarray:
    """The `demand` lowest-numbered GPUs marked in `available` (room for them in all) within
    the fewest racks that hold them: those with the most available first, the lowest-numbered
    among equals. No fewer racks hold them, so the GPUs span every one of these."""
    free = _Free(cluster, available)
    racks = free.fewest(free.rack, None, demand)
    return np.flatnonzero(available & np.isin(cluster.gpu_rack, racks))[:demand]


@element
class DelayPlacer(Placer):
    """Dally's placement: offer free GPUs to waiting jobs in ranking order, each waiting a
    while for a consolidated placement (delay scheduling).

    Running jobs keep their GPUs. Each waiting job, in ranking order, is offered the GPUs still
    free, and with its starvation time s (since its arrival, its last start or its last loss of
    all its GPUs) decides as Algorithm 1: on the first machine with room for it, if there is
    one; else, if s < T_Mc, it declines and the offer passes to the next job; else on a rack
    with room; else, if s < T_Rk, it declines; else on free GPUs anywhere. T_Rk counts from
    the same clock as T_Mc, so it is the total wait. A job that cannot fit in one machine has
    T_Mc = 0; one that cannot fit in one rack has both timers 0. Within a rack a job takes the
    fewest machines (those with the most free GPUs first), in the rack that needs the fewest;
    across racks, the fewest racks (and in them as few machines in any one rack as they
    allow): the communication model charges a spread job by the machines and racks it spans.
    (Dally's code takes the first fit at every level; the first machine with room is taken here
    too, and among equals the lowest-numbered GPUs.) A job wanting more GPUs than are still on offer is
    passed over when the ranking allows backfilling (NetworkSensitive's does); otherwise no job
    below it starts, as in a strict queue. A job that declines an offer never holds up the jobs
    below it: the next job taking what it declined is what delay scheduling is.

    Timers: `machine_wait` and `rack_wait` (Dally-manual); with `tuned=true`, the auto-tuner:
    per (level, GPU demand) the starvation times of the jobs that accepted at that level in the
    last `history`, and T = mean + 2 standard deviations (`sigma=sample` as the paper,
    `population` as the authors' simulator), at least `machine_floor` / `rack_floor` and, with
    `capped`, at most 0.8 x history / history (the simulator's floors are 6 and 12 leases,
    with these caps). Two of the simulator's rules are not reproduced even so: with no waits
    recorded a level's value is 0 here and 1 lease there (the same once floors of a lease or
    more apply); and the simulator drops waits shorter than one lease, which here are kept
    (they pull the timers down). `mode=no_wait` sets both timers to 0 (Dally-noWait);
    `mode=fully_consolidated` sets both to forever (Dally-fullyConsolidated), but the timers of a
    job too large for a machine or a rack are 0 in every mode: a job waits for one machine when
    it fits in one, else for one rack, any machines in it (the fewest the rack needs, as above:
    a 16-GPU job takes 2 GPUs on each of 8 machines if that is all a rack has free), and takes
    GPUs anywhere when it fits in no rack. So does the authors' simulator; the paper says only
    "the most consolidated placement". With `release=true` such a job moves to fewer machines
    when they have room. An argument that would have no effect (a timer
    with `tuned=true` or another mode; an auto-tuner argument or `timeline=true` without
    `tuned=true`) is refused, unless it is given its default value (`capped=false`), which
    changes nothing anywhere. Needs a cluster of one GPU type.

    Leases (`release=true`): a running job holds its GPUs for one round. At each round's end
    every gang is released and offered again with the free GPUs, to all jobs in ranking order
    (so a job that ranks higher may take GPUs a running job held: Dally's preemption). Among
    placements as tight, idle GPUs are taken first, then those of the lowest-ranked gangs (the
    machine or rack is chosen to displace as little as it can). A running job whose whole gang
    is still on offer at its turn keeps it (its lease is renewed at no cost), unless a tighter
    placement has room now (fewer racks, else fewer machines in any one rack): then it moves
    there. A running job part of whose gang was taken has lost its GPUs: its starvation clock
    starts again and it decides as a waiting job (Algorithm 1 with no wait behind it), else it
    is suspended. A suspended or moved job pays the graph's checkpoint cost
    (`checkpoint_per_gpu = 1s` is Dally's simulator's 1 s per GPU).

    Arguments:
        mode: delay (timers), no_wait (both timers 0) or fully_consolidated (both forever; a job too large for a machine still waits for one rack only).
        machine_wait: the machine timer T_Mc (default 12h, Dally-manual's); mode=delay, not tuned only.
        rack_wait: the cumulative rack timer T_Rk (default 24h, Dally-manual's); mode=delay, not tuned only.
        tuned: set the timers with the auto-tuner (Algorithm 2) instead.
        history: the auto-tuner's window (HISTORY_TIME_LIMIT): waits older than this are dropped (default 24h; tuned only).
        sigma: sample (the paper; default) or population (the authors' simulator) standard deviation (tuned only).
        machine_floor: the least tuned machine timer (default 0, the paper; 6 leases in the simulator; tuned only).
        rack_floor: the least tuned rack timer (default 0, the paper; 12 leases in the simulator; tuned only).
        capped: cap tuned timers at 0.8 x history (machine) and history (rack), as the simulator (default false; tuned only).
        release: end every running job's lease at each round and offer its gang again (Dally's lease model).
        timeline: report the tuned timers over time (a `timers` table: time, GPU demand, T_Mc, T_Rk, each time they change; tuned only).
    Counters:
        machine: jobs placed on one machine so far.
        rack: jobs placed on one rack (not one machine) so far.
        network: jobs placed across racks so far.
        declined: offers declined to wait for a better placement so far.
    Cost: O(n + G) over ranked jobs n and GPUs G, plus O(l N) over the jobs l it places and nodes N
        (delay timers and node scoring, job by job), plus O(J) over the job table J (the
        starvation clocks, each job's read from whether it holds GPUs).
    See also: NetworkSensitive, Consolidated
    Paper: Dally (IEEE BigData'25) §III-A (Algorithm 1) and §III-C (Algorithm 2); cluster-sim DallyIntraJobScheduler.
    """

    state = ("_clock", "_tuner", "_timeline", "_last_timers")
    fixed = ("_machine_size", "_rack_size")
    # Its timers wait for placements that only network tiers make faster: `check` and `run`
    # warn of a cluster without them (runtime/useless_runs.py).
    needs_tiers: ClassVar[bool] = True
    # (it refuses a cluster of several GPU types: nothing to warn of there)
    heterogeneity_agnostic: ClassVar[str | None] = None

    # The timers' and the tuner's arguments default to None (their values in _DEFAULTS) so that
    # one given where it has no effect is refused rather than silently ignored. Given as its
    # default value it has the same effect everywhere (none to miss), and is accepted.
    mode: str = attrs.field(default="delay", validator=one_of("delay", "no_wait", "fully_consolidated"))
    machine_wait: Duration | None = attrs.field(default=None, validator=non_negative)
    rack_wait: Duration | None = attrs.field(default=None, validator=non_negative)
    tuned: bool = attrs.field(default=False)
    history: Duration | None = attrs.field(default=None, validator=positive)
    sigma: str | None = attrs.field(default=None, validator=attrs.validators.optional(one_of("sample", "population")))
    machine_floor: Duration | None = attrs.field(default=None, validator=non_negative)
    rack_floor: Duration | None = attrs.field(default=None, validator=non_negative)
    capped: bool | None = attrs.field(default=None)
    release: bool = attrs.field(default=False)
    timeline: bool = attrs.field(default=False)

    def __attrs_post_init__(self) -> None:
        _check_arguments(self)

    @property
    def machine_timer(self) -> float:
        return MACHINE_WAIT if self.machine_wait is None else float(self.machine_wait)

    @property
    def rack_timer(self) -> float:
        return RACK_WAIT if self.rack_wait is None else float(self.rack_wait)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        cluster = ctx.cluster
        if len(cluster.gpu_types) > 1:
            raise SchedError(f"{self.name} (DelayPlacer): needs a cluster of one GPU type, got {', '.join(cluster.gpu_types)}")
        self.counters.update(machine=0, rack=0, network=0, declined=0)
        self._clock = StarvationClock()
        self._tuner = DelayTuner(
            HISTORY if self.history is None else float(self.history),
            self.sigma or "sample",
            float(self.machine_floor or 0.0),
            float(self.rack_floor or 0.0),
            bool(self.capped),
        )
        self._machine_size = cluster.max_gpus_per_node
        self._rack_size = int(np.bincount(cluster.gpu_rack).max())
        self._timeline: list[tuple[float, int, float, float]] = []
        self._last_timers: dict[int, tuple[float, float]] = {}

    # Algorithm 1 for one job, and the timers it is held to (dally_offers.py).
    timers = dally_offers.timers
    offer = dally_offers.offer
    reoffer = dally_offers.reoffer

    def tick(self, ctx: RoundContext, ranking: Ranking) -> Plan:
        cluster = ctx.cluster
        now = ctx.now
        clock = self._clock
        clock.update(ctx)
        running = ctx.running_rows
        holder = ctx.holder
        available = holder < 0
        if ctx.online is not None:
            available &= ctx.online
        rows, want = ranking.rows, ranking.gpus
        held = ctx.jobs.column("held")[rows]
        released = self.release and len(running) > 0
        # With lease release every lease ends at the round: the gangs are offered again, priced.
        free = _Free(cluster, available, lease_prices(ctx, rows, available) if released else None)
        offered = (want > 0) & ((held == 0) | released)
        if ranking.backfill:
            offered &= want <= free.total
        launch_rows, launch_gpus, counts, kept = [], [], [], []
        declined: list[tuple[int, int, float, float]] = []  # (position, reason, starved, timer)
        at = np.flatnonzero(offered)
        least_after = np.minimum.accumulate(want[at][::-1])[::-1].tolist()  # (the smallest demand from here on)
        blocked = False
        for k, i in enumerate(at.tolist()):
            if least_after[k] > free.total:
                break  # no offer can hold any job left this round
            demand = int(want[i])
            row = int(rows[i])
            if blocked or demand > free.total:
                # No offer can hold it this round. Without backfilling it holds up the jobs
                # below it: none starts or moves, but one whose gang is still on offer keeps it.
                # (A job that declines an offer holds up nobody: that is delay scheduling.)
                blocked = not ranking.backfill
                if blocked and held[i] > 0 and free.take_back(ctx.gpus_of(row), demand):
                    kept.append(row)
                continue
            level: str | None
            starved = 0.0
            if held[i] > 0:
                own = ctx.gpus_of(row)
                if len(own) == demand and free.available[own].all():
                    ids, level = self.reoffer(free, own, demand)
                    if level is None:
                        kept.append(row)
                        continue
                else:
                    # Higher-ranked jobs took part of its gang: it has lost its GPUs, and its
                    # starvation clock starts again.
                    clock.since[row] = now
                    ids, level = self.offer(free, demand, starved, now)
            else:
                starved = now - float(clock.since[row])
                ids, level = self.offer(free, demand, starved, now)
            if ids is None:
                self.counters["declined"] += 1
                if ctx.explaining:
                    timer = self.timers(demand, now)[0 if level == "machine" else 1]
                    code = Reason.DELAY_MACHINE if level == "machine" else Reason.DELAY_RACK
                    declined.append((i, code, starved, timer if math.isfinite(timer) else -1.0))
                continue
            self.counters[level] += 1
            launch_rows.append(row)
            launch_gpus.append(ids)
            counts.append(demand)
            if free.total == 0:
                break
        suspend = _NO_ROWS
        keep = running
        if released:
            keep = np.asarray(sorted(kept), dtype=np.int64)
            suspend = running[~isin_rows(running, keep)]
            lost = suspend[~isin_rows(suspend, np.asarray(launch_rows, dtype=np.int64))]
            clock.lost(lost, now)
            self.counters["preempted"] += len(lost)
            self.counters["moved"] += len(suspend) - len(lost)
        if ctx.explaining:
            self._explain(ctx, ranking, launch_rows, declined, suspend, free.available)
        if not launch_rows:
            return Plan(keep=keep, suspend=suspend)
        launched = np.asarray(launch_rows, dtype=np.int64)
        clock.started(launched, now)
        self.counters["launched"] += len(launched)
        return Plan(
            launch_rows=launched,
            launch_gpus=np.concatenate(launch_gpus),
            launch_counts=np.asarray(counts, dtype=np.int64),
            keep=keep,
            suspend=suspend,
        )

    def finish(self, ctx: RoundContext) -> dict:
        if not self.timeline:
            return {}
        import polars as pl

        schema = {"time_s": pl.Float64, "gpus": pl.Int64, "machine_timer_s": pl.Float64, "rack_timer_s": pl.Float64}
        return {"timers": pl.DataFrame(self._timeline, schema=schema, orient="row")}

    def _explain(self, ctx: RoundContext, ranking: Ranking, launched: list[int], declined: list, suspend, available) -> None:
        """Declined offers wait for their timers; other waiting jobs, for GPUs."""
        rows = ranking.rows
        is_run = ctx.jobs.column("held")[rows] > 0
        placed = isin_rows(rows, np.asarray(launched, dtype=np.int64))
        skip = None
        if declined:
            pos, code, starved, timer = (np.asarray(v) for v in zip(*declined))
            skip = np.zeros(len(rows), dtype=bool)
            skip[pos] = True
            ctx.explain(code.astype(np.int64), rows[pos], starved, timer)
        # (without lease release a running job keeps its GPUs whatever the ranking: not room for a job ahead)
        explain_placement(ctx, ranking, is_run, placed, suspend, available, skip, never_preempts=not self.release)
