"""`roundhouse profile` and `roundhouse trace generate` probed as a new user would: a model the
profiler cannot measure is refused naming the option and the models it can, an empty
`--batch-sizes` is refused rather than taken for the default, and `generate --format gavel`
refuses the options a Gavel trace has no field for (the file would be the same without them)."""

from __future__ import annotations

import contextlib

import pytest

import roundhouse.agents.profiler as profiler
from roundhouse.tools.cli import main


@pytest.fixture
def not_measured(monkeypatch):
    monkeypatch.setattr(profiler, "profile", lambda *a, **k: pytest.fail("measured, where the options should have been refused"))


@pytest.mark.parametrize(
    "args, message",
    [
        # (a typo: the models there are, and the nearest)
        (["--models", "Recomendation"], "error: --models: unknown model 'Recomendation' (have: ResNet-18, "),
        # (a model the simulator knows but no example workload trains: said as for --beside)
        (["--models", "A3C"], "error: --models: no example workload for model 'A3C' (have: ResNet-18, "),
        (["--models", "LM", "--batch-sizes", ""], "error: --batch-sizes: give whole numbers of 1 or more"),
    ],
)
def test_profile_refuses_a_model_it_cannot_measure_or_an_empty_batch_list(tmp_path, capsys, not_measured, args, message):
    out = tmp_path / "p.csv"
    assert main(["profile", "--seconds", "1", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err
    if "Recomendation" in message:
        assert "did you mean 'Recommendation'?" in err, err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "extra, given",
    [
        (["--start-id", "100"], "--start-id"),
        (["--loss", "blox"], "--loss"),
        (["--start-id", "7", "--loss", "blox", "--format", "gavel"], "--start-id and --loss"),
    ],
)
def test_generate_gavel_refuses_what_a_gavel_trace_cannot_hold(tmp_path, capsys, extra, given):
    out = tmp_path / "t.trace"
    args = ["trace", "generate", "-o", str(out), "--jobs", "5", "--rate", "8/h", "--seed", "1", "--models", "blox", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Gavel trace" in err and f"leave out {given}" in err, err
    assert not out.exists()


def test_generate_gavel_still_writes_what_it_can_hold(tmp_path):
    out = tmp_path / "t.trace"
    assert main(["trace", "generate", "-o", str(out), "--jobs", "5", "--rate", "8/h", "--seed", "1", "--models", "blox"]) == 0
    assert len(out.read_text().splitlines()) == 5


@pytest.mark.parametrize("value", ["2d", "1e12", "86401"])
def test_profile_refuses_a_measurement_longer_than_a_day_before_measuring(tmp_path, capsys, value):
    out = tmp_path / "p.csv"
    assert main(["profile", "--models", "LM", "--seconds", value, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --seconds {value}: must be a time from 1 second to 1 day"), err
    assert not out.exists()


@pytest.mark.parametrize("option", ["--concurrent", "--threads", "--gpus", "--batch-sizes"])
def test_profile_counts_are_written_with_the_digits_0_to_9(tmp_path, capsys, option):
    out = tmp_path / "p.csv"
    with pytest.raises(SystemExit) if option in ("--concurrent", "--threads") else contextlib.nullcontext():
        assert main(["profile", "--models", "LM", option, "\u0663", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert option in err and "whole number" in err, err
    assert not out.exists()
