"""Run a compiled graph in the simulator: the one entry point the command line, the
reproductions and the tests share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from roundhouse.errors import ClusterError, SchedError
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import CompiledGraph
from roundhouse.runtime.engine import Engine, RunResult
from roundhouse.runtime.world import World


def load_cluster(graph: CompiledGraph, cluster: str | Cluster | None) -> Cluster:
    """The cluster given on the command line, else the graph's `cluster` setting."""
    if isinstance(cluster, Cluster):
        return cluster
    if cluster is not None:
        return Cluster.parse(cluster)
    spec = graph.settings.cluster
    if spec is None:
        raise ClusterError(
            f'{graph.path}: no cluster: give --cluster (e.g. --cluster 32x4:V100) or set cluster = "..." in the graph'
        )
    location = graph.setting_locations.get("cluster")
    if location is None:  # given with --set: relative to the current folder, as other --set paths
        try:
            return Cluster.parse(spec)
        except ClusterError as err:
            raise ClusterError(f"--set cluster: {err}") from None
    try:
        # A spec file named in the graph is relative to the graph's folder.
        relative = Path(graph.path).parent / spec
        return Cluster.parse(str(relative) if spec.endswith(".toml") and relative.exists() else spec)
    except ClusterError as err:
        raise SchedError(f"setting 'cluster': {err}", location) from None


def load_profile(graph: CompiledGraph):
    from roundhouse.traces.profiles import ProfileTable

    return ProfileTable.load(graph.settings.profile)


def simulate(
    graph: CompiledGraph,
    cluster: str | Cluster | None = None,
    until: float | None = None,
    on_round: Callable | None = None,
    profile=None,
) -> RunResult:
    settings = graph.settings
    world = World(load_cluster(graph, cluster), profile or load_profile(graph), settings.reference_gpu, settings.pair_profile)
    backend = Simulator(world, settings.round, settings.checkpoint, settings.restore)
    return Engine(graph, world, backend, until=until, on_round=on_round).run()
