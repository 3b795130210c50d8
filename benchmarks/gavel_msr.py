"""Gavel's policies on its Philly-derived trace msr 0e4a51, whole CLI runs, beside Gavel's simulator.

    python benchmarks/gavel_msr.py              # LAS and FIFO, each run once
    python benchmarks/gavel_msr.py --repeat 3   # each three times: the fastest and slowest

Each case is one `roundhouse run GRAPH --out DIR` in a fresh process (starting Python, reading
the trace from ../shared/data/gavel, writing jobs.csv and summary.json all included), on
Gavel's simulated cluster 36:36:36 (one GPU per server) with 6-minute rounds and Gavel's
consolidated throughputs, as tools/reproductions/gavel.py's fidelity runs:

- LAS: heterogeneity-aware max-min fairness (`MaxMinFairness`, `GavelRounds`, `GavelPlacer`),
  Gavel's `max_min_fairness_perf`; Gavel's simulator takes 64.5 s for it on a 2-core machine.
- FIFO: Gavel's `fifo` (`FifoHet(aware=false)`, shuffled type order, not work conserving);
  Gavel's simulator takes 290 s (benchmarks/gavel_solvers.py).
- FIFO, aware: graphs/gavel-fifo.sched's heterogeneity-aware FIFO (Gavel's `fifo_perf`).

Prints wall time, the process's CPU time (user + system: less disturbed than wall time when
other work shares the machine), rounds (and how many of them event skipping passed without a
tick), and how many times faster than Gavel's simulator. The
target for LAS is under 1.5 s wall (at least 40 times Gavel's). `rows()` returns the figures
for benchmarks/scale.py. This is a script that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "gavel"
TRACE = SHARED / "msr_seed0_0e4a51.trace"

# Gavel's simulator (commit c4fa400, seed 0, 360 s rounds) on this trace, on a 2-core machine, seconds.
GAVEL_SECONDS = {"LAS": 64.5, "FIFO": 290.0}
LAS_TARGET_S = 1.5

CASES = {
    "LAS": 'MaxMinFairness -> GavelRounds(order="fastest", work_conserving=true)',
    "FIFO": 'FifoHet(aware=false) -> GavelRounds(order="shuffled", work_conserving=false)',
    "FIFO, aware": "FifoHet -> GavelRounds(work_conserving=false)",
}


def _folder(trace: Path) -> Path:
    """A folder with Gavel's consolidated throughputs and one graph per case."""
    import polars as pl

    sys.path.insert(0, str(REPO))
    from roundhouse.traces.profiles import ProfileTable

    folder = Path(tempfile.mkdtemp(prefix="gavel-msr-"))
    ProfileTable.load().frame.filter(pl.col("placement") == "consolidated").write_csv(folder / "profile.csv")
    for i, chain in enumerate(CASES.values()):
        (folder / f"case{i}.sched").write_text(
            f'round = 6min;\ncluster = "36:36:36";\nprofile = "profile.csv";\nsrc :: TraceSource(path="{trace}");\n'
            f"src -> AcceptAll -> JobPool -> {chain} -> GavelPlacer -> Launch -> m :: JobMetrics;\n"
        )
    return folder


def run_once(graph: Path, out: Path) -> dict:
    """One CLI run in a fresh process: wall and CPU seconds, rounds, average JCT."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", "run", str(graph), "--out", str(out), "--quiet"], env=env, check=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = json.loads((out / "summary.json").read_text())
    run = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
    return dict(
        wall_s=wall,
        cpu_s=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        rounds=run.get("rounds"),
        skipped=run.get("skipped_rounds"),
        jobs=summary.get("jobs_finished"),
        avg_jct_s=summary.get("avg_jct_s"),
    )


def rows(repeat: int = 1, trace: Path = TRACE) -> list[dict]:
    """One row per case: the fastest of `repeat` runs (wall and CPU), Gavel's time, the ratio
    (none when Gavel's trace is not at `trace`)."""
    if not trace.exists():
        return []
    folder = _folder(trace)
    out = []
    for i, name in enumerate(CASES):
        runs = [run_once(folder / f"case{i}.sched", folder / f"out{i}-{k}") for k in range(repeat)]
        best = min(runs, key=lambda r: r["wall_s"])
        gavel = GAVEL_SECONDS.get(name)
        out.append(
            dict(
                case=f"Gavel msr 0e4a51, {name}",
                wall_s=best["wall_s"],
                slowest_wall_s=max(r["wall_s"] for r in runs),
                cpu_s=min(r["cpu_s"] for r in runs),
                rounds=best["rounds"],
                skipped=best["skipped"],
                avg_jct_s=best["avg_jct_s"],
                gavel_s=gavel,
                times_faster=None if gavel is None else gavel / best["wall_s"],
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per case (the fastest is reported)")
    parser.add_argument("--data", type=Path, default=SHARED, help="the folder of Gavel's reference data (default: %(default)s)")
    args = parser.parse_args()
    trace = args.data / TRACE.name
    if not trace.exists():
        print(f"skipped: Gavel's trace not found at {trace}")
        return
    print("msr 0e4a51 (984 jobs), 36:36:36, 6-minute rounds, whole `roundhouse run --out` in a fresh process")
    print(
        f"{'case':34s} {'wall s':>8s} {'cpu s':>7s} {'rounds':>7s} {'skipped':>8s} {'avg JCT s':>10s} {'Gavel s':>8s} {'x faster':>9s}"
    )
    for row in rows(args.repeat, trace):
        gavel = f"{row['gavel_s']:8.1f}" if row["gavel_s"] else f"{'-':>8s}"
        faster = f"{row['times_faster']:8.1f}x" if row["times_faster"] else f"{'-':>9s}"
        wall = f"{row['wall_s']:.2f}" + (f"-{row['slowest_wall_s']:.2f}" if args.repeat > 1 else "")
        print(
            f"{row['case']:34s} {wall:>8s} {row['cpu_s']:7.2f} {row['rounds'] or '-':>7} {row['skipped'] or 0:>8} "
            f"{row['avg_jct_s']:10.0f} {gavel} {faster}"
        )
        if row["case"].endswith("LAS"):
            verdict = "met" if row["wall_s"] < LAS_TARGET_S else "MISSED"
            print(f"  LAS target: under {LAS_TARGET_S} s wall (40x Gavel's): {verdict}")


if __name__ == "__main__":
    main()
