"""Optimus (loss-curve fits, elastic GPU allocation) and Themis (finish-time fairness)."""

import numpy as np
import pytest

from roundhouse.elements.policies.optimus import fit_loss_curves
from tests.conftest import jobs_of


def test_fit_recovers_exact_curves():
    x = np.array([[0.0, 100.0, 200.0, 400.0, 800.0, 0, 0, 0], [0.0, 10.0, 20.0, 30.0, 0, 0, 0, 0]])
    valid = np.array([[1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0]], dtype=bool)
    truth = [(0.002, 0.5, 0.7), (0.3, 0.25, 1.5)]
    loss = np.zeros_like(x)
    for i, (b0, b1, b2) in enumerate(truth):
        loss[i] = 1.0 / (b0 * x[i] + b1) + b2
    b0, b1, b2 = fit_loss_curves(x, loss, valid)
    for i, (t0, t1, t2) in enumerate(truth):
        assert b2[i] == pytest.approx(t2, rel=0.05)
        assert b0[i] == pytest.approx(t0, rel=0.15)
        assert b1[i] == pytest.approx(t1, rel=0.15)
    # Too few usable points for a positive curve: no fit.
    flat = fit_loss_curves(np.array([[0.0, 1.0, 2.0]]), np.array([[1.0, 1.0, 1.0]]), np.ones((1, 3), dtype=bool))
    assert np.isnan(flat[0][0])


OPTIMUS = """
round = 5min;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> o :: Optimus -> Consolidated -> Launch -> m :: JobMetrics;
"""


def test_optimus_gives_free_gpus_where_they_speed_jobs_up(run_graph):
    # Alone on a 4-GPU node, a 1-GPU ResNet-18 job gets more GPUs (the profile says it runs
    # faster on 2 and 4 consolidated GPUs), so it finishes sooner than its 1-GPU duration.
    job = [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 20000.0, "model": "ResNet-18", "batch_size": 32}]
    alone = run_graph(OPTIMUS, job, cluster="1x4:V100")
    assert alone.counters["o"]["extra_gpus"] >= 0
    assert jobs_of(alone)[0]["jct_s"] < 0.5 * 20000.0
    fifo = run_graph(OPTIMUS.replace("o :: Optimus", "o :: Fifo"), job, cluster="1x4:V100")
    assert jobs_of(fifo)[0]["jct_s"] == pytest.approx(20000.0, rel=0.02)


def test_optimus_serves_jobs_by_expected_remaining_time(run_graph):
    # One GPU; the shorter job runs first whatever the arrival order (no loss reports: the
    # declared work is the estimate, as in Blox).
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 3000.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 600.0},
    ]
    got = jobs_of(run_graph(OPTIMUS, jobs, cluster="1x1:V100"))
    assert got[1]["first_start_s"] == 0.0 and got[0]["first_start_s"] == 600.0


def test_optimus_reads_remaining_work_from_the_fitted_loss_curve(run_graph):
    # Two GPUs. Jobs 0 and 1 (6000 s of declared work each) run side by side and report
    # losses; job 1's loss is within 0.1% of its floor after 10% of its work. When job 2
    # (4000 s) arrives at 1200 s, one of them must make room: Optimus expects job 1 to be done
    # (its fitted curve has converged) and preempts job 0, whose remaining time is the longest.
    # Without loss reports it would expect 4800 s from both and preempt job 1 (the later one).
    curves = {"loss_start": 5.0, "loss_final": 1.0}
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 6000.0, **curves, "loss_speed": 3999.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 6000.0, **curves, "loss_speed": 39990.0},
        {"job_id": 2, "arrival_s": 1200.0, "gpus": 1, "duration_s": 4000.0, **curves, "loss_speed": 3999.0},
    ]
    result = run_graph(OPTIMUS, jobs, cluster="1x2:V100")
    got = jobs_of(result, "m")
    assert got[0]["preemptions"] == 1 and got[1]["preemptions"] == 0
    blind = [{k: v for k, v in job.items() if not k.startswith("loss")} for job in jobs]
    got = jobs_of(run_graph(OPTIMUS, blind, cluster="1x2:V100"), "m")
    assert got[0]["preemptions"] == 0 and got[1]["preemptions"] == 1


THEMIS = """
round = 100s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> f :: Themis -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_finish_time_fairness_serves_the_worst_off_job(run_graph):
    # One GPU. A long job runs alone; a short one arrives: with two jobs each deserves half the
    # GPU, and the waiting short job's rho overtakes the running long job's, so it preempts it.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 5000.0},
        {"job_id": 1, "arrival_s": 250.0, "gpus": 1, "duration_s": 300.0},
    ]
    result = run_graph(THEMIS, jobs, cluster="1x1:V100")
    got = jobs_of(result, "m")
    assert got[1]["finish_s"] <= 1000.0
    assert got[0]["preemptions"] >= 1
    fairness = result.reports["f"]["fairness"]
    assert fairness["jobs"] == 2 and fairness["max_rho"] >= fairness["avg_rho"] > 0
    assert result.counters["f"]["max_rho"] > 0
