"""Sources: where jobs come from. Each round a source emits the jobs that have arrived by the
round's boundary (a job arriving inside a round becomes visible at the next boundary)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from roundhouse.errors import SchedError, TraceError
from roundhouse.runtime.element import MAX_JOBS, MAX_RATE, MAX_SECONDS, MAX_START_ID, Element, Out, element
from roundhouse.runtime.element_failures import argument_error
from roundhouse.runtime.types import Jobs
from roundhouse.runtime.values import Duration, FilePath, Rate, at_most, describe, existing_file, non_negative, one_of, positive
from roundhouse.traces.jobs import JobBatch

if TYPE_CHECKING:
    import polars as pl

    from roundhouse.runtime.context import RoundContext


class _Replay(Element):
    """Emits a prepared batch of jobs in arrival order, round by round (shared by sources).

    Like every source, it emits new jobs as a `JobBatch`; the engine adds them to the job
    table and passes them on as `Jobs`."""

    state = ("_next",)
    fixed = ("_batch", "_arrivals", "_none", "unknown_models")

    category = "source"
    outputs = (Out("jobs", Jobs),)

    def _load(self, ctx: RoundContext, trace, origin: str, profile=None, from_file: bool = False) -> None:
        """Prepare the source's jobs (`from_file`: read from the trace file `origin`)."""
        try:
            batch, unknown = ctx.prepare(trace, origin, profile)
        except TraceError as err:
            raise _at_declaration(self, err, from_file, None if from_file else _drawn_too_large(self, ctx, trace)) from None
        self._batch: JobBatch = batch
        self._arrivals = batch.columns["arrival_s"]
        self._next = 0
        self._none = batch.slice(0, 0)  # what a round without arrivals emits
        self.unknown_models = sorted(unknown)
        self.counters["arrived"] = 0

    def tick(self, ctx: RoundContext) -> JobBatch:
        arrivals = self._arrivals
        if self._next >= len(arrivals) or arrivals[self._next] > ctx.now + 1e-9:
            return self._none
        stop = int(arrivals.searchsorted(ctx.now + 1e-9, side="right"))
        jobs = self._batch.slice(self._next, stop)
        self.counters["arrived"] += stop - self._next
        self._next = stop
        return jobs

    def exhausted(self) -> bool:
        return self._next >= len(self._arrivals)

    def coming_job_ids(self) -> np.ndarray:
        return self._batch.columns["job_id"]

    def pass_arrivals(self, t: float) -> JobBatch:
        """Pass over, unemitted, the jobs that ticks up to the boundary `t` would have emitted,
        and return those still to come (a graph taking over a world whose rounds up to `t`
        have run: runtime/whatif.py)."""
        self._next = max(self._next, int(np.searchsorted(self._arrivals, t + 1e-9, side="right")))
        return self._batch.slice(self._next, len(self._arrivals))

    def next_arrival_s(self) -> float:
        return float(self._arrivals[self._next]) if self._next < len(self._arrivals) else float("inf")

    quiet_after_change = True

    def completions_wait(self, ctx: RoundContext) -> bool:
        return True  # (it does not see completions)

    def quiet_until(self, ctx: RoundContext) -> float:
        return self.next_arrival_s() - 1e-9  # (the tolerance `tick` reads arrivals with)

    def arrivals_wait(self, ctx: RoundContext) -> bool:
        return True  # (ticked in a round carried out in passing, as in any other)


def _at_declaration(source: Element, err: TraceError, from_file: bool, argument: str | None = None) -> TraceError | SchedError:
    """A check of the source's jobs against the run's world, made as it starts (traces/prepare.py:
    a job asking for more GPUs than the cluster has, ...), said where the graph declares the
    source, as other element errors are, or at the `argument` that drew what the check refuses.
    A trace file's job keeps the file first (the job is there, and --trace may have named the
    file), the declaration after."""
    named = f"element '{source.name}' ({type(source).__name__})"
    if from_file:
        where = f", declared at {source.declared_at}" if source.declared_at is not None else ""
        located = TraceError(err.path, f"{err.message} (a job of {named}{where})", row=err.row, column=err.column)
        located.also = err.also
        return located
    what = f"column '{err.column}': {err.message}" if err.column else err.message
    if argument is not None:
        return argument_error(source, argument, f"{named}: {what}")
    return SchedError(f"{named}: {what}", source.declared_at)


