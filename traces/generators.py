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

from traces.profiles import REFERENCE_GPU_TYPE, ProfileTable
from traces.schema import validate

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
    wanted = {profile.canonical_model(m) for m in models} - {None}
    gpus = np.asarray(gpus, dtype=np.int64)
    out_models = np.empty(gpus.shape, dtype=object)
    out_batch = np.zeros(gpus.shape, dtype=np.int64)
    for count in np.unique(gpus):  # a handful of distinct counts, in sorted order: deterministic
        choices = [c for c in profile.configs(int(count), REFERENCE_GPU_TYPE) if c[0] in wanted]
        if not choices:
            raise ValueError(f"no model of {sorted(wanted)} runs on {count} GPUs in {profile.source}")
        where = np.flatnonzero(gpus == count)
        picked = rng.integers(0, len(choices), size=where.size)
        out_models[where] = np.array([c[0] for c in choices], dtype=object)[picked]
        out_batch[where] = np.array([c[1] for c in choices], dtype=np.int64)[picked]
    return out_models, out_batch


def generate(
    jobs: int,
    rate_per_s: float,
    seed: int,
    durations: str | float = "philly",
    gpus: str | int = "philly",
    models: str = "none",
    start_id: int = 0,
    profile: ProfileTable | None = None,
) -> pl.DataFrame:
    """A canonical trace of `jobs` jobs with Poisson arrivals.

    durations: "philly", or a fixed number of seconds. gpus: "philly", "single" (every job 1 GPU)
    or a fixed count. models: "none" (duration only) or "blox" (Blox's models, see
    `assign_models`); duration_s is then the isolated time on a V100, consolidated, and the
    simulator derives the iterations from it with the profile table.
    """
    if jobs < 0:
        raise ValueError(f"the number of jobs must be 0 or more, got {jobs}")
    arrival_rng, duration_rng, gpu_rng, model_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    columns: dict[str, object] = {
        "job_id": np.arange(start_id, start_id + jobs, dtype=np.int64),
        "arrival_s": np.round(poisson_arrivals(jobs, rate_per_s, arrival_rng), TIME_DECIMALS),
    }
    if gpus == "philly":
        columns["gpus"] = philly_gpus(jobs, gpu_rng)
    elif gpus == "single":
        columns["gpus"] = np.ones(jobs, dtype=np.int64)
    elif isinstance(gpus, (int, np.integer)) and not isinstance(gpus, bool) and gpus >= 1:
        columns["gpus"] = np.full(jobs, gpus, dtype=np.int64)
    else:
        raise ValueError(f"gpus must be 'philly', 'single' or a count of 1 or more, got {gpus!r}")
    if durations == "philly":
        columns["duration_s"] = np.round(philly_durations(jobs, duration_rng), TIME_DECIMALS)
    elif isinstance(durations, (int, float)) and not isinstance(durations, bool) and durations > 0:
        columns["duration_s"] = np.full(jobs, float(durations))
    else:
        raise ValueError(f"durations must be 'philly' or a number of seconds above 0, got {durations!r}")
    if models == "blox":
        names, batch = assign_models(columns["gpus"], model_rng, profile)
        columns["model"] = pl.Series(names.tolist(), dtype=pl.String)
        columns["batch_size"] = batch
    elif models != "none":
        raise ValueError(f"models must be 'none' or 'blox', got {models!r}")
    return validate(pl.DataFrame(columns), "<generated>")


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
