"""Run a compiled graph in the simulator: the one entry point the command line, the
reproductions and the tests share."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from roundhouse.errors import ClusterError, RoundhouseError, SchedError, TraceError, UsageError
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster, ClusterSpec, KnownGpuTypes, spec_file
from roundhouse.runtime.compiler import CompiledGraph
from roundhouse.runtime.engine import Engine, RunResult
from roundhouse.runtime.settings import BUILT_IN_ELASTIC, named_gpu_types
from roundhouse.runtime.world import World
from roundhouse.traces.gputypes import named_types
from roundhouse.traces.readonce import read_for_source, release


def load_cluster(graph: CompiledGraph, cluster: str | Cluster | None, profile=None) -> Cluster:
    """The cluster given on the command line (`--cluster`), else the graph's `cluster` setting.

    Its GPU types must be ones the graph can run on (`cluster_gpu_types`); a problem is reported
    where the spec was given: the flag, `--set cluster`, or the setting's place in the graph."""
    if isinstance(cluster, Cluster):
        return cluster
    profile = profile or load_profile(graph)
    known = gpu_types(graph, profile)
    if cluster is not None:
        return _from_flag("--cluster", cluster, graph, known, profile)
    spec = graph.settings.cluster
    if spec is None:
        raise ClusterError(
            'no cluster: give --cluster (e.g. --cluster 32x4:V100) or set cluster = "..." in the graph', graph.path
        )
    location = graph.setting_locations.get("cluster")
    if location is None:  # given with --set: relative to the current folder, as other --set paths
        return _from_flag(graph.setting_flags.get("cluster", "--set cluster"), spec, graph, known, profile)
    # A spec file named in the graph is relative to the graph's folder.
    file = spec_file(spec, Path(graph.path).parent)
    text = spec if file is None else str(file)
    try:
        return Cluster.parse(text, cluster_gpu_types(graph, text, known, profile))
    except ClusterError as err:
        where = f"{err.path}: " if err.path else ""
        raise SchedError(f"setting 'cluster': {where}{err.message}", location) from None


def _from_flag(flag: str, spec: str, graph: CompiledGraph, known: tuple[str, ...], profile) -> Cluster:
    try:
        return Cluster.parse(spec, cluster_gpu_types(graph, spec, known, profile))
    except ClusterError as err:
        if err.path is not None:  # the spec file's own message names it
            raise
        raise UsageError(f"{flag}: {err.message}") from None


def gpu_types(graph: CompiledGraph, profile=None) -> tuple[str, ...]:
    """The GPU types any cluster for this graph may have: those of its throughput profile, its
    `reference_gpu` and those its `gpu_types` setting names (each once, case aside, as first
    written). Jobs known only by duration run for that duration whatever the type, so a graph
    may run them on a type it names so (a job known by its model has no throughput there, and
    is never placed there). `cluster_gpu_types` adds the types its traces ask for."""
    settings = graph.settings
    types = (profile or load_profile(graph)).gpu_types
    return tuple(_first_of_each((*types, settings.reference_gpu, *named_gpu_types(settings.gpu_types))))


# What makes a GPU type one a cluster may have (said with the known types when a spec names another).
_WHY_KNOWN = (
    "a cluster may hold the throughput profile's GPU types, the reference_gpu, those named in gpu_types, "
    "and the types its trace's jobs ask for in gpu_type"
)


def cluster_gpu_types(graph: CompiledGraph, spec: str, known: tuple[str, ...], profile=None) -> KnownGpuTypes:
    """The GPU types the cluster `spec` may have: `known` (`gpu_types`), and, when the spec holds
    another, the types the graph's traces ask for (their `gpu_type` column, traces/gputypes.py),
    though the profile lacks them: a job known only by duration runs there for its duration, one
    known by its model has no throughput there (so it is never placed there). Any other type is
    refused, so that a misspelt one (V1OO) is caught before the run: a name written only in the
    cluster cannot be told from a misspelling, so a type of its own is named outside it too, and
    the refusal says how (`_naming_advice`). The traces are read only for a spec beyond `known`,
    and then once: their TraceSources take the reads (traces/readonce.py)."""
    try:
        spec_types = [g.gpu_type for g in ClusterSpec.parse(spec).groups]
    except ClusterError:  # (parsed again against the types below, which says what is wrong)
        spec_types = []
    have = {t.lower() for t in known}
    if all(t.lower() in have for t in spec_types):
        return KnownGpuTypes(known, _WHY_KNOWN)
    reads = _read_traces(graph)
    asked = [t for t in _first_of_each(n for *_, trace in reads for n in named_types(trace)) if t.lower() not in have]
    allowed = have | {t.lower() for t in asked}
    beyond = _first_of_each(t for t in spec_types if t.lower() not in allowed)
    if not beyond:
        return KnownGpuTypes((*known, *asked), _WHY_KNOWN)
    for source, elastic, _ in reads:  # (refused: no source of this run will take them)
        release(source.path, source.format, elastic)
    by_model = _may_have_jobs_known_by_model(graph, reads, profile or load_profile(graph))
    advice = _naming_advice(beyond, by_model, named_gpu_types(graph.settings.gpu_types))
    return KnownGpuTypes((*known, *asked), f"{_WHY_KNOWN}; {advice}")