def _drawn_too_large(source: Element, ctx: RoundContext, trace) -> str | None:
    """`gpus` when a generator drew a job larger than the cluster's largest GPU type, the check
    traces/prepare.py makes first (not in a run with an elastic profile, whose schedulers give
    each job the GPUs they choose): that argument drew its GPU count. None for any other refusal."""
    if getattr(source, "gpus", None) is None or ctx.throughput.elastic is not None or not trace.height:
        return None
    cluster = ctx.cluster
    largest = int(np.bincount(cluster.gpu_type, minlength=len(cluster.gpu_types)).max())
    return "gpus" if int(trace["gpus"].max()) > largest else None


def _only_with_rate(instance, attribute, value) -> None:
    """TraceSource's seed draws the arrivals that `rate` redraws: without a rate the trace's
    own arrival times are kept and a seed would change nothing."""
    if value is not None and instance.rate is None:
        raise ValueError(
            "needs `rate`: it seeds the arrivals redrawn at that rate; without one the trace's own arrival times are kept "
            "and a seed would change nothing (give rate=..., or leave seed out)"
        )


@element
class TraceSource(_Replay):
    """Replay a job trace: each job arrives at its `arrival_s`.

    Reads any trace format Roundhouse knows (canonical CSV or Parquet, Gavel's `.trace`,
    Tiresias' CSV, Philly's `cluster_job_log`, Helios' and Dally's logs, Alibaba PAI's task
    table, Pollux's workload CSV, the ONES artifact's trace). With `rate`, the arrival times are
    drawn again as a Poisson process at that rate (as Blox and Gavel do with the Philly trace,
    which then contributes only the job population); the jobs keep their order. A job whose
    trace names a GPU type (`gpu_type`, as PAI's task table gives) runs only on GPUs of that
    type; a type the cluster lacks is an error when the run starts.

    Ports:
        jobs: the jobs arriving this round.
    Arguments:
        path: the trace file (relative to the `.sched` file).
        rate: if given, redraw arrivals as a Poisson process at this rate.
        jobs: if given, use only the first this many jobs (in arrival order).
        seed: seed for the arrivals redrawn at `rate` (only with rate; default: derived from the graph's seed).
        format: the trace format: auto, canonical, gavel, tiresias, philly, helios, pai, pollux or ones.
        timing: profile (jobs whose model the profile knows run at its throughputs) or duration
          (every job runs for its duration_s wherever it is placed, as in Tiresias' simulator).
    Counters:
        arrived: jobs emitted so far.
        skipped: the trace's records its reader skipped (jobs that never ran, or asked for no GPU: Philly's, Helios' and PAI's logs hold them).
    Cost: O(k + log J) over the jobs k arriving this round (a binary search in the trace's J
        arrivals and a slice); reading the trace once, O(J).
    See also: PoissonSource, AcceptAll, JobPool
    Paper: Blox (EuroSys'24) §4 (Philly-Trace with Poisson arrivals); Gavel (OSDI'20) §7.1.
    """

    path: FilePath = attrs.field(validator=existing_file)
    rate: Rate | None = attrs.field(default=None, validator=[positive, at_most(MAX_RATE)])
    jobs: int | None = attrs.field(default=None, validator=[positive, at_most(MAX_JOBS)])
    seed: int | None = attrs.field(default=None, validator=[non_negative, _only_with_rate])
    format: str = attrs.field(
        default="auto", validator=one_of("auto", "canonical", "gavel", "tiresias", "philly", "helios", "pai", "pollux", "ones")
    )
    timing: str = attrs.field(default="profile", validator=one_of("profile", "duration"))

    def start(self, ctx: RoundContext) -> None:
        from roundhouse.traces.generators import poisson_arrivals
        from roundhouse.traces.profiles import ProfileTable
        from roundhouse.traces.readonce import take_or_read

        # (a Pollux workload names the graph's elastic applications; a canonical elastic job needs no work column.
        # The cluster's check may have read the trace already for the GPU types it names: taken, not read again.)
        loaded = take_or_read(self.path, self.format, ctx.throughput.elastic)
        trace = loaded.frame
        if self.jobs is not None:
            trace = trace.head(self.jobs)
        if self.rate is not None:
            problem = _too_slow(trace.height, self.rate)
            if problem:  # (known once the trace is read: said at the rate, as a generator's is when checked)
                raise argument_error(
                    self, "rate", f"argument 'rate' of TraceSource '{self.name}' {problem}", hint="a faster rate or fewer jobs"
                )
            arrivals = poisson_arrivals(trace.height, float(self.rate), ctx.rng(self.seed))
            if len(arrivals) and arrivals[-1] > float(MAX_SECONDS):
                # The rate passed its check, on the average span: these draws, by chance, went further.
                seed = "a seed derived from the graph's" if self.seed is None else f"seed {self.seed}"
                last = f"must be at most {float(MAX_SECONDS):g} s (a century), got {float(arrivals[-1]):g}"
                raise _beyond_a_century(self, "redrawn", trace.height, seed, last)
            trace = trace.with_columns(arrival_s=arrivals)
        if self.timing == "duration" and trace["duration_s"].null_count():
            # (a job known by its model and iterations: the first such, named, as prepare names a job)
            first = trace["job_id"].filter(trace["duration_s"].is_null())[0]
            missing = TraceError(
                str(self.path), f"job {first} has none, and timing=duration needs a duration_s for every job", column="duration_s"
            )
            raise _at_declaration(self, missing, from_file=True)
        profile = None
        if self.timing == "duration":  # an empty profile: no job is known by its model
            profile = ProfileTable.from_frame(ProfileTable.load().frame.clear(), source="(no profile: timing=duration)")
        self._load(ctx, trace, str(self.path), profile, from_file=True)
        self.counters["skipped"] = loaded.skipped  # (the run's summary notes them: describe and convert do)

    def jobs_ahead(self, elastic=None) -> pl.DataFrame:
        """The jobs it will emit, known before it starts (`check` and `run` warn of a graph that
        would measure or start none of them): `job_id` and `model` (null: a job without one).
        The trace is read as `start` reads it, under the graph's `elastic` profile, and kept
        for `start` to take: it is read once."""
        import polars as pl

        from roundhouse.traces.readonce import read_for_source

        trace = read_for_source(self.path, self.format, elastic).frame
        if self.jobs is not None:
            trace = trace.head(self.jobs)
        model = pl.col("model") if "model" in trace.columns else pl.lit(None, dtype=pl.String).alias("model")
        return trace.select(pl.col("job_id"), model)


