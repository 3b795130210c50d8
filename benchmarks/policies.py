"""Speed of the Tiresias, Optimus and Themis graphs and of the placement-aware placers.

    python benchmarks/policies.py            # 2,000 jobs each, and Tiresias' testbed graphs
    python benchmarks/policies.py --quick    # 200 jobs each, no testbed graphs (a few seconds)

Each policy runs 2,000 Philly-distribution jobs (Blox models) at 6 jobs/hour on 128 V100s in
32 x 4 nodes, 5-minute rounds, until every job has finished; prints wall time and rounds per
second. Tiresias' testbed graphs (480 jobs, 60 GPUs, 10 s rounds) are timed too. A script that
prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import description  # noqa: E402

from roundhouse.runtime.compiler import CompiledGraph, compile_file  # noqa: E402
from roundhouse.runtime.simulate import simulate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# Jobs per policy: the full run, and --quick's (a tenth: the same policies, the same cluster).
JOBS, QUICK_JOBS = 2_000, 200

POLICIES = {
    "Fifo + Consolidated (reference)": "Fifo -> Consolidated",
    "Las + Consolidated (reference)": "Las -> Consolidated",
    "TiresiasLas + Consolidated": "TiresiasLas(queues=2, thresholds=[1h]) -> Consolidated",
    "TiresiasGittins + Consolidated": "TiresiasGittins(queues=2, thresholds=[1h]) -> Consolidated",
    "TiresiasLas + SkewAwarePlacer": "TiresiasLas(queues=2, thresholds=[1h]) -> SkewAwarePlacer",
    "TiresiasLas + ProfiledPlacer": "TiresiasLas(queues=2, thresholds=[1h]) -> ProfiledPlacer",
    "Optimus + Consolidated": "Optimus -> Consolidated",
    "Themis + Consolidated": "Themis -> Consolidated",
    "Fifo + BandwidthAwareIntraNode": "Fifo -> BandwidthAwareIntraNode",
}


def timed(graph: CompiledGraph) -> tuple[int, float, float]:
    started = time.perf_counter()
    result = simulate(graph)
    wall = time.perf_counter() - started
    summary = next(r["summary"] for r in result.reports.values() if "summary" in r)
    return result.rounds, wall, summary["avg_jct_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_JOBS} jobs per policy, and no testbed graphs (default: {JOBS:,} jobs, and those graphs)",
    )
    args = parser.parse_args()
    jobs = QUICK_JOBS if args.quick else JOBS
    print(f"{jobs:,} Philly jobs (Blox models), 6 jobs/hour, 128 V100s (32 x 4, p3.8xlarge links), 5-minute rounds")
    for name, chain in POLICIES.items():
        # Compiled from its text: the graph reads no file, so none is written.
        text = (
            'round = 5min;\ncluster = "32x4:V100@p3.8xlarge";\n'
            f"src :: PoissonSource(rate=6/h, jobs={jobs}, models=blox, seed=0);\n"
            f"src -> AcceptAll -> JobPool -> {chain} -> Launch -> JobMetrics;\n"
        )
        rounds, wall, jct = timed(compile_file("bench.sched", text=text))
        print(f"  {name:34s} {rounds:6d} rounds {wall:7.2f} s {rounds / wall:7.0f} rounds/s   avg JCT {jct / 3600:6.1f} h")
    if args.quick:  # (the testbed's workload is fixed: it has no smaller form)
        return
    print("Tiresias' testbed workload (480 jobs, 60 GPUs, 10 s rounds)")
    for name in ("tiresias", "tiresias-gittins", "yarn-cs"):
        rounds, wall, jct = timed(compile_file(REPO / "graphs" / f"{name}.sched"))
        print(
            f"  graphs/{name + '.sched':27s} {rounds:6d} rounds {wall:7.2f} s {rounds / wall:7.0f} rounds/s   avg JCT {jct / 3600:6.2f} h"
        )


if __name__ == "__main__":
    main()
