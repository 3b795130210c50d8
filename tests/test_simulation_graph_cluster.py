"""A simulation given a cluster (`Simulation(graph, cluster=...)`) runs a graph that says that
cluster, not its file's `cluster` setting: printed, in its settings, and after a snapshot loads."""

from __future__ import annotations

import json

from roundhouse import Simulation
from roundhouse.runtime.cluster import Cluster
from roundhouse.tools.cli import main
from tests.conftest import REPO

GRAPH = (
    'round = 5min;\ncluster = "2x2:V100";\nsrc :: PoissonSource(rate=6/h, jobs=12, seed=3);\n'
    "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
)


def test_the_graph_printed_says_the_cluster_the_simulation_runs_on(tmp_path, capsys, monkeypatch):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH)
    sim = Simulation(graph, cluster="4x8:V100")
    assert sim.world.cluster.describe() == "32 GPUs on 4 nodes (4x8:V100)"
    assert str(sim.graph) == repr(sim.graph) == "CompiledGraph(g.sched: 7 elements, 6 connections, round 5min, cluster 4x8:V100)"
    assert sim.graph.settings.cluster == "4x8:V100"
    # Without one, the file's; given as a Cluster written as a shorthand, that shorthand.
    assert "cluster 2x2:V100)" in str(Simulation(graph).graph)
    assert "cluster 1x4:V100)" in str(Simulation(graph, cluster=Cluster.parse("1x4:V100")).graph)
    # A spec file by its whole path, whatever folder the graph is printed in.
    spec = REPO / "clusters" / "synergy-128.toml"
    monkeypatch.chdir(REPO)
    assert str(Simulation(graph, cluster="clusters/synergy-128.toml").graph).endswith(f"cluster {spec})")
    monkeypatch.chdir(tmp_path)

    # A snapshot's graph says it too once loaded, and whatif's other side (the run's own graph
    # with --set) goes on from the same cluster.
    sim.run_until(3600)
    path = sim.save(tmp_path / "hour.snap")
    loaded = Simulation.load(path)
    assert str(loaded.graph) == str(sim.graph) and loaded.world.cluster.describe() == sim.world.cluster.describe()
    capsys.readouterr()
    assert main(["whatif", str(path), "--set", "src.jobs=13", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["from"]["cluster"] == "32 GPUs on 4 nodes (4x8:V100)" and len(got["projections"]) == 2
