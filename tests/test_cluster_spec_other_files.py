"""A file of another kind given where a cluster spec is asked for (a graph to `--cluster`, a
trace in a graph's `cluster` setting) is said to be what it is, not TOML gone wrong; a key a
spec writes twice is named; and a spec file that is not there is told a near name beside it,
or that its folder is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import ClusterSpec
from roundhouse.tools.cli import main
from tests.conftest import REPO

LAS = REPO / "graphs" / "las.sched"


def _refused(spec: Path) -> str:
    with pytest.raises(ClusterError) as info:
        ClusterSpec.parse(str(spec))
    return str(info.value)


@pytest.mark.parametrize(
    "name, body, kind",
    [
        ("g.sched", 'round = 5min;\ncluster = "32x4:V100";\n', "a graph"),
        ("t.csv", "job_id,arrival_s,gpus,duration_s\n0,0,1,60\n", "a trace"),
        ("t.parquet", b"PAR1\xff\x00\x15", "a trace"),
    ],
)
def test_a_file_of_another_kind_is_said_to_be_one(tmp_path, name, body, kind):
    spec = tmp_path / name
    spec.write_bytes(body if isinstance(body, bytes) else body.encode())
    said = _refused(spec)
    assert said.startswith(f"{spec}: error: is {kind}"), said
    assert "not a cluster spec" in said and ".toml" in said
    assert "TOML" not in said and "unit" not in said  # (not the reader's complaint, nor the advice on units)


def test_check_of_a_graph_given_as_its_cluster_names_the_graph(tmp_path, capsys):
    assert main(["check", "--cluster", str(LAS), str(LAS)]) == 2
    err = capsys.readouterr().err
    assert f"{LAS}: error: is a graph (.sched file), not a cluster spec" in err
    assert "Traceback" not in err


def test_a_graph_whose_cluster_setting_names_a_graph_is_refused_at_the_setting(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'cluster = "{LAS}";\n'
        "arrivals :: PoissonSource(rate=4/h, jobs=5, seed=0);\n"
        "arrivals -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    assert main(["check", str(graph)]) == 2
    err = capsys.readouterr().err
    assert f"g.sched:1:11: error: setting 'cluster': {LAS}: is a graph" in err, err


def test_a_toml_spec_that_is_not_toml_is_still_said_as_the_reader_says(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text("round = 5min;\n")
    assert "not valid TOML" in _refused(spec)


def test_a_key_written_twice_is_named(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text("[[group]]\nnodes = 2\ngpus_per_node = 4\nnodes = 3\n")
    said = _refused(spec)
    assert said.startswith(f"{spec}:4: error: not valid TOML"), said
    assert "'nodes' has a value already" in said


def test_a_dotted_key_written_over_a_value_names_no_key(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text('[[group]]\nnodes = 2\ngpus_per_node = 4\nrack = "a"\nrack.x = 1\n')
    said = _refused(spec)
    assert said.startswith(f"{spec}:5: error: not valid TOML") and "has a value already" not in said, said


# --- a spec file that is not there: its folder missing, or a near name beside it ---


def test_a_misspelt_spec_file_is_told_the_spec_beside_it(tmp_path):
    (tmp_path / "gavel-physical.toml").write_text("[[group]]\nnodes = 2\ngpus_per_node = 4\n")
    said = _refused(tmp_path / "gavel-physcal.toml")
    assert said == f"{tmp_path / 'gavel-physcal.toml'}: error: cluster spec not found (did you mean 'gavel-physical.toml'?)"


def test_a_spec_file_with_nothing_near_it_is_said_not_found_alone(tmp_path):
    (tmp_path / "gavel-physical.toml").write_text("[[group]]\nnodes = 2\ngpus_per_node = 4\n")
    assert _refused(tmp_path / "zz.toml").endswith("error: cluster spec not found")


def test_a_spec_file_in_a_missing_folder_names_the_folder(tmp_path):
    said = _refused(tmp_path / "nodir" / "c.toml")
    assert said.endswith(f"error: cluster spec not found: no folder {tmp_path / 'nodir'}"), said


def test_a_graph_naming_a_misspelt_spec_is_told_at_the_setting(tmp_path, capsys):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "physical.toml").write_text("[[group]]\nnodes = 2\ngpus_per_node = 4\n")
    graph = tmp_path / "g.sched"
    graph.write_text(
        'cluster = "c/physcal.toml";\n'
        "arrivals :: PoissonSource(rate=4/h, jobs=5, seed=0);\n"
        "arrivals -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    assert main(["check", str(graph)]) == 2
    err = capsys.readouterr().err
    assert (
        "g.sched:1:11: error: setting 'cluster': " in err and "cluster spec not found (did you mean 'physical.toml'?)" in err
    ), err


def test_a_misspelt_spec_written_without_toml_is_told_the_spec_beside_it(tmp_path):
    for name in ("gavel-physical", "cpus", "unitstr"):  # (names sharing only '.toml' are not near)
        (tmp_path / f"{name}.toml").write_text("[[group]]\nnodes = 2\ngpus_per_node = 4\n")
    with pytest.raises(ClusterError) as info:
        ClusterSpec.parse(str(tmp_path / "gavel-physcal"))
    assert str(info.value).endswith(f"no file {tmp_path / 'gavel-physcal'} (did you mean 'gavel-physical.toml'?)"), info.value