def _numbered(start_id: int, jobs: int, models: str) -> pl.DataFrame:
    """A generator's jobs as `jobs_ahead` gives them: ids from `start_id`, and `model` only
    when its jobs have none (`models=none`); drawn models are not known before it starts."""
    import polars as pl

    ids = pl.DataFrame({"job_id": np.arange(start_id, start_id + jobs, dtype=np.int64)})
    return ids.with_columns(model=pl.lit(None, dtype=pl.String)) if models == "none" else ids


def _drawn_from(models: str) -> tuple[str, ...]:
    """The names a generator's `models` draws from (`check` and `run` warn of a Pollux none of
    them is an application for): Blox's models, or none."""
    from roundhouse.traces.generators import BLOX_MODELS

    return BLOX_MODELS if models == "blox" else ()


def _too_slow(jobs: int, rate) -> str:
    """Why a rate is too slow for `jobs` Poisson arrivals ("" if it is not): on average they
    would span more than a century, which no trace's arrival times may. (Compared as a product:
    the span itself of a vanishing rate is no finite number.)"""
    gaps = jobs - 1  # (the first job arrives at 0)
    if rate is None or rate <= 0 or gaps <= float(MAX_SECONDS) * float(rate):
        return ""
    slowest = gaps / float(MAX_SECONDS) * 3600
    step = 10 ** (math.floor(math.log10(slowest)) - 2)  # (rounded up to 3 digits: a rate that passes)
    return (
        f"must be at least {math.ceil(slowest / step) * step:.3g}/h for {jobs:,} jobs, got {describe(rate)} "
        "(their arrivals would span more than a century)"
    )


