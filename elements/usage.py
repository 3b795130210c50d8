"""Resource usage per round: what the running jobs hold of the cluster's GPUs, CPU cores and
memory, round by round (the run's summary gives the averages: elements/sinks.py)."""

from __future__ import annotations

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
    running jobs, and `gpu`, `cpu` and `memory` as fractions of the cluster's. CPU and memory
    count what comes with the GPUs (the GPU-proportional share, or an allocator's: Proportional,
    SynergyTune), not what the jobs' processes use.

    Ports:
        events: the round's events (any; the element reads the running jobs).
    Arguments:
        none
    Counters:
        rounds: rounds recorded so far.
    Cost: O(r) over the running jobs r, every round (it is never skipped: it records each one).
    See also: JobMetrics, SynergyTune, Proportional
    Paper: Synergy (OSDI'22) §6 (CPU and memory utilisation beside GPU utilisation).
    """

    state = ("_rows",)
    fixed = ("_size",)

    category = "sink"
    inputs = (In("events", Events, multi=True),)

    def start(self, ctx: RoundContext) -> None:
        self._rows: list[tuple[float, int, float, float, float]] = []
        cluster = ctx.cluster
        self._size = (float(cluster.n_gpus), float(np.sum(cluster.node_cpus)), float(np.sum(cluster.node_memory_gb)))
        self.counters["rounds"] = 0

    def tick(self, ctx: RoundContext, events: Events) -> None:
        running, jobs = ctx.running_rows, ctx.jobs
        gpus, cpus, memory = self._size
        self._rows.append(
            (
                float(ctx.now),
                len(running),
                float(jobs.column("held")[running].sum()) / gpus,
                float(jobs.column("cpus_held")[running].sum()) / cpus if cpus else 0.0,
                float(jobs.column("memory_held_gb")[running].sum()) / memory if memory else 0.0,
            )
        )
        self.counters["rounds"] += 1

    def finish(self, ctx: RoundContext) -> dict:
        schema = {"time_s": pl.Float64, "running": pl.Int64, "gpu": pl.Float64, "cpu": pl.Float64, "memory": pl.Float64}
        return {"usage": pl.DataFrame(self._rows, schema=schema, orient="row")}
