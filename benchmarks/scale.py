"""How the engine's cost grows: with active jobs, with cluster size, and at production sizes.

    python benchmarks/scale.py            # every case (the million-job ones take minutes)
    python benchmarks/scale.py --quick    # the small cases only (about a minute)
    python benchmarks/scale.py --only million-160   # one case by name (gavel-msr: Gavel's msr runs)
    python benchmarks/scale.py --no-skip  # the same with event skipping off (skip_rounds=false)
    python benchmarks/scale.py --plot docs/figures/scale.png   # every case, and the docs' plot redrawn
    python benchmarks/scale.py --only alibaba-fifo --alibaba CLUSTERDATA/cluster-trace-gpu-v2020/simulator
                                          # Alibaba's simulator on the same trace too (some 12 minutes a policy)

Each case's trace is generated first, by `roundhouse trace generate` in a process of its own
(Roundhouse's own generator: Philly durations and GPU counts, Poisson arrivals), into a
temporary folder. Each case then runs in a subprocess of its own, so that its peak resident
memory is its own and no generator's: "cli" cases are `roundhouse run GRAPH --out DIR` as the
command line runs it (reading the trace, simulating, writing jobs.csv, summary.json and
explain.parquet), "engine" cases simulate in process (as benchmarks/engine_las.py). The first
table gives wall time (the whole run, start-up included), rounds (ticked and skipped, and of
the skipped ones those carried out in passing: jobs arrived and found room), rounds per second, microseconds per round and peak RSS; the second splits each CLI run into its
phases, with each phase's wall time and its own peak RSS (the kernel's high-water mark, reset
at the start of the phase): start-up (imports, compiling the graph, loading the cluster and
profiles), reading the trace (parsing and checking it, and preparing the job specs), the
simulation, and writing the results. With --plot FILE, a plot of microseconds per round
against the mean number of jobs in the system and against the cluster's GPUs is written to FILE
(docs/figures/scale.png is a full run's: `--plot docs/figures/scale.png`). The Alibaba-shape
cases are printed again beside Alibaba's own simulator (benchmarks/alibaba_sim.py): its README's
figures on its own trace, or with --alibaba its run on the same generated trace, measured now.
--no-skip turns event skipping off in every case, Gavel's included.

Figures depend on the machine and on what else runs on it; compare versions of the code on the
same machine, runs interleaved. This is a script that prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import alibaba_sim  # noqa: E402  (beside this script)
from anchor_run import AnchorFailed  # noqa: E402
from bench_common import compile_bytecode, description, exit_on_terminate, path_option, program_problem, run_child, run_script  # noqa: E402

# name: (group, what, jobs, rate per hour, cluster, policy, placer, how it runs, in --quick)
#   group "active": jobs in the system grow with the number of jobs (overloaded 128 GPUs)
#   group "size": the cluster grows at a fixed 80% offered load
#   group "profiled": the jobs are profiled models in Gavel's format (their rates come from the
#     throughput profile, as a Gavel trace's do), not durations
#   how: "engine" (simulate in process, as benchmarks/engine_las.py) or "cli" (roundhouse run --out)
CASES: dict[str, tuple] = {
    "active-1k": ("active", "1,000 jobs, 8/h, 128 GPUs", 1_000, 8.0, "32x4:V100", "Las", "Consolidated", "engine", True),
    "active-10k": ("active", "10,000 jobs, 8/h, 128 GPUs", 10_000, 8.0, "32x4:V100", "Las", "Consolidated", "engine", True),
    "active-100k": (
        "active",
        "100,000 jobs, 8/h, 128 GPUs (engine_las --full)",
        100_000,
        8.0,
        "32x4:V100",
        "Las",
        "Consolidated",
        "engine",
        False,
    ),
    "size-128": ("size", "128 GPUs, 2,000 jobs at 80% load", 2_000, 3.2, "16x8:V100", "Las", "Consolidated", "engine", True),
    "size-1024": (
        "size",
        "1,024 GPUs, 16,000 jobs at 80% load",
        16_000,
        25.6,
        "128x8:V100",
        "Las",
        "Consolidated",
        "engine",
        True,
    ),
    "size-6400": (
        "size",
        "6,400 GPUs, 100,000 jobs at 80% load",
        100_000,
        160.0,
        "800x8:V100",
        "Las",
        "Consolidated",
        "engine",
        False,
    ),
    "million-160": (
        "headline",
        "1,000,000 jobs, 160/h, 6,400 GPUs (CLI)",
        1_000_000,
        160.0,
        "800x8:V100",
        "Las",
        "Consolidated",
        "cli",
        False,
    ),
    "million-400": (
        "headline",
        "1,000,000 jobs, 400/h (overloaded), 6,400 GPUs (CLI)",
        1_000_000,
        400.0,
        "800x8:V100",
        "Las",
        "Consolidated",
        "cli",
        False,
    ),
    "profiled-100k": (
        "profiled",
        "100,000 Gavel-format jobs (profiled models), 160/h, 6,400 GPUs (CLI)",
        100_000,
        160.0,
        "800x8:V100",
        "Las",
        "Consolidated",
        "cli",
        False,
    ),
    "alibaba-fifo": (
        "alibaba",
        "Alibaba's shape: 20,000 jobs, 1,000/min, 6,500 GPUs, FIFO, backfilling (CLI)",
        20_000,
        60_000.0,
        "1625x4:V100",
        "Fifo(backfill=true)",  # (Alibaba's FIFO tries every queued job in order: it backfills)
        "Consolidated",
        "cli",
        True,
    ),
    "alibaba-sjf": (
        "alibaba",
        "the same, shortest job first (CLI)",
        20_000,
        60_000.0,
        "1625x4:V100",
        "Srtf",
        "Consolidated",
        "cli",
        True,
    ),
}
# The width of the first table's column of what each case is: its longest description.
CASE_WIDTH = max(len(case[1]) for case in CASES.values())
# Gavel's heterogeneity-aware LAS and FIFO on its msr trace, whole CLI runs beside Gavel's own
# simulator, are measured by benchmarks/gavel_msr.py; this script prints its rows as the case
# named here (skipped when Gavel's trace is not beside the project).
GAVEL_CASE = "gavel-msr"
# The policy of Alibaba's simulator that each Alibaba-shape case's policy stands for
# (benchmarks/alibaba_sim.py runs it, or gives its figures from one run on the same jobs).
ALIBABA_POLICIES = {"Fifo(backfill=true)": "FIFO", "Srtf": "SJF"}


def graph_text(trace: Path, cluster: str, policy: str, placer: str, skip: bool) -> str:
    return (
        f'round = 5min;\ncluster = "{cluster}";\nskip_rounds = {"true" if skip else "false"};\n'
        f'src :: TraceSource(path="{trace}");\n'
        f"src -> AcceptAll -> JobPool -> {policy} -> {placer} -> Launch -> m :: JobMetrics;\n"
    )


PHASES = ("start-up", "read", "simulate", "write")


class _Phases:
    """Wall time and peak resident memory of each phase of a run in this process. A phase's
    peak is the kernel's high-water mark of resident memory, reset when the phase begins."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.wall: dict[str, float] = {}
        self.peak_mb: dict[str, float] = {}
        self._at = self.started
        _reset_peak()

    def end(self, phase: str) -> None:
        now = time.perf_counter()
        self.wall[phase] = self.wall.get(phase, 0.0) + now - self._at
        self.peak_mb[phase] = max(self.peak_mb.get(phase, 0.0), _peak_mb())
        self._at = now
        _reset_peak()

    def around(self, module, name: str, before: str | None, after: str | None) -> None:
        """End phase `before` when `module.name` is called and phase `after` when it returns."""
        original = getattr(module, name)

        def timed(*args, **kwargs):
            if before:
                self.end(before)
            out = original(*args, **kwargs)
            if after:
                self.end(after)
            return out

        setattr(module, name, timed)


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:  # "5": reset the peak resident set size (Linux)
            f.write("5")
    except OSError:  # (elsewhere a phase's peak is the peak so far)
        pass


