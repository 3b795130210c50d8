"""`roundhouse check FILE...`: parse, compile and check graphs without running anything."""

from __future__ import annotations

import sys

from roundhouse.errors import RoundhouseError, SchedError
from roundhouse.runtime import registry
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import load_cluster, load_elastic, load_pairs, new_engine
from roundhouse.runtime.snapshot import forks_world, unforkable_elements
from roundhouse.tools.common import error_text
from roundhouse.tools.results import trace_problems


def register(sub) -> None:
    p = sub.add_parser("check", help="check .sched files (syntax, classes, arguments, ports, types, cycles, traces' columns)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument(
        "--fork",
        action="store_true",
        help="also check that every element can be forked (as `roundhouse whatif` and the Simulation API's fork need); "
        "automatic for a graph with an element that forks the world (the synthesizer)",
    )
    p.add_argument(
        "--cluster",
        metavar="SPEC",
        help="check against this cluster (as run's --cluster): a graph without a cluster setting has its elements "
        "started, and its jobs checked, only against one",
    )
    p.set_defaults(handler=check)


def check(args) -> int:
    failed = 0
    for path in args.files:
        # Each graph sees only the element files it requires, as when it is checked alone.
        with registry.scope():
            failed += not _check_one(path, args.fork, args.cluster)
    return 2 if failed else 0


def _check_one(path: str, fork: bool, cluster_spec: str | None) -> bool:
    try:
        graph = compile_file(path)
        named = cluster_spec is not None or graph.settings.cluster is not None
        cluster = load_cluster(graph, cluster_spec) if named else None
        # The elastic profile's measurements are read and fitted as a run reads them, and the
        # pair profile read as a run's world reads it: a bad file there is found now, not when
        # the run starts (or, for the pairs, when two jobs first share GPUs).
        load_elastic(graph)
        load_pairs(graph)
    except RoundhouseError as err:
        print(error_text(err), file=sys.stderr)
        return False
    problems = trace_problems(graph)
    if fork or forks_world(graph):
        for name, class_name, why in unforkable_elements(graph):
            problems.append(
                SchedError(f"element '{name}' ({class_name}) cannot be forked: {why}", graph.elements[name].declared_at)
            )
    if not problems and cluster is not None:
        try:  # (every element started as a run starts it: what it checks against the cluster, and the traces' rows)
            new_engine(graph, cluster).begin()
        except RoundhouseError as err:
            problems.append(err)
    for problem in problems:
        print(error_text(problem), file=sys.stderr)
    if problems:
        return False
    # (without a cluster, what its elements check when they start is not checked: `run` would need one)
    where = f", cluster {cluster.describe()}" if cluster else "; no cluster: give --cluster to check its elements against one"
    print(f"{path}: ok ({len(graph.elements)} elements, {len(graph.connections)} connections{where})")
    return True
