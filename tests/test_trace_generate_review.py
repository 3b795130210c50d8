"""`roundhouse trace generate`: an output it cannot write is refused before anything is drawn,
arrivals that by chance span more than a century are refused naming --rate (never a trace its own
reader refuses), loss curves must be finite, and the workloads draw what their docstrings say."""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.tools.cli import main
from roundhouse.traces import philly
from roundhouse.traces.formats import read_trace
from roundhouse.traces.generators import (
    DALLY_POISSON_RATE_PER_S,
    dally_workload,
    generate,
    tiresias_testbed,
)
from tests.conftest import fails


def _generate(out, *extra: str) -> list[str]:
    return ["trace", "generate", "-o", str(out), *extra]


def _never(*args, **kwargs):
    raise AssertionError("drew the jobs before checking where they go")


@pytest.mark.parametrize("workload", ["philly", "ones"])
def test_an_output_in_a_missing_folder_is_refused_before_drawing(tmp_path, capsys, monkeypatch, workload):
    from roundhouse.traces import ones

    monkeypatch.setattr(philly, "SyntheticLog", _never)
    monkeypatch.setattr(ones, "generate", _never)
    out = tmp_path / "missing" / ("x.json" if workload == "philly" else "x.csv")
    err = fails(capsys, *_generate(out, "--jobs", "10", "--rate", "8/h", "--seed", "0", "--workload", workload))
    assert f"the folder '{out.parent}' does not exist" in err


def test_an_output_that_is_a_folder_or_under_a_file_is_refused(tmp_path, capsys):
    err = fails(capsys, *_generate(tmp_path, "--jobs", "10", "--rate", "8/h", "--seed", "0", "--format", "canonical"))
    assert f"-o '{tmp_path}' is a folder" in err
    (tmp_path / "a.csv").write_text("x")
    err = fails(capsys, *_generate(tmp_path / "a.csv" / "b.csv", "--jobs", "10", "--rate", "8/h", "--seed", "0"))
    assert "is a file, not a folder" in err


def test_convert_refuses_an_output_in_a_missing_folder_before_reading(tmp_path, capsys, monkeypatch):
    from roundhouse.traces import formats

    monkeypatch.setattr(formats, "load_trace", _never)
    out = tmp_path / "missing" / "x.csv"
    err = fails(capsys, "trace", "convert", tmp_path / "in.csv", out)
    assert f"OUTPUT '{out}': the folder '{out.parent}' does not exist" in err


# 2 jobs at 2.3e-6/h: 1.2 centuries apart on average, within the rate check (which counts one
# gap, not two jobs), but these seeds draw gaps of 1.2-2.1 centuries.
@pytest.mark.parametrize(
    "name, seed, extra",
    [
        ("x.csv", "4", ["--workload", "philly"]),  # the generator's own check (TraceError)
        ("x.csv", "4", ["--workload", "tiresias"]),
        ("x.csv", "4", ["--workload", "pollux"]),  # no check of its own: the file was written
        ("x.json", "0", []),  # Philly's synthetic log: the file was written, its reader refused it
    ],
)
def test_arrivals_past_a_century_are_refused_naming_the_rate(tmp_path, capsys, name, seed, extra):
    out = tmp_path / name
    err = fails(capsys, *_generate(out, "--jobs", "2", "--rate", "2.3e-6/h", "--seed", seed, *extra))
    assert f"--rate '2.3e-6/h' is too low for 2 jobs with --seed {seed}" in err
    assert "<generated>" not in err
    assert not out.exists()


def test_arrivals_within_a_century_are_written_and_read_back(tmp_path):
    out = tmp_path / "x.json"
    assert main(_generate(out, "--jobs", "2", "--rate", "2.3e-6/h", "--seed", "3")) == 0
    assert read_trace(out).height >= 1
    # One job has no gap to span: any rate will do.
    one = tmp_path / "one.csv"
    assert main(_generate(one, "--jobs", "1", "--rate", "1e-30/h", "--seed", "0")) == 0
    assert read_trace(one)["arrival_s"].to_list() == [0.0]


def test_a_vanishing_rate_is_refused_in_words(tmp_path, capsys):
    err = fails(capsys, *_generate(tmp_path / "x.csv", "--jobs", "2", "--rate", "1e-320/h", "--seed", "0"))
    assert "--rate '1e-320/h' is too low" in err and "inf" not in err


@pytest.mark.parametrize(
    "row, column, words",
    [
        ("0,0,1,100,inf,1,5", "loss_start", "must be a finite number"),
        ("0,0,1,100,3,inf,5", "loss_final", "must be a finite number greater than 0"),
    ],
)
def test_loss_curves_must_be_finite(tmp_path, row, column, words):
    path = tmp_path / "loss.csv"
    path.write_text("job_id,arrival_s,gpus,duration_s,loss_start,loss_final,loss_speed\n" + row + "\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == 2 and caught.value.column == column and words in str(caught.value)


# --- what the workloads draw, on large samples ------------------------------------------------


def test_philly_jobs_average_about_32_gpu_hours():
    df = generate(400_000, 8 / 3600, 0)
    gpu_hours = (df["duration_s"] * df["gpus"]).mean() / 3600
    # E[duration] = 0.8 * 60 * (10^3 - 10^1.5) / (1.5 ln 10) + 0.2 * 60 * (10^4 - 10^3) / ln 10 s; E[gpus] = 1.9
    expected = (0.8 * (1000 - 10**1.5) / 1.5 + 0.2 * 9000) / np.log(10) / 60 * 1.9
    assert abs(gpu_hours - expected) < 0.02 * expected and abs(expected - 32) < 0.5
    shares = df["gpus"].value_counts(normalize=True).sort("gpus")["proportion"].to_list()
    assert np.allclose(shares, [0.7, 0.1, 0.15, 0.05], atol=0.003)


def test_tiresias_mix_and_bins():
    df = tiresias_testbed(480, 1 / 30, 0)
    assert sorted(Counter(df["gpus"].to_list()).items()) == [(1, 240), (2, 40), (4, 80), (8, 90), (16, 25), (32, 5)]
    assert set(Counter(df["model"].to_list()).values()) == {48}
    big = tiresias_testbed(100_000, 1 / 30, 0)
    small, short = big["gpus"] <= 4, big["duration_s"] < 800
    bins = [(small & short).mean(), (small & ~short).mean(), (~small & short).mean(), (~small & ~short).mean()]
    assert np.allclose(bins, [0.627, 0.123, 0.172, 0.078], atol=0.002)  # as the docstring says
    assert big["duration_s"].min() >= 120 and big["duration_s"].max() <= 7200


def test_dally_durations_come_out_as_the_docstring_says():
    batch = dally_workload(200_000, 0)["duration_s"]
    assert 59_000 < batch.median() < 63_000 and 80_000 < batch.mean() < 84_000
    medians = [dally_workload(500, seed)["duration_s"].median() for seed in range(20)]
    assert 55_000 < min(medians) and max(medians) < 66_000
    poisson = dally_workload(200_000, 0, DALLY_POISSON_RATE_PER_S)["duration_s"]
    assert 73_000 < poisson.median() < 77_000 and 97_000 < poisson.mean() < 101_000


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    def made(name: str, seed: str) -> bytes:
        out = tmp_path / name
        assert main(_generate(out, "--jobs", "300", "--rate", "30/h", "--seed", seed, "--workload", "synergy")) == 0
        return out.read_bytes()

    assert made("a.csv", "7") == made("b.csv", "7") != made("c.csv", "8")
    assert pl.read_csv(tmp_path / "a.csv").height == 300
