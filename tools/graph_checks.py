"""What `roundhouse check` finds wrong with a graph, for every command that refuses what it
refuses (`check`, `render`): one code path, so that the commands agree and say it the same way."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from roundhouse.errors import RoundhouseError, SchedError, UsageError, print_warning
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import CompiledGraph, Override, compile_file, compile_graph, refuse_empty_graph_path
from roundhouse.runtime.dsl.loader import load
from roundhouse.runtime.element_failures import describe_element
from roundhouse.runtime.simulate import load_cluster, load_elastic, load_pairs, new_engine
from roundhouse.runtime.snapshot import forks_world, unforkable_elements
from roundhouse.runtime.useless_runs import warnings_before_run
from roundhouse.tools.common import error_text
from roundhouse.tools.results import trace_overrides, trace_problems


@dataclass
class Checked:
    """A graph as `check` sees it: compiled (None if it did not compile), its cluster (None when
    neither the graph nor an option names one), what is wrong with it (empty if nothing), and
    what it would run to no use (warnings, runtime/useless_runs.py; looked for when asked)."""

    graph: CompiledGraph | None
    cluster: Cluster | None
    problems: list[RoundhouseError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def check_graph(
    path: str,
    fork: bool = False,
    cluster_spec: str | None = None,
    warn: bool = False,
    overrides: Sequence[Override] = (),
    trace: str | None = None,
) -> Checked:
    """Parse, compile and check the graph at `path` without running it, with the `--set`
    `overrides` a run would take: its cluster (the
    `cluster_spec` given as an option, which replaces the graph's setting, else the setting),
    profiles, traces' headers, forkability (when `fork`, or the graph forks the world), and,
    given a cluster, every element started as a run starts it (the traces' rows, the jobs
    checked against the cluster). Without a cluster the elements are not started. With
    `warn`, what a graph that passes would run to no use is found too (`Checked.warnings`).
    `trace`: a trace file in place of the path of the graph's one TraceSource, as run's --trace."""
    try:
        for o in overrides:  # (as run refuses them: --cluster would replace the other without a word)
            if cluster_spec is not None and o.target == "cluster":
                raise UsageError(f"--cluster {cluster_spec} and {o.label}: the cluster is given twice; keep one")
        if trace is None:
            graph = compile_file(path, overrides)
        else:  # (as run reads --trace: the graph's one TraceSource reads it instead, by its whole path)
            refuse_empty_graph_path(path)
            flat = load(path)
            graph = compile_graph(flat, list(overrides) + trace_overrides(flat, path, list(overrides), trace))
        named = cluster_spec is not None or graph.settings.cluster is not None
        cluster = load_cluster(graph, cluster_spec) if named else None
        # The elastic profile's measurements are read and fitted as a run reads them, and the
        # pair profile read as a run's world reads it: a bad file there is found now, not when
        # the run starts (or, for the pairs, when two jobs first share GPUs).
        load_elastic(graph)
        load_pairs(graph)
    except RoundhouseError as err:
        return Checked(None, None, [err])
    problems = trace_problems(graph, trace)
    if fork or forks_world(graph):
        for name, _, why in unforkable_elements(graph):
            el = graph.elements[name]
            problems.append(  # (the error's location is the graph's line: the class's file is added)
                SchedError(f"element {describe_element(el, declared=False)} cannot be forked: {why}", el.declared_at)
            )
    # (before the elements start: a trace read for the warnings is the one its source takes)
    warnings = warnings_before_run(graph, cluster) if warn and not problems else []
    if not problems and cluster is not None:
        try:  # (every element started as a run starts it: what it checks against the cluster, and the traces' rows)
            new_engine(graph, cluster).begin()
        except RoundhouseError as err:
            problems.append(err)
    return Checked(graph, cluster, problems, warnings if not problems else [])


def print_problems(checked: Checked) -> bool:
    """Print what `check_graph` found, each in the command line's one form, to standard error;
    True if there was anything."""
    for problem in checked.problems:
        print(error_text(problem), file=sys.stderr)
    return bool(checked.problems)


def print_warnings(checked: Checked) -> None:
    """Print what `check_graph` warns of, to standard error."""
    for warning in checked.warnings:
        print_warning(warning)
