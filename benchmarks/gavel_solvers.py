"""Gavel's solvers at scale, and a whole Gavel simulation, beside Gavel's own figures.

    python benchmarks/gavel_solvers.py            # solver scaling (32..2048 jobs) and the whole simulation
    python benchmarks/gavel_solvers.py --quick    # up to 256 jobs, one trial

Solver scaling follows Gavel's harness (scripts/microbenchmarks/sweep_policy_runtimes.py): n
single-GPU jobs, each one of Gavel's 26 job configurations at random, on n/4 GPUs of each type
(V100, P100, K80); the hierarchical policy has 5 entities with weights drawn from 1..3 and
fairness inside each. Each figure is the median of three solves (a fresh run each, after one
untimed solve per policy), timed inside the solver element (building the program and solving
it). "distinct" repeats the measurement with every job's weight made unique, so that no two
jobs share a row (the worst case for our grouping of alike jobs). The reference is Gavel's code
(cvxpy with ECOS) on a 2-core machine like ours, as measured when this work was planned (Gavel's
paper gives no per-size times; its Fig. 12 has the hierarchical policy under 10 minutes at 2,048
jobs on its authors' machine, where the 2-core machine gave no result within minutes).

The whole simulation replays Gavel's Philly-derived trace msr 0e4a51 (984 jobs, read in place
from ../shared/data/gavel) on 36:36:36 with Gavel's FIFO, 6-minute rounds; Gavel's simulator
took 290 s for it when this work was planned, and 186 s in one sitting with ours on 2026-12-04
(`benchmarks/gavel_msr.py --gavel` runs it beside ours). Our average JCT is printed beside
Gavel's from its shared results (msr_0e4a51_36-36-36_results_all_policies.csv, read in place),
both over the same jobs: those Gavel gives a JCT for (983 of the 984: it fails one).
This is a script that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import at_least, description, exit_on_terminate, run_script  # noqa: E402
from gavel_msr import GAVEL_SECONDS, BadReference, same_jobs_jct, shared_results  # noqa: E402

from roundhouse.runtime.compiler import compile_file  # noqa: E402
from roundhouse.runtime.simulate import simulate  # noqa: E402
from roundhouse.traces.profiles import ProfileTable  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel"
# Gavel's solver times on a 2-core machine, as measured when this work was planned: seconds by number of active jobs.
# (Not from Gavel's paper, which gives no per-size times: its Fig. 12 says only that the hierarchical
# policy without space sharing runs in under 10 minutes at 2,048 jobs, on its authors' machine;
# shared/notes/gavel.md, "Scalability".)
GAVEL_MAX_MIN = {32: 0.01, 512: 0.03, 2048: 0.15}
GAVEL_WATER_FILLING = {32: 0.3, 256: 1.5, 512: 6.8, 1024: 88.0, 2048: None}  # None: no result within minutes
GAVEL_FIFO_SIMULATION_S = GAVEL_SECONDS["FIFO"]  # (Gavel's simulator on msr 0e4a51, as gavel_msr.py gives it)
FIFO_TARGET_TIMES = 50  # the target: the whole simulation at least this many times faster
# The width of the column of Gavel's figures: its longest texts are "no result within minutes"
# and a figure with "(interpolated)".
GAVEL_WIDTH = 24


def _jobs(n: int, seed: int, distinct: bool) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    configs = ProfileTable.load().configs(1)
    picked = rng.integers(0, len(configs), size=n)
    weight = np.ones(n) if not distinct else 1.0 + 1e-6 * np.arange(n)
    return pl.DataFrame(
        {
            "job_id": np.arange(n),
            "arrival_s": np.zeros(n),
            "gpus": np.ones(n, dtype=np.int64),
            "model": [configs[i][0] for i in picked],
            "batch_size": [configs[i][1] for i in picked],
            "iterations": np.full(n, 1e9),
            "weight": weight,
            "user": [f"e{e}" for e in rng.integers(0, 5, size=n)],
        }
    )


def solve_ms(policy: str, n: int, trial: int, distinct: bool) -> float:
    weights = np.random.default_rng(100 + trial).integers(1, 4, size=5).tolist()
    solver = {
        "max-min": "MaxMinFairness",
        "hierarchical": f"Hierarchical(entities={['e0', 'e1', 'e2', 'e3', 'e4']}, weights={weights})".replace("'", '"'),
    }[policy]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _jobs(n, trial, distinct).write_csv(folder / "jobs.csv")
        (folder / "g.sched").write_text(
            f'round = 6min;\ncluster = "{n // 4}:{n // 4}:{n // 4}";\n'
            f'src :: TraceSource(path="jobs.csv");\n'
            f"src -> AcceptAll -> JobPool -> solve :: {solver} -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;\n"
        )
        graph = compile_file(folder / "g.sched")
        simulate(graph, until=1.0)
    return graph.elements["solve"].counters["solve_ms"] / graph.elements["solve"].counters["solves"]


def _reference(table: dict, n: int) -> tuple[float | None, str]:
    """Gavel's figure at n jobs: quoted, or interpolated (log-log) between quoted sizes."""
    if n in table:
        return table[n], "" if table[n] is not None else "no result within minutes"
    known = sorted((k, v) for k, v in table.items() if v is not None)
    below = [kv for kv in known if kv[0] < n]
    above = [kv for kv in known if kv[0] > n]
    if not below or not above:
        return None, ""
    (n0, t0), (n1, t1) = below[-1], above[0]
    value = float(np.exp(np.interp(np.log(n), [np.log(n0), np.log(n1)], [np.log(t0), np.log(t1)])))
    return value, "interpolated"