def _read_traces(graph: CompiledGraph) -> list:
    """(source, elastic profile, its jobs) for each TraceSource of the graph whose format can
    name a GPU type (canonical traces, PAI's task table), read as the source will read it, which
    it then takes instead of reading the file again; a trace that cannot be read is reported
    here, as its source would."""
    from roundhouse.traces.formats import detect_format

    elastic = load_elastic(graph) if graph.settings.elastic_profile is not None else None
    reads = []
    for source in graph.by_class("TraceSource"):
        path, format = getattr(source, "path", None), getattr(source, "format", "auto")
        if path is None or (format if format != "auto" else detect_format(path)) not in ("canonical", "pai"):
            continue
        trace = read_for_source(path, format, elastic)
        jobs = getattr(source, "jobs", None)
        reads.append((source, elastic, trace if jobs is None else trace.head(jobs)))
    return reads


def _first_of_each(names) -> list[str]:
    """Each name once, case aside, as first written."""
    first: dict[str, str] = {}
    for name in names:
        first.setdefault(name.lower(), name)
    return list(first.values())


def _may_have_jobs_known_by_model(graph: CompiledGraph, reads: list, profile) -> bool:
    """Whether a job of the graph may be known by its model, which runs only where the profile
    gives its speed (so a refused type is told of the profile's rows first). Told of its
    TraceSources (read here if `_read_traces` did not: the run is refused, so no source reads
    them after) and its generators of jobs known by duration; any other source may have such jobs."""
    from roundhouse.traces.formats import read_trace

    if graph.settings.elastic_profile is not None:
        return True
    read = {id(source): trace for source, _, trace in reads}
    for source in graph.elements.values():
        if getattr(source, "category", None) != "source":
            continue
        kind = type(source).__name__
        if kind in ("PoissonSource", "BurstSource") and getattr(source, "models", None) == "none":
            continue
        if kind != "TraceSource":
            return True
        if getattr(source, "timing", "profile") == "duration":
            continue
        trace = read.get(id(source))
        if trace is None:
            trace = read_trace(getattr(source, "path", ""), format=getattr(source, "format", "auto"))
            jobs = getattr(source, "jobs", None)
            trace = trace if jobs is None else trace.head(jobs)
        models = trace["model"].drop_nulls().unique().to_list() if "model" in trace.columns else []
        if any(profile.canonical_model(m) is not None for m in models):
            return True
    return False


def _naming_advice(beyond: list[str], by_model: bool, named: tuple[str, ...]) -> str:
    """What to do about GPU types beyond those a cluster may hold (`beyond`, as written): a
    misspelt one is corrected; one of its own is named outside the cluster too: in gpu_types
    (kept with the types it names, `named`), where jobs known only by duration run on it; in
    such jobs' gpu_type column; or, when a job may be known by its model (`by_model`), which
    runs only where the profile gives its speed, in the profile's rows, said first then."""
    head = (
        f"{_listed(beyond)} {'is' if len(beyond) == 1 else 'are'} none of these; "
        + ("a type of its own (not a misspelling) is" if len(beyond) == 1 else "types of their own (not misspellings) are")
        + " named outside the cluster too: "
    )
    it = "it" if len(beyond) == 1 else "them"
    value = ",".join(_first_of_each((*named, *beyond)))
    # (bare only as a word the command line reads as text: a type with '-', or named true or
    # false, is quoted, as several are)
    bare = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value) and value not in ("true", "false")
    flag = f"--set gpu_types={value}" if bare else f"--set 'gpu_types=\"{value}\"'"
    setting = f'set gpu_types = "{value}" ({flag})'
    column = (
        f"name {_listed(beyond)} in the gpu_type column of the jobs known only by their durations that are to run on {it} "
        "(a job naming a type runs only there)"
    )
    if not by_model:
        return head + f"{setting}, as jobs known only by their durations run for them on any type, or {column}"
    return (
        head
        + f"give the profile rows on {it} (a job known by its model runs only where the profile gives its speed), "
        + f"or {setting} for the jobs known only by their durations (one known by its model is never placed there), or {column}"
    )


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def load_profile(graph: CompiledGraph):
    from roundhouse.traces.profiles import ProfileTable

    return ProfileTable.load(graph.settings.profile)