def _beyond_a_century(source: Element, drawn: str, jobs: int, seed: str, detail: str) -> SchedError:
    """The error for a source whose arrivals, drawn at a rate that passed `_too_slow` (on the
    average span), by chance went further than a century, which no trace's arrival times may:
    said at its rate."""
    rate = getattr(source, "rate", None)
    return argument_error(
        source,
        "rate",
        f"{type(source).__name__} '{source.name}': the arrivals of its {jobs:,} jobs {drawn} at {describe(rate)} ({seed}) "
        f"span more than a century: {detail}",
        hint="a faster rate, fewer jobs or another seed",
    )


def _arrivals_within_a_century(instance, attribute, value) -> None:
    """A generator's rate, against its `jobs`: said at the argument when the graph is checked,
    not when the run has drawn the arrivals."""
    problem = _too_slow(instance.jobs, value)
    if problem:
        raise ValueError(problem)


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
    Cost: O(k + log J) over the jobs k arriving this round (a binary search in the J generated
        arrivals and a slice).
    See also: TraceSource
    Paper: Gavel (OSDI'20) §7.1 and its generate_job; Blox (EuroSys'24) §4.
    """

    rate: Rate = attrs.field(validator=[positive, at_most(MAX_RATE), _arrivals_within_a_century])
    jobs: int = attrs.field(default=1000, validator=[positive, at_most(MAX_JOBS)])
    seed: int | None = attrs.field(default=None, validator=non_negative)
    gpus: str = attrs.field(default="philly", validator=one_of("philly", "single"))
    models: str = attrs.field(default="none", validator=one_of("none", "blox"))
    start_id: int = attrs.field(default=0, validator=[non_negative, at_most(MAX_START_ID)])

    def start(self, ctx: RoundContext) -> None:
        from roundhouse.traces.generators import generate

        seed = int(ctx.rng(self.seed).integers(2**31)) if self.seed is None else self.seed
        # Models are drawn from the graph's profile (the shipped table unless `profile` names
        # another), so that every job gets a configuration the run can look up.
        try:
            trace = generate(
                self.jobs, float(self.rate), seed, gpus=self.gpus, models=self.models, start_id=self.start_id, profile=ctx.profile
            )
        except TraceError as err:
            if err.column != "arrival_s":
                raise
            raise _beyond_a_century(self, "drawn", self.jobs, f"seed {seed}", err.message) from None
        self._load(ctx, trace, f"{self.name} (PoissonSource)")

    def jobs_ahead(self, elastic=None) -> pl.DataFrame:
        """Its jobs' ids (and models, with `models=none`), known before it starts (`_numbered`)."""
        return _numbered(self.start_id, self.jobs, self.models)

    def models_drawn(self) -> tuple[str, ...]:
        """The model names its jobs are drawn from, known before it starts (`_drawn_from`)."""
        return _drawn_from(self.models)


