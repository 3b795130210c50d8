"""Gavel's policies on its Philly-derived trace msr 0e4a51, whole CLI runs, beside Gavel's simulator.

    python benchmarks/gavel_msr.py              # LAS and FIFO, each run once
    python benchmarks/gavel_msr.py --repeat 3   # each three times: the fastest and slowest
    python benchmarks/gavel_msr.py --gavel ../gavel/scheduler --gavel-python ../gavel-env/bin/python
                                                # and Gavel's simulator on the same cases, now

Each case is one `roundhouse run GRAPH --out DIR` in a fresh process (starting Python, reading
the trace from ../shared/data/gavel or `--data FOLDER`, writing jobs.csv and summary.json all
included), on Gavel's simulated cluster 36:36:36 (one GPU per server) with 6-minute rounds and
Gavel's consolidated throughputs, as tools/reproductions/gavel.py's fidelity runs:

- LAS: heterogeneity-aware max-min fairness (`MaxMinFairness`, `GavelRounds`, `GavelPlacer`),
  Gavel's `max_min_fairness_perf`; Gavel's simulator takes 64.5 s for it on a 2-core machine.
- FIFO: Gavel's `fifo` (`FifoHet(aware=false)`, shuffled type order, not work conserving);
  Gavel's simulator takes 290 s (benchmarks/gavel_solvers.py).
- FIFO, aware: graphs/gavel-fifo.sched's heterogeneity-aware FIFO (Gavel's `fifo_perf`).

Prints wall time, the process's CPU time (user + system: less disturbed than wall time when
other work shares the machine), rounds (and how many of them event skipping passed without a
tick), how many times faster than Gavel's simulator, and Gavel's average JCT beside ours (from
Gavel's shared results, msr_0e4a51_36-36-36_results_all_policies.csv read in place, unless
`--gavel` measures it now; it has none for `fifo_perf`). The target for LAS is under 1.5 s
wall (at least 40 times Gavel's). `rows()` returns the figures for benchmarks/scale.py. This is
a script that prints figures, not a timed test.

Gavel's times above were measured once each, on days when the machine ran at different speeds
(in one sitting on 2026-12-04, Gavel's simulator took 133 s for LAS and 186 s for FIFO on this
project's machine), so ratios against them are rough. With `--gavel`, the folder `scheduler/` of a
checkout of Gavel (commit c4fa400; its Python needs cvxpy, ECOS, grpcio with its stubs built by
its Makefile, matrix_completion, scikit-learn and psutil), Gavel's own simulator runs the same
cases in the same sitting (`simulate_scheduler_with_trace.py`, seed 0, ECOS, 360 s rounds,
Gavel's `max_min_fairness_perf`, `fifo` and `fifo_perf`), and the ratio is taken against it:
the two programs then share the machine's speed of the day.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from anchor_run import AnchorFailed, failure, run_anchor
from bench_common import at_least

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "gavel"
TRACE = SHARED / "msr_seed0_0e4a51.trace"
# Gavel's simulator's output per job and policy on this trace, beside it (its README says how it was run).
RESULTS = "msr_0e4a51_36-36-36_results_all_policies.csv"

# Gavel's simulator (commit c4fa400, seed 0, 360 s rounds) on this trace, on a 2-core machine, seconds,
# each measured once on its own day (see the docstring: `--gavel` measures them beside ours).
GAVEL_SECONDS = {"LAS": 64.5, "FIFO": 290.0}
LAS_TARGET_S = 1.5
LAS_TARGET_TIMES = 40
# Gavel's name for each case's policy (its scripts/drivers/simulate_scheduler_with_trace.py).
GAVEL_POLICIES = {"LAS": "max_min_fairness_perf", "FIFO": "fifo", "FIFO, aware": "fifo_perf"}

CASES = {
    "LAS": 'MaxMinFairness -> GavelRounds(order="fastest", work_conserving=true)',
    "FIFO": 'FifoHet(aware=false) -> GavelRounds(order="shuffled", work_conserving=false)',
    "FIFO, aware": "FifoHet -> GavelRounds(work_conserving=false)",
}


def _write_graphs(folder: Path, trace: Path, skip: bool) -> None:
    """Gavel's consolidated throughputs and one graph per case, in `folder`."""
    import polars as pl

    sys.path.insert(0, str(REPO))
    from roundhouse.traces.profiles import ProfileTable

    ProfileTable.load().frame.filter(pl.col("placement") == "consolidated").write_csv(folder / "profile.csv")
    for i, chain in enumerate(CASES.values()):
        (folder / f"case{i}.sched").write_text(
            f'round = 6min;\ncluster = "36:36:36";\nprofile = "profile.csv";\nskip_rounds = {str(skip).lower()};\n'
            f'src :: TraceSource(path="{trace}");\n'
            f"src -> AcceptAll -> JobPool -> {chain} -> GavelPlacer -> Launch -> m :: JobMetrics;\n"
        )


