"""Synthetic workloads from the distributions that Gavel and Blox publish and use.

Every function takes a seeded `np.random.Generator` (or a seed) and nothing else random, so the
same seed gives the same trace, byte for byte once written. `generate()` draws arrivals,
durations, GPU counts and models from separate child streams of one seed, so switching models
on or off does not move the arrivals or durations of the jobs.

The "Philly distribution" is the one in Gavel's `generate_job` and Blox's `get_gavel_like_iter`
(both from Gandiva's description of Microsoft's Philly cluster): a duration of 10^U(1.5, 3)
minutes with probability 0.8 and 10^U(3, 4) minutes otherwise, and 1, 2, 4 or 8 GPUs with
probabilities 0.7, 0.1, 0.15 and 0.05.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from roundhouse.traces.profiles import REFERENCE_GPU_TYPE, ProfileTable
from roundhouse.traces.schema import validate

# Blox Table 2 (EuroSys'24) model names; LSTM is Gavel's LM and Recoder its Recommendation.
BLOX_MODELS: tuple[str, ...] = ("ResNet-18", "CycleGAN", "ResNet-50", "LSTM", "Recoder", "Transformer", "A3C")
PHILLY_GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8)
PHILLY_GPU_PROBABILITIES: tuple[float, ...] = (0.7, 0.1, 0.15, 0.05)
PHILLY_SHORT_PROBABILITY = 0.8
PHILLY_SHORT_LOG10_MINUTES = (1.5, 3.0)
PHILLY_LONG_LOG10_MINUTES = (3.0, 4.0)
# Generated times are rounded to the millisecond: enough for any scheduler, and short to write.
TIME_DECIMALS = 3


def poisson_arrivals(n: int, rate_per_s: float, rng: np.random.Generator, start_s: float = 0.0) -> np.ndarray:
    """`n` arrival times (s) of a Poisson process at `rate_per_s`; the first job arrives at `start_s`,
    as in a trace whose first submission is t = 0."""
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ValueError(f"the arrival rate must be a positive number of jobs per second, got {rate_per_s}")
    gaps = rng.exponential(1.0 / rate_per_s, size=n)
    return start_s + np.concatenate(([0.0], np.cumsum(gaps[:-1]))) if n else np.empty(0)


def philly_durations(n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` job durations in seconds from the Philly distribution (80 % short, 20 % long)."""
    short = rng.random(n) < PHILLY_SHORT_PROBABILITY
    short_exp = rng.uniform(*PHILLY_SHORT_LOG10_MINUTES, size=n)
    long_exp = rng.uniform(*PHILLY_LONG_LOG10_MINUTES, size=n)
    return 60.0 * np.power(10.0, np.where(short, short_exp, long_exp))