def _peak_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource  # (kilobytes on Linux, bytes on macOS)

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 / (1024 if sys.platform == "darwin" else 1)


def child(name: str, folder: Path, skip: bool) -> None:
    """Run one case in this process and print its figures as one JSON line."""
    group, _, jobs, rate, cluster, policy, placer, how, _ = CASES[name]
    phases = _Phases()
    graph = folder / f"{name}.sched"
    graph.write_text(graph_text(trace_path(folder, jobs, rate, group == "profiled"), cluster, policy, placer, skip))
    if how == "cli":
        import roundhouse.tools.run_cmd as run_cmd
        import roundhouse.traces.formats as formats
        from roundhouse.runtime.world import World
        from roundhouse.tools.cli import main

        # Each hook is looked up where it is called: TraceSource imports the reader when it
        # starts, the world's `prepare` is a method, and the command calls `write_results` by
        # its module's name.
        phases.around(formats, "load_trace", "start-up", None)
        phases.around(World, "prepare", None, "read")
        phases.around(run_cmd, "write_results", "simulate", "write")
        out = folder / f"{name}-out"
        status = main(["run", str(graph), "--out", str(out), "--quiet"])
        if status:
            raise SystemExit(status)
        wall = time.perf_counter() - phases.started
        unseen = [phase for phase in PHASES if phase not in phases.wall]
        if unseen:  # (a hook never called: what it times would be counted in the next phase)
            raise SystemExit(
                f"the phase(s) {', '.join(unseen)} of case {name} were never seen to end: "
                "the function benchmarks/scale.py hooks to time them is no longer called where it looks"
            )
        run = json.loads((out / "run.json").read_text())
        rounds = run["rounds"]
        skipped, passed = run.get("skipped_rounds"), run.get("passed_rounds")
        summary = json.loads((out / "summary.json").read_text())
    else:
        from roundhouse.runtime.compiler import compile_file
        from roundhouse.runtime.simulate import simulate

        result = simulate(compile_file(graph))
        wall = time.perf_counter() - phases.started
        phases.end("simulate")
        rounds, skipped, passed = result.rounds, result.skipped_rounds, result.passed_rounds
        summary = result.reports["m"]["summary"]
    span = summary["end_s"]
    in_system = (summary["avg_jct_s"] or 0.0) * summary["jobs_finished"] / span if span else 0.0  # Little's law
    print(
        json.dumps(
            {
                "name": name,
                "wall_s": wall,
                "rounds": rounds,
                "skipped": skipped,
                "passed": passed,
                "in_system": in_system,
                "peak_rss_mb": max(phases.peak_mb.values()),
                "phases_s": phases.wall,
                "phases_peak_mb": phases.peak_mb,
                "avg_jct_h": (summary["avg_jct_s"] or 0.0) / 3600,
            }
        )
    )


