"""Live mode end to end on loopback: a scheduler, two agents with two fake GPUs each, eight real
training jobs under a preemptive policy (Srtf) with short rounds."""

from __future__ import annotations

import polars as pl
import pytest

from tests.livecluster import TEST_PROFILE, LiveCluster

# Real agents, schedulers or training processes on this machine (the quick loop is -m "not live").
pytestmark = pytest.mark.live

GRAPH = """
round = 2s;
cluster = "2x2:V100";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Srtf -> FirstFree -> Launch -> m :: JobMetrics;
"""

# Three long jobs start at once (job 0 on two workers); short ones arrive later and Srtf makes
# room for them by preempting the longest, the two-worker job first. The agents emulate their
# GPUs (held to TEST_PROFILE's speeds), so that on any machine the long jobs are still running
# when the short ones arrive: at least 15 s, 6 s and 6 s. Job 0 is longer than the other two
# could be even had they made no progress (a loaded machine starts their processes late, and
# Srtf ranks by the progress reported): it is the one preempted first whatever their start.
JOBS = """job_id,arrival_s,gpus,model,iterations,batch_size
0,0,2,LM,1800,10
1,0,1,ResNet-18,480,16
2,0,1,Recommendation,900,64
3,4,1,ResNet-18,120,16
4,4,1,LM,250,10
5,9,1,Recommendation,200,64
6,12,2,ResNet-18,100,16
7,13,1,LM,300,10
"""


@pytest.fixture
def cluster(tmp_path):
    c = LiveCluster(tmp_path, GRAPH, {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS}, serve_args=("--checkpoint-every", "0"))
    yield c
    c.close()


@pytest.mark.slow
def test_eight_jobs_finish_and_preempted_jobs_resume_exactly(cluster):
    cluster.start_scheduler()
    cluster.start_agent("node-a")
    cluster.start_agent("node-b")
    status = cluster.wait_exit("scheduler", timeout=150)
    assert status == 0, cluster.logs()
    jobs = pl.read_csv(cluster.folder / "out" / "jobs.csv")
    assert jobs["status"].to_list() == ["finished"] * 8, cluster.logs()
    # Emulated GPUs: no job trained faster than the profile says (job 2: 900 iterations at 150/s).
    assert jobs.filter(pl.col("job_id") == 2)["run_s"].item() >= 900 / 150 - 0.1, jobs

    attempts = cluster.attempts()
    iterations = {0: 1800, 1: 480, 2: 900, 3: 120, 4: 250, 5: 200, 6: 100, 7: 300}
    preempted = 0
    for job, runs in attempts.items():
        # The last attempt completes the job's work; every earlier one was preempted, ended at
        # the iteration it checkpointed, and the next one resumed from exactly that iteration.
        assert runs[-1][2] == "done" and runs[-1][3] == iterations[job], (job, runs)
        for (_, _start, outcome, end, ckpt, _), (_, next_start, *_rest) in zip(runs, runs[1:]):
            assert outcome == "preempted", (job, runs)
            assert ckpt is not None and end - ckpt <= 1 and next_start == ckpt, (job, runs)
            preempted += 1
        for _, start, _, _end, _, resume in runs[1:]:
            assert resume is not None and resume.endswith(f"-i{start}.pt")
    assert preempted >= 1, attempts
    assert len(attempts[0]) >= 2, f"the two-worker job was never preempted: {attempts}\n{cluster.logs()}"

    # Two-phase revocation: only rank 0 of the two-worker job was told, and both workers
    # checkpointed and stopped at the same iteration.
    exits = cluster.exits()
    for attempt, *_ in attempts[0][:-1]:
        ranks = [e for e in exits if e[0] == 0 and e[1] == attempt]
        assert [e[2] for e in ranks] == [0, 1]
        assert {e[4] for e in ranks} == {"preempted"}
        assert ranks[0][5] == ranks[1][5] and ranks[0][6] == ranks[1][6], ranks
    agent_logs = cluster.log("node-a") + cluster.log("node-b")
    assert "revoked job 0 attempt 1 rank 0" in agent_logs
    assert "revoked job 0 attempt 1 rank 1" not in agent_logs

    # Workers that resumed say so, at the iteration their attempt started from.
    worker_logs = "".join(p.read_text() for p in cluster.folder.glob("node-*/logs/*.log"))
    for job, runs in attempts.items():
        for attempt, start, *_ in runs[1:]:
            assert f"[job {job} attempt {attempt} rank 0] resumed from" in worker_logs
            assert f"at iteration {start}" in worker_logs
