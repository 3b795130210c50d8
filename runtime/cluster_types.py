"""The GPU types a graph's cluster may hold: the throughput profile's, the graph's `reference_gpu`,
those its `gpu_types` setting names, and those its trace's jobs ask for in a `gpu_type` column.
Any other is refused before the run (a name written only in the cluster cannot be told from a
misspelling), with what to do about it (`_naming_advice`)."""

from __future__ import annotations

import re

from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import ClusterSpec, KnownGpuTypes
from roundhouse.runtime.compiler import CompiledGraph
from roundhouse.runtime.near_gpu_types import near_types, warn_near_misses
from roundhouse.runtime.settings import named_gpu_types
from roundhouse.traces.gputypes import named_types
from roundhouse.traces.readonce import read_for_source, release


def _profile(graph: CompiledGraph):
    from roundhouse.runtime.simulate import load_profile  # (simulate.py loads the cluster with these types)

    return load_profile(graph)


def gpu_types(graph: CompiledGraph, profile=None) -> tuple[str, ...]:
    """The GPU types any cluster for this graph may have: those of its throughput profile, its
    `reference_gpu` and those its `gpu_types` setting names (each once, case aside, as first
    written). Jobs known only by duration run for that duration whatever the type, so a graph
    may run them on a type it names so (a job known by its model has no throughput there, and
    is never placed there). `cluster_gpu_types` adds the types its traces ask for. A name in
    `gpu_types` that is a near miss of a profile type (V1OO) is warned of (runtime/near_gpu_types.py);
    one the profile has, case aside, is the profile's type."""
    settings = graph.settings
    types = (profile or _profile(graph)).gpu_types
    named = named_gpu_types(settings.gpu_types)
    warn_near_misses(named, types, _where_named(graph))
    return tuple(_first_of_each((*types, settings.reference_gpu, *named)))


def _where_named(graph: CompiledGraph) -> str:
    """How a warning about the `gpu_types` setting starts: at its place in the graph, or naming
    the option that gave it."""
    location = graph.setting_locations.get("gpu_types")
    if location is not None:
        return f"{location}: warning: setting 'gpu_types': "
    flag = graph.setting_flags.get("gpu_types")
    return f"warning: {flag}: " if flag else "warning: setting 'gpu_types': "


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
    profile = profile or _profile(graph)
    by_model = _may_have_jobs_known_by_model(graph, reads, profile)
    advice = _naming_advice(beyond, by_model, named_gpu_types(graph.settings.gpu_types), profile.gpu_types)
    # (the advice names the profile's type a near miss meant: the refusal gives no other hint for it)
    told = [name for name in beyond if near_types(name, profile.gpu_types)]
    return KnownGpuTypes((*known, *asked), f"{_WHY_KNOWN}; {advice}", told)


def _read_traces(graph: CompiledGraph) -> list:
    """(source, elastic profile, its jobs) for each TraceSource of the graph whose format can
    name a GPU type (canonical traces, PAI's task table), read as the source will read it, which
    it then takes instead of reading the file again; a trace that cannot be read is reported
    here, as its source would."""
    from roundhouse.traces.formats import detect_format

    elastic = _elastic(graph) if graph.settings.elastic_profile is not None else None
    reads = []
    for source in graph.by_class("TraceSource"):
        path, format = getattr(source, "path", None), getattr(source, "format", "auto")
        if path is None or (format if format != "auto" else detect_format(path)) not in ("canonical", "pai"):
            continue
        trace = read_for_source(path, format, elastic).frame
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


def _naming_advice(beyond: list[str], by_model: bool, named: tuple[str, ...], profile_types: tuple[str, ...]) -> str:
    """What to do about GPU types beyond those a cluster may hold (`beyond`, as written): a
    misspelt one is corrected (the profile's type it is a near miss of is named); one of its
    own is named outside the cluster too: in gpu_types (kept with the types it names, `named`),
    where jobs known only by duration run on it; in such jobs' gpu_type column; or, when a job
    may be known by its model (`by_model`), which runs only where the profile gives its speed,
    in the profile's rows, said first then."""
    head = (
        f"{_listed(beyond)} {'is' if len(beyond) == 1 else 'are'} none of these{_meant(beyond, profile_types)}; "
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


def _meant(beyond: list[str], profile_types: tuple[str, ...]) -> str:
    """For the refused types that are near misses of the profile's (V1OO for V100), what to write
    instead, in parentheses; "" when none is."""
    near = [(name, " or ".join(types)) for name in beyond if (types := near_types(name, profile_types))]
    if not near:
        return ""
    if len(beyond) == 1:
        return f" (if you meant the throughput profile's {near[0][1]}, write that in the cluster)"
    return f" (if you meant the throughput profile's {_listed([f'{t} for {n}' for n, t in near])}, write {'that' if len(near) == 1 else 'those'} in the cluster)"


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _elastic(graph: CompiledGraph):
    from roundhouse.runtime.simulate import load_elastic

    return load_elastic(graph)
