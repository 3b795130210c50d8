"""`roundhouse profile`: what it refuses before measuring (a GPU type its profile could not hold,
a model beside with no workload), and how a failed measurement is reported."""

from __future__ import annotations

import pytest

import roundhouse.agents.profiler as profiler
from roundhouse.tools.cli import main


@pytest.fixture
def not_measured(monkeypatch):
    """Fail the test if anything is measured."""

    def measure(*args, **kwargs):
        raise AssertionError("measured, where the options should have been refused first")

    monkeypatch.setattr(profiler, "profile", measure)


@pytest.mark.parametrize(
    "gpu_type, message",
    [
        ("V100,x", "error: --gpu-type 'V100,x': ',' cannot be part of a GPU type's name"),
        ('V"100', "error: --gpu-type 'V\"100': '\"' cannot be part"),
        ("#1", "error: --gpu-type '#1': '#' cannot be part"),
        ("a\nb", "error: --gpu-type 'a\\nb': '\\n' cannot be part"),
        ("", "error: --gpu-type: give the name of a GPU type"),
        ("  ", "error: --gpu-type: give the name of a GPU type"),
        (" V100", "error: --gpu-type ' V100': has spaces at its ends"),
    ],
)
def test_a_gpu_type_the_profile_could_not_hold_is_refused_before_measuring(tmp_path, capsys, not_measured, gpu_type, message):
    out = tmp_path / "p.csv"
    assert main(["profile", "--models", "ResNet-18", "--gpu-type", gpu_type, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert not out.exists()


def test_a_model_beside_with_no_workload_is_refused_before_measuring(tmp_path, capsys, not_measured):
    out = tmp_path / "p.csv"
    args = ["profile", "--models", "ResNet-18", "--concurrent", "2", "--beside", "ResNet-18,Transformer"]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --beside: no example workload for model 'Transformer' (have: ResNet-18,"), err
    assert not out.exists()


class _FailingRunner:
    """A runner whose measurement fails as a crashed workload's does."""

    def __init__(self, folder, threads):
        pass

    def measure(self, model, batch, gpus, seconds, companions):
        raise RuntimeError("the LM workload failed (exit status 1); the end of its log:\nImportError: no torch")

    def close(self) -> None:
        pass


def test_a_failed_measurement_is_reported_with_the_model_and_the_log(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(profiler, "_Runner", _FailingRunner)
    out = tmp_path / "p.csv"
    assert main(["profile", "--models", "ResNet-18", "--seconds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: profiling ResNet-18 (batch 16, 1 GPU(s)): the LM workload failed (exit status 1)"), err
    assert "ImportError: no torch" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.live
def test_a_workload_that_fails_to_start_is_reported_with_its_log(tmp_path, capsys, monkeypatch):
    real = profiler.workload_for
    monkeypatch.setattr(profiler, "workload_for", lambda m: "roundhouse.no_such_workload" if m == "LM" else real(m))
    out = tmp_path / "p.csv"
    args = ["profile", "--models", "ResNet-18", "--seconds", "1", "--concurrent", "2", "--beside", "LM"]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: profiling ResNet-18 (batch 16, 1 GPU(s)): the LM workload failed (exit status 1)"), err
    assert "No module named roundhouse.no_such_workload" in err
    assert not out.exists()
