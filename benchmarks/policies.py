"""Speed of the Tiresias, Optimus and Themis graphs and of the placement-aware placers.

    python benchmarks/policies.py            # 2,000 jobs each, and Tiresias' testbed graphs
    python benchmarks/policies.py --quick    # 250 jobs each on an eighth of the cluster, no testbed graphs

Each policy runs 2,000 Philly-distribution jobs (Blox models) at 6 jobs/hour on 128 V100s in
32 x 4 nodes, 5-minute rounds, until every job has finished; prints wall time, rounds per
second and the average JCT. The jobs ask for more than the cluster holds (about 1.5 times its
GPU-hours over the arrivals' span), so a queue builds and the policies' JCTs differ (Fifo's
several times Las'). Tiresias' testbed graphs (480 jobs, 60 GPUs, 10 s rounds) are timed too.

`--quick` scales the whole workload down by eight: 250 jobs at 0.75 jobs/hour on 16 V100s
(4 x 4). Each GPU is offered what it is in the full case (as many jobs per GPU, arriving as
often, over the same two weeks), so a queue builds as it does and the policies differ as they
do there: Fifo's average JCT several times Las', Optimus' the lowest, the Tiresias graphs
between. The figures are the full case's in kind, not all in size: Fifo's, Las' and Themis'
average JCTs within a few percent of it, Optimus' a quarter lower, the Tiresias graphs' about
half. What it shows is each policy's speed under load, in about 15 s of CPU.
(Fewer jobs on the full cluster would not do: 200 jobs arrive in a day and a half, before the
cluster fills, and every policy but Optimus then runs each job as it arrives, with one JCT.)
A script that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import description, run_script  # noqa: E402

from roundhouse.runtime.compiler import CompiledGraph, compile_file  # noqa: E402
from roundhouse.runtime.simulate import simulate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# Jobs per policy and 4-GPU nodes: the full run, and --quick's (an eighth of both, and of the
# arrival rate: the same load on each GPU, the module docstring).
JOBS, QUICK_JOBS = 2_000, 250
NODES, QUICK_NODES = 32, 4
RATE_PER_NODE = 6.0 / NODES  # jobs per hour

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
        help=f"{QUICK_JOBS} jobs per policy on {4 * QUICK_NODES} GPUs, as loaded as the full case, and no testbed graphs "
        f"(default: {JOBS:,} jobs on {4 * NODES} GPUs, and those graphs)",
    )
    args = parser.parse_args()
    jobs, nodes = (QUICK_JOBS, QUICK_NODES) if args.quick else (JOBS, NODES)
    rate = RATE_PER_NODE * nodes
    print(
        f"{jobs:,} Philly jobs (Blox models), {rate:g} jobs/hour, {4 * nodes} V100s ({nodes} x 4, p3.8xlarge links), "
        "5-minute rounds"
    )
    for name, chain in POLICIES.items():
        # Compiled from its text: the graph reads no file, so none is written.
        text = (
            f'round = 5min;\ncluster = "{nodes}x4:V100@p3.8xlarge";\n'
            f"src :: PoissonSource(rate={rate:g}/h, jobs={jobs}, models=blox, seed=0);\n"
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
    run_script(main)
