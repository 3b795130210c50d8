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
    assert result.counters["f"]["max_rho"] == 0  # (the pool is empty at the end)
    midway = run_graph(THEMIS, jobs, cluster="1x1:V100", until=500.0)
    assert midway.counters["f"]["max_rho"] > 0


THEMIS_FTF = """
round = 5min;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> f :: Themis -> Consolidated -> run :: Launch -> m :: JobMetrics;
run -> ftf :: FinishTimeFairnessMetrics;
"""


def test_themis_rho_is_isolated_time_times_the_average_contention(run_graph):
    # Two 4-GPU jobs of an hour on one 4-GPU node, the second arriving half an hour in. Each
    # job's rho is its JCT over T_indep x N_avg, N_avg the time average of the number of jobs
    # in the system over its whole life (arrival to finish), not the harmonic mean of N nor an
    # average stopping at the last round before its finish.
    jobs = [
        {"job_id": i, "arrival_s": 1800.0 * i, "gpus": 4, "duration_s": 3600.0, "model": "ResNet-18", "batch_size": 16}
        for i in range(2)
    ]
    result = run_graph(THEMIS_FTF, jobs, cluster="1x4:V100")
    got = jobs_of(result, "m")
    arrival = np.array([got[i]["arrival_s"] for i in range(2)])
    end = np.array([got[i]["finish_s"] for i in range(2)])
    edges = np.unique(np.concatenate([arrival, end]))
    in_system = np.array([np.count_nonzero((arrival <= t) & (t < end)) for t in edges[:-1]])
    rho = []
    for a, e in zip(arrival, end):
        within = np.clip(np.minimum(edges[1:], e) - np.maximum(edges[:-1], a), 0.0, None)
        n_avg = float((in_system * within).sum()) / (e - a)
        rho.append((e - a) / (3600.0 * n_avg))  # (a job asking for the whole cluster: T_id = T_indep x N_avg)
    assert got[0]["preemptions"] + got[1]["preemptions"] > 0  # (the jobs did share the node)
    fairness = result.reports["f"]["fairness"]
    assert fairness["jobs"] == fairness["jobs_finished"] == 2
    assert fairness["max_rho"] == pytest.approx(max(rho), rel=1e-9)
    assert fairness["avg_rho"] == pytest.approx(sum(rho) / 2, rel=1e-9)
    per_job = result.reports["ftf"]["rho_per_job"]["rho"].to_list()
    assert per_job == pytest.approx(rho, rel=1e-9)


def _mixed_jobs(n: int) -> list[dict]:
    rng = np.random.default_rng(7)
    models = ["ResNet-18", "Transformer", "ResNet-50"]
    return [
        {
            "job_id": i,
            "arrival_s": float(np.round(rng.uniform(0, 6 * 3600))),
            "gpus": int(rng.choice([1, 2, 4])),
            "duration_s": float(np.round(rng.uniform(600, 4 * 3600))),
            "model": models[i % 3],
            "batch_size": 64 if models[i % 3] == "Transformer" else 16,
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("cluster", ["2x4:V100", "1x4:V100,1x4:P100,1x4:K80"])
def test_themis_fairness_report_agrees_with_finish_time_fairness_metrics(run_graph, cluster):
    # Jobs of several sizes and models arriving at any time (not on round boundaries). With
    # the pool holding every job in the system, Themis' rho is FinishTimeFairnessMetrics' rho,
    # on one GPU type and on mixed types (each job's ideal time at its speed on each type).
    result = run_graph(THEMIS_FTF, _mixed_jobs(24), cluster=cluster)
    fairness, ftf = result.reports["f"]["fairness"], result.reports["ftf"]["rho"]
    assert fairness["jobs"] == fairness["jobs_finished"] == 24
    assert fairness["max_rho"] == pytest.approx(ftf["max_rho"], rel=1e-9)
    assert fairness["avg_rho"] == pytest.approx(ftf["avg_rho"], rel=1e-9)


def test_themis_report_says_it_covers_only_the_jobs_it_ranked(run_graph):
    # Under a ChoosePolicy that never selects Themis, Themis ranks no job: its report says it
    # covers none of the jobs that finished, rather than leaving them out unsaid.
    graph = """
    round = 5min;
    src :: TraceSource(path="trace.csv");
    fifo :: Fifo;
    th :: Themis;
    order :: ChoosePolicy(candidates=[fifo, th]);
    src -> AcceptAll -> JobPool -> order -> Consolidated -> Launch -> m :: JobMetrics;
    """
    result = run_graph(graph, _mixed_jobs(6), cluster="2x4:V100")
    fairness = result.reports["th"]["fairness"]
    assert fairness["jobs"] == 0 and fairness["jobs_finished"] == 6
    assert "ranked" in fairness["covers"]


def test_themis_max_rho_counter_is_zero_once_the_pool_empties(run_graph):
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 300.0},
        {"job_id": 1, "arrival_s": 7200.0, "gpus": 1, "duration_s": 300.0},
    ]
    result = run_graph(THEMIS, jobs, cluster="1x1:V100", until=3600.0)
    assert jobs_of(result, "m")[0]["finish_s"] == pytest.approx(300.0)
    assert result.counters["f"]["max_rho"] == 0