@element
class BurstSource(_Replay):
    """Inject bursts of extra jobs: `jobs` jobs in each window of `length`, one window every
    `every`, for `bursts` windows.

    Inside a window the arrival times are uniform (a Poisson process given its count). GPU
    counts follow the Philly distribution (or are all 1); durations are uniform between
    `min_duration` and `max_duration` when both are given (Blox §5.2's short jobs, 10 minutes to
    an hour), else drawn from the Philly distribution. Connect it beside the main source, into
    the same admission gate. Job ids start at `start_id`, out of the way of the main trace's.

    Ports:
        jobs: the jobs arriving this round.
    Arguments:
        jobs: jobs per burst.
        length: how long each burst lasts.
        every: time from the start of one burst to the next.
        offset: when the first burst starts.
        bursts: how many bursts.
        min_duration: shortest duration (with max_duration: uniform durations).
        max_duration: longest duration.
        gpus: GPU counts: philly (1/2/4/8 GPUs) or single.
        models: none (jobs known by duration only) or blox.
        start_id: the first job id.
        seed: seed (default: derived from the graph's seed).
    Counters:
        arrived: jobs emitted so far.
    Cost: O(k + log J) over the jobs k arriving this round (a binary search in the J generated
        arrivals and a slice).
    See also: PoissonSource, TraceSource, AcceptThreshold
    Paper: Blox (EuroSys'24) §5.1 (a spike of 16 jobs in one hour each day, Fig 13) and §5.2 (bursty load).
    """

    jobs: int = attrs.field(validator=[positive, at_most(MAX_JOBS)])
    length: Duration = attrs.field(default=Duration(3600.0), validator=[positive, at_most(MAX_SECONDS)])
    every: Duration = attrs.field(default=Duration(86400.0), validator=[positive, at_most(MAX_SECONDS)])
    offset: Duration = attrs.field(default=Duration(0.0), validator=[non_negative, at_most(MAX_SECONDS)])
    bursts: int = attrs.field(default=1, validator=[positive, at_most(MAX_JOBS)])
    min_duration: Duration | None = attrs.field(default=None, validator=[positive, at_most(MAX_SECONDS)])
    max_duration: Duration | None = attrs.field(default=None, validator=[positive, at_most(MAX_SECONDS)])
    gpus: str = attrs.field(default="philly", validator=one_of("philly", "single"))
    models: str = attrs.field(default="none", validator=one_of("none", "blox"))
    start_id: int = attrs.field(default=1_000_000, validator=[non_negative, at_most(MAX_START_ID)])
    seed: int | None = attrs.field(default=None, validator=non_negative)

    def __attrs_post_init__(self) -> None:
        if self.jobs * self.bursts > MAX_JOBS:
            raise ValueError(f"jobs x bursts ({self.jobs * self.bursts:,}) is more than {MAX_JOBS:,} jobs")
        if (self.min_duration is None) != (self.max_duration is None):
            raise ValueError("give both min_duration and max_duration (uniform durations), or neither (Philly durations)")
        if self.min_duration is not None and self.max_duration is not None and self.min_duration > self.max_duration:
            raise ValueError(f"min_duration ({self.min_duration:g}s) is longer than max_duration ({self.max_duration:g}s)")
        if self.bursts > 1 and self.length > self.every:  # (one burst: no next one to overlap)
            raise ValueError(f"a burst ({self.length:g}s) cannot last longer than the time between bursts ({self.every:g}s)")
        end = float(self.offset) + float(self.every) * (self.bursts - 1) + float(self.length)
        if end > float(MAX_SECONDS):
            # (as a trace's arrival times may not: said here, not when the run has drawn them)
            raise ValueError(
                f"its last burst would end at {describe(Duration(end))} (offset + (bursts - 1) x every + length), "
                f"more than a century ({describe(MAX_SECONDS)}) after the start"
            )

    def start(self, ctx: RoundContext) -> None:
        import polars as pl

        from roundhouse.traces.generators import TIME_DECIMALS, assign_models, philly_durations, philly_gpus
        from roundhouse.traces.schema import validate

        seed = int(ctx.rng(self.seed).integers(2**31)) if self.seed is None else self.seed
        time_rng, duration_rng, gpu_rng, model_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
        n = self.jobs * self.bursts
        within = np.sort(time_rng.uniform(0.0, float(self.length), size=(self.bursts, self.jobs)), axis=1)
        arrivals = float(self.offset) + float(self.every) * np.arange(self.bursts)[:, None] + within
        if self.min_duration is None or self.max_duration is None:  # (both or neither)
            durations = philly_durations(n, duration_rng)
        else:
            durations = duration_rng.uniform(float(self.min_duration), float(self.max_duration), size=n)
        gpus = philly_gpus(n, gpu_rng) if self.gpus == "philly" else np.ones(n, dtype=np.int64)
        columns: dict[str, np.ndarray | pl.Series] = {
            "job_id": np.arange(self.start_id, self.start_id + n, dtype=np.int64),
            "arrival_s": np.round(arrivals.ravel(), TIME_DECIMALS),
            "gpus": gpus,
            "duration_s": np.round(durations, TIME_DECIMALS),
        }
        if self.models == "blox":
            names, batch = assign_models(gpus, model_rng, ctx.profile)
            columns["model"] = pl.Series(names.tolist(), dtype=pl.String)
            columns["batch_size"] = batch
        self._load(ctx, validate(pl.DataFrame(columns), f"{self.name} (BurstSource)"), f"{self.name} (BurstSource)")

    def jobs_ahead(self, elastic=None) -> pl.DataFrame:
        """Its jobs' ids (and models, with `models=none`), known before it starts (`_numbered`)."""
        return _numbered(self.start_id, self.jobs * self.bursts, self.models)

    def models_drawn(self) -> tuple[str, ...]:
        """The model names its jobs are drawn from, known before it starts (`_drawn_from`)."""
        return _drawn_from(self.models)


