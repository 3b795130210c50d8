"""Graphs that pass every check yet would run to no use: a sink whose `track` range names none of
the jobs the sources bring (it measures nothing), a Pollux given jobs of no application of the
elastic profile, or no profile at all (it never starts them), one of Dally's elements on a
cluster without network tiers (its network awareness gains nothing), an intra-node bandwidth
element on nodes of no known topology (it measures nothing, or places as Consolidated), or a
simulation whose only sources take jobs submitted live (nobody submits: it ends at once),
sources that bring no job at all, or a trace's source given more `jobs` than its trace holds (a
larger `jobs` changes nothing).
`check` and `run` warn of them before the run, from what the sources can tell before they start
(a trace's jobs, a generator's ids; a live source's jobs are not known ahead); the last only
`run` and `sweep`, which know the run is simulated, and a `Simulation` as it is built (Python
warnings, `warn_before_simulation`). The run's end says what came of them."""

from __future__ import annotations

import warnings

import numpy as np

from roundhouse.errors import RoundhouseError, RoundhouseWarning, print_warning
from roundhouse.runtime.cluster_warnings import (
    at,
    by_links,
    by_type_alike,
    heterogeneity_warnings,
    tier_warnings,
    topology_warnings,
)
from roundhouse.runtime.values import IdRange
from roundhouse.traces.jobs import PENDING

# What a graph gives for Pollux to start its jobs, as the warnings and notes say it.
_GIVE_PROFILE = (
    'give elastic_profile = "pollux" for Pollux\'s six applications, "ones" for ONES\' model/dataset pairs, or a '
    "folder of Pollux's per-application measurements, and jobs whose model names one of its applications"
)


def describe_ids(ids) -> str:
    """Job ids as a sentence names them: "id 7", "ids 0 to 29" (every id between them), or
    "ids from 0 to 29" (some missing)."""
    ids = np.unique(np.asarray(ids, dtype=np.int64))
    first, last = int(ids[0]), int(ids[-1])
    if first == last:
        return f"id {first}"
    return f"ids {'' if last - first + 1 == len(ids) else 'from '}{first} to {last}"


def tracked_range(el) -> IdRange | None:
    """The `track` range of a sink that measures only some jobs (None: all jobs, or no such argument)."""
    track = getattr(el, "track", None)
    return track if isinstance(track, IdRange) else None


def _in_range(track: IdRange) -> str:
    return f"track={track} (ids {track.start} to {track.stop - 1})"


def warnings_before_run(graph, cluster=None) -> list[str]:
    """What `check` and `run` warn of in a compiled graph, each a line of the command line's
    form (`g.sched:5:1: warning: ...`). A source's jobs are read as its start reads them (a
    trace is kept for its start to take); a source that cannot tell them makes no warning, nor
    does one that cannot be read (its start says what is wrong). `cluster`: the cluster the run
    is given (`--cluster`: a spec or a `Cluster`), else None for the graph's own setting."""
    from roundhouse.runtime.simulate import load_elastic

    warnings = tier_warnings(graph, cluster) + topology_warnings(graph, cluster) + heterogeneity_warnings(graph, cluster)
    sources = [el for el in graph.elements.values() if el.category == "source"]
    try:
        elastic = load_elastic(graph)
        read = [(el, ahead(elastic)) for el in sources if (ahead := getattr(el, "jobs_ahead", None)) is not None]
    except RoundhouseError:
        return warnings
    known = [frame for _, frame in read]
    warnings += [_short_trace_warning(el, frame.height) for el, frame in read if _short_of(el, frame.height)]
    if known and len(known) == len(sources):  # (a source whose ids are not known may bring any)
        ids = np.concatenate([frame["job_id"].to_numpy() for frame in known])
        if not len(ids):
            warnings.append(_no_job_warning(sources))
        for name, el in graph.elements.items():
            track = tracked_range(el)
            if track is not None and len(ids) and not ((ids >= track.start) & (ids < track.stop)).any():
                warnings.append(
                    f"{at(el)}warning: element '{name}' ({type(el).__name__}): {_in_range(track)} names none of the "
                    f"{len(ids):,} jobs the graph's sources bring ({describe_ids(ids)}): it will measure no job "
                    "(give a range of their ids, or leave track out to measure every job)"
                )
    with_models = [frame for frame in known if "model" in frame.columns]
    everyone = len(with_models) == len(sources)
    for name, el in graph.elements.items():
        if getattr(type(el), "elastic_only", False) and with_models:
            warnings += _elastic_warning(name, el, elastic, with_models, everyone)
        elif getattr(type(el), "elastic_only", False) and elastic is None:  # (no job's model known ahead)
            warnings.append(
                f"{_elastic_head(name, el)} names an application of the graph's elastic_profile, and the "
                f"graph sets none: it will never start any job: {_GIVE_PROFILE}"
            )
        if getattr(type(el), "elastic_only", False) and elastic is not None:
            warnings += _drawn_warnings(name, el, elastic, graph)
    return warnings


