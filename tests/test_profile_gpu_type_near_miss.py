"""`roundhouse profile --gpu-type`: a near miss of the shipped profile's types (`V1OO`) is warned
of before measuring (it is filed as written, a type no cluster of V100s uses); a type differing
from the reference type only in case needs no `reference_gpu` in the hint, as types are
compared without regard to case."""

import pytest

from roundhouse.tools.cli import main


class _Measured:
    restore_s, checkpoint_s = 0.25, 0.5

    def __init__(self, gpu_type: str):
        self.gpu_type = gpu_type

    def csv(self, header):
        return f"# {header}\nmodel,batch_size,gpu_type,gpus,placement,iters_per_s\nLM,10,{self.gpu_type},1,consolidated,150.0\n"


@pytest.fixture
def measured(monkeypatch, capsys) -> list[str]:
    """What stderr held when measuring began (the warning is to come before it, as it takes minutes)."""
    import roundhouse.agents.profiler as profiler

    before: list[str] = []

    def fake(models, batches, gpus, gpu_type, *args, **kw):
        before.append(capsys.readouterr().err)
        return _Measured(gpu_type)

    monkeypatch.setattr(profiler, "profile", fake)
    return before


def _profile(tmp_path, capsys, gpu_type: str) -> tuple[str, str]:
    out = tmp_path / "p.csv"
    assert main(["profile", "--models", "LM", "--seconds", "1", "--gpu-type", gpu_type, "--out", str(out)]) == 0
    said = capsys.readouterr()
    assert f",{gpu_type},1," in out.read_text()  # (filed as written, warned of or not)
    return said.out, said.err


@pytest.mark.parametrize("name, near", [("V1OO", "V100"), ("P10", "P100"), ("k8O", "K80"), ("V1000", "V100")])
def test_a_near_miss_of_a_shipped_type_is_warned_of(tmp_path, capsys, measured, name, near):
    _profile(tmp_path, capsys, name)
    (err,) = measured
    assert f"warning: --gpu-type {name}: near the shipped profile's {near}" in err, err
    assert f"if you meant {near}, write that" in err


@pytest.mark.parametrize("name", ["A100", "K40", "V100", "v100", "H100-80GB"])
def test_a_type_of_its_own_or_a_shipped_one_is_not_warned_of(tmp_path, capsys, measured, name):
    _, err = _profile(tmp_path, capsys, name)
    assert "warning" not in err + measured[0], err


def test_the_reference_type_in_another_case_asks_for_no_reference_gpu(tmp_path, capsys, measured):
    out, _ = _profile(tmp_path, capsys, "v100")
    assert "reference_gpu" not in out, out
    out, _ = _profile(tmp_path, capsys, "A100")
    assert 'reference_gpu = "A100";' in out, out
