"""docs/whatif.md, docs/explain.md and docs/clusters.md followed as a new user would: what their
commands do with input a user gets wrong. A misspelt setting given a value only a text setting
takes (`--set clustr=8x4:V100`) is said to be an unknown setting, with the one it is near, not
a bad value, from `check` and from `whatif` alike."""

import pytest

from tests.conftest import REPO, fails


@pytest.fixture
def graph():
    return REPO / "graphs" / "las.sched"  # (a graph with a cluster setting, as a user's first)


@pytest.mark.parametrize(
    ("given", "near"),
    [("Cluster=4x4", "cluster"), ("clustr=4x4:V100", "cluster"), ("gpu_type=A100,T4", "gpu_types")],
)
def test_a_misspelt_setting_is_unknown_not_a_bad_value(graph, capsys, given, near):
    err = fails(capsys, "check", graph, "--set", given)
    name = given.split("=")[0]
    assert f"unknown setting '{name}' (--set {name})" in err, err
    assert f"did you mean '{near}'?" in err and "bad value" not in err, err


def test_whatif_says_the_same_of_a_misspelt_setting(tmp_path, graph, capsys):
    from roundhouse.runtime.simulation import Simulation

    snap = tmp_path / "day.snap"
    Simulation(str(graph)).run_until(3600).save(snap)
    err = fails(capsys, "whatif", snap, "--set", "Cluster=4x4")
    assert "unknown setting 'Cluster' (--set Cluster)" in err and "did you mean 'cluster'?" in err, err


def test_a_known_settings_bad_value_is_still_a_bad_value(graph, capsys):
    err = fails(capsys, "check", graph, "--set", "seed=abc def")
    assert "--set seed=abc def: bad value" in err and "unknown setting" not in err, err


# --- a cluster written otherwise but alike node by node is the run's ---

LIVE = """round = 10s;
cluster = "2x2:V100";
submitted :: LiveSource;
submitted -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


def _journal(folder):
    """A journal of a run of LIVE a few rounds in, and the run's facts as serve keeps them."""
    from tests.test_journal_reading import live_journal

    return live_journal(folder, LIVE, [(1, 300)], 30.0, fingerprint=True)


def _whatif_json(capsys, *argv) -> dict:
    import json

    from roundhouse.tools.cli import main

    capsys.readouterr()
    assert main(["whatif", *map(str, argv), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("alike", ["1x2,1x2", "2x2:v100", "1x2:V100, 1x2:v100"])
def test_whatif_takes_the_runs_cluster_written_otherwise(tmp_path, capsys, alike):
    path, _ = _journal(tmp_path)
    assert _whatif_json(capsys, path, "--cluster", alike) == _whatif_json(capsys, path)
    err = fails(capsys, "whatif", path, "--cluster", "0:4:0")  # (4 GPUs too, but other nodes)
    assert "the cluster 4 GPUs on 4 nodes (4x1:P100) is not the run's, which was 4 GPUs on 2 nodes (2x2:V100)" in err


def test_serve_resumes_its_journal_on_the_runs_cluster_written_otherwise(tmp_path):
    from roundhouse.errors import UsageError
    from roundhouse.runtime.cluster import Cluster
    from roundhouse.runtime.journal import Journal

    path, meta = _journal(tmp_path)
    for spec, same in (("1x2,1x2", True), ("2x2:v100", True), ("1x4", False)):
        cluster = Cluster.parse(spec)
        again = {**meta, "cluster": cluster.describe(), "cluster_fingerprint": cluster.fingerprint()}
        journal = Journal(path)
        try:
            if same:
                assert journal.run_of(again)["epoch"]
            else:
                with pytest.raises(UsageError, match="belongs to another run: its cluster differs"):
                    journal.run_of(again)
        finally:
            journal.close()


# --- simulate(..., explain_to=PATH): a PATH that cannot be written is refused before the run ---


@pytest.mark.parametrize(("where", "says"), [("nowhere/x.parquet", "cannot be written"), (".", "is a folder")])
def test_explain_to_a_path_that_cannot_be_written_is_refused_first(tmp_path, graph, where, says):
    from roundhouse.errors import UsageError
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    path = tmp_path / where
    ticked = []
    with pytest.raises(UsageError, match=f"explain_to: .*: {says}"):
        simulate(compile_file(graph), explain=True, explain_to=path, on_round=lambda *a: ticked.append(1))
    assert not ticked  # (refused before the run, not when its record is written)


def test_whatif_with_neither_graph_nor_set_gives_the_runs_side_alone(tmp_path, capsys):
    # (As docs/whatif.md says under its commands.)
    path, _ = _journal(tmp_path)
    projections = _whatif_json(capsys, path)["projections"]
    assert [p["given"] for p in projections] == ["as run"]
