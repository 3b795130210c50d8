"""`roundhouse check FILE...`: parse, compile and check graphs without running anything."""

from __future__ import annotations

import sys

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import load_cluster
from roundhouse.tools.common import error_text


def register(sub) -> None:
    p = sub.add_parser("check", help="check .sched files (syntax, classes, arguments, ports, types, cycles)")
    p.add_argument("files", nargs="+", metavar="FILE")
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
        where = f", cluster {cluster.describe()}" if cluster else ""
        print(f"{path}: ok ({len(graph.elements)} elements, {len(graph.connections)} connections{where})")
    return 2 if failed else 0
