"""Pollux side by side with its own simulator: the fidelity run of its README (Pollux policy,
workload 6, 16 nodes of 4 GPUs, 60 s interval), average JCT and wall time, ours beside the
anchor's. The goal: within 5% of its average JCT, and at least 50 times faster (under 37 s).
A script that prints figures, not a timed test; wall times on a shared machine are noisy.

    python benchmarks/pollux_fidelity.py [--seeds 3] [--patience 10 | --full-search]

By default each round's search stops once its best allocation has not improved for 10
generations (`Pollux(patience=10)`); `--full-search` runs all 100 generations every round, as
Pollux's simulator does (36-47 s a seed on the 2-core machine, measured on 2026-12-05; the
default about 6 s a seed).

Reads the workload in place from ../shared/data/pollux/; Pollux's applications are the built-in
profile, their fit (traces/pollux.py), as the reproductions run them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import at_least, description, run_script  # noqa: E402

from roundhouse.runtime.compiler import compile_file  # noqa: E402
from roundhouse.runtime.simulate import simulate  # noqa: E402
from roundhouse.tools.reproductions.pollux import DATA, POLLUX, PROFILE, WORKLOAD, graph_text  # noqa: E402

# Pollux's simulator on this run (petuum/adaptdl osdi21-artifact, simulator/README.md, "Checking
# Simulator Fidelity", copied as ../shared/data/pollux/SIMULATOR-README.md): average JCT
# 2,446.13 s, printed there as 2446.13125. The other two figures are not published: 2,435 s in
# another run (its genetic search is random), and about 31 minutes on the 2-core machine this
# project is built on (981 rounds of about 1.9 s each; its README says "up to 30mins depending on
# the speed of the CPU"), as measured for this project's brief.
ANCHOR_JCT_S = 2446.13
ANCHOR_OTHER_RUN_S = 2435.0
ANCHOR_WALL_S = 31 * 60.0
# The goal: within 5% of its average JCT, and at least 50 times faster.
GOAL_JCT_OFF = 0.05
GOAL_TIMES = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--seeds", type=at_least(1), default=1, help="runs with seeds 0..N-1 of Pollux's search (default 1)")
    parser.add_argument("--patience", type=at_least(1), help="generations without improvement that end a search (default 10)")
    parser.add_argument("--full-search", action="store_true", help="all 100 generations every round, as Pollux's simulator")
    args = parser.parse_args()
    if args.full_search and args.patience is not None:
        parser.error("--patience has no effect with --full-search (which runs all 100 generations)")
    if args.patience is None:
        args.patience = 10
    if not (WORKLOAD.is_file() and PROFILE.is_dir()):
        print(f"skipped: Pollux's data not found at {DATA} (its workloads/workload-6.csv and traces/)")
        return
    search = "" if args.full_search else f", patience={args.patience}"
    how = (
        "all 100 generations a round"
        if args.full_search
        else f"a search ends after {args.patience} generations without improvement"
    )
    print(f"Pollux, workload 6 (160 jobs), 16 x 4 GPUs, 60 s interval ({how})")
    print(
        f"  anchor, Pollux's simulator: average JCT {ANCHOR_JCT_S:,.0f} s (its README; {ANCHOR_OTHER_RUN_S:,.0f} s in another run), "
        f"wall ~{ANCHOR_WALL_S / 60:.0f} min (measured on the 2-core machine)"
    )
    jcts, walls = [], []
    for seed in range(args.seeds):
        # Compiled from its text: its data paths are absolute, so no file need be written.
        text = graph_text(WORKLOAD, POLLUX.replace("seed=0", f"seed={seed}{search}"), 60, "fidelity run").lstrip()
        graph = compile_file(f"pollux-{seed}.sched", text=text)
        started, cpu = time.perf_counter(), time.process_time()
        result = simulate(graph)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        summary = next(r["summary"] for r in result.reports.values() if "summary" in r)
        jct = summary["avg_jct_s"]
        jcts.append(jct)
        walls.append(wall)
        print(
            f"  ours, seed {seed}: average JCT {jct:,.0f} s ({100 * (jct - ANCHOR_JCT_S) / ANCHOR_JCT_S:+.1f}% against {ANCHOR_JCT_S:,.0f} s), "
            f"{summary['jobs_finished']}/{summary['jobs_tracked']} jobs finished, {result.rounds} rounds, "
            f"wall {wall:.1f} s, CPU {cpu:.1f} s ({ANCHOR_WALL_S / wall:.0f}x faster than ~{ANCHOR_WALL_S / 60:.0f} min)"
        )
    mean = sum(jcts) / len(jcts)
    if len(jcts) > 1:
        print(f"  ours, mean of {len(jcts)} seeds: {mean:,.0f} s ({100 * (mean - ANCHOR_JCT_S) / ANCHOR_JCT_S:+.1f}%)")
    close = abs(mean - ANCHOR_JCT_S) <= GOAL_JCT_OFF * ANCHOR_JCT_S
    fast = max(walls) < ANCHOR_WALL_S / GOAL_TIMES
    print(
        f"goal: average JCT within {GOAL_JCT_OFF:.0%} of {ANCHOR_JCT_S:,.0f} s{' (the mean of the seeds)' if len(jcts) > 1 else ''}: "
        f"{'met' if close else 'MISSED'}; at least {GOAL_TIMES}x faster (under {ANCHOR_WALL_S / GOAL_TIMES:.0f} s a run): "
        f"{'met' if fast else 'MISSED'}"
    )


if __name__ == "__main__":
    run_script(main)
