"""Alibaba's GPU-cluster simulator beside ours, on the same generated trace.

Alibaba's public simulator for its PAI 2020 GPU trace (github.com/alibaba/clusterdata, folder
`cluster-trace-gpu-v2020/simulator`) replays jobs on a pool of GPUs one simulated second at a
time, with FIFO and shortest-job-first allocation among others. Its README's sample output is
the scaling benchmark's anchor for "Alibaba's shape": 20,000 jobs of its own trace arriving
1,000 a minute on 6,500 GPUs.

`benchmarks/scale.py --alibaba FOLDER` runs that simulator (FOLDER is its `simulator/` folder,
from a checkout of clusterdata; it needs numpy and matplotlib) on the trace the scale case
generated, converted to the simulator's columns here, so both run the same jobs in one sitting.
Its trace files are not needed. What differs, and is printed beside the figures: it schedules
every second where we schedule every 5 minutes; it places jobs on one node of 6,500 GPUs (its
README's configuration, no topology) where we place them on 1,625 servers of 4; it gives the
jobs of each minute the same arrival instant (its `arrival_rate` mode) where the generated trace
spreads them; it never preempts a running job (it preempts only when the cluster's capacity
shrinks, which it does not here) where our rankings are preemptive (`Srtf` stands for its SJF,
and both know every job's duration); both try the next job when one does not fit.
"""

from __future__ import annotations

import json
from pathlib import Path

from anchor_run import failure, run_anchor
from bench_common import not_a_script

# Its README's sample output ("Output"): its own trace pai_job_duration_estimate_100K.csv, 20,000
# jobs, 1,000 a minute, one node of 6,500 GPUs, load-balancing placement, seed 42, on its authors'
# machine. Wall seconds (`runtime`) and average JCT in seconds (`avg_jct`).
README_FIGURES = {"FIFO": (110.53, 7918.47), "SJF": (51.96, 5988.61)}

# The simulator run once beside ours on the scaling benchmark's own generated jobs (the same
# seeded trace every run makes), on the 2-core machine (docs/cost-model.md, its table of
# Alibaba's shape): wall seconds and average JCT in seconds. These, not the README's, are the
# anchor a ratio can be taken against when it is not run again (`--alibaba`).
MEASURED_SAME_JOBS = {"FIFO": (676.4, 35.33 * 3600), "SJF": (733.5, 25.39 * 3600)}

# Its allocation policies by number (its utils.py, ALLOC_POLICY_DICT); preemption policy 2 (LGF)
# as in its README's runs.
POLICY_CODES = {"FIFO": 8, "SJF": 0}

# Run in the simulator's own Python, with its folder first on the path: the simulator built as its
# run_simulator.py builds it, the shape given on the command line, one JSON line printed.
DRIVER = """
import json, logging, sys
from pathlib import Path
folder, trace, policy, gpus, per_minute, jobs, log = sys.argv[1:8]
sys.path.insert(0, folder)
from simulator import Simulator
log = Path(log)
logging.basicConfig(level=logging.WARNING, format="%(message)s", filename=log, filemode="a")
simulator = Simulator(
    csv_file=Path(trace), alloc_policy=int(policy), preempt_policy=2, sort_node_policy=3, num_nodes=1,
    random_seed=42, max_time=int(1e9), num_spare_node=0, pattern=0, hetero=False, num_gpus=int(gpus),
    num_cpus=round(23.22 * int(gpus)), describe_file=None, log_file=log, export_job_stats=False,
    export_cluster_util=False, arrival_rate=int(per_minute), num_jobs_limit=int(jobs), gpu_type_matching=0,
    verbose=0)
done, avg_jct, avg_wait, makespan = simulator.simulator_go(repeat=1)[0]
print(json.dumps(dict(jobs=done, avg_jct_s=avg_jct, avg_wait_s=avg_wait, makespan_s=makespan)))
"""


def check_folder(folder: Path) -> str | None:
    """What is wrong with `folder` as the simulator's folder, or None."""
    missing = [name for name in ("simulator.py", "cluster.py", "scheduler.py") if not (folder / name).exists()]
    return f"no {', '.join(missing)} there (give the folder cluster-trace-gpu-v2020/simulator)" if missing else None


def write_trace(ours: Path, theirs: Path) -> None:
    """Our trace (job_id, arrival_s, gpus, duration_s) in the simulator's columns: one instance
    of `gpus` GPUs and no CPUs per job, one user, submit times ours (it keeps their order)."""
    import polars as pl

    pl.read_csv(ours, glob=False).select(
        pl.col("job_id"),
        pl.lit("generated").alias("user"),
        pl.col("duration_s").alias("duration"),
        pl.col("gpus").alias("num_gpu"),
        pl.lit(0).alias("num_cpu"),
        pl.col("arrival_s").alias("submit_time"),
        pl.lit(1).alias("num_inst"),
        pl.lit("V100").alias("gpu_type"),
    ).write_csv(theirs)


def run_alibaba(folder: Path, python: str, policy: str, trace: Path, gpus: int, per_minute: int, jobs: int) -> dict:
    """The simulator on `trace` (our columns) under `policy` ("FIFO" or "SJF"), in a fresh process:
    wall seconds of the whole process, and the jobs, average JCT and wait, and makespan it reports.
    Its converted trace and its log are written beside `trace`."""
    converted = trace.with_name(f"{trace.stem}-alibaba.csv")
    if not converted.exists():
        write_trace(trace, converted)
    log = trace.with_name(f"{trace.stem}-alibaba-{policy}.log")
    args = [python, "-c", DRIVER, str(folder), str(converted), str(POLICY_CODES[policy]), str(gpus), str(per_minute)]
    args += [str(jobs), str(log)]
    done, wall = run_anchor(args, "Alibaba's simulator")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise failure(done, f"Alibaba's simulator ({policy}) in {folder}")
    return {"wall_s": wall, **json.loads(lines[-1])}


if __name__ == "__main__":
    not_a_script("benchmarks/scale.py --only alibaba-fifo (with --alibaba FOLDER to run Alibaba's simulator)")
