"""Elements that work by something a cluster may lack, on a cluster that lacks it: Dally's by
network tiers (no job is slowed by where it runs), the intra-node bandwidth elements by a node
topology (the links between a node's GPUs are unknown). Warned of before a run, with what the
cluster needs (tools/useless_runs.py gathers them with the other warnings)."""

from __future__ import annotations

from roundhouse.errors import RoundhouseError


def tier_warnings(graph, cluster=None) -> list[str]:
    """The warning for each element built for network tiers (`needs_tiers`: Dally's) on a
    cluster that has none, where no job is slowed by where it runs. None when the cluster
    cannot be loaded (or none is named): the run says what is wrong."""
    needing = [(name, el) for name, el in graph.elements.items() if getattr(type(el), "needs_tiers", False)]
    cluster = _loaded(graph, cluster) if needing else None
    if cluster is None or cluster.tiers is not None:
        return []
    return [
        f"{at(el)}warning: element '{name}' ({type(el).__name__}) works by network tiers, and the cluster "
        f"({cluster.describe()}) has no network tiers: no job is slowed by where it runs, so what it does by machines, "
        "racks and the network (delay timers, network sensitivity, consolidating network-heavy models) gains nothing "
        '(give cluster = "dally:N", Dally\'s racks with their tiers, or a cluster spec file with a [tiers] table)'
        for name, el in needing
    ]


def topology_warnings(graph, cluster=None) -> list[str]:
    """The warning for each element that works by the links between a node's GPUs (measuring
    them, or choosing GPUs by them) on a cluster none of whose nodes has a known topology. None
    when the cluster cannot be loaded (or none is named), as `tier_warnings`."""
    needing = [(name, el, what) for name, el in graph.elements.items() if (what := by_links(el)) is not None]
    cluster = _loaded(graph, cluster) if needing else None
    if cluster is None or any(group.topology for group in cluster.spec.groups):
        return []
    return [
        f"{at(el)}warning: element '{name}' ({type(el).__name__}) works by the links between a node's GPUs, and the "
        f"cluster ({cluster.describe()}) names no node topology, so those links are unknown: {what} "
        f"({_give_topology(cluster)}; docs/clusters.md)"
        for name, el, what in needing
    ]


def _loaded(graph, cluster):
    """The run's cluster (`cluster` given, else the graph's setting), or None when it cannot be
    loaded: the run says what is wrong."""
    from roundhouse.runtime.simulate import load_cluster

    try:
        return load_cluster(graph, cluster)
    except RoundhouseError:
        return None


def by_links(el) -> str | None:
    """What `el` does on nodes of no known topology, if it works by their links (its class's
    `without_topology`), else None."""
    return getattr(type(el), "without_topology", None)


def _give_topology(cluster) -> str:
    """How to give a cluster's nodes a topology, named for its own first group where one fits."""
    from roundhouse.runtime.topologies import TOPOLOGIES

    group = cluster.spec.groups[0]
    fits = [name for name, links in TOPOLOGIES.items() if len(links) == group.gpus_per_node]
    name = fits[0] if fits else next(iter(TOPOLOGIES))
    spec = f"{group.nodes}x{group.gpus_per_node}:{group.gpu_type}" if fits else f"32x{len(TOPOLOGIES[name])}:V100"
    return f'give a topology: a cluster such as "{spec}@{name}", or topology = "{name}" in a cluster spec file\'s group'


def at(el) -> str:
    """How a warning about an element starts: at its declaration, when it has one."""
    where = getattr(el, "declared_at", None)
    return f"{where}: " if where is not None else ""