def _short_of(el, brought: int) -> bool:
    """Whether a trace's source asks for more jobs (`jobs=`) than its trace holds: it then runs
    them all, and a larger `jobs` (a sweep's) changes nothing."""
    asked = getattr(el, "jobs", None)
    return hasattr(el, "path") and isinstance(asked, int) and 0 < brought < asked


def _short_trace_warning(el, brought: int) -> str:
    return (
        f"{at(el)}warning: element '{el.name}' ({type(el).__name__}) is given jobs={el.jobs:,}, but its trace "
        f"{el.path} holds {brought:,} jobs: it brings those {brought:,} (a larger jobs changes nothing; give a "
        "longer trace for more)"
    )


def _no_job_warning(sources: list) -> str:
    """The warning for sources that, read ahead, bring no job at all (a trace of a header alone)."""
    named = ", ".join(f"'{el.name}' ({type(el).__name__})" for el in sources)
    return (
        f"{at(sources[0])}warning: the graph's {'source' if len(sources) == 1 else 'sources'} {named} "
        f"{'brings' if len(sources) == 1 else 'bring'} no job: the run ends after its first round with nothing "
        "measured (a trace with a header and no rows, say)"
    )


def _drawn_warnings(name: str, el, elastic, graph) -> list[str]:
    """The warning for an element that starts only elastic jobs, of each generator whose jobs'
    models are drawn from names none of which is an application of the elastic profile: their
    models are not known before the run, but the names they are drawn from are."""
    out = []
    for source_name, source in graph.elements.items():
        drawn = source.models_drawn() if source.category == "source" and hasattr(source, "models_drawn") else ()
        if drawn and not any(elastic.row(m) >= 0 for m in drawn):
            apps = ", ".join(a.name for a in elastic.apps)
            out.append(
                f"{_elastic_head(name, el)} names an application of elastic profile {elastic.origin!r} ({apps}): "
                f"source '{source_name}' ({type(source).__name__}) draws its jobs' models from {', '.join(drawn)}, none "
                "of which is one, so it will never start them: a run left with only those stalls (give an elastic "
                "source, such as a TraceSource of Pollux's workload, or an elastic_profile with those models)"
            )
    return out


def live_only_warnings(graph) -> list[str]:
    """For a simulated run (`run` without --live, `sweep`): the warning for a graph whose only
    sources take jobs submitted live. Nobody can submit to a simulation: it ends after its
    first round with no job. Not for `check`, which cannot tell whether the graph is to be
    served live."""
    sources = [(name, el) for name, el in graph.elements.items() if el.category == "source"]
    if not sources or not all(getattr(type(el), "submitted_live", False) for _, el in sources):
        return []
    name, el = sources[0]
    named = (
        f"element '{name}' ({type(el).__name__}) brings"
        if len(sources) == 1
        else (f"elements {', '.join(repr(n) for n, _ in sources)} bring")
    )
    return [
        f"{at(el)}warning: {named} only jobs submitted live with `roundhouse submit`, and the graph has no other "
        "source: nobody can submit jobs in a simulation, so it ends after its first round with no job: run it live "
        "(`roundhouse serve`, docs/live.md) or add a TraceSource"
    ]


def _elastic_warning(name: str, el, elastic, frames: list, everyone: bool) -> list[str]:
    """The warning for an element that starts only elastic jobs, of the jobs whose models are
    known before the run (`frames`, from the sources' `jobs_ahead`; `everyone`: all the
    sources' jobs) that are of no elastic application."""
    import polars as pl

    jobs = pl.concat([frame.select("job_id", pl.col("model").cast(pl.String)) for frame in frames])
    # (each distinct model looked up once: a trace holds a few models for many jobs)
    names = [m for m in jobs["model"].unique().to_list() if m is not None]
    elastic_names = [m for m in names if elastic is not None and elastic.row(m) >= 0]
    outside = jobs.filter(~pl.col("model").is_in(elastic_names) | pl.col("model").is_null())
    if not outside.height:
        return []
    brought = f"{jobs.height:,} jobs " + ("the graph's sources bring" if everyone else "its sources tell of before the run")
    head = _elastic_head(name, el)
    if elastic is None:
        return [
            f"{head} names an application of the graph's elastic_profile, and the graph sets none: it will never start "
            f"any of the {brought}: {_GIVE_PROFILE}"
        ]
    first, model = outside["job_id"][0], outside["model"][0]
    apps = ", ".join(a.name for a in elastic.apps)
    return [
        f"{head} names an application of elastic profile {elastic.origin!r} ({apps}): {outside.height:,} of the {brought} "
        f"name none (job {first}, {'with no model' if model is None else f'model {model}'}, for one), and it will never start "
        "them: a run left with only those stalls (give them a model among those applications, or an elastic_profile with theirs)"
    ]