def philly_gpus(n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` GPU counts from the Philly distribution: 1/2/4/8 with probability .7/.1/.15/.05."""
    edges = np.cumsum(PHILLY_GPU_PROBABILITIES)[:-1]
    return np.asarray(PHILLY_GPU_COUNTS, dtype=np.int64)[np.searchsorted(edges, rng.random(n), side="right")]


def assign_models(
    gpus: np.ndarray,
    rng: np.random.Generator,
    profile: ProfileTable | None = None,
    models: tuple[str, ...] = BLOX_MODELS,
) -> tuple[np.ndarray, np.ndarray]:
    """A (model, batch size) for each job, uniform among the configurations of `models` that the
    profile runs at that job's GPU count on the reference GPU type (V100, consolidated); so a
    multi-GPU job only gets a model that Gavel measured distributed. Returns (models, batch sizes)."""
    profile = profile or ProfileTable.load()
    gpus = np.asarray(gpus, dtype=np.int64)
    out_models = np.empty(gpus.shape, dtype=object)
    out_batch = np.zeros(gpus.shape, dtype=np.int64)
    for count in np.unique(gpus):  # a handful of distinct counts, in sorted order: deterministic
        choices = model_choices(profile, int(count), models)
        if not choices:
            raise ValueError(no_model_on(profile, int(count), models))
        where = np.flatnonzero(gpus == count)
        picked = rng.integers(0, len(choices), size=where.size)
        out_models[where] = np.array([c[0] for c in choices], dtype=object)[picked]
        out_batch[where] = np.array([c[1] for c in choices], dtype=np.int64)[picked]
    return out_models, out_batch


def model_choices(profile: ProfileTable, count: int, models: tuple[str, ...] = BLOX_MODELS) -> list[tuple[str, int]]:
    """The (model, batch size) configurations of `models` the profile runs on `count` GPUs of the
    reference type: what `assign_models` draws from."""
    wanted = _profiled(profile, models)
    return [c for c in profile.configs(count, REFERENCE_GPU_TYPE) if c[0] in wanted]


def no_model_on(profile: ProfileTable, count: int, models: tuple[str, ...] = BLOX_MODELS) -> str:
    """Why no job of `count` GPUs can be given a model of `models`."""
    return f"no model of {sorted(_profiled(profile, models))} runs on {count} GPUs in {profile.source}"


def _profiled(profile: ProfileTable, models: tuple[str, ...]) -> set[str]:
    """`models` as the profile names them (those it knows)."""
    return {name for m in models if (name := profile.canonical_model(m)) is not None}


def generate(
    jobs: int,
    rate_per_s: float,
    seed: int,
    durations: str | float = "philly",
    gpus: str | int = "philly",
    models: str = "none",
    start_id: int = 0,
    profile: ProfileTable | None = None,
    loss: str = "none",
) -> pl.DataFrame:
    """A canonical trace of `jobs` jobs with Poisson arrivals.

    durations: "philly", or a fixed number of seconds. gpus: "philly", "single" (every job 1 GPU)
    or a fixed count. models: "none" (duration only) or "blox" (Blox's models, see
    `assign_models`); duration_s is then the isolated time on a V100, consolidated, and the
    simulator derives the iterations from it with the profile table. loss: "none" or "blox"
    (loss-curve columns as Blox §5.3 assumes them, see `loss_curves`).
    """
    if jobs < 0:
        raise ValueError(f"the number of jobs must be 0 or more, got {jobs}")
    arrival_rng, duration_rng, gpu_rng, model_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    columns: dict[str, object] = {
        "job_id": np.arange(start_id, start_id + jobs, dtype=np.int64),
        "arrival_s": np.round(poisson_arrivals(jobs, rate_per_s, arrival_rng), TIME_DECIMALS),
    }
    if gpus == "philly":
        gpu_counts = philly_gpus(jobs, gpu_rng)
    elif gpus == "single":
        gpu_counts = np.ones(jobs, dtype=np.int64)
    elif isinstance(gpus, (int, np.integer)) and not isinstance(gpus, bool) and gpus >= 1:
        gpu_counts = np.full(jobs, gpus, dtype=np.int64)
    else:
        raise ValueError(f"gpus must be 'philly', 'single' or a count of 1 or more, got {gpus!r}")
    columns["gpus"] = gpu_counts
    if durations == "philly":
        columns["duration_s"] = np.round(philly_durations(jobs, duration_rng), TIME_DECIMALS)
    elif isinstance(durations, (int, float)) and not isinstance(durations, bool) and 0 < durations < math.inf:
        columns["duration_s"] = np.full(jobs, float(durations))
    else:
        raise ValueError(f"durations must be 'philly' or a finite number of seconds above 0, got {durations!r}")
    if models == "blox":
        names, batch = assign_models(gpu_counts, model_rng, profile)
        columns["model"] = pl.Series(names.tolist(), dtype=pl.String)
        columns["batch_size"] = batch
    elif models != "none":
        raise ValueError(f"models must be 'none' or 'blox', got {models!r}")
    if loss == "blox":
        columns.update(loss_curves(jobs, np.random.default_rng(np.random.SeedSequence(seed).spawn(5)[4])))
    elif loss != "none":
        raise ValueError(f"loss must be 'none' or 'blox', got {loss!r}")
    return validate(pl.DataFrame(columns), "<generated>")


# --- Tiresias' testbed workload (NSDI'19 §5.1) ----------------------------------------------

# The ten TensorFlow benchmark models of Tiresias Table 6, 48 jobs each in the 480-job workload.
TIRESIAS_MODELS: tuple[str, ...] = (
    "VGG19",
    "VGG16",
    "VGG11",
    "AlexNet",
    "ResNet152",
    "ResNet101",
    "ResNet50",
    "Inception4",
    "Inception3",
    "GoogleNet",
)
# GPU counts of the 480 jobs: 240 single-GPU jobs and 40x2, 80x4, 90x8, 25x16, 5x32.
TIRESIAS_GPU_MIX: dict[int, int] = {1: 240, 2: 40, 4: 80, 8: 90, 16: 25, 32: 5}
# Training times range from 2 min to 2 h; "short" is under 800 s, "small" at most 4 GPUs.
TIRESIAS_DURATION_S = (120.0, 7200.0)
TIRESIAS_SHORT_S = 800.0
TIRESIAS_SMALL_GPUS = 4
# Table 3's bins (share of all jobs): small-short 63.5%, small-long 12.5%, large-short 16.5%,
# large-long 7.5%; so a small job is short with probability 63.5/76, a large one 16.5/24.
TIRESIAS_SHORT_SHARE = {True: 63.5 / 76.0, False: 16.5 / 24.0}


def _apportion(total: int, weights) -> np.ndarray:
    """`total` split in proportion to `weights`, in whole numbers (largest remainders)."""
    weights = np.asarray(weights, dtype=np.float64)
    exact = total * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    counts[np.argsort(-(exact - counts), kind="stable")[: total - counts.sum()]] += 1
    return counts


def tiresias_testbed(jobs: int = 480, rate_per_s: float = 1.0 / 30.0, seed: int = 0) -> pl.DataFrame:
    """A workload like Tiresias' 480-job testbed trace: the published GPU-count mix and model mix
    (scaled to `jobs`), Poisson arrivals (mean gap 30 s by default), and durations from 2 min to
    2 h with the share of short jobs (< 800 s) that Table 3 gives for small and large jobs;
    inside each bin, durations are log-uniform (our choice: the paper gives only the range).
    The GPU mix has 75% small jobs where Table 3 has 76%, so the four bins come out at about
    62.7/12.3/17.2/7.8% of the jobs rather than Table 3's 63.5/12.5/16.5/7.5%.
    Times are whole seconds, as in Tiresias' own traces."""
    if jobs < 1:
        raise ValueError(f"the number of jobs must be 1 or more, got {jobs}")
    arrival_rng, gpu_rng, model_rng, bin_rng, duration_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)
    )
    counts = _apportion(jobs, list(TIRESIAS_GPU_MIX.values()))
    gpus = gpu_rng.permutation(np.repeat(np.array(list(TIRESIAS_GPU_MIX), dtype=np.int64), counts))
    models = model_rng.permutation(
        np.repeat(np.array(TIRESIAS_MODELS, dtype=object), _apportion(jobs, [1] * len(TIRESIAS_MODELS)))
    )
    short = np.zeros(jobs, dtype=bool)
    for small in (True, False):
        where = np.flatnonzero((gpus <= TIRESIAS_SMALL_GPUS) == small)
        k = int(round(len(where) * TIRESIAS_SHORT_SHARE[small]))
        short[bin_rng.permutation(where)[:k]] = True
    low, high = np.log10(TIRESIAS_DURATION_S[0]), np.log10(TIRESIAS_DURATION_S[1])
    cut = np.log10(TIRESIAS_SHORT_S)
    exponent = np.where(short, duration_rng.uniform(low, cut, jobs), duration_rng.uniform(cut, high, jobs))
    durations = np.clip(np.round(10.0**exponent), TIRESIAS_DURATION_S[0], TIRESIAS_DURATION_S[1])
    durations = np.where(short, np.minimum(durations, TIRESIAS_SHORT_S - 1), np.maximum(durations, TIRESIAS_SHORT_S))
    frame = pl.DataFrame(
        {
            "job_id": np.arange(jobs, dtype=np.int64),
            "arrival_s": np.round(poisson_arrivals(jobs, rate_per_s, arrival_rng)),
            "gpus": gpus,
            "duration_s": durations,
            "model": pl.Series(models.tolist(), dtype=pl.String),
        }
    )
    return validate(frame, "<generated>")


# --- loss curves (traces/losscurves.py) ------------------------------------------------------

# Jeon et al. (ATC'19) §5: "around 75% of jobs reach within 0.1% of lowest loss using only 40%
# of the epochs"; Blox §5.3 assigns 75% of its jobs to converge in 40% of their training.
BLOX_CONVERGING_SHARE = 0.75
BLOX_CONVERGE_FRACTION = 0.4
BLOX_LOSS_THRESHOLD = 0.001


def loss_curves(
    n: int,
    rng: np.random.Generator,
    share: float = BLOX_CONVERGING_SHARE,
    fraction: float = BLOX_CONVERGE_FRACTION,
    threshold: float = BLOX_LOSS_THRESHOLD,
) -> dict[str, np.ndarray]:
    """Loss-curve columns for `n` jobs: a random `share` of them come within `threshold` of their
    final loss after `fraction` of their work, the others exactly when their work ends. Final
    losses are U(0.5, 2) and starting losses 3 to 10 times higher (the scale does not matter to
    the policies, only the shape)."""
    from roundhouse.traces.losscurves import speed_for

    final = np.round(rng.uniform(0.5, 2.0, n), 4)
    start = np.round(final * rng.uniform(3.0, 10.0, n), 4)
    early = np.zeros(n, dtype=bool)
    early[rng.permutation(n)[: int(round(share * n))]] = True
    converge_at = np.where(early, fraction, 1.0)
    # Speeds are written with three decimals, rounded up so that the loss is within the
    # threshold no later than `converge_at` (a hair slower would miss it).
    speed = np.ceil(speed_for(start, final, threshold, converge_at) * 1000.0) / 1000.0
    return {"loss_start": start, "loss_final": final, "loss_speed": speed}


# Gavel's cost experiment (OSDI'20 §7.3): ResNet-50 and A3C jobs, each running a whole number of
# days on a V100, with an SLO a fixed multiple of that duration.
COST_MODELS: tuple[tuple[str, int], ...] = (("ResNet-50", 64), ("A3C", 4))
COST_DURATION_DAYS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)
COST_SLO_FACTORS: tuple[float, ...] = (1.2, 2.0, 10.0)


def cost_workload(jobs: int, rate_per_s: float | None, seed: int, start_id: int = 0) -> pl.DataFrame:
    """Gavel's cost workload: single-GPU ResNet-50 (batch 64) and A3C jobs, equally likely, each
    lasting 0.5, 1, 2, 4 or 8 days on a V100 and with an SLO of 1.2, 2 or 10 times that duration
    (all uniform). Arrivals are Poisson at `rate_per_s`, or all at time 0 when it is None.
    The ResNet-50 batch size is our choice: the paper names none."""
    arrival_rng, model_rng, duration_rng, slo_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    arrivals = np.zeros(jobs) if rate_per_s is None else poisson_arrivals(jobs, rate_per_s, arrival_rng)
    picked = model_rng.integers(0, len(COST_MODELS), size=jobs)
    duration = 86400.0 * np.asarray(COST_DURATION_DAYS)[duration_rng.integers(0, len(COST_DURATION_DAYS), size=jobs)]
    factor = np.asarray(COST_SLO_FACTORS)[slo_rng.integers(0, len(COST_SLO_FACTORS), size=jobs)]
    frame = pl.DataFrame(
        {
            "job_id": np.arange(start_id, start_id + jobs, dtype=np.int64),
            "arrival_s": np.round(arrivals, TIME_DECIMALS),
            "gpus": np.ones(jobs, dtype=np.int64),
            "duration_s": duration,
            "model": pl.Series([COST_MODELS[i][0] for i in picked.tolist()], dtype=pl.String),
            "batch_size": np.array([COST_MODELS[i][1] for i in picked.tolist()], dtype=np.int64),
            "slo_s": duration * factor,
        }
    )
    return validate(frame, "<generated>")


# --- Dally's workloads (Sharma et al., IEEE BigData'25) -------------------------------------

# Dally's six Table I models, as its Helios-derived workload files name them after reading
# (traces/helios.py), with what the batch file `sense_500jobs_0start0arrival-withBert.json`
# (aakash-sharma/cluster-sim at 4cd660e) shows for each: the median duration, the (population)
# standard deviation of the log-duration and the range in seconds, and the median time per iteration
# (s) for each batch size, with how many jobs used that batch size.
DALLY_MODELS: dict[str, dict] = {
    "MobileNetV3": {"median": 78221, "log_sd": 0.844, "range": (7233, 1165582),
                    "batches": {32: (77, 0.0007666), 64: (26, 0.0003941), 128: (22, 0.0002982)}},
    "BERT-large": {"median": 95082, "log_sd": 0.678, "range": (37548, 486851),
                   "batches": {32: (125, 0.0083395)}},
    "ResNet50": {"median": 75520, "log_sd": 0.621, "range": (36156, 761516),
                 "batches": {32: (72, 0.001491), 64: (22, 0.0014108), 128: (31, 0.0013064)}},
    "ResNet18": {"median": 9474, "log_sd": 0.114, "range": (7262, 10594),
                 "batches": {32: (24, 0.0005669), 64: (7, 0.0002476), 128: (7, 0.0001755)}},
    "AlexNet": {"median": 8537, "log_sd": 0.128, "range": (7218, 10738),
                "batches": {32: (34, 0.0014685), 64: (7, 0.0005201), 128: (12, 0.0003227)}},
    "VGG11": {"median": 8572, "log_sd": 0.123, "range": (7319, 10691),
              "batches": {32: (20, 0.0002811), 64: (6, 0.0001346), 128: (8, 0.0001402)}},
}  # fmt: skip
# How many jobs of each model asked for each GPU count: in the batch file (500 jobs, all at
# t = 0; the notes' mix 1x270, 2x13, 4x52, 8x109, 16x42, 32x11 and one each of 40, 48, 56, and
# MobileNetV3, BERT, ResNet50 125 each, AlexNet 53, ResNet18 38, VGG 34), and in the Poisson
# file `sense_500jobs_poisson_1proc-week.json` (411 multi-GPU jobs over a week).
DALLY_BATCH_MIX: dict[str, dict[int, int]] = {
    "MobileNetV3": {1: 17, 2: 2, 4: 15, 8: 52, 16: 26, 32: 10, 40: 1, 48: 1, 56: 1},
    "BERT-large": {1: 94, 2: 4, 4: 7, 8: 15, 16: 5},
    "ResNet50": {1: 67, 2: 7, 4: 16, 8: 27, 16: 7, 32: 1},
    "ResNet18": {1: 35, 4: 3},
    "AlexNet": {1: 27, 4: 9, 8: 13, 16: 4},
    "VGG11": {1: 30, 4: 2, 8: 2},
}
DALLY_POISSON_MIX: dict[str, dict[int, int]] = {
    "MobileNetV3": {2: 2, 4: 15, 8: 64, 16: 28, 32: 13, 40: 1, 48: 1, 56: 1},
    "BERT-large": {2: 26, 3: 1, 4: 33, 8: 51, 16: 11, 32: 3},
    "ResNet50": {2: 13, 4: 34, 8: 59, 16: 12, 32: 7},
    "ResNet18": {4: 3},
    "AlexNet": {4: 9, 8: 14, 16: 5, 40: 1},
    "VGG11": {4: 2, 8: 2},
}
# The Poisson files put 411 jobs in about a week (600,000 s).
DALLY_POISSON_RATE_PER_S = 411 / 600_000


def dally_workload(jobs: int, seed: int, rate_per_s: float | None = None) -> pl.DataFrame:
    """A workload like Dally's: all jobs at t = 0 when `rate_per_s` is None (the batch
    workload), else Poisson arrivals (the Poisson workload, whose model and GPU mix differ).

    The (model, GPU count) pairs follow the mix of the matching Dally file exactly when `jobs`
    is its size (500 or 411) and in proportion otherwise. Each job's batch size is drawn with
    the file's frequencies for its model, and its time per iteration is the file's median for
    that model and batch size. Durations are log-normal with each model's median and log-spread
    in the batch file, clipped to that model's range, in whole seconds; iterations = duration /
    time per iteration, rounded. The batch workload's overall median duration comes out about
    61,000 s (56,000 to 65,000 s over seeds 0-19 at 500 jobs) against the file's 55,975 s, and its
    mean about 82,000 s against the file's 93,988 s: clipped log-normals have thinner tails than
    the file's durations. The Poisson workload's median comes out about 75,000 s against its
    file's 70,623 s, its mean about 99,000 s against 117,487 s. Arrivals are whole seconds, as in
    Dally's files.
    """
    if jobs < 1:
        raise ValueError(f"the number of jobs must be 1 or more, got {jobs}")
    arrival_rng, mix_rng, duration_rng, batch_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    mix = DALLY_BATCH_MIX if rate_per_s is None else DALLY_POISSON_MIX
    cells = [(model, gpus, count) for model, counts in mix.items() for gpus, count in counts.items()]
    picked = mix_rng.permutation(np.repeat(np.arange(len(cells)), _apportion(jobs, [c[2] for c in cells])))
    models = [cells[i][0] for i in picked.tolist()]
    gpus = np.array([cells[i][1] for i in picked.tolist()], dtype=np.int64)
    normal = duration_rng.standard_normal(jobs)
    uniform = batch_rng.random(jobs)
    duration = np.empty(jobs)
    batch = np.empty(jobs, dtype=np.int64)
    per_iteration = np.empty(jobs)
    for name, facts in DALLY_MODELS.items():  # fixed order: deterministic
        where = np.array([m == name for m in models], dtype=bool)
        low, high = facts["range"]
        duration[where] = np.clip(facts["median"] * np.exp(facts["log_sd"] * normal[where]), low, high)
        sizes = list(facts["batches"])
        weights = np.array([facts["batches"][b][0] for b in sizes], dtype=np.float64)
        choice = np.searchsorted(np.cumsum(weights / weights.sum())[:-1], uniform[where], side="right")
        batch[where] = np.asarray(sizes, dtype=np.int64)[choice]
        per_iteration[where] = np.array([facts["batches"][b][1] for b in sizes])[choice]
    duration = np.round(duration)
    arrivals = np.zeros(jobs) if rate_per_s is None else np.round(poisson_arrivals(jobs, rate_per_s, arrival_rng))
    frame = pl.DataFrame(
        {
            "job_id": np.arange(jobs, dtype=np.int64),
            "arrival_s": arrivals,
            "gpus": gpus,
            "duration_s": duration,
            "model": pl.Series(models, dtype=pl.String),
            "iterations": np.maximum(np.round(duration / per_iteration), 1.0),
            "batch_size": batch,
            "iteration_time_s": per_iteration,
        }
    )
    return validate(frame, "<generated>")


# --- Synergy's Philly workloads (Mohan et al., OSDI'22) -------------------------------------

# Synergy's model zoo (msr-fiddle/synergy, simulator/jobs/model_zoo.py): image, language and
# speech models, with each model's best-case CPU cores and memory (GB) per GPU: the fewest
# cores, then the least memory, at which its sensitivity profile reaches its top speed
# (traces/profiles/resources.csv, `best_cpus` and `best_memory_gb` of traces/resources.py, which
# the allocators demand for these models whatever a trace says). The language models' profiles
# are flat, so 1 core and 20.83 GB per GPU, the grid's least; Synergy's simulator/jobs/model.py
# `use_real_scores` lists 62.5 GB for them, memory they would hold without running faster.
# A GPU-proportional share on Synergy's servers (8 GPUs, 24 cores, 500 GB) is 3 cores and
# 62.5 GB per GPU.
SYNERGY_MODELS: dict[str, tuple[str, float, float]] = {
    "AlexNet": ("image", 12, 125.0),
    "ResNet18": ("image", 9, 62.5),
    "ResNet50": ("image", 4, 62.5),
    "MobileNet": ("image", 6, 62.5),
    "ShuffleNet": ("image", 12, 125.0),
    "GNMT": ("language", 1, 20.83),
    "Transformer": ("language", 1, 20.83),
    "LSTM": ("language", 1, 20.83),
    "M5": ("speech", 6, 187.5),
    "DeepSpeech": ("speech", 3, 62.5),
}
SYNERGY_TASKS: tuple[str, ...] = ("image", "language", "speech")
# The image/language/speech split of Synergy's experiments (simulator/runner.py `class_split`).
SYNERGY_SPLIT: tuple[int, int, int] = (20, 70, 10)


def synergy_philly(jobs: int, rate_per_s: float, seed: int, gpus: str = "philly") -> pl.DataFrame:
    """A workload like Synergy's Philly runs: Poisson arrivals, Philly durations, Philly GPU
    counts (or one GPU each with `gpus="single"`), tasks split image/language/speech 20/70/10
    (exactly, in whole jobs), the model uniform among its task's. Each job asks for its model's
    best-case CPU cores and memory per GPU times its GPUs (`cpus`, `memory_gb`); the `task`
    column names its class. Durations are what the job takes at the GPU-proportional share of
    CPU and memory, as in Synergy's simulator (traces/resources.py: a job given its best-case
    demand runs faster by its model's sensitivity)."""
    if jobs < 1:
        raise ValueError(f"the number of jobs must be 1 or more, got {jobs}")
    arrival_rng, duration_rng, gpu_rng, task_rng, model_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)
    )
    if gpus == "philly":
        counts = philly_gpus(jobs, gpu_rng)
    elif gpus == "single":
        counts = np.ones(jobs, dtype=np.int64)
    else:
        raise ValueError(f"gpus must be 'philly' or 'single', got {gpus!r}")
    tasks = task_rng.permutation(np.repeat(np.arange(len(SYNERGY_TASKS)), _apportion(jobs, SYNERGY_SPLIT)))
    # Each job's model: the floor of draw x (its task's model count) indexes its task's models,
    # in the zoo's order; worked out per task, not per job.
    zoo = list(SYNERGY_MODELS)
    draws = model_rng.random(jobs)
    model_index = np.empty(jobs, dtype=np.int64)
    for task, name in enumerate(SYNERGY_TASKS):
        choices = np.array([i for i, m in enumerate(zoo) if SYNERGY_MODELS[m][0] == name], dtype=np.int64)
        where = tasks == task
        model_index[where] = choices[(draws[where] * len(choices)).astype(np.int64)]
    models = np.array(zoo, dtype=object)[model_index].tolist()
    cpus = np.array([SYNERGY_MODELS[m][1] for m in zoo])[model_index] * counts
    memory = np.array([SYNERGY_MODELS[m][2] for m in zoo])[model_index] * counts
    frame = pl.DataFrame(
        {
            "job_id": np.arange(jobs, dtype=np.int64),
            "arrival_s": np.round(poisson_arrivals(jobs, rate_per_s, arrival_rng), TIME_DECIMALS),
            "gpus": counts,
            "duration_s": np.round(philly_durations(jobs, duration_rng), TIME_DECIMALS),
            "model": pl.Series(models, dtype=pl.String),
            "cpus": cpus.astype(np.float64),
            "memory_gb": memory,
            "task": pl.Series([SYNERGY_TASKS[t] for t in tasks.tolist()], dtype=pl.String),
        }
    )
    return validate(frame, "<generated>")
