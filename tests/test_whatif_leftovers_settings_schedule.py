"""Leftovers of `whatif` and the Simulation API: the run's own graph given by a relative path
is not told its profile goes unused; a Cluster read from a spec file is the graph's cluster
as that file; and a snapshot's projection of a graph of another round length keeps its rounds
on the run's schedule, as a journal's does."""

from __future__ import annotations

import json
import shutil

import attrs

from tests.conftest import REPO
from tests.livecluster import TEST_PROFILE
from tests.test_journal_reading import live_journal


def whatif_json_and_warnings(capsys, *argv) -> tuple[dict, str]:
    """`roundhouse whatif ... --json`'s result and what it printed to stderr."""
    from roundhouse.tools.cli import main

    capsys.readouterr()
    assert main(["whatif", *map(str, argv), "--json"]) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    return json.loads(out), err


LIVE_WITH_PROFILE = """round = 10s;
cluster = "1x2:V100";
profile = "profile.csv";
submitted :: LiveSource;
submitted -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;
"""


# --- the run's own profile, its graph given by a relative path -------------------------------
def _journal_with_profile(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "profile.csv").write_text(TEST_PROFILE)
    (folder / "graph.sched").write_text(LIVE_WITH_PROFILE)
    return live_journal(folder, folder / "graph.sched", [(1, 35 + 20 * i) for i in range(5)], 40.0)[0]


def test_the_run_s_own_graph_by_a_relative_path_is_not_told_its_profile_goes_unused(tmp_path, capsys, monkeypatch):
    journal = _journal_with_profile(tmp_path)
    monkeypatch.chdir(tmp_path)
    for spelled in ("run/graph.sched", "run/../run/graph.sched"):
        got, err = whatif_json_and_warnings(capsys, "run/j.sqlite", "--graph", spelled)
        assert "not used" not in err, (spelled, err)
        as_run, again = got["projections"]
        assert as_run["metrics"] == again["metrics"]
    # (the journal named by its whole path, the graph by a relative one: the same files still)
    _, err = whatif_json_and_warnings(capsys, journal, "--graph", "run/graph.sched")
    assert "not used" not in err, err


def test_a_profile_that_really_differs_is_still_told_unused(tmp_path, capsys, monkeypatch):
    _journal_with_profile(tmp_path)
    monkeypatch.chdir(tmp_path)
    # A copy of the profile is another file, whatever its text: the run's is what is used.
    shutil.copy(tmp_path / "run" / "profile.csv", tmp_path / "run" / "mine.csv")
    (tmp_path / "run" / "other.sched").write_text(LIVE_WITH_PROFILE.replace("profile.csv", "mine.csv"))
    _, err = whatif_json_and_warnings(capsys, "run/j.sqlite", "--graph", "run/other.sched")
    assert "its own profile run/mine.csv is not used (docs/whatif.md)" in err, err


# --- a Cluster read from a spec file, given to a Simulation ----------------------------------
GRAPH = (
    'round = 5min;\ncluster = "2x2:V100";\nsrc :: PoissonSource(rate=6/h, jobs=12, seed=3);\n'
    "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
)


def test_a_cluster_read_from_a_spec_file_is_the_graph_s_cluster_as_that_file(tmp_path, monkeypatch):
    from roundhouse import Simulation
    from roundhouse.runtime.cluster import Cluster

    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH)
    spec = REPO / "clusters" / "synergy-128.toml"  # (cores and memory per node: no shorthand writes it)
    monkeypatch.chdir(REPO)
    cluster = Cluster.parse("clusters/synergy-128.toml")
    monkeypatch.chdir(tmp_path)
    sim = Simulation(graph, cluster=cluster)
    assert sim.world.cluster is cluster
    assert str(sim.graph).endswith(f"cluster {spec})"), sim.graph
    assert sim.graph.settings.cluster == str(spec)
    # As the file given by its path: the same graph, the same key.
    assert sim.graph.key() == Simulation(graph, cluster=str(spec)).graph.key()
    # Where it was read from is no part of what it is.
    assert cluster.spec == Cluster.parse(str(spec)).spec == attrs.evolve(cluster.spec, file=None)
    # A loaded snapshot's graph says it too.
    path = sim.run_until(3600).save(tmp_path / "hour.snap")
    assert str(Simulation.load(path).graph) == str(sim.graph)


