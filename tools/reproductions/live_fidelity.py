"""Blox §7, Fig. 18: the simulator against the live runtime, on the same graph and jobs.

Blox ran 100 jobs (FIFO, first-free placement) on a 32-GPU EC2 cluster and in its simulator,
calibrated with profiled throughputs and launch/preemption overheads, and found the per-job JCT
differed by 6.1% on average (the 25th, 50th and 75th percentiles of the JCT distributions by
1.7%, 5.8% and 2.2%).

Ours is the same experiment at loopback scale: `roundhouse profile` measures the example
workloads here (two at a time, as the two fake GPUs share this machine's CPUs) and the launch
and checkpoint overheads; a trace of short single-GPU jobs then runs through one graph (Fifo,
FirstFree) twice: simulated with that profile and those overheads, and live on a scheduler and
two agents with one fake GPU each, real training processes included.
"""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import numpy as np
import polars as pl

from roundhouse.tools.reproductions import Comparison, ExperimentFailed, Report, experiment
from roundhouse.tools.reproductions._runs import save_figure

MODELS = ("ResNet-18", "LM", "Recommendation")


def _trace(rates: dict[str, float], jobs: int, seed: int, run_s: tuple[float, float], gap_s: float) -> pl.DataFrame:
    """Single-GPU jobs of the three models, each sized to take `run_s` seconds alone on a
    profiled GPU, arriving as a Poisson process with mean gap `gap_s`."""
    rng = np.random.default_rng(seed)
    models = [MODELS[i % len(MODELS)] for i in range(jobs)]
    seconds = rng.uniform(*run_s, size=jobs)
    arrivals = np.concatenate([[0.0], np.cumsum(rng.exponential(gap_s, size=jobs - 1))])
    return pl.DataFrame(
        {
            "job_id": np.arange(jobs),
            "arrival_s": np.round(arrivals, 1),
            "gpus": np.ones(jobs, dtype=np.int64),
            "model": models,
            "iterations": [float(math.ceil(rates[m] * s)) for m, s in zip(models, seconds)],
        }
    )


