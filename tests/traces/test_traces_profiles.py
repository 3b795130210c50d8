"""The profile table: the transcription of Gavel's throughputs, lookups, aliases, bad files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from roundhouse.errors import TraceError
from roundhouse.traces.profiles import GAVEL_MODELS, SHIPPED_PROFILE, ProfileTable, canonical_model

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "gavel"


@pytest.fixture(scope="module")
def table() -> ProfileTable:
    return ProfileTable.load()


def test_values_from_the_gavel_notes(table):
    assert table.rate("ResNet-50", 64, "V100", 1) == pytest.approx(4.39, abs=0.005)
    assert table.rate("ResNet-50", 128, "K80", 4) == 0.0  # cannot run there: kept, not missing
    assert table.rate("A3C", None, "V100", 1) == pytest.approx(7.18, abs=0.005)
    assert table.rate("LM", 5, "P100", 4) == pytest.approx(110.22, abs=0.005)
    assert table.rate("Recommendation", 512, "P100", 1) == pytest.approx(48.88, abs=0.005)
    assert table.rate("ResNet-18", 16, "V100", 2) == pytest.approx(100.14, abs=0.005)
    assert table.rate("ResNet-18", 16, "V100", 2, consolidated=False) == pytest.approx(35.34, abs=0.005)


def test_missing_entries_and_spread_fallback(table):
    assert table.rate("A3C", 4, "V100", 2) is None  # not distributed: no entry
    assert table.rate("GPT-3", 1, "V100", 1) is None
    assert table.rate("ResNet-50", 64, "H100", 1) is None
    # Gavel measured no unconsolidated K80 entry for ResNet-50 bs 64 on 4 GPUs.
    assert table.rate("ResNet-50", 64, "K80", 4, consolidated=False) == table.rate("ResNet-50", 64, "K80", 4)


def test_aliases_and_names(table):
    assert set(table.models) == set(GAVEL_MODELS)
    assert table.gpu_types == ("V100", "P100", "K80")
    for alias, name in [
        ("LSTM", "LM"),
        ("recoder", "Recommendation"),
        ("ResNet18", "ResNet-18"),
        ("Resnet-18", "ResNet-18"),
        ("CycleGan", "CycleGAN"),
        ("resnet_50", "ResNet-50"),
    ]:
        assert table.canonical_model(alias) == name == canonical_model(alias)
    assert table.canonical_model("vgg19") is None
    assert table.rate("lstm", 20, "v100", 1) == table.rate("LM", 20, "V100", 1)
    assert table.default_batch_size("LSTM") == 5
    assert table.default_batch_size("CycleGAN") == 1


def test_vectorised_rates_agree_with_single_lookups(table):
    models = ["ResNet-50", "LSTM", "A3C", "vgg19", "ResNet-18", "Transformer"]
    batches = [64, None, None, 32, 16, 256]
    gpus = [1, 4, 1, 1, 2, 8]
    for consolidated in (True, False):
        many = table.rates(models, batches, "K80", gpus, consolidated=consolidated)
        one = [table.rate(m, b, "K80", g, consolidated) or 0.0 for m, b, g in zip(models, batches, gpus)]
        assert many.tolist() == one
    assert table.rates(["ResNet-50"] * 3, 64, "V100", 1).tolist() == [table.rate("ResNet-50", 64, "V100", 1)] * 3


def test_configs(table):
    single = table.configs(1)
    assert len(single) == 26  # Gavel's 26 job configurations
    multi = table.configs(8)
    assert {m for m, _ in multi} == {"ResNet-18", "ResNet-50", "Transformer", "LM"}
    assert ("ResNet-50", 128) not in table.configs(4, "K80")


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/gavel is not present")
def test_every_isolated_throughput_is_transcribed(table):
    data = json.loads((SHARED / "simulation_throughputs.json").read_text())
    count = 0
    for worker, jobs in data.items():
        gpu_type = worker.split("_")[0].upper()
        for key, others in jobs.items():
            job_type, sf = re.fullmatch(r"\('(.*)', (\d+)\)", key).groups()
            match = re.fullmatch(r"(.*) \(batch size (\d+)\)", job_type)
            model, bs = (match.group(1), int(match.group(2))) if match else (job_type, None)
            placement = "spread" if worker.endswith("_unconsolidated") else "consolidated"
            assert table._index[(model, bs or table.default_batch_size(model), gpu_type, int(sf), placement)] == others["null"]
            count += 1
    assert count == table.frame.height


def test_shipped_file_cites_its_source():
    head = SHIPPED_PROFILE.read_text().splitlines()[:3]
    assert "Gavel (Narayanan et al., OSDI 2020)" in head[0] and "c4fa400" in head[0]
    assert "MIT licence" in head[1]


@pytest.mark.parametrize(
    "line, column, words",
    [
        ("ResNet-18,16,V100,1,somewhere,1.0", "placement", "consolidated"),
        ("ResNet-18,16,V100,one,consolidated,1.0", "gpus", "whole number"),
        ("ResNet-18,16,V100,1,consolidated,-1", "iters_per_s", "0 or more"),
        ("ResNet-18,16,V100,1,consolidated,2.0", None, "listed twice"),
    ],
)
def test_bad_profile_files(tmp_path, line, column, words):
    path = tmp_path / "p.csv"
    path.write_text(
        f"# a profile\nmodel,batch_size,gpu_type,gpus,placement,iters_per_s\nResNet-18,16,V100,1,consolidated,1.0\n{line}\n"
    )
    with pytest.raises(TraceError) as info:
        ProfileTable.load(path)
    assert info.value.row == 4 and info.value.column == column
    assert words in info.value.message


def test_profile_missing_column(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("model,batch_size,gpu_type,gpu,placement,iters_per_s\n")
    with pytest.raises(TraceError, match="did you mean 'gpu'"):
        ProfileTable.load(path)


def test_table_is_immutable(table):
    with pytest.raises(AttributeError):
        table.frame = None
    with pytest.raises(TypeError):
        table._index[("x", 1, "V100", 1, "consolidated")] = 1.0
    assert isinstance(table.rates([], [], "V100", 1), np.ndarray)
