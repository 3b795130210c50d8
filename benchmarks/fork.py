"""Forking cost: the 10,000-job LAS world (engine_las.py's case) forked mid-run, and a snapshot
of it saved and loaded.

    python benchmarks/fork.py               # fork at half and at nine tenths of the arrivals
    python benchmarks/fork.py --jobs 100000

Prints the median and slowest of 20 forks at each point, the snapshot's size and the time to
save and to load it. Target (a 2-core machine): a fork of the 10,000-job world under 50 ms.
This is a script that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import at_least, description, exit_on_terminate, plural, run_script  # noqa: E402

from roundhouse.runtime.simulation import Simulation  # noqa: E402

RATE_PER_H = 8.0
# The target: a fork of the 10,000-job world under 50 ms (the median of the forks at a point).
TARGET_JOBS = 10_000
TARGET_S = 0.05


def las(jobs: int) -> str:
    return f"""
round = 5min;
cluster = "32x4:V100";
src :: PoissonSource(rate={RATE_PER_H:g}/h, jobs={jobs}, seed=0);
src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--jobs", type=at_least(1), default=TARGET_JOBS, help=f"jobs in the world (default {TARGET_JOBS:,})")
    parser.add_argument("--forks", type=at_least(1), default=20, help="forks timed at each point (default 20)")
    args = parser.parse_args()
    exit_on_terminate()  # (`kill PID` removes its temporary files, as Ctrl-C does)
    sim = Simulation(las(args.jobs))
    span_s = args.jobs / RATE_PER_H * 3600
    print(f"LAS, {plural(args.jobs, 'Philly job')} at {RATE_PER_H:g}/h on 32 x 4 V100s, 5-minute rounds")
    worst = 0.0
    for fraction in (0.5, 0.9):
        sim.run_until(fraction * span_s)
        walls = []
        for _ in range(args.forks):
            started = time.perf_counter()
            sim.fork()
            walls.append(time.perf_counter() - started)
        worst = max(worst, statistics.median(walls))
        print(
            f"  at t={sim.now / 3600:7.0f} h ({len(sim.world.jobs):6,} jobs in the table, {len(sim.world.running_rows):4} running): "
            f"fork median {statistics.median(walls) * 1e3:6.2f} ms, slowest {max(walls) * 1e3:6.2f} ms"
        )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "world.snap"
        started = time.perf_counter()
        sim.save(path)
        saved = time.perf_counter() - started
        started = time.perf_counter()
        Simulation.load(path)
        loaded = time.perf_counter() - started
        print(f"  snapshot: {path.stat().st_size / 1e6:.1f} MB, saved in {saved * 1e3:.0f} ms, loaded in {loaded * 1e3:.0f} ms")
    if args.jobs == TARGET_JOBS:
        verdict = "met" if worst < TARGET_S else "NOT met"
        print(f"\ntarget: a fork of the {TARGET_JOBS:,}-job world under {TARGET_S * 1e3:g} ms: {worst * 1e3:.2f} ms ({verdict})")
    else:
        print(
            f"\nslowest median fork: {worst * 1e3:.2f} ms (the target, under {TARGET_S * 1e3:g} ms, is for the "
            f"{TARGET_JOBS:,}-job world: run without --jobs)"
        )


if __name__ == "__main__":
    run_script(main)
