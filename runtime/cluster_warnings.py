"""Elements at odds with the run's cluster. Those that work by something a cluster may lack, on
a cluster that lacks it: Dally's by network tiers (no job is slowed by where it runs), the
intra-node bandwidth elements by a node topology (the links between a node's GPUs are unknown).
And placers that do not weigh what each job gains from one GPU type over another, on a cluster
of several types on which the jobs' models run at different speeds. Warned of before a run, with
what the cluster needs or what to use instead (runtime/useless_runs.py gathers them with the other
warnings)."""

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


def heterogeneity_warnings(graph, cluster=None) -> list[str]:
    """The warning for each placer that places jobs without weighing what each gains from one
    GPU type over another (its class's `heterogeneity_agnostic`), on a cluster of several GPU
    types on which the profile's throughputs differ for a model the graph's jobs may have. None
    when the cluster or the profile cannot be loaded (the run says what is wrong), as
    `tier_warnings`, or when no job's model is known to differ."""
    agnostic = [(name, el, what) for name, el in graph.elements.items() if (what := by_type_alike(el)) is not None]
    cluster = _loaded(graph, cluster) if agnostic else None
    if cluster is None or len(cluster.gpu_types) < 2:
        return []
    from roundhouse.runtime.simulate import load_profile

    try:
        differs = _differing_model(load_profile(graph), _models_ahead(graph), cluster.gpu_types)
    except RoundhouseError:
        return []
    if differs is None:
        return []
    types = ", ".join(cluster.gpu_types)
    return [
        f"{at(el)}warning: element '{name}' ({type(el).__name__}) places jobs without weighing what each gains from "
        f"one GPU type over another, and the cluster ({cluster.describe()}) has GPU types {types}, on which the "
        f"profile's throughputs differ ({differs}): {what} (for placement by each job's throughput on each type, "
        "use GavelPlacer after one of Gavel's policies and GavelRounds, as graphs/gavel-las.sched does)"
        for name, el, what in agnostic
    ]


def by_type_alike(el) -> str | None:
    """How `el` places jobs on GPU types without weighing their throughputs, if it does (its
    class's `heterogeneity_agnostic`), else None."""
    return getattr(type(el), "heterogeneity_agnostic", None)


def _models_ahead(graph) -> set[str] | None:
    """The models the graph's jobs may have, as the sources tell before they start: a trace's
    `model` column, the names a generator draws from. None when a source cannot tell (a live
    source's jobs may name any model)."""
    from roundhouse.runtime.simulate import load_elastic

    elastic = load_elastic(graph)
    models: set[str] = set()
    for el in graph.elements.values():
        if el.category != "source":
            continue
        drawn = el.models_drawn() if hasattr(el, "models_drawn") else ()
        ahead = getattr(el, "jobs_ahead", None)
        if drawn:
            models.update(drawn)
        elif ahead is None:
            return None
        else:
            frame = ahead(elastic)
            if "model" in frame.columns:
                models.update(m for m in frame["model"].unique().to_list() if m is not None)
    return models


def _differing_model(profile, models: set[str] | None, gpu_types) -> str | None:
    """The model (of `models`; None: any of the profile's) whose one-GPU throughput at its
    default batch size differs most between two of `gpu_types`, said as "ResNet-50 runs 3.2x as
    fast on V100 as on K80", or None when every such model runs alike on every type it runs on."""
    most, said = 1.0, None
    for model in sorted(profile.models if models is None else models):
        rates = {t: rate for t in gpu_types if (rate := profile.rate(model, None, t, 1))}
        fast, slow = max(rates, key=rates.__getitem__, default=None), min(rates, key=rates.__getitem__, default=None)
        if fast is not None and slow is not None and rates[fast] > most * rates[slow]:
            most = rates[fast] / rates[slow]
            said = f"{profile.canonical_model(model)} runs {most:.1f}x as fast on {fast} as on {slow}"
    return said


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
