"""`roundhouse check FILE...`: parse, compile and check graphs without running anything."""

from __future__ import annotations

import sys

from roundhouse.errors import RoundhouseError, SchedError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import load_cluster
from roundhouse.runtime.snapshot import forks_world, unforkable_elements
from roundhouse.tools.common import error_text


def register(sub) -> None:
    p = sub.add_parser("check", help="check .sched files (syntax, classes, arguments, ports, types, cycles)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument(
        "--fork",
        action="store_true",
        help="also check that every element can be forked (as `roundhouse whatif` and the Simulation API's fork need); "
        "automatic for a graph with an element that forks the world (the synthesizer)",
    )
    p.set_defaults(handler=check)


def check(args) -> int:
    failed = 0
    for path in args.files:
        try:
            graph = compile_file(path)
            cluster = load_cluster(graph, None) if graph.settings.cluster else None
        except RoundhouseError as err:
            print(error_text(err), file=sys.stderr)
            failed += 1
            continue
        if args.fork or forks_world(graph):
            problems = unforkable_elements(graph)
            for name, class_name, why in problems:
                el = graph.elements[name]
                print(
                    error_text(SchedError(f"element '{name}' ({class_name}) cannot be forked: {why}", el.declared_at)),
                    file=sys.stderr,
                )
            if problems:
                failed += 1
                continue
        where = f", cluster {cluster.describe()}" if cluster else ""
        print(f"{path}: ok ({len(graph.elements)} elements, {len(graph.connections)} connections{where})")
    return 2 if failed else 0
