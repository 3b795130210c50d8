"""Gavel's policies on its Philly-derived trace msr 0e4a51, whole CLI runs, beside Gavel's simulator.

    python benchmarks/gavel_msr.py              # LAS and FIFO, each run once
    python benchmarks/gavel_msr.py --repeat 3   # each three times: the fastest and slowest
    python benchmarks/gavel_msr.py --gavel ../gavel/scheduler --gavel-python ../gavel-env/bin/python
                                                # and Gavel's simulator on the same cases, now

Each case is one `roundhouse run GRAPH --out DIR` in a fresh process (starting Python, reading
the trace from ../shared/data/gavel or `--data FOLDER`, writing jobs.csv and summary.json all
included), on Gavel's simulated cluster 36:36:36 (one GPU per server) with 6-minute rounds and
Gavel's consolidated throughputs, as tools/reproductions/gavel.py's fidelity runs:

- LAS: heterogeneity-aware max-min fairness (`MaxMinFairness`, `GavelRounds` visiting the GPU
  types in the cluster's order, as Gavel's scheduler does, `GavelPlacer`), Gavel's
  `max_min_fairness_perf`; Gavel's simulator takes 64.5 s for it on a 2-core machine.
- FIFO: Gavel's `fifo` (`FifoHet(aware=false)`, shuffled type order, not work conserving);
  Gavel's simulator takes 290 s (benchmarks/gavel_solvers.py).
- FIFO, aware: graphs/gavel-fifo.sched's heterogeneity-aware FIFO (Gavel's `fifo_perf`);
  Gavel's simulator took 156.3 s for it, with an average JCT of 505,471 s, in the sitting of
  2026-12-04 (docs/cost-model.md).

Prints wall time, the process's CPU time (user + system: less disturbed than wall time when
other work shares the machine), rounds (and how many of them event skipping passed without a
tick), how many times faster than Gavel's simulator, and Gavel's average JCT beside ours, both
over the same jobs, those Gavel gives a JCT for (it fails one job of this trace under FIFO):
from Gavel's shared results (msr_0e4a51_36-36-36_results_all_policies.csv, read in place), or
from its simulator's output with `--gavel`. The shared results hold none for `fifo_perf`: its
average is the one Gavel's simulator printed on 2026-12-04, beside ours over all our jobs. The target for LAS is under 1.5 s wall (at least 40 times Gavel's). `rows()`
returns the figures for benchmarks/scale.py. This is a script that prints figures, not a timed
test.

Gavel's times above are not published figures: they were measured for this project, once each,
with Gavel's own simulator on a 2-core machine, on days when the machine ran at different speeds
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
import sys
import tempfile
import time
from pathlib import Path

from anchor_run import AnchorFailed, failure, run_anchor
from bench_common import (
    at_least,
    compile_bytecode,
    description,
    exit_on_terminate,
    path_option,
    program_problem,
    run_child,
    run_script,
)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "gavel"
TRACE = SHARED / "msr_seed0_0e4a51.trace"
# Gavel's simulator's output per job and policy on this trace, beside it (its README says how it was run).
RESULTS = "msr_0e4a51_36-36-36_results_all_policies.csv"
# Gavel's measured throughputs, beside the trace: its simulator reads them (`--gavel`).
THROUGHPUTS = "simulation_throughputs.json"

# Gavel's simulator (commit c4fa400, seed 0, 360 s rounds) on this trace, on a 2-core machine, seconds,
# each measured once on its own day (see the docstring: `--gavel` measures them beside ours); the
# aware FIFO's in the sitting of 2026-12-04 (docs/cost-model.md), the only one that ran it.
GAVEL_SECONDS = {"LAS": 64.5, "FIFO": 290.0, "FIFO, aware": 156.3}
# Gavel's average JCT where its shared results have none (they hold no `fifo_perf`): what its
# simulator printed in the sitting of 2026-12-04 that gave the 156.3 s above (docs/cost-model.md),
# over the jobs it completed, seconds.
GAVEL_AVG_JCT_S = {"FIFO, aware": 505_471.0}
LAS_TARGET_S = 1.5
LAS_TARGET_TIMES = 40
# Gavel's name for each case's policy (its scripts/drivers/simulate_scheduler_with_trace.py).
GAVEL_POLICIES = {"LAS": "max_min_fairness_perf", "FIFO": "fifo", "FIFO, aware": "fifo_perf"}

CASES = {
    "LAS": 'MaxMinFairness -> GavelRounds(order="cluster", work_conserving=true)',
    "FIFO": 'FifoHet(aware=false) -> GavelRounds(order="shuffled", work_conserving=false)',
    "FIFO, aware": 'FifoHet -> GavelRounds(order="cluster", work_conserving=false)',
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


class BadReference(Exception):
    """Gavel's shared results cannot be read; the message names the file, then what is wrong
    (`PATH: error: ...`, as the project's errors about a file are written)."""


def shared_results(data: Path = SHARED):
    """Gavel's per-job results on this trace, read in place from `data`: a frame of policy,
    job_id and gavel_jct_s (a job Gavel failed has no JCT and is left out, as Gavel leaves it out
    of the average it prints), or None when the file is not there. Raises BadReference, naming
    the file, when it cannot be read or lacks the columns read."""
    path = data / RESULTS
    if not path.is_file():
        return None
    import polars as pl

    sys.path.insert(0, str(REPO))
    from roundhouse.errors import TraceError
    from roundhouse.tools.reproductions.gavel import gavel_results

    try:
        return gavel_results(path, ())
    except TraceError as err:
        raise BadReference(str(err)) from None
    except OSError as err:
        raise BadReference(f"{path}: error: cannot read it ({err.strerror})") from None
    except pl.exceptions.PolarsError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise BadReference(f"{path}: error: cannot read it as Gavel's per-job results ({first})") from None


def same_jobs_jct(ours, theirs) -> tuple[float | None, float | None, int]:
    """Average JCT of ours and of Gavel's over the same jobs, those both give a JCT for: `ours`
    a frame of job_id and jct_s (our jobs.csv), `theirs` one of job_id and gavel_jct_s. Returns
    (ours, Gavel's, the number of jobs averaged over); the averages are None over no job."""
    joined = ours.select("job_id", "jct_s").join(theirs.select("job_id", "gavel_jct_s"), on="job_id").drop_nulls()
    if joined.height == 0:
        return None, None, 0
    return float(joined["jct_s"].mean()), float(joined["gavel_jct_s"].mean()), joined.height


def run_once(graph: Path, out: Path) -> dict:
    """One CLI run in a fresh process: wall and CPU seconds, rounds, average JCT, and the
    folder of its results (jobs.csv among them)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = run_child([sys.executable, "-m", "roundhouse.tools.cli", "run", str(graph), "--out", str(out), "--quiet"], env=env)
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
        out=out,
    )


# A job's JCT as Gavel's simulator prints it (`Job 12: 3456.789`, or `Job 12 (high priority): ...`).
GAVEL_JOB_JCT = re.compile(r"^Job (\d+)(?: \(high priority\))?: ([0-9.]+)$", re.M)


def run_gavel(checkout: Path, python: str, policy: str, trace: Path) -> dict:
    """Gavel's own simulator on `trace` under `policy`, in a fresh process, as Gavel's shared
    results were made (`simulate_scheduler_with_trace.py`, seed 0, ECOS, 360 s rounds, one GPU
    per server on 36:36:36): wall seconds, the average JCT it prints, and the JCT it prints for
    each job it completed (a frame of job_id and gavel_jct_s; None if it printed none)."""
    import polars as pl

    args = [python, "scripts/drivers/simulate_scheduler_with_trace.py", "-t", str(trace), "-p", policy,
            "--throughputs_file", str(trace.parent / THROUGHPUTS), "-c", "36:36:36",
            "--seed", "0", "--solver", "ECOS", "--time_per_iteration", "360"]  # fmt: skip
    done, wall = run_anchor(args, "Gavel's simulator", cwd=checkout)
    found = re.search(r"Average job completion time: ([0-9.]+) seconds", done.stdout)
    if done.returncode != 0 or not found:
        raise failure(done, f"Gavel's simulator ({policy}) in {checkout}")
    jobs = GAVEL_JOB_JCT.findall(done.stdout)
    per_job = pl.DataFrame({"job_id": [int(j) for j, _ in jobs], "gavel_jct_s": [float(t) for _, t in jobs]}) if jobs else None
    return dict(wall_s=wall, avg_jct_s=float(found.group(1)), per_job=per_job)


def rows(
    repeat: int = 1,
    trace: Path = TRACE,
    gavel: tuple[Path, str] | None = None,
    skip: bool = True,
    shared=None,
) -> list[dict]:
    """One row per case: the fastest of `repeat` runs (wall and CPU), Gavel's time, the ratio
    (none when Gavel's trace is not at `trace`). With `gavel` (the folder `scheduler/` of Gavel's
    checkout, and the Python to run it with), Gavel's time and JCT are measured now, once per
    case; without, its JCT is the one in `shared`, Gavel's shared results (`shared_results`),
    if given. Ours and Gavel's average JCT are taken over the same jobs, those Gavel gives a
    JCT for. `skip` false turns event skipping off (`skip_rounds = false`)."""
    import polars as pl

    if not trace.exists():
        return []
    trace = trace.resolve()  # (the graphs are in another folder)
    out = []
    with tempfile.TemporaryDirectory(prefix="gavel-msr-") as tmp:
        folder = Path(tmp)
        _write_graphs(folder, trace, skip)
        for i, name in enumerate(CASES):
            runs = [run_once(folder / f"case{i}.sched", folder / f"out{i}-{k}") for k in range(repeat)]
            best = min(runs, key=lambda r: r["wall_s"])
            theirs = run_gavel(gavel[0], gavel[1], GAVEL_POLICIES[name], trace) if gavel else None
            if theirs is not None:
                reference = theirs["per_job"]
            elif shared is not None:
                reference = shared.filter(pl.col("policy") == GAVEL_POLICIES[name])
                reference = reference if reference.height else None
            else:
                reference = None
            compared = None
            if reference is not None:
                compared = same_jobs_jct(pl.read_csv(best["out"] / "jobs.csv", glob=False), reference)
            out.append(_row(name, runs, best, theirs, compared))
    return out


def _row(name: str, runs: list[dict], best: dict, theirs: dict | None, compared: tuple | None) -> dict:
    """A case's figures. `compared`: ours and Gavel's average JCT over the same jobs, and how
    many, when Gavel's per-job JCTs are known; else Gavel's average JCT is the one its simulator
    printed (`theirs`), if it ran, beside ours over all our jobs."""
    gavel_s = theirs["wall_s"] if theirs else GAVEL_SECONDS.get(name)
    if compared is not None:
        ours_jct, their_jct, jct_jobs = compared
    else:
        ours_jct, their_jct, jct_jobs = best["avg_jct_s"], (theirs["avg_jct_s"] if theirs else GAVEL_AVG_JCT_S.get(name)), None
    return dict(
        case=f"Gavel msr 0e4a51, {name}",
        wall_s=best["wall_s"],
        slowest_wall_s=max(r["wall_s"] for r in runs),
        cpu_s=min(r["cpu_s"] for r in runs),
        rounds=best["rounds"],
        skipped=best["skipped"],
        jobs=best["jobs"],
        avg_jct_s=best["avg_jct_s"],
        compared_avg_jct_s=ours_jct,
        compared_jobs=jct_jobs,
        gavel_s=gavel_s,
        gavel_measured_now=theirs is not None,
        gavel_avg_jct_s=their_jct,
        times_faster=None if gavel_s is None else gavel_s / best["wall_s"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--repeat", type=at_least(1), default=1, help="runs per case (the fastest is reported; default 1)")
    parser.add_argument(
        "--data", type=path_option, help=f"the folder of Gavel's reference data (default: {SHARED}, skipped when it is not there)"
    )
    parser.add_argument("--gavel", type=path_option, help="the folder scheduler/ of Gavel's checkout: run its simulator now too")
    parser.add_argument("--gavel-python", help="with --gavel, the Python to run Gavel with (default: this one)")
    args = parser.parse_args()
    exit_on_terminate()  # (`kill PID` stops what it started, as Ctrl-C does)
    compile_bytecode()  # (start-up timed as an installed package's: bench_common.compile_bytecode)
    if args.gavel_python is not None and args.gavel is None:
        parser.error("--gavel-python has no effect without --gavel")
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
        if not (args.gavel / "scripts" / "drivers" / "simulate_scheduler_with_trace.py").is_file():
            parser.error(f"--gavel {args.gavel}: no scripts/drivers/simulate_scheduler_with_trace.py there")
        python = args.gavel_python or sys.executable
        wrong = program_problem(python)
        if wrong:
            parser.error(f"--gavel-python {python}: {wrong}")
        if not (data / THROUGHPUTS).is_file():  # (found now, not when Gavel's simulator fails after our runs)
            parser.error(f"--gavel: Gavel's simulator needs {data / THROUGHPUTS}, which is not there")
        gavel = (args.gavel.resolve(), python)
    try:  # read before anything runs: a bad file is found at once
        shared = None if gavel else shared_results(data)
    except BadReference as err:
        sys.exit(str(err))  # (it names the file, then the error)
    when = "measured now" if gavel else "as measured once (--gavel measures it now)"
    once = f"for {' and '.join(GAVEL_AVG_JCT_S)}: as its simulator printed it on 2026-12-04 (docs/cost-model.md)"
    if gavel:
        jct_from = "measured now"
    elif shared is not None:
        jct_from = f"from Gavel's shared results, {data / RESULTS}; {once}"
    else:
        jct_from = f"not known ({RESULTS} not found in {data}; --gavel measures it now); {once}"
    print("msr 0e4a51 (984 jobs), 36:36:36, 6-minute rounds, whole `roundhouse run --out` in a fresh process")
    print(f"Gavel's simulator: {when}")
    print(f"Gavel's average JCT: {jct_from}")
    print(
        f"{'case':34s} {'wall s':>8s} {'cpu s':>7s} {'rounds':>7s} {'skipped':>8s} {'avg JCT s':>10s} {'Gavel s':>8s} "
        f"{'x faster':>9s} {'Gavel JCT s':>12s} {'JCT jobs':>9s}"
    )
    try:
        measured = rows(args.repeat, data / TRACE.name, gavel, shared=shared)
    except AnchorFailed as err:
        sys.exit(f"error: {err}")
    for row in measured:
        theirs = f"{row['gavel_s']:8.1f}" if row["gavel_s"] else f"{'-':>8s}"
        faster = f"{row['times_faster']:8.1f}x" if row["times_faster"] else f"{'-':>9s}"
        their_jct = f"{row['gavel_avg_jct_s']:12.0f}" if row["gavel_avg_jct_s"] is not None else f"{'-':>12s}"
        ours_jct = f"{row['compared_avg_jct_s']:10.0f}" if row["compared_avg_jct_s"] is not None else f"{'-':>10s}"
        jct_jobs = f"{row['compared_jobs']}/{row['jobs']}" if row["compared_jobs"] is not None else f"all {row['jobs']}"
        wall = f"{row['wall_s']:.2f}" + (f"-{row['slowest_wall_s']:.2f}" if args.repeat > 1 else "")
        print(
            f"{row['case']:34s} {wall:>8s} {row['cpu_s']:7.2f} {row['rounds'] or '-':>7} {row['skipped'] or 0:>8} "
            f"{ours_jct} {theirs} {faster} {their_jct} {jct_jobs:>9s}"
        )
        if row["case"].endswith("LAS"):
            verdict = "met" if row["wall_s"] < LAS_TARGET_S else "MISSED"
            print(f"  LAS target: under {LAS_TARGET_S} s wall: {verdict}")
            if row["times_faster"]:
                verdict = "met" if row["times_faster"] >= LAS_TARGET_TIMES else "MISSED"
                print(f"  LAS target: at least {LAS_TARGET_TIMES}x Gavel's simulator ({when}): {verdict}")
    print(
        "avg JCT s, Gavel JCT s: ours and Gavel's over the same jobs, those Gavel gives a JCT for (it gives none to a job it\n"
        "  fails); JCT jobs: how many, of the jobs we finished (`all N`: Gavel's per-job JCTs are not known, ours is over all)"
    )


if __name__ == "__main__":
    run_script(main)