def _elastic_head(name: str, el) -> str:
    return f"{at(el)}warning: element '{name}' ({type(el).__name__}) starts only elastic jobs, those whose model (the 'model' column)"


def warning_inputs(graph) -> tuple:
    """What `warnings_before_run` reads of a graph: two graphs alike in it are warned of alike
    (a sweep's runs that vary only a policy's argument, or the seed, share one look)."""
    read = [
        (name, repr(el))
        for name, el in graph.elements.items()
        if el.category == "source" or tracked_range(el) is not None or getattr(type(el), "elastic_only", False)
    ]
    profile = graph.settings.elastic_profile
    # (the cluster setting, where an element needs network tiers or a node topology, and with the
    # profile where a placer does not weigh GPU types: a --vary of either changes them)
    by_types = any(by_type_alike(el) is not None for el in graph.elements.values())
    by_cluster = by_types or any(
        getattr(type(el), "needs_tiers", False) or by_links(el) is not None for el in graph.elements.values()
    )
    cluster = None
    if by_cluster:
        cluster = (
            str(graph.settings.cluster),
            str(graph.setting_locations.get("cluster")),
            by_types and str(graph.settings.profile),
        )
    return (
        tuple(read),
        None if profile is None else str(profile),
        str(graph.setting_locations.get("elastic_profile")),
        cluster,
    )


def print_warnings_before_run(graph, cluster=None) -> None:
    """`warnings_before_run`, on standard error."""
    for warning in warnings_before_run(graph, cluster):
        print_warning(warning)


def warn_before_simulation(graph, cluster=None, stacklevel: int = 3) -> None:
    """What `roundhouse run` warns of before a simulated run, as Python warnings of the class
    `RoundhouseWarning` (each the line `run` prints), for a graph run from Python (`Simulation`);
    `stacklevel`: that of the caller's caller, whose line the warning names."""
    for warning in warnings_before_run(graph, cluster) + live_only_warnings(graph):
        warnings.warn(warning, RoundhouseWarning, stacklevel=stacklevel)


def untracked_note(name: str, el, ids) -> str:
    """The note the run's end prints for a sink that tracked no job, though jobs arrived."""
    track = tracked_range(el)
    said = ""
    if track is not None:
        held = f"ids {track.start} to {track.stop - 1}"
        said = f": track={track} holds {held}, and the {len(ids):,} jobs that arrived have {describe_ids(ids)}"
    return f"note: {name} tracked no job: none in its track range arrived before the run ended{said}"


def unstarted_notes(graph, result) -> list[str]:
    """The run's end: for each element that starts only elastic jobs, how many it left waiting
    (its `unschedulable` counter) and why."""
    notes = []
    jobs, elastic = result.world.jobs, result.world.throughput.elastic
    for name, el in getattr(graph, "elements", {}).items():
        count = (result.counters.get(name) or {}).get("unschedulable", 0)
        if not getattr(type(el), "elastic_only", False) or not count:
            continue
        head = f"note: element '{name}' ({type(el).__name__}) left {count:,} waiting job(s) it never started"
        if elastic is None:
            notes.append(f"{head}: it starts only elastic jobs, and the graph sets no elastic_profile; {_GIVE_PROFILE}")
            continue
        rows = np.zeros(0, dtype=np.int64)
        if jobs.has_column("elastic_model"):
            rows = np.flatnonzero((jobs.column("status") == PENDING) & (jobs.column("elastic_model") < 0))
        one = ""
        if len(rows):
            model = jobs.column("model")[rows[0]] if jobs.has_column("model") else None
            named = _unknown_models(graph) if model is None else f"model {model}"
            one = f" (job {jobs.column('job_id')[rows[0]]}, {named})"
        notes.append(
            f"{head}: it starts only elastic jobs, and their model names no application of elastic profile "
            f"{elastic.origin!r}{one}"
        )
    return notes


# How many of the names no profile knows a note lists (a trace may hold hundreds).
_NAMES_SHOWN = 5


def _unknown_models(graph) -> str:
    """What a note says of a job whose model no profile knows. The job table keeps only the
    names a profile knows, so the job's own name is not in it; its sources tell the names in
    their traces that no profile knows (found as they prepared their jobs), and those are named."""
    by_source = [
        list(names)
        for el in graph.elements.values()
        if el.category == "source" and (names := getattr(el, "unknown_models", None))
    ]
    names = list(dict.fromkeys(name for found in by_source for name in found))
    if not names:  # (the job had no model, or its source does not tell)
        return "no model a profile knows"
    listed = ", ".join(names[:_NAMES_SHOWN]) + (f" and {len(names) - _NAMES_SHOWN:,} more" if len(names) > _NAMES_SHOWN else "")
    whose = "the trace's model" if len(by_source) == 1 else "the traces' model"
    return f"no model a profile knows; {whose}{'s' if len(names) > 1 else ''} that no profile knows: {listed}"