def graph_text(round_s: float, restore_s: float, checkpoint_s: float) -> str:
    return f"""// Blox §7 fidelity setup at loopback scale: the same graph, simulated and live.
round = {round_s:g}s;
restore = {restore_s:.2f}s;
checkpoint = {checkpoint_s:.2f}s;
cluster = "2x1:V100";
profile = "profile.csv";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def compare(sim: pl.DataFrame, live: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, float]]:
    both = sim.select("job_id", pl.col("jct_s").alias("sim_jct_s"), pl.col("first_start_s").alias("sim_start_s")).join(
        live.select("job_id", pl.col("jct_s").alias("live_jct_s"), pl.col("first_start_s").alias("live_start_s")), on="job_id"
    )
    both = both.with_columns(diff=(pl.col("sim_jct_s") - pl.col("live_jct_s")).abs() / pl.col("live_jct_s"))
    s, v = both["sim_jct_s"].to_numpy(), both["live_jct_s"].to_numpy()
    figures = {"mean_job_diff": float(both["diff"].mean())}
    for q in (25, 50, 75):
        a, b = np.percentile(s, q), np.percentile(v, q)
        figures[f"p{q}_diff"] = abs(a - b) / b
    figures["sim_avg_jct_s"], figures["live_avg_jct_s"] = float(s.mean()), float(v.mean())
    return both, figures


@experiment(
    "live-fidelity",
    "Simulator fidelity: one graph and trace, simulated and run live on loopback",
    "Blox (EuroSys'24) §7, Fig. 18",
)
def run(out_dir: Path, quick: bool) -> Report:
    from roundhouse.agents.profiler import ProfileResult, profile
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate
    from roundhouse.tools.loopback import Loopback

    out_dir = Path(out_dir)
    # The quick run is a smoke test of the whole path (profile, live run, calibrated simulation),
    # sized to be short (the tests run it): four jobs of two to four rounds each; its figures are
    # noisier than the full run's.
    jobs = 4 if quick else 12
    seconds = 2.0 if quick else 8.0
    # Each model beside each of the others is nine measurements, each starting three training
    # processes; the quick run measures each beside a copy of itself (three), which is most of
    # its time saved and still goes through every step.
    beside = None if quick else list(MODELS)
    before = profile(list(MODELS), gpus=[1], gpu_type="V100", seconds=seconds, concurrent=2, log=lambda s: None, beside=beside)
    rates = {m.model: m.iters_per_s for m in before.measurements}
    # Rounds must outlast the overheads (the simulator's rule) and be short beside the jobs.
    # (The quick run's jobs last two to four of its usual 4 s rounds: enough to pass the whole path.)
    run_s = (8.0, 16.0) if quick else (30.0, 90.0)
    trace = _trace(rates, jobs, seed=5, run_s=run_s, gap_s=4.0 if quick else 15.0)
    trace.write_csv(out_dir / "trace.csv")
    round_s = max(4.0, math.ceil(before.fresh_launch_s + before.checkpoint_s + 1.5))
    # The live run reads the profile measured before it (Fifo and FirstFree decide without
    # throughputs, so it only sizes the jobs); the simulation reads the calibrated one below.
    (out_dir / "profile.csv").write_text(before.csv("measured by the live-fidelity reproduction, before the live run"))
    (out_dir / "graph.sched").write_text(graph_text(round_s, before.fresh_launch_s, before.checkpoint_s))

    import shutil

    shutil.rmtree(out_dir / "live", ignore_errors=True)  # a fresh run, not a resumed journal
    with Loopback(out_dir / "live", out_dir / "graph.sched", serve_args=("--checkpoint-every", "0")) as cluster:
        cluster.start_scheduler()
        cluster.start_agent("node-a", gpus="1:V100")
        cluster.start_agent("node-b", gpus="1:V100")
        timeout = 120 + 2 * float(trace["arrival_s"].max()) + 4 * run_s[1] * jobs
        try:
            status = cluster.wait_exit("scheduler", timeout=timeout)
        except TimeoutError:
            raise ExperimentFailed(f"the live run did not end within {timeout:.0f} s; {_logs(cluster)}") from None
        if status != 0:
            raise ExperimentFailed(f"the live run failed (the scheduler's exit status {status}); {_logs(cluster)}")
    live_jobs = pl.read_csv(out_dir / "live" / "out" / "jobs.csv", glob=False)

    # Calibrate: the machine measured just before and just after the live run (other work on a
    # shared machine changes what the jobs get), averaged; then simulate.
    after = profile(list(MODELS), gpus=[1], gpu_type="V100", seconds=seconds, concurrent=2, log=lambda s: None, beside=beside)
    calibrated = ProfileResult(
        "V100",
        2,
        beside=before.beside,
        measurements=tuple(
            attrs.evolve(
                b,
                iters_per_s=(b.iters_per_s + a.iters_per_s) / 2,
                launch_s=(b.launch_s + a.launch_s) / 2,
                resume_s=(b.resume_s + a.resume_s) / 2,
                checkpoint_s=(b.checkpoint_s + a.checkpoint_s) / 2,
            )
            for b, a in zip(before.measurements, after.measurements)
        ),
    )
    (out_dir / "profile.csv").write_text(
        calibrated.csv("measured by the live-fidelity reproduction, before and after the live run (mean)")
    )
    restore, checkpoint = calibrated.fresh_launch_s, calibrated.checkpoint_s
    (out_dir / "graph.sched").write_text(graph_text(round_s, restore, checkpoint))
    sim = simulate(compile_file(out_dir / "graph.sched"))
    sim_jobs = sim.reports["m"]["jobs"]
    sim_jobs.write_csv(out_dir / "sim-jobs.csv")
    drift = {b.model: a.iters_per_s / b.iters_per_s - 1 for b, a in zip(before.measurements, after.measurements)}
    rates = {m.model: m.iters_per_s for m in calibrated.measurements}
    table, figures = compare(sim_jobs, live_jobs)
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    note = (
        f"{jobs} single-GPU jobs ({run_s[0]:g}-{run_s[1]:g} s each alone) on 2 fake GPUs sharing a 2-core machine, Fifo + FirstFree, "
        f"{round_s:g} s rounds; profiled {', '.join(f'{m} {r:.0f} it/s' for m, r in rates.items())}, launch {restore:.2f} s"
    )
    report = Report(
        comparisons=[
            Comparison(
                "average per-job JCT difference, simulated vs live",
                "6.1% (100 jobs, 32 V100s)",
                pct(figures["mean_job_diff"]),
                "target: within 10%; " + note,
            ),
            Comparison(
                "25th / 50th / 75th percentile JCT difference",
                "1.7% / 5.8% / 2.2%",
                " / ".join(pct(figures[f"p{q}_diff"]) for q in (25, 50, 75)),
            ),
            Comparison(
                "average JCT, simulated / live", "", f"{figures['sim_avg_jct_s']:.1f} s / {figures['live_avg_jct_s']:.1f} s"
            ),
        ],
        tables={"jct": table},
        notes=[
            "Timing on a shared machine is noisy: other processes slow the live jobs but not the simulator. The "
            "profile is measured just before and just after the live run and averaged; the change between the two "
            "measurements (" + ", ".join(f"{m} {100 * d:+.0f}%" for m, d in drift.items()) + ") shows how much the "
            "machine itself moved during the run.",
        ],
    )
    report.figures.append(_plot(table, out_dir / "jct-cdf.png"))
    return report


def _logs(cluster) -> str:
    """Where the live run's logs are, and the scheduler's last lines (its error, if it gave one)."""
    lines = [line for line in cluster.log("scheduler").splitlines() if line.strip()][-5:]
    return f"the logs are in {cluster.folder}; the scheduler's last lines:\n" + "\n".join(f"  {line}" for line in lines)


def _plot(table: pl.DataFrame, path: Path) -> Path:
    def draw(ax):
        for column, label in (("sim_jct_s", "simulator"), ("live_jct_s", "live (loopback)")):
            values = np.sort(table[column].to_numpy())
            ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=label)
        ax.set_xlabel("JCT (s)")
        ax.set_ylabel("fraction of jobs")
        ax.set_title("Fidelity: same graph and jobs (cf. Blox Fig. 18)")
        ax.legend()

    return save_figure(path, draw, size=(5, 3.4))
