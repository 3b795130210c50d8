"""ResourceUsage, LossTermination and Launch: shared GPUs, rounds jumped over, event skipping
with loss-based termination, suspended jobs, and what a gate sees of an ended job."""

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.simulation import Simulation
from roundhouse.traces.jobs import FINISHED, PENDING
from tests.conftest import jobs_of, write_trace


def curve(fraction: float, threshold: float = 0.001) -> dict:
    """A loss curve from 5 to 1 that comes within `threshold` after `fraction` of the work."""
    return {"loss_start": 5.0, "loss_final": 1.0, "loss_speed": ((4.0 / threshold) - 1.0) / fraction}


NO_CURVE = {"loss_start": None, "loss_final": None, "loss_speed": None}


def compiled(tmp_path, text: str, jobs: list[dict] | None = None):
    if jobs is not None:
        write_trace(tmp_path / "trace.csv", jobs)
    (tmp_path / "g.sched").write_text(text)
    return compile_file(tmp_path / "g.sched", ())


# --- ResourceUsage ---


def test_resource_usage_counts_a_gpu_two_jobs_share_once(tmp_path):
    # With space sharing, both jobs of a pair hold the GPU: the fraction went up to 2.0.
    graph = compiled(
        tmp_path,
        'round = 6min;\nskip_rounds = false;\ncluster = "2:2:2";\n'
        "src :: PoissonSource(rate=12/h, jobs=12, gpus=single, models=blox, seed=3);\n"
        "src -> AcceptAll -> JobPool -> MaxMinFairness(space_sharing=true, interval=0) -> mech :: GavelRounds"
        " -> GavelPlacer -> run :: Launch -> m :: JobMetrics;\nrun -> u :: ResourceUsage;\n",
    )
    busy, pairs = [], []

    def seen(ctx):
        busy.append(np.count_nonzero(np.asarray(ctx.holder) >= 0) / ctx.cluster.n_gpus)
        co = ctx.co_holder
        pairs.append(0 if co is None else int(np.count_nonzero(np.asarray(co) >= 0)))

    result = simulate(graph, until=2 * 3600.0, on_round=seen)
    usage = result.reports["u"]["usage"]
    assert sum(pairs) > 0  # jobs shared GPUs
    assert usage["gpu"].to_list() == pytest.approx(busy)
    assert usage["gpu"].max() <= 1.0


def test_resource_usage_has_a_row_for_each_round_jumped_over_with_no_job(tmp_path):
    # Between job 0's end and job 1's arrival the system is empty and the run jumps: those
    # rounds had no row, and the gpu column's mean was not the average over time.
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, duration_s=250.0),
        dict(job_id=1, arrival_s=5000.0, gpus=2, duration_s=150.0),
    ]
    graph = compiled(
        tmp_path,
        'round = 100s;\ncluster = "1x2:V100";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> run :: Launch -> m :: JobMetrics;\n"
        "run -> u :: ResourceUsage;\n",
        jobs,
    )
    result = simulate(graph)
    usage = result.reports["u"]["usage"]
    times = usage["time_s"].to_numpy()
    assert times[0] == 0.0 and times[-1] == result.end_s
    assert np.allclose(np.diff(times), 100.0)  # one row per round, none left out
    assert usage.height == result.counters["u"]["rounds"] == 53  # 0 s to 5200 s
    gap = usage.filter((pl.col("time_s") > 300.0) & (pl.col("time_s") < 5000.0))
    assert gap.height == 46 and gap["running"].sum() == 0 and gap["gpu"].sum() == 0.0
    assert usage.filter(pl.col("time_s") >= 5000.0)["gpu"].to_list() == [1.0, 1.0, 0.0]


def test_resource_usage_lets_rounds_be_skipped_with_the_same_table(tmp_path):
    # It declared no quiet time: a graph with it ticked every round. The rounds passed now take
    # the row of the round before them, as their ticks would have recorded.
    text = MIXED.replace("round = 100s", "round = 77.7s") + "run -> u :: ResourceUsage;\n"
    jobs = _mixed_jobs(25)
    on = simulate(compiled(tmp_path, text, jobs))
    off = simulate(compiled(tmp_path, text + "skip_rounds = false;\n", jobs))
    assert on.skipped_rounds > 0 and off.skipped_rounds == 0
    assert on.counters == off.counters
    assert on.reports["u"]["usage"].equals(off.reports["u"]["usage"])
    assert np.allclose(np.diff(on.reports["u"]["usage"]["time_s"].to_numpy()), 77.7)


# --- LossTermination and event skipping ---

MIXED = """round = 100s;
cluster = "2x4:V100";
checkpoint_per_gpu = 7s;
src :: TraceSource(path="trace.csv");
stop :: LossTermination(threshold=0.002);
run :: Launch;
src -> AcceptThreshold(factor=1.0x) -> JobPool -> stop -> Las -> Consolidated -> run -> m :: JobMetrics;
stop [converged] -> [finish] run;
"""


def _mixed_jobs(n: int = 40) -> list[dict]:
    rng = np.random.default_rng(5)
    jobs, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(400.0))
        job = {
            "job_id": i,
            "arrival_s": round(t, 3),
            "gpus": int(rng.choice([1, 1, 2, 4])),
            "duration_s": float(rng.integers(200, 20000)),
        }
        if rng.random() < 0.8:
            job.update(curve(float(rng.choice([0.4, 1.0, 0.05, 0.77])), 0.002))
        else:
            job.update(NO_CURVE)
        jobs.append(job)
    return jobs