@element
class LiveSource(Element):
    """Accept jobs submitted to a live scheduler with `roundhouse submit`.

    Each round it emits the jobs submitted since the last one: like any arrival, a job
    submitted inside a round becomes visible at the next boundary, with its arrival time the
    moment the scheduler received it. A job names a model (one of the example workloads, see
    agents/workloads) and its iterations, or a `command` to run and its `duration_s`. The
    scheduler checks each submission against the trace schema and the profile before it
    answers, and journals it, so an accepted job is never lost. In a simulation nobody can
    submit: it emits nothing, and the run ends when the other sources' jobs are done.

    Ports:
        jobs: the jobs submitted this round.
    Arguments:
        jobs: how many jobs to expect: once that many have arrived the run may end when all are done (unlimited if omitted: the scheduler serves until stopped or --until).
    Counters:
        arrived: jobs emitted so far.
    Cost: O(k) over the jobs k submitted since the last round.
    See also: TraceSource, PoissonSource, JobPool
    Paper: Blox (EuroSys'24) §6.3, the CentralScheduler's job submission.
    """

    state = ("_live", "_none")
    # Its jobs come only from `roundhouse submit`: a simulation fed by nothing else is warned of
    # (runtime/useless_runs.py).
    submitted_live: ClassVar[bool] = True

    category = "source"
    outputs = (Out("jobs", Jobs),)

    jobs: int | None = attrs.field(default=None, validator=[positive, at_most(MAX_JOBS)])

    def start(self, ctx: RoundContext) -> None:
        self._live = False
        self._none: JobBatch | None = None
        self.counters["arrived"] = 0

    def tick(self, ctx: RoundContext) -> JobBatch:
        frame = ctx.events.submitted
        if frame is not None:
            self._live = True
        if frame is None or frame.height == 0:
            if self._none is None:
                self._none = JobBatch({"job_id": np.zeros(0, dtype=np.int64)}, np.zeros((0, len(ctx.cluster.gpu_types))))
            return self._none
        batch, _ = ctx.prepare(frame, f"{self.name} (submission)")
        self.counters["arrived"] += len(batch)
        return batch

    def exhausted(self) -> bool:
        return not self._live or (self.jobs is not None and self.counters["arrived"] >= self.jobs)

    def next_arrival_s(self) -> float:
        return float("inf")


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
    Cost: O(k + log J) over the jobs k arriving this round (a binary search in the J generated
        arrivals and a slice).
    See also: PoissonSource, MinCostSLO, SloMetrics
    Paper: Gavel (OSDI'20) §7.3 (cost experiment).
    """

    jobs: int = attrs.field(default=500, validator=[positive, at_most(MAX_JOBS)])
    rate: Rate | None = attrs.field(default=None, validator=[positive, at_most(MAX_RATE), _arrivals_within_a_century])
    seed: int | None = attrs.field(default=None, validator=non_negative)
    start_id: int = attrs.field(default=0, validator=[non_negative, at_most(MAX_START_ID)])

    def start(self, ctx: RoundContext) -> None:
        from roundhouse.traces.generators import cost_workload

        seed = int(ctx.rng(self.seed).integers(2**31)) if self.seed is None else self.seed
        try:
            trace = cost_workload(self.jobs, None if self.rate is None else float(self.rate), seed, start_id=self.start_id)
        except TraceError as err:
            if err.column != "arrival_s":
                raise
            raise _beyond_a_century(self, "drawn", self.jobs, f"seed {seed}", err.message) from None
        self._load(ctx, trace, f"{self.name} (CostWorkload)")

    def jobs_ahead(self, elastic=None) -> pl.DataFrame:
        """Its jobs' ids, known before it starts (each one's model is drawn then)."""
        return _numbered(self.start_id, self.jobs, "drawn")

    def models_drawn(self) -> tuple[str, ...]:
        """The model names its jobs are drawn from (Gavel's cost workload: two)."""
        return ("ResNet-50", "A3C")
