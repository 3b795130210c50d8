"""Cluster specs and trace generation as a new user first meets them: outputs named like folders,
GPU type names a spec file takes, counts and seeds past what is read, and spec files named
without their extension."""

from __future__ import annotations

import pytest

from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import Cluster, ClusterSpec
from roundhouse.tools.cli import main
from tests.conftest import REPO

GENERATE = ["trace", "generate", "--jobs", "5", "--rate", "8/h", "--seed", "1"]


def refused(capsys, argv: list[str], said: str) -> str:
    """Run `argv`, which must be refused (exit 2) with `said` in the message and no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err, err
    assert "Traceback" not in err
    return err


# --- an output that ends in a slash names a folder, not the file before it ---


def test_generate_to_a_name_ending_in_a_slash_leaves_the_file_of_that_name_alone(tmp_path, capsys):
    good = tmp_path / "good.csv"
    assert main([*GENERATE, "-o", str(good)]) == 0
    before = good.read_bytes()
    refused(capsys, [*GENERATE[:-1], "2", "-o", f"{good}/"], "ends in a slash")
    assert good.read_bytes() == before


def test_generate_to_a_new_name_ending_in_a_slash_makes_no_file(tmp_path, capsys):
    refused(capsys, [*GENERATE, "-o", f"{tmp_path / 'runs'}/", "--format", "canonical"], "names a folder")
    assert not (tmp_path / "runs").exists()


def test_convert_to_a_name_ending_in_a_slash_leaves_the_file_of_that_name_alone(tmp_path, capsys):
    source, good = tmp_path / "in.csv", tmp_path / "out.csv"
    assert main([*GENERATE, "-o", str(source)]) == 0
    good.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,10\n")
    refused(capsys, ["trace", "convert", str(source), f"{good}/"], "OUTPUT")
    assert good.read_text() == "job_id,arrival_s,gpus,duration_s\n0,0,1,10\n"


# --- whole numbers too long to read ---


@pytest.mark.parametrize("flag", ["--seed", "--jobs", "--start-id"])
def test_a_number_of_thousands_of_digits_is_said_to_be_one(tmp_path, capsys, flag):
    given = {"--jobs": "5", "--rate": "8/h", "--seed": "1", "--start-id": "0"} | {flag: "9" * 5000}
    argv = ["trace", "generate", "-o", str(tmp_path / "t.csv"), *(x for pair in given.items() for x in pair)]
    err = refused(capsys, argv, f"{flag}")
    assert "5,000 digits" in err
    assert "must be a whole number" not in err
    assert len(err) < 400  # (not the number itself)
    assert not (tmp_path / "t.csv").exists()


# --- GPU type names in a spec file ---


@pytest.mark.parametrize("name", ["A 100", "V100,P100", "V100:P100", " V100", "T4@p3.8xlarge", "V100;", "A" * 65])
def test_a_spec_file_gpu_type_is_a_name_an_agent_can_register(tmp_path, name):
    spec = tmp_path / "c.toml"
    spec.write_text(f'[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "{name}"\n')
    with pytest.raises(ClusterError) as err:
        ClusterSpec.parse(str(spec))
    assert err.value.path == f"{spec}:4"  # (the file, at the line of its gpu_type)
    assert err.value.message.startswith("[[group]] #1: 'gpu_type' must be a GPU type's name")


def test_a_refused_spec_file_gpu_type_is_not_told_to_name_itself_in_gpu_types(tmp_path, capsys):
    spec = tmp_path / "c.toml"
    spec.write_text('[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "RTX 3090"\n')
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,10\n")
    err = refused(
        capsys, ["check", str(REPO / "graphs" / "fifo.sched"), "--cluster", str(spec)], "'gpu_type' must be a GPU type's name"
    )
    assert "gpu_types" not in err


@pytest.mark.parametrize("name", ["A100-80GB_sxm", "3090", "A100.80GB"])
def test_spec_file_gpu_types_an_agent_can_register_still_read(tmp_path, name):
    # (`roundhouse profile --gpu-type` and an agent's GPUs take these names: a cluster must hold them)
    spec = tmp_path / "c.toml"
    spec.write_text(f'[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "{name}"\n')
    assert Cluster.parse(str(spec)).gpu_types == (name,)


# --- counts in the shorthand ---


def test_a_zero_count_names_the_group_it_is_in():
    with pytest.raises(ClusterError) as err:
        ClusterSpec.parse("8x4:V100,16x0:P100,4x4")
    assert "'16x0:P100'" in err.value.message
    assert "at least 1" in err.value.message


# --- a tier's latency of minus zero ---


def test_a_latency_of_minus_zero_is_zero(tmp_path):
    files = []
    for latency in ("-0.0", "0"):
        spec = tmp_path / f"t{len(files)}.toml"
        spec.write_text(f"[[group]]\nnodes = 16\ngpus_per_node = 8\nracks = 2\n[tiers.rack]\nlatency_ns = {latency}\n")
        files.append(Cluster.parse(str(spec)))
    assert "rack 0 ns" in files[0].describe()
    assert "-0" not in files[0].describe()
    assert files[0].fingerprint() == files[1].fingerprint()


# --- a spec file named without its extension ---


def test_a_spec_file_named_without_its_extension_is_pointed_to(tmp_path, monkeypatch):
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "mine.toml").write_text("[[group]]\nnodes = 2\ngpus_per_node = 4\n")
    monkeypatch.chdir(tmp_path)
    for text in ("clusters/mine", "mine"):
        monkeypatch.chdir(tmp_path if "/" in text else tmp_path / "clusters")
        with pytest.raises(ClusterError) as err:
            ClusterSpec.parse(text)
        assert f"did you mean {text}.toml?" in err.value.message


def test_a_path_that_is_no_regular_file_is_not_said_to_be_missing():
    with pytest.raises(ClusterError) as err:
        ClusterSpec.parse("/dev/null")
    assert "not a file" in err.value.message
    assert "no file" not in err.value.message


# --- values in messages as the spec file writes them ---


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("nodes = 1979-05-27", "got 1979-05-27"),
        ("nodes = [1979-05-27, 2]", "got [1979-05-27, 2]"),
        ("rack = 07:32:00", "got 07:32:00"),
        ("nodes = {a = 1, b = [1.5, nan]}", "got {a = 1, b = [1.5, nan]}"),
    ],
)
def test_a_date_or_a_table_of_a_spec_file_is_shown_as_written(tmp_path, written, shown):
    spec = tmp_path / "c.toml"
    spec.write_text(f"[[group]]\n{written}\ngpus_per_node = 4\n" + ("nodes = 2\n" if "nodes" not in written else ""))
    with pytest.raises(ClusterError) as err:
        ClusterSpec.parse(str(spec))
    assert err.value.message.endswith(shown), err.value.message
    assert "datetime" not in err.value.message
