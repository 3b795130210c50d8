"""`roundhouse serve GRAPH --bind ADDR`: run a graph live, against `roundhouse agent`s on GPU
nodes (`roundhouse run GRAPH --live ADDR` is the same)."""

from __future__ import annotations

from roundhouse.tools.common import add_overrides
from roundhouse.tools.live_run import add_live_options, run_live


def register(sub) -> None:
    p = sub.add_parser("serve", help="run a graph live: schedule real jobs on `roundhouse agent` nodes")
    p.add_argument("graph", help="the .sched file")
    p.add_argument("--bind", required=True, metavar="ADDR", help="where agents and submitters connect, e.g. tcp://0.0.0.0:5555")
    add_live_options(p)
    add_overrides(p, "override an element argument or a graph setting; repeatable")
    p.add_argument(
        "--trace", help="trace file for the graph's one TraceSource, in place of its path (a graph with several is refused)"
    )
    p.add_argument("--cluster", help="the cluster the agents form (default: the graph's cluster setting)")
    p.add_argument(
        "--until",
        help="end the run at this time (e.g. 2h; inf, as not given, runs until every job finishes), cutting the round in "
        "progress short; running jobs are checkpointed, and serve run again with the same journal resumes them",
    )
    p.add_argument("--out", help="folder for jobs.csv, summary.json, run.json and explain.parquet when the run ends")
    p.set_defaults(handler=serve_command)


def serve_command(args) -> int:
    return run_live(args, args.bind)