@pytest.mark.parametrize("round_s", ["100s", "77.7s"])
def test_loss_termination_lets_rounds_be_skipped_with_the_same_results(tmp_path, round_s):
    # It declared no quiet time: a graph with it ticked every round.
    jobs = _mixed_jobs(25)
    text = MIXED.replace("round = 100s", f"round = {round_s}")
    results = {}
    for skip in ("true", "false"):
        results[skip] = simulate(compiled(tmp_path, text + f"skip_rounds = {skip};\n", jobs))
    on, off = results["true"], results["false"]
    assert on.skipped_rounds > 0 and off.skipped_rounds == 0
    assert on.counters == off.counters and on.counters["stop"]["terminated"] > 0
    assert on.end_s == off.end_s
    assert on.reports["m"]["jobs"].equals(off.reports["m"]["jobs"])


def _reported_loss_graph(cluster: str, policy: str) -> str:
    """LossTermination ahead of `policy`, every round ticked: losses are set from outside (as a
    live job reports them), which a skipped round would not see."""
    return (
        f'round = 100s;\nskip_rounds = false;\ncluster = "{cluster}";\nsrc :: TraceSource(path="trace.csv");\n'
        "stop :: LossTermination(threshold=0.001);\nrun :: Launch;\n"
        f"src -> AcceptAll -> JobPool -> stop -> {policy} -> FirstFree -> run -> m :: JobMetrics;\n"
        "stop [converged] -> [finish] run;\n"
    )


def test_a_suspended_job_whose_loss_is_within_the_threshold_is_ended(tmp_path):
    # Job 0 (no curve) runs, then Las suspends it for job 1; a live job's last report can come
    # after its suspension: here its loss is set while it waits. It is ended from the queue.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 5000.0, **NO_CURVE},
        {"job_id": 1, "arrival_s": 250.0, "gpus": 1, "duration_s": 5000.0, **curve(1.0)},
    ]
    # (A report from outside, as in a live run, which never skips rounds.)
    compiled(tmp_path, _reported_loss_graph("1x1:V100", "Las"), jobs)
    sim = Simulation(tmp_path / "g.sched")
    sim.run_until(400.0)
    world = sim.world
    status = world.jobs.column("status")
    assert status[0] == PENDING and world.jobs.column("run_s")[0] > 0  # suspended after it ran
    world.apply_metrics({0: {"loss": 1.0005, "loss_final": 1.0}})
    result = sim.run()
    got = jobs_of(result, "m")
    assert world.jobs.column("status")[0] == FINISHED
    assert got[0]["finish_s"] == 400.0 and got[0]["run_s"] == pytest.approx(300.0)
    assert result.counters["stop"]["terminated"] == 1 and result.counters["run"]["completed"] == 1


def test_a_final_loss_below_zero_is_a_distance_from_its_size(tmp_path):
    # A live job may report a negative final loss (a log-likelihood, say): within 0.1% of -1 is
    # -0.9995. The test (loss - final) <= threshold * final never held for it.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 5000.0, **NO_CURVE},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0, **curve(1.0)},
    ]
    compiled(tmp_path, _reported_loss_graph("1x2:V100", "Fifo"), jobs)
    sim = Simulation(tmp_path / "g.sched")
    sim.run_until(300.0)
    sim.world.apply_metrics({0: {"loss": -0.9995, "loss_final": -1.0}})
    result = sim.run()
    assert jobs_of(result, "m")[0]["finish_s"] == 300.0
    assert result.counters["stop"]["terminated"] == 1


def test_a_job_ended_by_loss_frees_the_gate_a_round_after_one_that_completes(tmp_path):
    # As the docstrings say: the ended job's GPU counts against AcceptThreshold's limit for one
    # more round; a job that completes its work at the same boundary frees it at once.
    text = (
        'round = 100s;\ncluster = "1x1:V100";\nsrc :: TraceSource(path="trace.csv");\n'
        "stop :: LossTermination(threshold=0.001);\nrun :: Launch;\n"
        "src -> AcceptThreshold(factor=0.5x) -> JobPool -> stop -> Fifo -> FirstFree -> run -> m :: JobMetrics;\n"
        "stop [converged] -> [finish] run;\n"
    )
    waiting = {"job_id": 1, "arrival_s": 1.0, "gpus": 1, "duration_s": 300.0, **curve(1.0)}
    ended = jobs_of(
        simulate(
            compiled(tmp_path, text, [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0, **curve(0.4)}, waiting])
        )
    )
    completed = jobs_of(
        simulate(
            compiled(tmp_path, text, [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 400.0, **curve(1.0)}, waiting])
        )
    )
    assert ended[0]["finish_s"] == completed[0]["finish_s"] == 400.0
    assert completed[1]["first_start_s"] == 400.0
    assert ended[1]["first_start_s"] == 500.0


def test_a_tiny_threshold_skips_rounds_without_a_warning(tmp_path):
    # The quiet time of a threshold so small that no job ever converges: numpy's overflow
    # warning reached the user's terminal.
    import warnings

    text = MIXED.replace("threshold=0.002", "threshold=1e-320")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = simulate(compiled(tmp_path, text, _mixed_jobs(10)))
    assert result.counters["stop"]["terminated"] == 0 and result.skipped_rounds > 0
