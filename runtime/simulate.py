"""Run a compiled graph in the simulator: the one entry point the command line, the
reproductions and the tests share."""

from __future__ import annotations

from typing import Callable

from runtime.backends.sim import Simulator
from runtime.cluster import Cluster
from runtime.compiler import CompiledGraph
from runtime.engine import Engine, RunResult
from runtime.errors import ClusterError
from runtime.world import World


def load_cluster(graph: CompiledGraph, cluster: str | Cluster | None) -> Cluster:
    """The cluster given on the command line, else the graph's `cluster` setting."""
    if isinstance(cluster, Cluster):
        return cluster
    spec = cluster or graph.settings.cluster
    if spec is None:
        raise ClusterError(
            f"{graph.path}: no cluster: give --cluster (e.g. --cluster 32x4:V100) or set cluster = \"...\" in the graph"
        )
    return Cluster.parse(spec)


def load_profile(graph: CompiledGraph):
    from traces.profiles import ProfileTable

    return ProfileTable.load(graph.settings.profile)


def simulate(
    graph: CompiledGraph,
    cluster: str | Cluster | None = None,
    until: float | None = None,
    on_round: Callable | None = None,
    profile=None,
) -> RunResult:
    settings = graph.settings
    world = World(load_cluster(graph, cluster), profile or load_profile(graph), settings.reference_gpu)
    backend = Simulator(world, settings.round, settings.checkpoint, settings.restore)
    return Engine(graph, world, backend, until=until, on_round=on_round).run()