def test_a_cluster_no_file_or_shorthand_writes_is_not_said_as_the_graph_file_s(tmp_path):
    from roundhouse import Simulation
    from roundhouse.runtime.cluster import Cluster

    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH)
    # A spec file changed since its Cluster was read no longer says that cluster.
    spec = tmp_path / "mine.toml"
    spec.write_text((REPO / "clusters" / "synergy-128.toml").read_text())
    cluster = Cluster.parse(str(spec))
    spec.write_text(spec.read_text().replace("cpus = 24", "cpus = 32"))
    sim = Simulation(graph, cluster=cluster)
    said = "cluster Cluster(128 GPUs on 16 nodes (16x8:V100)))"
    assert str(sim.graph).endswith(said) and "2x2:V100" not in str(sim.graph), sim.graph
    path = sim.run_until(3600).save(tmp_path / "hour.snap")
    assert str(Simulation.load(path).graph).endswith(said)
    # One built in Python, with tiers (whose links' "GB/s" is no path), likewise.
    dally = Cluster.parse("dally:2")
    group = attrs.evolve(dally.spec.groups[0], cpus=3)
    built = Cluster(attrs.evolve(dally.spec, groups=(group,)))
    assert str(Simulation(graph, cluster=built).graph).endswith(
        "cluster Cluster(128 GPUs on 16 nodes (16x8:V100) in 2 racks of 8 machines))"
    )


# --- a snapshot's projection of a graph of another round length: on the run's schedule -------
# Rounds of 5 min, forked at 1200 s; the other graph's of 7 min, whose boundaries from the run's
# start (420 s, 840 s, 1260 s, ...) do not hold 1200 s. Its first round runs to 1260 s and whole
# rounds follow, as from a journal (docs/whatif.md): not 1620 s, 2040 s, ... from the fork point.
LONG_JOBS = "job_id,arrival_s,gpus,duration_s\n0,0,1,90000\n1,10,1,90000\n2,600,1,90000\n"
TRACED = """round = {round};
cluster = "2x4:V100";
arrivals :: TraceSource(path="jobs.csv");
arrivals -> AcceptAll -> pool :: JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;
"""


def _snapshot_and_other(tmp_path):
    from roundhouse import Simulation

    (tmp_path / "jobs.csv").write_text(LONG_JOBS)
    (tmp_path / "five.sched").write_text(TRACED.format(round="5min"))
    (tmp_path / "seven.sched").write_text(TRACED.format(round="7min"))
    sim = Simulation(tmp_path / "five.sched").run_until(1200)
    assert sim.now == 1200
    return sim, tmp_path / "seven.sched"


def test_simulate_ahead_runs_another_round_length_on_the_run_s_schedule(tmp_path):
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.whatif import simulate_ahead

    sim, other = _snapshot_and_other(tmp_path)
    # (The horizon, 1200 + 1000 s, ends at the first of its boundaries at or after 2200 s: 2520 s.)
    got = simulate_ahead(sim.world_now(), compile_file(other), sim.now, 1000.0)
    assert got.end_s == 2520.0, got
    assert got.end_s % 420 == 0
    # The run's own round length is on its schedule as it always was.
    assert simulate_ahead(sim.world_now(), sim.graph, sim.now, 1000.0).end_s == 2400.0


def test_whatif_from_a_snapshot_runs_another_round_length_on_the_run_s_schedule(tmp_path, capsys):
    sim, other = _snapshot_and_other(tmp_path)
    snap = sim.save(tmp_path / "fork.snap")
    got, _ = whatif_json_and_warnings(capsys, snap, "--graph", other, "--horizon", "1000s")
    as_run, seven = got["projections"]
    assert (as_run["end_s"], seven["end_s"]) == (2400.0, 2520.0), got


def test_a_built_in_elastic_profile_is_the_same_from_any_folder(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "run"
    folder.mkdir()
    text = LIVE_WITH_PROFILE.replace('profile = "profile.csv";\n', 'elastic_profile = "ones";\n')
    live_journal(folder, text, [(1, 35 + 20 * i) for i in range(5)], 40.0)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "g.sched").write_text(text)
    monkeypatch.chdir(tmp_path)
    _, err = whatif_json_and_warnings(capsys, "run/j.sqlite", "--graph", "elsewhere/g.sched")
    assert "not used" not in err, err
    # The other built-in one is another profile.
    (tmp_path / "elsewhere" / "g.sched").write_text(text.replace('"ones"', '"pollux"'))
    _, err = whatif_json_and_warnings(capsys, "run/j.sqlite", "--graph", "elsewhere/g.sched")
    assert "its own elastic_profile" in err and "is not used" in err, err
