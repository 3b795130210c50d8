"""Resource usage per round: what the running jobs hold of the cluster's GPUs, CPU cores and
memory, round by round (the run's summary gives the averages: elements/sinks.py)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from roundhouse.runtime.element import Element, In, element
from roundhouse.runtime.types import Events

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element
class ResourceUsage(Element):
    """Record, each round, the fraction of the cluster's GPUs, CPU cores and memory that
    running jobs hold.

    One row per round, at the round's boundary after its plan is carried out: `time_s`, the
    running jobs, and `gpu`, `cpu` and `memory` as fractions of the cluster's (all its nodes, a
    live cluster's offline ones too). A GPU two jobs share (space sharing) counts once. CPU and
    memory count what comes with the GPUs (the GPU-proportional share, or an allocator's:
    Proportional, SynergyTune), not what the jobs' processes use. The rounds that are not
    ticked get their rows too, so that the table's rounds are evenly spaced and a column's mean
    is its average over time: those event skipping passes, and those a simulation jumps over
    while no job is in the system, hold what the last ticked round held (nothing changes in
    them); a live round that came late takes the row of the round before it likewise.

    Ports:
        events: the round's events (any; the element reads the running jobs).
    Arguments:
        none
    Counters:
        rounds: rounds recorded so far.
    Cost: O(r) over the running jobs r, in each ticked round, plus O(G) over the cluster's GPUs
        once jobs have shared GPUs; O(k) at the end for the k rounds not ticked (it lets them
        pass: quiet until the next event).
    See also: JobMetrics, SynergyTune, Proportional
    Paper: Synergy (OSDI'22) §6 (CPU and memory utilisation beside GPU utilisation).
    """

    state = ("_rows", "_gaps")
    fixed = ("_size",)

    category = "sink"
    inputs = (In("events", Events, multi=True),)

    def start(self, ctx: RoundContext) -> None:
        self._rows: list[tuple[float, int, float, float, float]] = []
        # Stretches of rounds not ticked: (rows recorded before the stretch, the time of the row
        # before it, its rounds), each expanded at the end into copies of the row before it.
        self._gaps: list[tuple[int, float, int]] = []
        cluster = ctx.cluster
        self._size = (float(cluster.n_gpus), float(np.sum(cluster.node_cpus)), float(np.sum(cluster.node_memory_gb)))
        self.counters["rounds"] = 0

    def tick(self, ctx: RoundContext, events: Events) -> None:
        running, jobs = ctx.running_rows, ctx.jobs
        gpus, cpus, memory = self._size
        self._note_gap(ctx)
        held = float(jobs.column("held")[running].sum())
        co_holder = ctx.co_holder
        if co_holder is not None:  # (each job of a pair counts the GPUs they share)
            held -= float(np.count_nonzero(co_holder >= 0))
        self._rows.append(
            (
                float(ctx.now),
                len(running),
                held / gpus,
                float(jobs.column("cpus_held")[running].sum()) / cpus if cpus else 0.0,
                float(jobs.column("memory_held_gb")[running].sum()) / memory if memory else 0.0,
            )
        )
        self.counters["rounds"] += 1

    quiet_after_change = True

    def quiet_until(self, ctx: RoundContext) -> float:
        # A round passed without a tick has no event and no new plan: its row would be the last
        # one's, at its own time (`_note_gap` fills it in at the next tick).
        return math.inf

    def _note_gap(self, ctx: RoundContext) -> None:
        """The rounds since the last row that were not ticked (passed by event skipping, jumped
        over with no job in the system, or, live, late)."""
        if not self._rows:
            return
        last, round_s = self._rows[-1][0], ctx.round_s
        missed = int(round((float(ctx.now) - last) / round_s)) - 1
        if missed > 0:
            if getattr(self, "_gaps", None) is None:  # (a state saved before gaps were kept)
                self._gaps = []
            self._gaps.append((len(self._rows), last, missed))
            self.counters["rounds"] += missed

    def finish(self, ctx: RoundContext) -> dict:
        schema = {"time_s": pl.Float64, "running": pl.Int64, "gpu": pl.Float64, "cpu": pl.Float64, "memory": pl.Float64}
        frame = pl.DataFrame(self._rows, schema=schema, orient="row")
        gaps = getattr(self, "_gaps", [])  # (a state saved before gaps were kept has none)
        if not gaps:
            return {"usage": frame}
        pieces, at = [], 0
        for before, after, rounds in gaps:
            pieces.append(frame.slice(at, before - at))
            last = self._rows[before - 1]
            copies = {name: np.full(rounds, value) for name, value in zip(schema, last)}
            # (the clock's own additions, round after round, from the last row's time)
            copies["time_s"] = np.add.accumulate(np.concatenate([[after], np.full(rounds, ctx.round_s)]))[1:]
            pieces.append(pl.DataFrame(copies, schema=schema))
            at = before
        pieces.append(frame.slice(at))
        return {"usage": pl.concat(pieces)}