def load_elastic(graph: CompiledGraph):
    """The graph's elastic profile (traces/goodput.py), or None. "ones" or "pollux" alone names
    a built-in profile (traces/ones.py, traces/pollux.py) unless a folder of that name is there."""
    if graph.settings.elastic_profile is None:
        return None
    import os
    from pathlib import Path

    from roundhouse.errors import TraceError
    from roundhouse.traces.goodput import ElasticProfile

    path = Path(graph.settings.elastic_profile)
    name = path.name.lower()
    if name in BUILT_IN_ELASTIC and not path.exists():
        # The setting was resolved against the folder of the file that wrote it (the current
        # one for --set): a bare name is that folder joined with the name; any other was written out.
        written = graph.setting_locations.get("elastic_profile")
        base = Path(os.path.normpath(Path(written.path).parent)) if written is not None else Path.cwd()
        if path.parent != base:
            raise TraceError(str(path), f'no such folder (the built-in profile is named "{name}" alone, without a folder)')
        from roundhouse.traces import ones, pollux

        return ones.profile() if name == "ones" else pollux.profile()
    return ElasticProfile.load_pollux(path)


def load_pairs(graph: CompiledGraph):
    """The graph's `pair_profile`, read and checked; None when it gives none (the shipped Gavel
    table, read only when two jobs first share GPUs). A bad file is reported where the setting
    was given (its line in the graph, or the `--set`/`--vary` that gave it), before a run starts,
    not when a solver first pairs two jobs."""
    if graph.settings.pair_profile is None:
        return None
    from roundhouse.traces.pairs import PairTable

    try:
        return PairTable.load(graph.settings.pair_profile)
    except RoundhouseError as err:
        raise setting_error(graph, "pair_profile", err) from None


def setting_error(graph: CompiledGraph, name: str, err: RoundhouseError) -> RoundhouseError:
    """A problem with the file a setting names, said where the setting was given: at its value in
    the graph (`setting 'pair_profile': p.csv:3: column 'gpus': ...`), or at the command-line
    option that gave it."""
    if isinstance(err, TraceError):
        where = err.path if err.row is None else f"{err.path}:{err.row}"
        what = f"column '{err.column}': {err.message}" if err.column else err.message
        text = f"{where}: {what}"
    else:
        text = getattr(err, "message", None) or str(err)
    location = graph.setting_locations.get(name)
    if location is None:
        return UsageError(f"{graph.setting_flags.get(name, f'--set {name}')}: {text}")
    return SchedError(f"setting '{name}': {text}", location)


def new_world(graph: CompiledGraph, cluster: Cluster, profile) -> World:
    """A world for the graph: its cluster, profiles (throughput, pairs, elastic) and settings."""
    settings = graph.settings
    world = World(cluster, profile, settings.reference_gpu, load_pairs(graph), load_elastic(graph))
    world.batch_jump_penalty = float(settings.batch_jump_penalty)
    world.reference_at = graph.setting_locations.get("reference_gpu") or graph.setting_flags.get("reference_gpu")
    return world


def new_engine(
    graph: CompiledGraph,
    cluster: str | Cluster | None = None,
    until: float | None = None,
    on_round: Callable | None = None,
    profile=None,
    explain: bool = False,
) -> Engine:
    """The graph's engine on a new world and simulator, before its first round (`Engine.begin`
    starts its elements)."""
    profile = profile or load_profile(graph)
    world = new_world(graph, load_cluster(graph, cluster, profile), profile)
    return Engine(graph, world, Simulator.for_graph(world, graph.settings), until=until, on_round=on_round, explain=explain)


def simulate(
    graph: CompiledGraph,
    cluster: str | Cluster | None = None,
    until: float | None = None,
    on_round: Callable | None = None,
    profile=None,
    explain: bool = False,
    explain_to: Path | None = None,
) -> RunResult:
    """Simulate the graph; with `explain`, the world records why each job is where it is
    (runtime/explain.py), as `result.world.explain`, and with `explain_to` as well writes the
    record to that file as the run goes (`result.world.explain.write` to it finishes it)."""
    engine = new_engine(graph, cluster, until, on_round, profile, explain)
    world = engine.world
    if explain_to is not None and world.explain is not None:
        world.explain.write_as_it_goes(explain_to, world)
    return engine.run()
