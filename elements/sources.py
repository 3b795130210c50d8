"""Sources: where jobs come from. Each round a source emits the jobs that have arrived by the
round's boundary (a job arriving inside a round becomes visible at the next boundary)."""

from __future__ import annotations

import attrs
import numpy as np

from runtime.element import Element, Out, element
from runtime.types import Jobs
from runtime.values import FilePath, Rate, non_negative, one_of, positive
from runtime.world import JobBatch, prepare_jobs


_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_ROWS.flags.writeable = False


class _Replay(Element):
    """Emits a prepared batch of jobs in arrival order, round by round (shared by sources)."""

    category = "source"
    outputs = (Out("jobs", Jobs),)

    def _load(self, ctx, trace, origin: str) -> None:
        batch, unknown = prepare_jobs(trace, ctx.cluster, ctx.profile, ctx.reference_gpu, origin)
        self._batch: JobBatch = batch
        self._arrivals = batch.columns["arrival_s"]
        self._next = 0
        self.unknown_models = sorted(unknown)
        self.counters["arrived"] = 0

    def tick(self, ctx) -> Jobs:
        if self._next >= len(self._arrivals) or self._arrivals[self._next] > ctx.now + 1e-9:
            return ctx.jobs.view(_NO_ROWS, Jobs)
        stop = int(np.searchsorted(self._arrivals, ctx.now + 1e-9, side="right"))
        jobs = ctx.register_jobs(self._batch.slice(self._next, stop))
        self.counters["arrived"] += stop - self._next
        self._next = stop
        return jobs

    def exhausted(self) -> bool:
        return self._next >= len(self._arrivals)

    def next_arrival_s(self) -> float:
        return float(self._arrivals[self._next]) if self._next < len(self._arrivals) else float("inf")


@element
class TraceSource(_Replay):
    """Replay a job trace: each job arrives at its `arrival_s`.

    Reads any trace format Roundhouse knows (canonical CSV or Parquet, Philly's
    `cluster_job_log`, Gavel's `.trace`, Tiresias' CSV). With `rate`, the arrival times are
    drawn again as a Poisson process at that rate (as Blox and Gavel do with the Philly trace,
    which then contributes only the job population); the jobs keep their order.

    Ports:
        jobs: the jobs arriving this round.
    Arguments:
        path: the trace file (relative to the `.sched` file).
        rate: if given, redraw arrivals as a Poisson process at this rate.
        jobs: if given, use only the first this many jobs (in arrival order).
        seed: seed for the redrawn arrivals (default: derived from the graph's seed).
        format: the trace format: auto, canonical, philly, gavel or tiresias.
    Counters:
        arrived: jobs emitted so far.
    See also: PoissonSource, AcceptAll, JobPool
    Paper: Blox (EuroSys'24) §4 (Philly-Trace with Poisson arrivals); Gavel (OSDI'20) §7.1.
    """

    path: FilePath
    rate: Rate | None = attrs.field(default=None, validator=positive)
    jobs: int | None = attrs.field(default=None, validator=positive)
    seed: int | None = attrs.field(default=None, validator=non_negative)
    format: str = attrs.field(default="auto", validator=one_of("auto", "canonical", "philly", "gavel", "tiresias"))

    def start(self, ctx) -> None:
        from traces.formats import read_trace
        from traces.generators import poisson_arrivals

        trace = read_trace(self.path, format=self.format)
        if self.jobs is not None:
            trace = trace.head(self.jobs)
        if self.rate is not None:
            arrivals = poisson_arrivals(trace.height, float(self.rate), ctx.rng(self.seed))
            trace = trace.with_columns(arrival_s=arrivals)
        self._load(ctx, trace, str(self.path))


@element
class PoissonSource(_Replay):
    """Generate jobs: Poisson arrivals with the Philly duration and GPU-count distribution.

    Durations are 10^U(1.5,3) minutes with probability 0.8, else 10^U(3,4) minutes; GPU counts
    are 1, 2, 4, 8 with probability 0.7, 0.1, 0.15, 0.05 (or all 1 with `gpus=single`). With
    `models=blox`, each job is given one of the Blox Table 2 models that can run at its GPU
    count, and progresses at that model's profiled throughput.

    Ports:
        jobs: the jobs arriving this round.
    Arguments:
        rate: arrival rate.
        jobs: how many jobs to generate.
        seed: seed (default: derived from the graph's seed).
        gpus: GPU counts: philly (the mix above) or single.
        models: none (jobs known by duration only) or blox.
        start_id: the first job id.
    Counters:
        arrived: jobs emitted so far.
    See also: TraceSource
    Paper: Gavel (OSDI'20) §7.1 and its generate_job; Blox (EuroSys'24) §4.
    """

    rate: Rate = attrs.field(validator=positive)
    jobs: int = attrs.field(default=1000, validator=positive)
    seed: int | None = attrs.field(default=None, validator=non_negative)
    gpus: str = attrs.field(default="philly", validator=one_of("philly", "single"))
    models: str = attrs.field(default="none", validator=one_of("none", "blox"))
    start_id: int = attrs.field(default=0, validator=non_negative)

    def start(self, ctx) -> None:
        from traces.generators import generate

        seed = int(ctx.rng(self.seed).integers(2**31)) if self.seed is None else self.seed
        trace = generate(
            self.jobs, float(self.rate), seed, gpus=self.gpus, models=self.models, start_id=self.start_id
        )
        self._load(ctx, trace, f"{self.name} (PoissonSource)")


@element
class CostWorkload(_Replay):
    """Generate Gavel's cost workload: ResNet-50 and A3C jobs with durations in days and SLOs.

    Each job is a single-GPU ResNet-50 (batch size 64) or A3C, equally likely, that would run
    0.5, 1, 2, 4 or 8 days on a V100, with an SLO (`slo_s`) of 1.2, 2 or 10 times that duration.
    Arrivals are Poisson at `rate`, or all at time 0 without one.

    Ports:
        jobs: the jobs arriving this round.
    Arguments:
        jobs: how many jobs to generate.
        rate: arrival rate (omit for all jobs at time 0).
        seed: seed (default: derived from the graph's seed).
        start_id: the first job id.
    Counters:
        arrived: jobs emitted so far.
    See also: PoissonSource, MinCostSLO, SloMetrics
    Paper: Gavel (OSDI'20) §7.3 (cost experiment).
    """

    jobs: int = attrs.field(default=500, validator=positive)
    rate: Rate | None = attrs.field(default=None, validator=positive)
    seed: int | None = attrs.field(default=None, validator=non_negative)
    start_id: int = attrs.field(default=0, validator=non_negative)

    def start(self, ctx) -> None:
        from traces.generators import cost_workload

        seed = int(ctx.rng(self.seed).integers(2**31)) if self.seed is None else self.seed
        trace = cost_workload(self.jobs, None if self.rate is None else float(self.rate), seed, start_id=self.start_id)
        self._load(ctx, trace, f"{self.name} (CostWorkload)")
