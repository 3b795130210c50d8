"""Dally (IEEE BigData'25): delay scheduling for consolidation, with auto-tuned timers.

Free GPUs are offered to waiting jobs in ranking order. A job takes an offer on one machine
whenever one has room; otherwise it declines until it has starved for its machine timer, then
takes one rack, declines until its (cumulative) rack timer, then takes GPUs anywhere. A declined
offer passes to the next job. `DelayTuner` sets the timers from the waits that past placements
accepted (the paper's Algorithm 2).
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.elements.placement.placer import Placer
from roundhouse.elements.policies.dally import StarvationClock
from roundhouse.errors import SchedError
from roundhouse.runtime.element import element
from roundhouse.runtime.types import Plan, Ranking
from roundhouse.runtime.values import Duration, non_negative, one_of, positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext

LEVELS = ("machine", "rack")


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

    def record(self, level: str, demand: int, wait: float, now: float) -> None:
        """A job wanting `demand` GPUs accepted at `level` after waiting `wait` seconds."""
        if wait < self.min_wait:
            return
        self._lists.setdefault((level, demand), deque()).append((now, float(wait)))

    def waits(self, level: str, demand: int, now: float) -> list[float]:
        """The waits still in the window at `now` (older records are dropped)."""
        entries = self._lists.get((level, demand))
        if not entries:
            return []
        while entries and entries[0][0] < now - self.window:
            entries.popleft()
        return [w for _, w in entries]

    def value(self, level: str, demand: int, now: float) -> float:
        """mean + 2 sigma of the level's waits in the window (0 for none)."""
        waits = self.waits(level, demand, now)
        if not waits:
            return 0.0
        spread = float(np.std(waits, ddof=self.ddof)) if len(waits) > self.ddof else 0.0
        return float(np.mean(waits)) + 2.0 * spread

    def timers(self, demand: int, now: float) -> tuple[float, float]:
        """(machine timer, cumulative rack timer) for a job wanting `demand` GPUs."""
        t_mc = max(self.machine_floor, self.value("machine", demand, now))
        t_rk = max(self.rack_floor, self.value("rack", demand, now))
        if self.capped:
            t_mc = min(0.8 * self.window, t_mc)
            t_rk = min(self.window, t_rk)
        return t_mc, t_rk


class _Free:
    """The GPUs on offer this round, with their counts per machine and per rack (kept up to
    date as jobs take them, rather than counted again for every offer)."""

    def __init__(self, cluster, available: np.ndarray) -> None:
        self.cluster = cluster
        self.available = available
        self.node = cluster.per_node(available)
        self.rack = np.bincount(cluster.gpu_rack[available], minlength=cluster.n_racks)
        self.total = int(self.node.sum())

    def take(self, within: np.ndarray | None, demand: int) -> np.ndarray:
        """The lowest-numbered `demand` free GPUs (among those `within` marks), now taken."""
        mask = self.available if within is None else self.available & within
        ids = np.flatnonzero(mask)[:demand]
        self.available[ids] = False
        np.subtract.at(self.node, self.cluster.gpu_node[ids], 1)
        np.subtract.at(self.rack, self.cluster.gpu_rack[ids], 1)
        self.total -= demand
        return ids