def trace_path(folder: Path, jobs: int, rate: float, profiled: bool = False) -> Path:
    """Where a case's trace is generated: Gavel's format (tab-separated, `.trace`) for profiled jobs."""
    return folder / (f"trace-{jobs}-{rate:g}.trace" if profiled else f"trace-{jobs}-{rate:g}.csv")


def generate_trace(folder: Path, jobs: int, rate: float, profiled: bool = False) -> float:
    """The case's trace, from `roundhouse trace generate` in a process of its own (once per
    jobs, rate and format); returns the seconds it took (0 if the trace was there already)."""
    path = trace_path(folder, jobs, rate, profiled)
    if path.exists():
        return 0.0
    started = time.perf_counter()
    args = [sys.executable, "-m", "roundhouse.tools.cli", "trace", "generate", "-o", str(path)]
    args += ["--jobs", str(jobs), "--rate", f"{rate:g}/h", "--seed", "0"]
    args += ["--models", "blox", "--format", "gavel"] if profiled else []
    done = run_child(args, env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode:
        raise SystemExit(f"generating {path.name} failed:\n{done.stderr}")
    return time.perf_counter() - started


def run_case(name: str, folder: Path, skip: bool) -> dict:
    group, _, jobs, rate, *_ = CASES[name]
    generated = generate_trace(folder, jobs, rate, group == "profiled")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, __file__, "--child", name, "--folder", str(folder)] + ([] if skip else ["--no-skip"])
    done = run_child(args, env=env)
    if done.returncode:
        raise SystemExit(f"case {name} failed:\n{done.stderr}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "generate_s": generated}


# The groups of cases the plot draws: µs per round against the jobs in the system, and against
# the cluster's GPUs.
PLOTTED_GROUPS = ("active", "size")


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, group, x_of, label in (
        (left, "active", lambda r: r["in_system"], "mean jobs in the system (128 GPUs, overloaded)"),
        (
            right,
            "size",
            lambda r: gpus_of(CASES[r["name"]][4]),
            "GPUs (80% load)",
        ),
    ):
        rows = [r for r in results if CASES[r["name"]][0] == group]
        if rows:
            xs = [x_of(r) for r in rows]
            ys = [r["wall_s"] / r["rounds"] * 1e6 for r in rows]
            ax.plot(xs, ys, "o-")
            for x, y, r in zip(xs, ys, rows):
                ax.annotate(r["name"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(bottom=0)
        ax.set_xlabel(label)
        ax.set_ylabel("µs per round (wall)")
        ax.grid(True, alpha=0.3)
    fig.suptitle("Roundhouse engine: cost of a round (LAS, Consolidated, 5-minute rounds)")
    fig.tight_layout()
    # Drawn in memory, then written beside the file and renamed into its place: a failure
    # leaves neither a half-written plot nor a half-overwritten one of an earlier run.
    import io

    from roundhouse.errors import UsageError
    from roundhouse.tools.outputs.whole_file import write_whole

    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix[1:].lower(), dpi=110)
    plt.close(fig)
    try:
        write_whole(path, buffer.getvalue())
    except UsageError as err:
        sys.exit(str(err))


def gpus_of(cluster: str) -> int:
    """The GPUs of a cluster written NODESxGPUS:TYPE."""
    nodes, per_node = cluster.split(":")[0].split("x")
    return int(nodes) * int(per_node)


def print_alibaba_rows(results: list[dict], folder: Path, alibaba: tuple[Path, str] | None) -> None:
    """Alibaba's shape beside Alibaba's simulator on the same generated jobs: run now when
    `alibaba` (its simulator's folder and the Python to run it with) is given, else as it ran
    once on the 2-core machine (docs/cost-model.md); its README's figures (its own trace, its
    authors' machine) are said after, with no ratio."""
    rows = [r for r in results if CASES[r["name"]][0] == "alibaba"]
    if not rows:
        return
    where = (
        "run now on the same trace" if alibaba else "as it ran once on the same jobs, docs/cost-model.md; --alibaba runs it now"
    )
    print(f"\nAlibaba's shape beside Alibaba's simulator ({where})")
    print(f"{'case':14s} {'wall s':>8s} {'avg JCT h':>10s} {'Alibaba s':>10s} {'Alibaba JCT h':>14s} {'x faster':>9s}")
    for r in rows:
        _, _, jobs, rate, cluster, policy, *_ = CASES[r["name"]]
        theirs = ALIBABA_POLICIES[policy]
        if alibaba:
            try:
                measured = alibaba_sim.run_alibaba(
                    *alibaba, theirs, trace_path(folder, jobs, rate), gpus_of(cluster), round(rate / 60), jobs
                )
            except AnchorFailed as err:
                sys.exit(f"error: {err}")
            their_s, their_jct_s = measured["wall_s"], measured["avg_jct_s"]
        else:
            their_s, their_jct_s = alibaba_sim.MEASURED_SAME_JOBS[theirs]
        print(
            f"{r['name']:14s} {r['wall_s']:8.2f} {r['avg_jct_h']:10.2f} {their_s:10.1f} {their_jct_s / 3600:14.2f} "
            f"{their_s / r['wall_s']:8.1f}x",
            flush=True,
        )
    readme = ", ".join(f"{policy} {s:g} s ({jct / 3600:.1f} h)" for policy, (s, jct) in alibaba_sim.README_FIGURES.items())
    print(f"  (its README, on its own shorter jobs: {readme}; no ratio, other jobs)")


def print_gavel_rows(skip: bool) -> None:
    """Gavel's heterogeneity-aware LAS and FIFO on msr 0e4a51, whole CLI runs, with the seconds
    Gavel's own simulator takes (benchmarks/gavel_msr.py)."""
    import gavel_msr

    rows = gavel_msr.rows(skip=skip)
    if not rows:
        print(f"\nGavel's msr trace not found at {gavel_msr.TRACE}: its cases skipped")
        return
    print("\nGavel's msr 0e4a51 (984 jobs, 36:36:36, 6-minute rounds), `roundhouse run --out` in a fresh process")
    print(f"{'case':34s} {'wall s':>8s} {'cpu s':>7s} {'rounds':>7s} {'skipped':>8s} {'Gavel s':>8s} {'x faster':>9s}")
    for row in rows:
        anchor = f"{row['gavel_s']:8.1f}" if row["gavel_s"] else f"{'-':>8s}"
        faster = f"{row['times_faster']:8.1f}x" if row["times_faster"] else f"{'-':>9s}"
        print(
            f"{row['case']:34s} {row['wall_s']:8.2f} {row['cpu_s']:7.2f} {row['rounds'] or '-':>7} "
            f"{row['skipped'] or 0:>8} {anchor} {faster}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--quick", action="store_true", help="the small cases only")
    parser.add_argument(
        "--only", metavar="NAME", action="append", help=f"run only these cases ({', '.join([*CASES, GAVEL_CASE])})"
    )
    parser.add_argument("--no-skip", action="store_true", help="event skipping off (skip_rounds=false)")
    parser.add_argument("--plot", type=path_option, help="write the plot to this file (docs/figures/scale.png is a full run's)")
    parser.add_argument(
        "--alibaba",
        type=path_option,
        help="the folder cluster-trace-gpu-v2020/simulator of Alibaba's clusterdata: run it now too",
    )
    parser.add_argument("--alibaba-python", help="with --alibaba, the Python to run it with (default: this one)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick and args.only:  # (else `--quick --only million-160` runs a million jobs)
        parser.error("--quick has no effect with --only (which runs the cases named, small or not)")
    exit_on_terminate()  # (`kill PID` stops what it started, as Ctrl-C does)
    compile_bytecode()  # (start-up timed as an installed package's: bench_common.compile_bytecode)
    if args.child:
        child(args.child, args.folder, not args.no_skip)
        return
    # (a case named twice is run once: its row and its point in the plot are not doubled)
    names = (
        list(dict.fromkeys(args.only))
        if args.only
        else [*(n for n, case in CASES.items() if case[8] or not args.quick), GAVEL_CASE]
    )
    unknown = [n for n in names if n not in CASES and n != GAVEL_CASE]
    if unknown:
        parser.error(f"--only: unknown case(s) {', '.join(map(repr, unknown))}; the cases are {', '.join([*CASES, GAVEL_CASE])}")
    if args.plot is not None:
        # Checked before the cases run, which can take minutes.
        plotted = [n for n, case in CASES.items() if case[0] in PLOTTED_GROUPS]
        if not any(n in plotted for n in names):
            parser.error(f"--plot has no effect: no case it draws is run (they are {', '.join(plotted)})")
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        from roundhouse.errors import UsageError
        from roundhouse.runtime.files import check_output_file

        if args.plot.is_dir() or args.plot.suffix[1:].lower() not in FigureCanvasAgg.get_supported_filetypes():
            parser.error(f"--plot {args.plot}: give a file ending in .png, .svg or .pdf")
        try:
            check_output_file(args.plot, "--plot")
        except UsageError as err:
            parser.error(str(err))
    gavel = GAVEL_CASE in names
    alibaba = None
    if args.alibaba_python is not None and args.alibaba is None:
        parser.error("--alibaba-python has no effect without --alibaba")
    if args.alibaba is not None:
        alibaba_cases = [n for n, case in CASES.items() if case[0] == "alibaba"]
        if not any(n in alibaba_cases for n in names):
            parser.error(f"--alibaba has no effect: no Alibaba-shape case is run (they are {', '.join(alibaba_cases)})")
        wrong = alibaba_sim.check_folder(args.alibaba)
        if wrong:
            parser.error(f"--alibaba {args.alibaba}: {wrong}")
        python = args.alibaba_python or sys.executable
        wrong = program_problem(python)
        if wrong:
            parser.error(f"--alibaba-python {python}: {wrong}")
        alibaba = (args.alibaba.resolve(), python)
    names = [n for n in names if n != GAVEL_CASE]
    if names:  # (`--only gavel-msr`: Gavel's table alone, not this one's header over no row)
        print(
            f"{'case':{CASE_WIDTH}s} {'wall s':>8s} {'rounds':>9s} {'skipped':>9s} {'passed':>9s} {'rounds/s':>9s} {'us/round':>9s} {'in system':>10s} {'peak RSS':>9s}"
        )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            r = run_case(name, Path(tmp), not args.no_skip)
            results.append(r)
            skipped, passed = ("" if r[k] is None else f"{r[k]:,}" for k in ("skipped", "passed"))
            print(
                f"{CASES[name][1]:{CASE_WIDTH}s} {r['wall_s']:8.2f} {r['rounds']:9,} {skipped:>9s} {passed:>9s} {r['rounds'] / r['wall_s']:9,.0f} "
                f"{r['wall_s'] / r['rounds'] * 1e6:9.0f} {r['in_system']:10,.0f} {r['peak_rss_mb']:7.0f} MB",
                flush=True,
            )
        print_alibaba_rows(results, Path(tmp), alibaba)
    cli = [r for r in results if CASES[r["name"]][7] == "cli"]
    if cli:
        print("\nCLI runs by phase: wall seconds, and each phase's own peak RSS in MB")
        print(f"{'case':14s}" + "".join(f" {phase:>18s}" for phase in PHASES))
        for r in cli:
            cells = "".join(f" {r['phases_s'].get(p, 0.0):9.2f} s {r['phases_peak_mb'].get(p, 0.0):5.0f} MB" for p in PHASES)
            print(f"{r['name']:14s}{cells}")
    if gavel:
        print_gavel_rows(not args.no_skip)
    if args.plot is not None:
        plot(results, args.plot)
        print(f"\nplot written to {args.plot}")


if __name__ == "__main__":
    run_script(main)
