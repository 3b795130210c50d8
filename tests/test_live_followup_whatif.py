"""A live run's cluster told apart by its fingerprint, not only its description: `whatif`
refuses a cluster that describes alike but whose nodes differ (and a rerun of `serve` refuses
its journal), a journal written before the fingerprint was kept still loads, and a journal
whose run accepted jobs but has not begun says the run has not begun."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.simulate import load_cluster, load_profile, new_world
from roundhouse.runtime.whatif import _unused_settings
from tests.conftest import REPO, fails
from tests.test_journal_reading import live_journal

GRAPH = """round = 10s;
cluster = "synergy-128.toml";
submitted :: LiveSource;
submitted -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""
# Described as synergy-128 is (16 nodes of 8 V100s), with other cores and memory per node.
ALIKE = "16x8:V100"


def _journal(folder: Path, fingerprint: bool = True) -> Path:
    """A journal of a run of GRAPH on clusters/synergy-128.toml, a few rounds in; without the
    cluster's fingerprint in its facts as an older Roundhouse wrote them."""
    shutil.copy(REPO / "clusters" / "synergy-128.toml", folder / "synergy-128.toml")
    path, meta = live_journal(folder, GRAPH, [(1, 300)], 30.0, fingerprint=fingerprint)
    assert meta["cluster"] == Cluster.parse(ALIKE).describe()
    return path


def _whatif(capsys, *argv) -> str:
    from roundhouse.tools.cli import main

    capsys.readouterr()
    assert main(["whatif", *map(str, argv)]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_whatif_refuses_a_cluster_described_alike_whose_nodes_differ(tmp_path, capsys):
    path = _journal(tmp_path)
    err = fails(capsys, "whatif", path, "--cluster", ALIKE)
    assert f"{path}: the cluster is not the run's: both are 128 GPUs on 16 nodes (16x8:V100), but their nodes differ" in err
    assert "give --cluster the cluster the scheduler ran on" in err and "Traceback" not in err
    assert "job(s) seen" in _whatif(capsys, path)  # (the graph's own cluster: the run's)
    assert "job(s) seen" in _whatif(capsys, path, "--cluster", tmp_path / "synergy-128.toml")


def test_a_journal_without_the_fingerprint_is_told_apart_by_its_description(tmp_path, capsys):
    path = _journal(tmp_path, fingerprint=False)
    assert "job(s) seen" in _whatif(capsys, path)
    assert "job(s) seen" in _whatif(capsys, path, "--cluster", ALIKE)  # (all an old journal can tell)
    assert "is not the run's, which was 128 GPUs on 16 nodes" in fails(capsys, "whatif", path, "--cluster", "8x8:V100")


def _meta(cluster: Cluster) -> dict:
    facts = {"graph": "/g.sched", "graph_digest": "d", "cluster": cluster.describe(), "round_s": 10.0}
    return {**facts, "cluster_fingerprint": cluster.fingerprint()}


def test_a_rerun_on_a_cluster_described_alike_whose_nodes_differ_is_refused(tmp_path):
    synergy = Cluster.parse(str(REPO / "clusters" / "synergy-128.toml"))
    journal = Journal(tmp_path / "j.sqlite")
    journal.begin(_meta(synergy))
    with pytest.raises(UsageError, match=r"belongs to another run: its cluster's nodes differ \(their cores, memory"):
        journal.run_of(_meta(Cluster.parse(ALIKE)))
    assert journal.run_of(_meta(synergy))["cluster_fingerprint"] == synergy.fingerprint()
    journal.close()
    # A run that has not begun but accepted jobs keeps the fingerprint with its other facts.
    waiting = Journal(tmp_path / "w.sqlite")
    assert waiting.run_of(_meta(synergy)) == {}
    waiting.add_submission(0, {"model": "LM", "iterations": 10, "gpus": 1}, 0.0)
    waiting.commit()
    assert waiting.meta()["cluster_fingerprint"] == synergy.fingerprint()
    with pytest.raises(UsageError, match="which has not begun but accepted jobs: its cluster's nodes differ"):
        waiting.run_of(_meta(Cluster.parse(ALIKE)))
    waiting.close()


def test_a_journal_without_the_fingerprint_resumes(tmp_path):
    synergy = Cluster.parse(str(REPO / "clusters" / "synergy-128.toml"))
    journal = Journal(tmp_path / "j.sqlite")
    old = {k: v for k, v in _meta(synergy).items() if k != "cluster_fingerprint"}
    journal.begin(old)
    assert "cluster_fingerprint" not in journal.run_of(_meta(synergy))
    journal.close()


def test_a_journal_that_accepted_jobs_before_its_run_began_says_the_run_has_not_begun(tmp_path, capsys):
    journal = Journal(tmp_path / "k.sqlite")
    journal.run_of(_meta(Cluster.parse("1x2:V100")))
    journal.add_submission(0, {"model": "LM", "iterations": 10, "gpus": 1}, 0.0)
    journal.commit()
    journal.close()
    err = fails(capsys, "whatif", tmp_path / "k.sqlite")
    assert "k.sqlite: the run has not begun: its scheduler is waiting for its agents" in err, err
    assert "not journaled a round" not in err


def test_the_other_graph_s_cluster_described_alike_is_named_unused(tmp_path):
    shutil.copy(REPO / "clusters" / "synergy-128.toml", tmp_path / "synergy-128.toml")
    (tmp_path / "g.sched").write_text(GRAPH)
    (tmp_path / "other.sched").write_text(GRAPH.replace('"synergy-128.toml"', f'"{ALIKE}"'))
    run, other = compile_file(tmp_path / "g.sched"), compile_file(tmp_path / "other.sched")
    profile = load_profile(run)
    world = new_world(run, load_cluster(run, None, profile), profile)
    assert _unused_settings(run, other, world) == [f"cluster {ALIKE}"]
    assert _unused_settings(run, run, world) == []
