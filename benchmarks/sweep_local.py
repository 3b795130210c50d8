"""Sweep throughput on the local executor: a 100-run sweep of the 1,000-job LAS graph.

    python benchmarks/sweep_local.py               # 100 runs, one worker per core
    python benchmarks/sweep_local.py --runs 10     # fewer
    python benchmarks/sweep_local.py --workers 1   # one at a time, for comparison
    python benchmarks/sweep_local.py --out DIR     # the runs kept in DIR (a stopped sweep resumed)

The runs are graphs/las.sched with seeds 0..N-1 (the 1,000-job Philly sample on 128 GPUs;
its trace is fixed, so every run does the same work). Prints the sweep's wall time (from the
command's start to its end: planning, worker start-up, runs, storing), the summed run time of
the runs (as each worker measured its own), and their ratio. With W busy cores the ratio
approaches 1/W (about one half on a 2-core machine) as runs get longer than the start-up.
This is a script that prints figures, not a timed test. Measured once on a 2-core machine
shared with other work: 100 runs, wall 277.9 s, summed run time 536.9 s, ratio 0.52.

The sweep's results go to a temporary folder, removed at the end; a sweep stopped (Ctrl-C)
keeps its folder, and the script says how to resume it there (--out): a resumed sweep is timed
over the runs it does, not over those an earlier one did.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from bench_common import (  # noqa: E402
    INTERRUPTED_STATUS,
    TERMINATED_STATUS,
    at_least,
    description,
    exit_on_terminate,
    path_option,
    plural,
    run_script,
)

from roundhouse.runtime.results_store import ResultsStore  # noqa: E402
from roundhouse.runtime.sweep_exec import LocalExecutor  # noqa: E402
from roundhouse.tools.cli import main as roundhouse  # noqa: E402


def run(runs: int, workers: int | None, out: Path | None = None) -> None:
    """The sweep of `runs` runs on `workers` (None: one per core), its results in `out` (None: a
    temporary folder, removed at the end unless a stopped sweep kept runs in it)."""
    folder = out if out is not None else Path(tempfile.mkdtemp(prefix="sweep_local-"))
    keep = out is not None
    try:
        before = _stored_keys(folder)
        args = ["sweep", str(REPO / "graphs" / "las.sched"), "--seeds", str(runs), "--out", str(folder)]
        if workers is not None:
            args += ["--workers", str(workers)]
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            status = roundhouse(args)
        wall = time.perf_counter() - started
        if status in (INTERRUPTED_STATUS, TERMINATED_STATUS):
            # (The command has said so, and that the runs done are kept, to resume: they are.)
            keep = keep or (folder / "results").exists()
            if keep:
                again = ["--runs", str(runs), *(["--workers", str(workers)] if workers is not None else []), "--out", str(folder)]
                print(f"to resume the sweep there: python benchmarks/sweep_local.py {shlex.join(again)}", file=sys.stderr)
            sys.exit(status)
        if status != 0:
            sys.exit(f"the sweep failed (exit status {status})")
        frame = ResultsStore(folder / "results").read()
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    done = frame.filter(~pl.col("key").is_in(sorted(before)))  # (this sweep's runs: the wall time is theirs)
    if done.is_empty():
        print(f"all {plural(frame.height, 'run')} were in {folder} already: none was run, so none is timed")
        return
    summed = float(done["run_s"].sum())
    # (what the sweep started, which the ratio below is read against: never more workers than runs)
    where = LocalExecutor(workers).where_for(done.height) + (" (one per core at most)" if workers is None else "")
    print(f"{plural(done.height, 'run')} of graphs/las.sched on {where}")
    if done.height < frame.height:
        print(f"  (the other {plural(frame.height - done.height, 'run')} were in {folder} already, not timed)")
    print(f"  wall time       {wall:8.1f} s")
    print(f"  summed run time {summed:8.1f} s  ({summed / done.height:.2f} s a run)")
    print(f"  wall / summed   {wall / summed:8.2f}")


def _stored_keys(folder: Path) -> set[str]:
    """The keys of the runs an earlier sweep finished in `folder`'s results store (a sweep does
    again those that failed)."""
    if not (folder / "results").is_dir():
        return set()
    stored = ResultsStore(folder / "results").read()
    return set(stored.filter(pl.col("status") == "ok")["key"].to_list())


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--runs", type=at_least(1), default=100, help="runs in the sweep, seeds 0..N-1 (default 100)")
    parser.add_argument(
        "--workers", type=at_least(1), default=None, help="worker processes (default: one per core, as `roundhouse sweep`)"
    )
    parser.add_argument(
        "--out",
        type=path_option,
        help="the sweep's folder, kept (default: a temporary one, removed at the end); a stopped sweep is resumed there",
    )
    options = parser.parse_args()
    exit_on_terminate()  # (`kill PID` stops what it started, as Ctrl-C does)
    run(options.runs, options.workers, options.out)


if __name__ == "__main__":
    run_script(main)