def shared_jct(data: Path = SHARED) -> dict[str, float]:
    """Average JCT by Gavel policy in Gavel's shared results on this trace, read in place (none
    when the file is not in `data`). As Gavel prints it: a job Gavel failed has no JCT and is left out."""
    path = data / RESULTS
    if not path.is_file():
        return {}
    import polars as pl

    frame = pl.read_csv(path).group_by("policy").agg(pl.col("jct_s").mean())
    return dict(zip(frame["policy"], frame["jct_s"], strict=True))


def run_once(graph: Path, out: Path) -> dict:
    """One CLI run in a fresh process: wall and CPU seconds, rounds, average JCT."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", "run", str(graph), "--out", str(out), "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"error: `roundhouse run {graph.name}` exited with status {done.returncode}:\n{done.stderr.strip()}")
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


def run_gavel(checkout: Path, python: str, policy: str, trace: Path) -> dict:
    """Gavel's own simulator on `trace` under `policy`, in a fresh process, as Gavel's shared
    results were made (`simulate_scheduler_with_trace.py`, seed 0, ECOS, 360 s rounds, one GPU
    per server on 36:36:36): wall seconds and the average JCT it prints."""
    args = [python, "scripts/drivers/simulate_scheduler_with_trace.py", "-t", str(trace), "-p", policy,
            "--throughputs_file", str(trace.parent / "simulation_throughputs.json"), "-c", "36:36:36",
            "--seed", "0", "--solver", "ECOS", "--time_per_iteration", "360"]  # fmt: skip
    done, wall = run_anchor(args, "Gavel's simulator", cwd=checkout)
    found = re.search(r"Average job completion time: ([0-9.]+) seconds", done.stdout)
    if done.returncode != 0 or not found:
        raise failure(done, f"Gavel's simulator ({policy}) in {checkout}")
    return dict(wall_s=wall, avg_jct_s=float(found.group(1)))


def rows(repeat: int = 1, trace: Path = TRACE, gavel: tuple[Path, str] | None = None, skip: bool = True) -> list[dict]:
    """One row per case: the fastest of `repeat` runs (wall and CPU), Gavel's time, the ratio
    (none when Gavel's trace is not at `trace`). With `gavel` (the folder `scheduler/` of Gavel's
    checkout, and the Python to run it with), Gavel's time and JCT are measured now, once per
    case; without, its JCT is the one in Gavel's shared results beside the trace. `skip` false
    turns event skipping off (`skip_rounds = false`)."""
    if not trace.exists():
        return []
    trace = trace.resolve()  # (the graphs are in another folder)
    shared = shared_jct(trace.parent)
    out = []
    with tempfile.TemporaryDirectory(prefix="gavel-msr-") as tmp:
        folder = Path(tmp)
        _write_graphs(folder, trace, skip)
        for i, name in enumerate(CASES):
            runs = [run_once(folder / f"case{i}.sched", folder / f"out{i}-{k}") for k in range(repeat)]
            best = min(runs, key=lambda r: r["wall_s"])
            theirs = run_gavel(gavel[0], gavel[1], GAVEL_POLICIES[name], trace) if gavel else None
            out.append(_row(name, runs, best, theirs, shared.get(GAVEL_POLICIES[name])))
    return out


def _row(name: str, runs: list[dict], best: dict, theirs: dict | None, shared_jct_s: float | None) -> dict:
    gavel_s = theirs["wall_s"] if theirs else GAVEL_SECONDS.get(name)
    return dict(
        case=f"Gavel msr 0e4a51, {name}",
        wall_s=best["wall_s"],
        slowest_wall_s=max(r["wall_s"] for r in runs),
        cpu_s=min(r["cpu_s"] for r in runs),
        rounds=best["rounds"],
        skipped=best["skipped"],
        avg_jct_s=best["avg_jct_s"],
        gavel_s=gavel_s,
        gavel_measured_now=theirs is not None,
        gavel_avg_jct_s=theirs["avg_jct_s"] if theirs else shared_jct_s,
        times_faster=None if gavel_s is None else gavel_s / best["wall_s"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=at_least(1), default=1, help="runs per case (the fastest is reported)")
    parser.add_argument(
        "--data", type=Path, help=f"the folder of Gavel's reference data (default: {SHARED}, skipped when it is not there)"
    )
    parser.add_argument("--gavel", type=Path, help="the folder scheduler/ of Gavel's checkout: run its simulator now too")
    parser.add_argument("--gavel-python", default=sys.executable, help="the Python to run Gavel with (default: this one)")
    args = parser.parse_args()
    if args.data is None:
        data = SHARED
        if not TRACE.exists():
            print(f"skipped: Gavel's trace not found at {TRACE}")
            return
    else:
        data = args.data.resolve()
        if not (data / TRACE.name).is_file():
            parser.error(f"--data {args.data}: no {TRACE.name} there")
    gavel = None
    if args.gavel is not None:
        if not (args.gavel / "scripts" / "drivers" / "simulate_scheduler_with_trace.py").exists():
            parser.error(f"--gavel {args.gavel}: no scripts/drivers/simulate_scheduler_with_trace.py there")
        gavel = (args.gavel.resolve(), args.gavel_python)
    when = "measured now" if gavel else "as measured once (--gavel measures it now)"
    if gavel:
        jct_from = "measured now"
    elif (data / RESULTS).is_file():
        jct_from = f"from Gavel's shared results, {data / RESULTS}"
    else:
        jct_from = f"not known ({RESULTS} not found in {data}; --gavel measures it now)"
    print("msr 0e4a51 (984 jobs), 36:36:36, 6-minute rounds, whole `roundhouse run --out` in a fresh process")
    print(f"Gavel's simulator: {when}")
    print(f"Gavel's average JCT: {jct_from}")
    print(
        f"{'case':34s} {'wall s':>8s} {'cpu s':>7s} {'rounds':>7s} {'skipped':>8s} {'avg JCT s':>10s} {'Gavel s':>8s} "
        f"{'x faster':>9s} {'Gavel JCT s':>12s}"
    )
    try:
        measured = rows(args.repeat, data / TRACE.name, gavel)
    except AnchorFailed as err:
        sys.exit(f"error: {err}")
    for row in measured:
        theirs = f"{row['gavel_s']:8.1f}" if row["gavel_s"] else f"{'-':>8s}"
        faster = f"{row['times_faster']:8.1f}x" if row["times_faster"] else f"{'-':>9s}"
        their_jct = f"{row['gavel_avg_jct_s']:12.0f}" if row["gavel_avg_jct_s"] else f"{'-':>12s}"
        wall = f"{row['wall_s']:.2f}" + (f"-{row['slowest_wall_s']:.2f}" if args.repeat > 1 else "")
        print(
            f"{row['case']:34s} {wall:>8s} {row['cpu_s']:7.2f} {row['rounds'] or '-':>7} {row['skipped'] or 0:>8} "
            f"{row['avg_jct_s']:10.0f} {theirs} {faster} {their_jct}"
        )
        if row["case"].endswith("LAS"):
            verdict = "met" if row["wall_s"] < LAS_TARGET_S else "MISSED"
            print(f"  LAS target: under {LAS_TARGET_S} s wall: {verdict}")
            if row["times_faster"]:
                verdict = "met" if row["times_faster"] >= LAS_TARGET_TIMES else "MISSED"
                print(f"  LAS target: at least {LAS_TARGET_TIMES}x Gavel's simulator ({when}): {verdict}")


if __name__ == "__main__":
    main()
