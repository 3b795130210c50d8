"""Sweep throughput on the local executor: a 100-run sweep of the 1,000-job LAS graph.

    python benchmarks/sweep_local.py               # 100 runs, one worker per core
    python benchmarks/sweep_local.py --runs 10     # fewer
    python benchmarks/sweep_local.py --workers 1   # one at a time, for comparison

The runs are graphs/las.sched with seeds 0..N-1 (the 1,000-job Philly sample on 128 GPUs;
its trace is fixed, so every run does the same work). Prints the sweep's wall time (from the
command's start to its end: planning, worker start-up, runs, storing), the summed run time of
the runs (as each worker measured its own), and their ratio. With W busy cores the ratio
approaches 1/W (about one half on a 2-core machine) as runs get longer than the start-up.
This is a script that prints figures, not a timed test. Measured once on a 2-core machine
shared with other work: 100 runs, wall 277.9 s, summed run time 536.9 s, ratio 0.52.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from bench_common import (  # noqa: E402
    INTERRUPTED_STATUS,
    TERMINATED_STATUS,
    at_least,
    description,
    exit_on_terminate,
    plural,
    run_script,
)

from roundhouse.runtime.results_store import ResultsStore  # noqa: E402
from roundhouse.runtime.sweep_exec import LocalExecutor  # noqa: E402
from roundhouse.tools.cli import main as roundhouse  # noqa: E402


def run(runs: int, workers: int | None) -> None:
    with tempfile.TemporaryDirectory() as out:
        args = ["sweep", str(REPO / "graphs" / "las.sched"), "--seeds", str(runs), "--out", out]
        if workers is not None:
            args += ["--workers", str(workers)]
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            status = roundhouse(args)
        wall = time.perf_counter() - started
        if status in (INTERRUPTED_STATUS, TERMINATED_STATUS):
            sys.exit(status)  # (the command has said so; what it kept goes with the temporary folder)
        if status != 0:
            sys.exit(f"the sweep failed (exit status {status})")
        frame = ResultsStore(Path(out) / "results").read()
    summed = float(frame["run_s"].sum())
    # (what the sweep started, which the ratio below is read against: never more workers than runs)
    where = LocalExecutor(workers).where_for(runs) + (" (one per core at most)" if workers is None else "")
    print(f"{plural(frame.height, 'run')} of graphs/las.sched on {where}")
    print(f"  wall time       {wall:8.1f} s")
    print(f"  summed run time {summed:8.1f} s  ({summed / frame.height:.2f} s a run)")
    print(f"  wall / summed   {wall / summed:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--runs", type=at_least(1), default=100, help="runs in the sweep, seeds 0..N-1 (default 100)")
    parser.add_argument(
        "--workers", type=at_least(1), default=None, help="worker processes (default: one per core, as `roundhouse sweep`)"
    )
    options = parser.parse_args()
    exit_on_terminate()  # (`kill PID` stops what it started, as Ctrl-C does)
    run(options.runs, options.workers)


if __name__ == "__main__":
    run_script(main)
