"""Cluster specs as a user writes them: spaces around a file's name in a graph, folders given as
spec files, groups split into one rack each, and the docs' Dally cluster written out."""

import re

import numpy as np
import pytest

from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import Cluster, ClusterSpec, spec_file
from roundhouse.tools.cli import main
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import REPO

KNOWN = ProfileTable.load().gpu_types
TRACE = "job_id,arrival_s,gpus,duration_s\n0,0,1,10\n"


def group(nodes: int, extra: str = "") -> str:
    return f"[[group]]\nnodes = {nodes}\ngpus_per_node = 8\n{extra}"


def graph_in(folder, cluster: str):
    """A graph in `folder` whose `cluster` setting is written `cluster`, with a tiny trace."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t.csv").write_text(TRACE)
    path = folder / "g.sched"
    path.write_text(
        f'cluster = "{cluster}";\nTraceSource(path="t.csv") -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'
    )
    return path


# --- a spec file's name in a graph, with spaces around it ---


def test_a_spec_file_named_with_spaces_around_it_is_found_beside_the_graph(tmp_path, monkeypatch, capsys):
    graph = graph_in(tmp_path / "g", " c.toml ")
    (tmp_path / "g" / "c.toml").write_text(group(2))
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "c.toml").write_text(group(5))  # one of the same name where the command runs
    monkeypatch.chdir(tmp_path / "here")
    assert spec_file(" c.toml ", tmp_path / "g") == tmp_path / "g" / "c.toml"
    assert main(["check", str(graph)]) == 0
    assert "cluster 16 GPUs on 2 nodes (2x8:V100)" in capsys.readouterr().out


def test_a_missing_spec_file_with_a_slash_is_looked_for_beside_the_graph(tmp_path, monkeypatch, capsys):
    graph = graph_in(tmp_path / "g", "sub/c")
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(graph)]) == 2
    assert f"no file {tmp_path / 'g' / 'sub' / 'c'}" in capsys.readouterr().err


def test_a_shorthand_in_a_graph_names_no_file():
    assert spec_file(" 32x4:V100 ", REPO / "graphs") is None
    assert spec_file("  ", REPO / "graphs") is None


# --- a folder in place of a spec file ---


@pytest.mark.parametrize("name", ["adir", "adir.toml"])
def test_a_folder_given_as_the_cluster_is_said_to_be_a_folder(tmp_path, capsys, name):
    folder = tmp_path / name
    folder.mkdir()
    with pytest.raises(ClusterError, match="is a folder, not a cluster spec file") as err:
        Cluster.parse(str(folder), KNOWN)
    assert err.value.path == str(folder)
    with pytest.raises(ClusterError, match="is a folder, not a cluster spec file"):
        ClusterSpec.from_toml(folder)
    assert main(["run", str(REPO / "graphs" / "las.sched"), "--cluster", f"{folder}/"]) == 2
    said = capsys.readouterr().err
    assert "is a folder, not a cluster spec file" in said and "no file" not in said


def test_a_folder_named_in_a_graph_is_said_to_be_a_folder(tmp_path, capsys):
    graph = graph_in(tmp_path / "g", "racks")
    (tmp_path / "g" / "racks").mkdir()
    assert main(["check", str(graph)]) == 2
    said = capsys.readouterr().err
    assert f"setting 'cluster': {tmp_path / 'g' / 'racks'}: is a folder, not a cluster spec file" in said


# --- a group split into one rack of its own ---


@pytest.mark.parametrize("split", ["machines_per_rack = 8\n", "racks = 1\n"])
def test_groups_split_into_one_rack_each_do_not_share_it(tmp_path, split):
    path = tmp_path / "c.toml"
    path.write_text(group(8, split) + group(8, split) + "[tiers]\n")
    cluster = Cluster.parse(str(path), KNOWN)
    assert cluster.n_racks == 2 and cluster.racks == ("r0-0", "r1-0")
    assert cluster.node_rack.tolist() == [0] * 8 + [1] * 8
    # a job on a machine of each group crosses racks, as on one group of 16 split in two
    whole = tmp_path / "whole.toml"
    whole.write_text(group(16, "machines_per_rack = 8\n") + "[tiers]\n")
    assert cluster.spread([0, 64]) == Cluster.parse(str(whole), KNOWN).spread([0, 64]) == "cluster"
    assert "in 2 racks of 8 machines" in cluster.describe()


def test_a_group_split_into_one_rack_keeps_it_from_a_group_naming_it(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(group(2, 'rack = "a"\nracks = 1\n') + group(2, 'rack = "a-0"\n'))
    with pytest.raises(ClusterError, match="rack 'a-0' is also a rack of \\[\\[group\\]\\] #1"):
        Cluster.parse(str(path), KNOWN)


def test_groups_not_split_still_share_a_rack(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(group(2, 'rack = "a"\n') + group(2, 'rack = "a"\n') + group(2))
    cluster = Cluster.parse(str(path), KNOWN)
    assert cluster.racks == ("a", "r0") and cluster.node_rack.tolist() == [0, 0, 0, 0, 1, 1]


def test_own_racks_is_not_a_key_of_a_spec_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(group(2, "own_racks = true\n"))
    with pytest.raises(ClusterError, match="unknown key 'own_racks'"):
        Cluster.parse(str(path), KNOWN)


# --- the docs ---


def test_the_docs_dally_cluster_written_out_is_dally_8(tmp_path):
    page = (REPO / "docs" / "clusters.md").read_text()
    (body,) = [b for b in re.findall(r"^```toml\n(.*?)^```", page, re.S | re.M) if 'name = "dally-8-racks"' in b]
    path = tmp_path / "dally.toml"
    path.write_text(body)
    written, shorthand = Cluster.parse(str(path), KNOWN), Cluster.parse("dally:8", KNOWN)
    assert written.describe() == shorthand.describe()
    assert written.tiers == shorthand.tiers
    for table in ("node_gpus", "node_rack", "node_cpus", "node_memory_gb", "gpu_memory_gb", "node_network_gbps"):
        assert np.array_equal(getattr(written, table), getattr(shorthand, table)), table


# --- telling clusters apart beyond their one-line description ---


def test_clusters_that_describe_alike_but_differ_in_a_node_fact_have_different_fingerprints(tmp_path):
    synergy = Cluster.parse(str(REPO / "clusters" / "synergy-128.toml"), KNOWN)
    plain = Cluster.parse("16x8:V100", KNOWN)
    assert synergy.describe() == plain.describe() and synergy.fingerprint() != plain.fingerprint()
    racked = Cluster.parse(str(REPO / "clusters" / "gavel-simulated.toml"), KNOWN)
    gavel = Cluster.parse("36:36:36", KNOWN)
    assert racked.describe() == gavel.describe() and racked.fingerprint() != gavel.fingerprint()
    linked = Cluster.parse("4x4:V100@p3.8xlarge", KNOWN)
    assert linked.fingerprint() != Cluster.parse("4x4:V100", KNOWN).fingerprint()


def test_clusters_written_differently_but_alike_share_a_fingerprint():
    one = Cluster.parse("4x4:V100", KNOWN).fingerprint()
    assert one == Cluster.parse("2x4:V100, 2x4:v100", KNOWN).fingerprint() == Cluster.parse(" 4x4 ", KNOWN).fingerprint()
    assert Cluster.parse("dally:2", KNOWN).fingerprint() == Cluster.parse("dally:2", KNOWN).fingerprint()


def test_a_shorthand_is_read_as_one_even_where_a_folder_has_its_name(tmp_path, monkeypatch):
    (tmp_path / "4x4").mkdir()
    (tmp_path / "dally:1").mkdir()
    monkeypatch.chdir(tmp_path)
    assert Cluster.parse("4x4", KNOWN).n_gpus == 16 and Cluster.parse("dally:1", KNOWN).n_gpus == 64
    assert spec_file("4x4", tmp_path) is None and spec_file("dally:1", tmp_path) is None
