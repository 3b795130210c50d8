"""Cluster specs as a user modelling their own cluster writes them: GPU type names in the
shorthand, spec files the TOML reader refuses, and what a run says of the cluster it built."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import Cluster, ClusterSpec
from roundhouse.tools.cli import main
from tests.conftest import REPO

LAS = str(REPO / "graphs" / "las.sched")


def _trace(folder: Path) -> Path:
    trace = folder / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,60\n1,0,2,120\n")
    return trace


# --- the shorthand takes every GPU type name a spec file takes ---


@pytest.mark.parametrize("name", ["3090", "A100.80GB", "a100-80gb", "H100_SXM"])
def test_the_shorthand_takes_the_type_names_a_spec_file_takes(tmp_path, name):
    spec = tmp_path / "c.toml"
    spec.write_text(f'[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "{name}"\n')
    from_file = Cluster(ClusterSpec.parse(str(spec), [name]))
    written = Cluster(ClusterSpec.parse(f"2x4:{name}", [name]))
    assert written.gpu_types == from_file.gpu_types == (name,)
    assert written.fingerprint() == from_file.fingerprint()


def test_a_run_on_a_shorthand_of_a_type_named_in_gpu_types_runs(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["run", LAS, "--cluster", "1x4:3090,1x4:A100.80GB", "--set", "gpu_types=3090,A100.80GB"]
    assert main([*argv, "--trace", str(_trace(tmp_path)), "--out", str(out), "--quiet"]) == 0
    assert (out / "jobs.csv").read_text().count("\n") == 3  # (both jobs ran)
    assert "1x4:3090, 1x4:A100.80GB" in capsys.readouterr().out + (out / "run.json").read_text()


@pytest.mark.parametrize("name", ["Vé100", "-x", "A" * 65, "V100;P100"])
def test_a_shorthand_type_that_is_no_name_is_refused_as_a_spec_file_refuses_it(name):
    with pytest.raises(ClusterError, match="is not a GPU type's name") as info:
        ClusterSpec.parse(f"2x4:{name}", [name])
    assert "starting with a letter or digit" in str(info.value)


def test_a_shorthand_with_two_types_is_still_not_a_group():
    with pytest.raises(ClusterError, match=r"'2x4:V100:P100' is not NODESxGPUS"):
        ClusterSpec.parse("2x4:V100:P100")


# --- a spec file the TOML reader refuses is said at its line ---


def _refused(tmp_path: Path, body: str) -> str:
    spec = tmp_path / "c.toml"
    spec.write_text(body)
    with pytest.raises(ClusterError) as info:
        ClusterSpec.parse(str(spec))
    return str(info.value).replace(str(spec), "c.toml")


@pytest.mark.parametrize(
    "body, line, column",
    [
        ("[[group]\nnodes = 2\n", 1, 8),
        ("# a comment\n[[group]]\nnodes = 2\nnodes = 3\ngpus_per_node = 4\n", 4, 10),
        ('[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "V100\n', 4, 17),
    ],
)
def test_a_spec_the_toml_reader_refuses_is_said_at_the_line(tmp_path, body, line, column):
    said = _refused(tmp_path, body)
    assert said.startswith(f"c.toml:{line}: error: not valid TOML: "), said
    assert f"(column {column})" in said, said  # (a key written twice is named after it)
    assert "at line" not in said


@pytest.mark.parametrize(
    "written, line",
    [
        ("[tiers.rack]\nlatency_ns = 5000 ns\n", 5),
        ("[tiers.network]\nbandwidth_gb_per_s = 25GB/s\n", 5),
        ("memory_gb = 500 GB\n", 4),
    ],
)
def test_a_number_written_with_its_unit_is_told_to_be_written_alone(tmp_path, written, line):
    said = _refused(tmp_path, f"[[group]]\nnodes = 2\ngpus_per_node = 4\n{written}")
    assert said.startswith(f"c.toml:{line}: error: not valid TOML"), said
    assert "write the number alone" in said


def test_a_syntax_error_after_a_number_is_not_said_to_be_a_unit(tmp_path):
    said = _refused(tmp_path, "[[group]]\nnodes = 2 3\n")
    assert said.startswith("c.toml:2: error: not valid TOML") and "unit" not in said


def test_a_number_too_long_to_read_is_said_at_its_line_without_python_advice(tmp_path):
    said = _refused(tmp_path, "[[group]]\nnodes = 2\ngpus_per_node = 4\ncpus = 1" + "0" * 5000 + "\n")
    assert said.startswith("c.toml:4: error: not valid TOML"), said[:200]
    assert "5,001 digits" in said and "sys." not in said and len(said) < 300


def test_a_check_of_a_graph_shows_the_located_toml_error(tmp_path, capsys):
    spec = tmp_path / "c.toml"
    spec.write_text("[[group]]\nnodes = 2\ngpus_per_node = 4\n\n[tiers.rack]\nlatency_ns = 5000 ns\n")
    assert main(["check", "--cluster", str(spec), LAS]) != 0
    err = capsys.readouterr().err
    assert f"{spec}:6: error: not valid TOML" in err and "Traceback" not in err


# --- the same `rack` written in a split group and in another is refused, not two racks ---

_SPLIT = '[[group]]\nnodes = 4\ngpus_per_node = 8\nrack = "a"\nracks = 2\n'
_WHOLE = '[[group]]\nnodes = 2\ngpus_per_node = 8\nrack = "a"\n'


@pytest.mark.parametrize(
    "body, line, split",
    [(_SPLIT + _WHOLE + "[tiers]\n", 9, 1), (_WHOLE + _SPLIT.replace("racks = 2", "machines_per_rack = 4"), 8, 2)],
)
def test_a_rack_named_by_a_split_group_and_another_is_refused(tmp_path, body, line, split):
    said = _refused(tmp_path, body)
    assert said.startswith(f"c.toml:{line}: error: [[group]] #2: rack 'a' is also the 'rack' of [[group]] #1"), said
    assert f"[[group]] #{split} is split into racks of its own" in said


def test_groups_naming_one_rack_unsplit_still_share_it_and_split_ones_get_their_own(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text(_WHOLE + _WHOLE + _SPLIT.replace('"a"', '"b"'))
    c = Cluster.parse(str(spec))
    assert c.racks == ("a", "b-0", "b-1") and c.node_rack.tolist() == [0, 0, 0, 0, 1, 1, 2, 2]