@element
class DelayPlacer(Placer):
    """Dally's placement: offer free GPUs to waiting jobs in ranking order, each waiting a
    while for a consolidated placement (delay scheduling).

    Running jobs keep their GPUs. Each waiting job, in ranking order, is offered the GPUs still
    free, and with its starvation time s (since its arrival, its last start or its last loss of
    all its GPUs) decides as Algorithm 1: on the first machine with room for it, if there is
    one; else, if s < T_Mc, it declines and the offer passes to the next job; else on the first
    rack with room; else, if s < T_Rk, it declines; else on the lowest-numbered free GPUs.
    T_Rk counts from the same clock as T_Mc, so it is the total wait. A job that cannot fit in
    one machine has T_Mc = 0; one that cannot fit in one rack has both timers 0. Within a
    machine or rack the lowest-numbered free GPUs are taken (first fit, as Dally's code).

    Timers: `machine_wait` and `rack_wait` (Dally-manual); with `tuned=true`, the auto-tuner:
    per (level, GPU demand) the starvation times of the jobs that accepted at that level in the
    last `history`, and T = mean + 2 standard deviations (`sigma=sample` as the paper,
    `population` as the authors' simulator), at least `machine_floor` / `rack_floor` and, with
    `capped`, at most 0.8 x history / history (the simulator's floors are 6 and 12 leases,
    with these caps). `mode=no_wait` sets both timers to 0 (Dally-noWait);
    `mode=fully_consolidated` waits as long as it takes for the most consolidated placement
    that can ever fit (Dally-fullyConsolidated). Needs a cluster of one GPU type.

    Arguments:
        mode: delay (timers), no_wait (both timers 0) or fully_consolidated (wait for the tightest fit).
        machine_wait: the machine timer T_Mc when not tuned (Dally-manual: 12h).
        rack_wait: the cumulative rack timer T_Rk when not tuned (Dally-manual: 24h).
        tuned: set the timers with the auto-tuner (Algorithm 2) instead.
        history: the auto-tuner's window (HISTORY_TIME_LIMIT): waits older than this are dropped.
        sigma: sample (the paper) or population (the authors' simulator) standard deviation.
        machine_floor: the least tuned machine timer (0: the paper; 6 leases in the simulator).
        rack_floor: the least tuned rack timer (0: the paper; 12 leases in the simulator).
        capped: cap tuned timers at 0.8 x history (machine) and history (rack), as the simulator.
    Counters:
        machine: jobs placed on one machine so far.
        rack: jobs placed on one rack (not one machine) so far.
        network: jobs placed across racks so far.
        declined: offers declined to wait for a better placement so far.
    See also: NetworkSensitive, Consolidated
    Paper: Dally (IEEE BigData'25) §III-A (Algorithm 1) and §III-C (Algorithm 2); cluster-sim DallyIntraJobScheduler.
    """

    state = ("_clock", "_tuner")
    fixed = ("_machine_size", "_rack_size")

    mode: str = attrs.field(default="delay", validator=one_of("delay", "no_wait", "fully_consolidated"))
    machine_wait: Duration = attrs.field(default=Duration(12 * 3600.0), validator=non_negative)
    rack_wait: Duration = attrs.field(default=Duration(24 * 3600.0), validator=non_negative)
    tuned: bool = attrs.field(default=False)
    history: Duration = attrs.field(default=Duration(24 * 3600.0), validator=positive)
    sigma: str = attrs.field(default="sample", validator=one_of("sample", "population"))
    machine_floor: Duration = attrs.field(default=Duration(0.0), validator=non_negative)
    rack_floor: Duration = attrs.field(default=Duration(0.0), validator=non_negative)
    capped: bool = attrs.field(default=False)

    def __attrs_post_init__(self) -> None:
        if self.rack_wait < self.machine_wait:
            raise ValueError(
                f"rack_wait ({self.rack_wait:g}s) is shorter than machine_wait ({self.machine_wait:g}s): "
                "the rack timer counts the whole wait, machine wait included"
            )
        if self.tuned and self.mode != "delay":
            raise ValueError(f"tuned=true needs mode=delay (mode={self.mode} sets its own timers)")

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        cluster = ctx.cluster
        if len(cluster.gpu_types) > 1:
            raise SchedError(f"{self.name} (DelayPlacer): needs a cluster of one GPU type, got {', '.join(cluster.gpu_types)}")
        self.counters.update(machine=0, rack=0, network=0, declined=0)
        self._clock = StarvationClock()
        self._tuner = DelayTuner(self.history, self.sigma, self.machine_floor, self.rack_floor, self.capped)
        self._machine_size = cluster.max_gpus_per_node
        self._rack_size = int(np.bincount(cluster.gpu_rack).max())

    def timers(self, demand: int, now: float) -> tuple[float, float]:
        """(T_Mc, T_Rk) for a job wanting `demand` GPUs, Algorithm 1's zero rules applied."""
        if demand > self._rack_size:
            return 0.0, 0.0
        if self.mode == "no_wait":
            t_mc, t_rk = 0.0, 0.0
        elif self.mode == "fully_consolidated":
            t_mc, t_rk = math.inf, math.inf
        elif self.tuned:
            t_mc, t_rk = self._tuner.timers(demand, now)
        else:
            t_mc, t_rk = float(self.machine_wait), float(self.rack_wait)
        if demand > self._machine_size:
            t_mc = 0.0
        return t_mc, t_rk

    def offer(self, cluster, free: _Free, demand: int, starvation: float, now: float):
        """Algorithm 1 for one job: (GPU ids, level) or (None, None) when it declines."""
        fits = np.flatnonzero(free.node >= demand)
        if len(fits):
            ids = free.take(cluster.gpu_node == int(fits[0]), demand)
            if self.tuned:
                self._tuner.record("machine", demand, starvation, now)
            return ids, "machine"
        t_mc, t_rk = self.timers(demand, now)
        if starvation < t_mc:
            return None, None
        fits = np.flatnonzero(free.rack >= demand)
        if len(fits):
            ids = free.take(cluster.gpu_rack == int(fits[0]), demand)
            if self.tuned:
                self._tuner.record("rack", demand, starvation, now)
            return ids, "rack"
        if starvation < t_rk:
            return None, None
        return free.take(None, demand), "network"

    def tick(self, ctx: RoundContext, ranking: Ranking) -> Plan:
        cluster = ctx.cluster
        now = ctx.now
        self._clock.update(ctx)
        running = ctx.running_rows
        available = ctx.holder < 0
        if ctx.online is not None:
            available &= ctx.online
        free = _Free(cluster, available)
        rows, want = ranking.rows, ranking.gpus
        waiting = (ctx.jobs.column("held")[rows] == 0) & (want > 0) & (want <= free.total)
        launch_rows, launch_gpus, counts = [], [], []
        for i in np.flatnonzero(waiting).tolist():
            demand = int(want[i])
            if demand > free.total:
                continue  # no offer can hold it this round
            row = int(rows[i])
            ids, level = self.offer(cluster, free, demand, now - float(self._clock.since[row]), now)
            if ids is None:
                self.counters["declined"] += 1
                continue
            self.counters[level] += 1
            launch_rows.append(row)
            launch_gpus.append(ids)
            counts.append(demand)
            if free.total == 0:
                break
        if not launch_rows:
            return Plan(keep=running)
        launched = np.asarray(launch_rows, dtype=np.int64)
        self._clock.started(launched, now)
        self.counters["launched"] += len(launched)
        return Plan(
            launch_rows=launched,
            launch_gpus=np.concatenate(launch_gpus),
            launch_counts=np.asarray(counts, dtype=np.int64),
            keep=running,
        )
