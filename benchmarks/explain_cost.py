"""What recording decision explanations costs: the 10,000-job LAS case of engine_las.py, run
with and without the record, interleaved.

    python benchmarks/explain_cost.py              # 10,000 jobs, 5 runs of each
    python benchmarks/explain_cost.py --repeat 9   # more runs of each
    python benchmarks/explain_cost.py --jobs 1000  # a smaller case

Runs alternate (without, with, without, with, ...) so that both see the same machine load,
and each is timed in the process's CPU time (steadier than wall time when other work shares
the machine; wall time is printed too). The cost is the median of the runs with the record
over the median of those without; its spread is the range of the ratios of the pairs of runs
(each run with the record over the run without it just before it). The machine's load average
is printed before and after. One untimed run comes first (the process's first run pays one-time
costs). Target: recording costs under 15% of the simulation time, in the 10,000-job case.
Writing the record (explain.parquet, once at the end of a run) is timed apart. This is a
script that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import at_least, description, exit_on_terminate, plural, run_script  # noqa: E402
from engine_las import compiled, philly_las  # noqa: E402

from roundhouse.runtime.engine import RunResult  # noqa: E402
from roundhouse.runtime.simulate import simulate  # noqa: E402

# The target: recording costs under 15% of the simulation time, in the 10,000-job case.
TARGET_JOBS = 10_000
TARGET_COST = 0.15


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def measure(graph, repeat: int) -> tuple[dict[bool, list[float]], dict[bool, list[float]], RunResult | None]:
    """Wall and CPU seconds of `repeat` runs without the record and `repeat` with it,
    interleaved, after one untimed run (with the record: the process's first run pays one-time
    costs, imports and caches, that are neither's); and the last run with the record."""
    simulate(graph, explain=True)  # untimed
    walls: dict[bool, list[float]] = {False: [], True: []}
    cpus: dict[bool, list[float]] = {False: [], True: []}
    result = None
    for _ in range(repeat):
        for explain in (False, True):
            started, cpu = time.perf_counter(), time.process_time()
            got = simulate(graph, explain=explain)
            walls[explain].append(time.perf_counter() - started)
            cpus[explain].append(time.process_time() - cpu)
            if explain:
                result = got
    return walls, cpus, result


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--jobs", type=at_least(1), default=TARGET_JOBS, metavar="N", help=f"jobs in the LAS case (default {TARGET_JOBS:,})"
    )
    parser.add_argument("--repeat", type=at_least(1), default=5, metavar="N", help="runs with and without the record (default 5)")
    parser.add_argument(
        "--placer", choices=("Consolidated", "FirstFree"), default="Consolidated", help="the placer (default Consolidated)"
    )
    args = parser.parse_args()
    exit_on_terminate()  # (`kill PID` removes its temporary files, as Ctrl-C does)
    graph = compiled(philly_las(args.jobs, args.placer))
    before = load()
    walls, cpus, result = measure(graph, args.repeat)
    assert result is not None and result.world.explain is not None
    record = result.world.explain
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "explain.parquet"
        record.write(path, result.world)
        size = path.stat().st_size
    write_s = time.perf_counter() - started
    print(
        f"LAS, {plural(args.jobs, 'Philly job')}, {args.placer}, {result.rounds} rounds, {args.repeat} interleaved runs of each "
        "(after one untimed run)"
    )
    print(f"  before: {before}; after: {load()}")
    for label, times in (("CPU", cpus), ("wall", walls)):
        off, on = statistics.median(times[False]), statistics.median(times[True])
        pairs = [b / a - 1 for a, b in zip(times[False], times[True])]
        cost = (on - off) / off
        if args.jobs == TARGET_JOBS:
            target = f"target: under {TARGET_COST:.0%}: {'met' if cost < TARGET_COST else 'MISSED'}"
        else:
            target = f"the target, under {TARGET_COST:.0%}, is for {TARGET_JOBS:,} jobs"
        print(f"  {label:4s} without the record  median {off:7.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times[False])})")
        print(f"  {label:4s} with the record     median {on:7.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times[True])})")
        print(
            f"  {label:4s} recording costs     {cost:+7.1%}  (pairs: {min(pairs):+.1%} to {max(pairs):+.1%}; "
            f"median pair {statistics.median(pairs):+.1%}; {target})"
        )
    print(
        f"  record: {record.records:,} changes over {result.rounds:,} rounds; explain.parquet {size / 1e6:.1f} MB, written in {write_s:.2f} s"
    )


if __name__ == "__main__":
    run_script(main)
