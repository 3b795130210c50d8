"""The metrics sinks against hand computations on tiny traces: JobMetrics' summary,
finish-time fairness of jobs ended early or left unfinished, effective throughput across idle
stretches the clock jumps over."""

from __future__ import annotations

import json

import polars as pl
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate


def _run(tmp_path, rows: list[dict], body: str, cluster: str = "1x4:V100", until: float | None = None):
    pl.DataFrame(rows).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        f'round = 5min;\ncluster = "{cluster}";\nsrc :: TraceSource(path="trace.csv");\nrun :: Launch;\n{body}'
    )
    return simulate(compile_file(tmp_path / "g.sched"), until=until)


FIFO = "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> run -> m :: JobMetrics;\n"


def _job(i, arrival, gpus, duration, **extra):
    return dict(job_id=i, arrival_s=float(arrival), gpus=gpus, duration_s=float(duration), **extra)


def test_job_metrics_summary_matches_a_hand_computation(tmp_path):
    # 4 GPUs, 5-minute rounds, FIFO without backfill: 0 and 1 start at 0 (2 GPUs each) and end at
    # 600 and 900; 2 (4 GPUs, seen at 300) waits for both and runs 900-1200; 3 (seen at 900)
    # waits behind it and runs 1200-2400.
    jobs = [_job(0, 0, 2, 600), _job(1, 0, 2, 900), _job(2, 100, 4, 300), _job(3, 700, 1, 1200)]
    summary = _run(tmp_path, jobs, FIFO).reports["m"]["summary"]
    jct = [600.0, 900.0, 1100.0, 1700.0]
    assert summary["avg_jct_s"] == pytest.approx(sum(jct) / 4)
    assert summary["median_jct_s"] == pytest.approx(1000.0)
    assert summary["p95_jct_s"] == pytest.approx(1100 + 0.85 * 600)  # (linear interpolation)
    assert summary["avg_queue_s"] == pytest.approx((0 + 0 + 800 + 500) / 4)
    assert summary["makespan_s"] == pytest.approx(2400.0)
    busy = 2 * 600 + 2 * 900 + 4 * 300 + 1 * 1200
    assert summary["utilization"] == pytest.approx(busy / (4 * 2400))


def test_effective_throughput_counts_the_idle_rounds_the_clock_jumps_over(tmp_path):
    # Two 4-GPU jobs of 300 s, 3000 s apart: the cluster is busy 600 s of the 3300 s from the
    # first start to the last finish. The rounds between, with no job in the system, are not
    # ticked (the clock jumps), yet they are rounds of no work in the series and its average.
    jobs = [_job(0, 0, 4, 300), _job(1, 3000, 4, 300)]
    result = _run(tmp_path, jobs, FIFO + "run -> tp :: EffectiveThroughput;\n")
    report = result.reports["tp"]
    series = report["throughput_series"]
    assert series["time_s"].to_list() == [300.0 * k for k in range(11)]
    assert series["total"].to_list() == [4.0] + [0.0] * 9 + [4.0]
    assert report["throughput"]["avg_effective_throughput"] == pytest.approx(4 * 600 / 3300)
    assert report["throughput"]["rounds"] == 11


def test_rho_of_a_job_ended_early_is_over_the_work_it_did(tmp_path):
    # Two one-GPU jobs alone on two GPUs, each on its own GPU the whole time: both got at least
    # their fair share, rho 1. Job 1's loss converges within its first round, so
    # LossTermination ends it at 300 s, a tenth of its declared work: its time alone is that
    # of the work it did (300 s), not of all it declared (3000 s, which made rho 0.1).
    loss = dict(model="LM", batch_size=40, loss_start=4.46, loss_final=0.7471)
    jobs = [_job(0, 0, 1, 3000, **loss, loss_speed=100.0), _job(1, 0, 1, 3000, **loss, loss_speed=1e5)]
    body = (
        "src -> AcceptAll -> JobPool -> stop :: LossTermination(threshold=0.01) -> Fifo -> Consolidated -> run -> m :: JobMetrics;\n"
        "stop [converged] -> [finish] run;\nrun -> ftf :: FinishTimeFairnessMetrics;\n"
    )
    result = _run(tmp_path, jobs, body, cluster="1x2:V100")
    per_job = result.reports["ftf"]["rho_per_job"]
    assert result.reports["m"]["jobs"]["jct_s"].to_list() == [3000.0, 300.0]
    assert per_job["isolated_s"].to_list() == pytest.approx([3000.0, 300.0])
    assert per_job["rho"].to_list() == pytest.approx([1.0, 1.0])
    assert result.reports["ftf"]["rho"]["unfair_pct"] == 0.0


def test_rho_summary_says_how_many_jobs_it_is_over(tmp_path):
    # Cut at 20 minutes: 0, 1 and 2 have finished, 3 is still running. Its rho is unknown, and
    # the summary says one measured job has none beside the three that have.
    jobs = [_job(0, 0, 2, 600), _job(1, 0, 2, 900), _job(2, 100, 4, 300), _job(3, 700, 1, 1200)]
    result = _run(tmp_path, jobs, FIFO + "run -> ftf :: FinishTimeFairnessMetrics;\n", until=1000)
    rho = result.reports["ftf"]["rho"]
    assert (rho["jobs"], rho["without_rho"]) == (3, 1)
    assert result.reports["ftf"]["rho_per_job"]["job_id"].to_list() == [0, 1, 2]
    # Job 0: in the system 0-600 with 2 jobs then 3 (2 seen at 300): n = 2.5, a share of
    # 4 / 2.5 / 2 = 0.8 of its 2 GPUs, 750 s alone; rho 600 / 750.
    assert result.reports["ftf"]["rho_per_job"]["rho"][0] == pytest.approx(0.8)
    json.dumps(rho, allow_nan=False)  # (valid JSON: no NaN or inf)
