"""Dally-like and Synergy-like workloads: seeded and deterministic, with the published mixes
(exact at the papers' sizes, within tolerance otherwise) and durations near Dally's."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.tools.cli import main
from roundhouse.traces.formats import read_trace
from roundhouse.traces.generators import (
    DALLY_BATCH_MIX,
    DALLY_POISSON_RATE_PER_S,
    SYNERGY_MODELS,
    dally_workload,
    synergy_philly,
)

NOTES_BATCH_GPUS = {1: 270, 2: 13, 4: 52, 8: 109, 16: 42, 32: 11, 40: 1, 48: 1, 56: 1}
NOTES_BATCH_MODELS = {"MobileNetV3": 125, "BERT-large": 125, "ResNet-50": 125, "AlexNet": 53, "ResNet-18": 38, "VGG11": 34}


def counts(frame, column) -> dict:
    return dict(frame.group_by(column).len().iter_rows())


def test_dally_batch_has_the_notes_mixes_at_500_jobs():
    frame = dally_workload(500, seed=3)
    assert counts(frame, "gpus") == NOTES_BATCH_GPUS
    assert counts(frame, "model") == NOTES_BATCH_MODELS
    assert frame["arrival_s"].max() == 0.0 and frame["gpus"].sum() == 2544


def test_dally_batch_mix_scales_with_the_number_of_jobs():
    frame = dally_workload(5000, seed=4)
    shares = counts(frame, "gpus")
    for gpus, n in NOTES_BATCH_GPUS.items():
        assert abs(shares[gpus] / 5000 - n / 500) < 0.002, gpus


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dally_durations_near_the_files(seed):
    batch = dally_workload(500, seed)
    # The batch file: median 55,975 s, mean 93,988 s; its tail is heavier than a log-normal's.
    assert abs(batch["duration_s"].median() / 55975 - 1) < 0.2
    assert 0.75 < batch["duration_s"].mean() / 93988 < 1.1
    poisson = dally_workload(411, seed, DALLY_POISSON_RATE_PER_S)
    assert abs(poisson["duration_s"].median() / 70623 - 1) < 0.2
    short = batch.filter(batch["model"].is_in(["AlexNet", "VGG11", "ResNet-18"]))
    assert short["duration_s"].min() >= 7218 and short["duration_s"].max() <= 10738


def test_dally_iterations_times_time_per_iteration_is_the_duration():
    frame = dally_workload(800, seed=5)
    product = frame["iterations"] * frame["iteration_time_s"]
    assert ((product - frame["duration_s"]).abs() <= frame["iteration_time_s"]).all()
    assert set(frame["batch_size"].unique().to_list()) == {32, 64, 128}
    assert frame.filter(frame["model"] == "BERT-large")["batch_size"].unique().to_list() == [32]


def test_dally_poisson_arrivals_and_multi_gpu_mix():
    frame = dally_workload(411, seed=6, rate_per_s=DALLY_POISSON_RATE_PER_S)
    assert frame["gpus"].min() >= 2
    assert {g: n for g, n in counts(frame, "gpus").items() if g in (2, 4, 8, 16, 32)} == {
        2: 41,
        4: 96,
        8: 190,
        16: 56,
        32: 23,
    }
    gaps = np.diff(np.sort(frame["arrival_s"].to_numpy()))
    assert abs(gaps.mean() * DALLY_POISSON_RATE_PER_S - 1) < 0.15
    assert (frame["arrival_s"] == frame["arrival_s"].round()).all()


def test_dally_is_seeded_and_deterministic():
    assert dally_workload(300, seed=7).equals(dally_workload(300, seed=7))
    assert not dally_workload(300, seed=7).equals(dally_workload(300, seed=8))
    assert sum(sum(c.values()) for c in DALLY_BATCH_MIX.values()) == 500
    with pytest.raises(ValueError):
        dally_workload(0, seed=0)


def test_synergy_split_models_and_demands():
    frame = synergy_philly(1000, 9 / 3600, seed=0)
    assert counts(frame, "task") == {"image": 200, "language": 700, "speech": 100}
    per_gpu = {name: facts for name, facts in SYNERGY_MODELS.items()}
    for row in frame.iter_rows(named=True):
        original = {"ResNet-18": "ResNet18", "ResNet-50": "ResNet50", "LM": "LSTM"}.get(row["model"], row["model"])
        task, cpus, memory = per_gpu[original]
        assert row["task"] == task
        assert row["cpus"] == cpus * row["gpus"] and row["memory_gb"] == memory * row["gpus"]
    gpus = frame["gpus"].to_numpy()
    for count, p in zip((1, 2, 4, 8), (0.7, 0.1, 0.15, 0.05)):
        assert abs(np.mean(gpus == count) - p) < 0.04
    # every model of a task turns up
    assert frame["model"].n_unique() == len(SYNERGY_MODELS)


def test_synergy_single_gpu_and_determinism():
    single = synergy_philly(200, 9 / 3600, seed=1, gpus="single")
    assert single["gpus"].unique().to_list() == [1]
    assert synergy_philly(200, 9 / 3600, seed=1).equals(synergy_philly(200, 9 / 3600, seed=1))
    with pytest.raises(ValueError):
        synergy_philly(5, 1.0, seed=0, gpus="many")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--workload", "dally-batch", "--rate", "2/h"], "leave out --rate"),
        (["--workload", "dally-poisson"], "needs --rate"),
        (["--workload", "dally-poisson", "--rate", "2/h", "--gpus", "single"], "leave out --gpus"),
        (["--workload", "synergy", "--rate", "2/h", "--models", "blox"], "leave out --models"),
        (["--workload", "dally"], "did you mean"),
    ],
)
def test_generate_refuses_wrong_options(tmp_path, capsys, args, words):
    assert main(["trace", "generate", "-o", str(tmp_path / "t.csv"), "--jobs", "5", "--seed", "0", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_generated_synergy_trace_runs(tmp_path, capsys):
    path = tmp_path / "s.csv"
    assert (
        main(["trace", "generate", "-o", str(path), "--jobs", "30", "--rate", "9/h", "--seed", "2", "--workload", "synergy"]) == 0
    )
    assert read_trace(path)["cpus"].min() >= 1
    graph = str(__import__("pathlib").Path(__file__).resolve().parents[2] / "graphs" / "las.sched")
    code = main(["run", graph, "--trace", str(path), "--cluster", "16x8", "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