def scaling(sizes: list[int], trials: int, distinct_up_to: int) -> None:
    print(f"solve time in seconds, median of {trials} (a fresh run each); Gavel = its code (cvxpy/ECOS) on a 2-core machine")
    print(f"  {'policy':12s} {'jobs':>5s} {'ours (grouped)':>15s} {'ours (distinct)':>15s}   {'Gavel':{GAVEL_WIDTH}s} target")
    for policy, reference, factor in (("max-min", GAVEL_MAX_MIN, 1.0), ("hierarchical", GAVEL_WATER_FILLING, 10.0)):
        # An untimed solve first: the process's first solve pays one-time start-up costs
        # (imports, caches) that are not the solver's.
        solve_ms(policy, sizes[0], 0, False)
        for n in sizes:
            grouped = statistics.median(solve_ms(policy, n, t, False) for t in range(trials)) / 1e3
            distinct = (
                statistics.median(solve_ms(policy, n, t, True) for t in range(trials)) / 1e3 if n <= distinct_up_to else None
            )
            ref, how = _reference(reference, n)
            ref_text = (f"{ref:.3g}" + (f" ({how})" if how else "")) if ref is not None else how
            verdict = ""
            if policy == "max-min" and ref is not None:
                verdict = f"<= {ref:.3g} s: {'met' if grouped <= ref else 'MISSED'}"
            elif policy == "hierarchical" and n >= 256:
                if ref is None:
                    verdict = "finishes: met"
                elif not how:
                    verdict = f"<= {ref / factor:.3g} s (10x): {'met' if grouped <= ref / factor else 'MISSED'}"
            distinct_text = f"{distinct:15.4f}" if distinct is not None else f"{'-':>15s}"
            print(f"  {policy:12s} {n:5d} {grouped:15.4f} {distinct_text}   {ref_text:{GAVEL_WIDTH}s} {verdict}".rstrip())


def whole_simulation() -> None:
    trace = SHARED / "msr_seed0_0e4a51.trace"
    if not trace.exists():
        print(f"whole simulation: skipped ({trace} not found)")
        return
    try:  # read before the simulation: a bad file is found at once
        shared = shared_results(SHARED)
    except BadReference as err:
        sys.exit(str(err))  # (it names the file, then the error)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        profile = ProfileTable.load().frame.filter(pl.col("placement") == "consolidated")
        profile.write_csv(folder / "profile.csv")  # Gavel's simulator ignores placement
        (folder / "g.sched").write_text(
            f'round = 6min;\ncluster = "36:36:36";\nprofile = "profile.csv";\n'
            f'src :: TraceSource(path="{trace}");\n'
            'src -> AcceptAll -> JobPool -> FifoHet(aware=false) -> GavelRounds(order="shuffled", work_conserving=false)'
            " -> GavelPlacer -> Launch -> m :: JobMetrics;\n"
        )
        graph = compile_file(folder / "g.sched")
        result = simulate(graph)
    summary = result.reports["m"]["summary"]
    theirs = shared.filter(pl.col("policy") == "fifo") if shared is not None else None
    if theirs is not None and theirs.height:
        ours_jct, their_jct, jobs = same_jobs_jct(result.reports["m"]["jobs"], theirs)
        finished = summary["jobs_finished"]
        jct = (
            f"average JCT over the {jobs} of our {finished} jobs Gavel gives a JCT for: ours {ours_jct:.0f} s, "
            f"Gavel's {their_jct:.0f} s (its shared results)"
            if jobs
            else "average JCT: no job has a JCT in both"
        )
    else:
        jct = f"average JCT {summary['avg_jct_s']:.0f} s (Gavel's: not in Gavel's shared results)"
    times = GAVEL_FIFO_SIMULATION_S / result.wall_s
    print(
        f"whole simulation: msr 0e4a51 (984 jobs), FIFO, 36:36:36: {result.wall_s:.2f} s for {result.rounds} rounds "
        f"(Gavel's simulator: {GAVEL_FIFO_SIMULATION_S:.0f} s) = {times:.0f}x faster "
        f"(target {FIFO_TARGET_TIMES}x: {'met' if times >= FIFO_TARGET_TIMES else 'MISSED'}); {jct}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--quick", action="store_true", help="up to 256 jobs, one trial (default: up to 2048, three)")
    parser.add_argument(
        "--distinct-up-to", type=at_least(0), default=2048, help="largest size for the every-job-distinct column (default 2048)"
    )
    args = parser.parse_args()
    exit_on_terminate()  # (`kill PID` removes its temporary files, as Ctrl-C does)
    sizes = [32, 64, 128, 256] if args.quick else [32, 64, 128, 256, 512, 1024, 2048]
    scaling(sizes, 1 if args.quick else 3, args.distinct_up_to)
    whole_simulation()


if __name__ == "__main__":
    run_script(main)
