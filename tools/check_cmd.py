"""`roundhouse check FILE...`: parse, compile and check graphs without running anything."""

from __future__ import annotations

import sys

from roundhouse.runtime import registry
from roundhouse.runtime.compiler import Override
from roundhouse.tools.common import add_overrides, overrides
from roundhouse.tools.graph_checks import check_graph, print_problems, print_warnings
from roundhouse.tools.outputs.stdout_result import plural


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
    p.add_argument(
        "--trace",
        metavar="FILE",
        help="check with this trace file in place of the path of each graph's one TraceSource (as run's --trace)",
    )
    add_overrides(
        p, "check the graph with this element argument (element.field=value) or setting given, as run takes it; repeatable"
    )
    p.set_defaults(handler=check)


def check(args) -> int:
    failed = 0
    given = overrides(args.overrides)
    for path in args.files:
        # Each graph sees only the element files it requires, as when it is checked alone.
        with registry.scope():
            failed += not _check_one(path, args.fork, args.cluster, named=len(args.files) > 1, given=given, trace=args.trace)
    return 2 if failed else 0


def _check_one(
    path: str,
    fork: bool,
    cluster_spec: str | None,
    named: bool = False,
    given: list[Override] | None = None,
    trace: str | None = None,
) -> bool:
    """Check one graph, printing what is wrong, or that it is ok. When `named` (several graphs
    are checked), a refused graph's problems are followed by a line naming it: a problem found
    when its elements start names the element, or the trace, not the graph."""
    checked = check_graph(path, fork, cluster_spec, warn=True, overrides=given or [], trace=trace)
    if print_problems(checked):
        if named:
            print(f"{path}: refused (see above)", file=sys.stderr)
        return False
    graph, cluster = checked.graph, checked.cluster
    assert graph is not None  # (a graph that did not compile is a problem)
    # (without a cluster, what its elements check when they start is not checked: `run` would need one)
    where = f", cluster {cluster.describe()}" if cluster else "; no cluster: give --cluster to check its elements against one"
    print_warnings(checked)  # (a warning does not refuse the graph: a run may still be meant)
    print(f"{path}: ok ({plural(len(graph.elements), 'element')}, {plural(len(graph.connections), 'connection')}{where})")
    return True
