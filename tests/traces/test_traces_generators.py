"""Generators: the published distributions within tolerance, and determinism by seed."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.traces.generators import (
    BLOX_MODELS,
    assign_models,
    generate,
    philly_durations,
    philly_gpus,
    poisson_arrivals,
)
from roundhouse.traces.profiles import ProfileTable

N = 20_000


def test_philly_gpu_mix():
    gpus = philly_gpus(N, np.random.default_rng(0))
    for count, p in zip((1, 2, 4, 8), (0.7, 0.1, 0.15, 0.05)):
        assert abs(np.mean(gpus == count) - p) < 0.015, count
    assert set(np.unique(gpus)) == {1, 2, 4, 8}


def test_philly_durations_long_short_split():
    minutes = philly_durations(N, np.random.default_rng(1)) / 60
    assert minutes.min() >= 10**1.5 and minutes.max() <= 10**4
    short = minutes < 10**3
    assert abs(short.mean() - 0.8) < 0.015
    # Log-uniform inside each part: the median exponent of the short part is about 2.25.
    assert abs(np.median(np.log10(minutes[short])) - 2.25) < 0.05


def test_poisson_arrivals():
    rate = 8 / 3600
    arrivals = poisson_arrivals(N, rate, np.random.default_rng(2), start_s=100.0)
    assert arrivals[0] == 100.0 and np.all(np.diff(arrivals) >= 0)
    assert abs(np.mean(np.diff(arrivals)) * rate - 1) < 0.03
    with pytest.raises(ValueError):
        poisson_arrivals(3, 0.0, np.random.default_rng(0))


def test_assign_models_respects_gpu_counts():
    table = ProfileTable.load()
    gpus = philly_gpus(5000, np.random.default_rng(3))
    models, batch = assign_models(gpus, np.random.default_rng(4), table)
    rates = table.rates(models, batch, "V100", gpus)
    assert np.all(rates > 0)
    distributed = {"ResNet-18", "ResNet-50", "Transformer", "LM"}
    assert set(models[gpus > 1]) <= distributed
    assert set(models[gpus == 1]) == {table.canonical_model(m) for m in BLOX_MODELS}
    with pytest.raises(ValueError, match="3 GPUs"):
        assign_models(np.array([3]), np.random.default_rng(0), table)


def test_generate_is_deterministic_and_seeded():
    a = generate(300, 8 / 3600, seed=7, models="blox")
    b = generate(300, 8 / 3600, seed=7, models="blox")
    assert a.equals(b)
    assert not a.equals(generate(300, 8 / 3600, seed=8, models="blox"))
    plain = generate(300, 8 / 3600, seed=7)
    # Models come from their own stream: the rest of the trace does not move.
    for column in ("arrival_s", "gpus", "duration_s"):
        assert plain[column].equals(a[column])
    assert plain["model"].null_count() == 300


def test_generate_options():
    df = generate(50, 1 / 60, seed=0, gpus="single", start_id=1000)
    assert df["gpus"].unique().to_list() == [1]
    assert df["job_id"].to_list() == list(range(1000, 1050))
    assert generate(5, 1 / 60, seed=0, durations=300.0, gpus=4)["duration_s"].to_list() == [300.0] * 5
    for bad in ({"gpus": "many"}, {"models": "all"}, {"durations": -1}):
        with pytest.raises(ValueError):
            generate(5, 1 / 60, seed=0, **bad)
