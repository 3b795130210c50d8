"""Tiresias' discretized queues checked against the paper (§3.2): a job enters the first queue
when it first starts, so the wait before that is not starvation; a promoted job is enqueued to the
first queue behind the jobs already in it."""

from __future__ import annotations

from tests.conftest import jobs_of

GRAPH = """
round = 50s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> d :: {policy} -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_promotion_does_not_count_the_wait_before_a_first_start(run_graph):
    # One GPU, K=2 at 1000 GPU-s, promote_knob=1.5. Job 0 (5000 s) runs [0, 1000) and is demoted;
    # job 1 (1500 s), which arrived at 0, first starts at 1000 and is demoted at 2000, where the
    # second queue's first-in first-out order (by first start) puts job 0 back and preempts it.
    # Job 1 has then run 1000 s and waited 0 s since it entered the first queue (at its start), so
    # it is due for promotion after 1.5 x 1000 s more of waiting: at 3500, and it finishes at 4000.
    # Counting its 1000 s before its first start as waiting would promote it at 2500.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 5000.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 1500.0},
    ]
    policy = "TiresiasLas(queues=2, thresholds=[1000s], promote_knob=1.5)"
    result = run_graph(GRAPH.format(policy=policy), jobs, cluster="1x1:V100")
    got = jobs_of(result)
    assert got[1]["first_start_s"] == 1000.0
    assert got[1]["finish_s"] == 4000.0
    assert result.counters["d"]["promoted"] == 1
    # (the same with the Gittins index ordering the first queue: one job there at a time)
    gittins = run_graph(GRAPH.format(policy=policy.replace("TiresiasLas", "TiresiasGittins")), jobs, cluster="1x1:V100")
    assert jobs_of(gittins)[1]["finish_s"] == 4000.0


def test_a_promoted_job_joins_the_first_queue_behind_the_jobs_already_there(run_graph):
    # One GPU, K=2 at 100 GPU-s, promote_knob=0.5. Job 0 runs [0, 100) and is demoted; job 1,
    # arriving at 100, starts then in the first queue. At 150 job 0 has waited 50 >= 0.5 x 100 s
    # and is promoted: it queues behind job 1 (which entered the first queue at 100), so job 1 runs
    # on until its own demotion at 200. Ranking job 0 by its first start (0) would preempt job 1
    # at 150, a preemption first-in first-out by start time exists to avoid.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0},
        {"job_id": 1, "arrival_s": 100.0, "gpus": 1, "duration_s": 500.0},
    ]
    text = GRAPH.format(policy="TiresiasLas(queues=2, thresholds=[100s], promote_knob=0.5)")
    at_150 = run_graph(text, jobs, cluster="1x1:V100", until=150)
    assert at_150.counters["d"]["promoted"] == 1
    assert jobs_of(at_150)[1]["preemptions"] == 0
    at_200 = jobs_of(run_graph(text, jobs, cluster="1x1:V100", until=200))
    assert at_200[1]["run_s"] == 100.0 and at_200[1]["preemptions"] == 1  # demoted at 100 GPU-s
    assert at_200[0]["preemptions"] == 1
