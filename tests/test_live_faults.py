"""Live mode under faults: a node agent killed mid-run, the scheduler killed and restarted, job
processes that crash."""

from __future__ import annotations

import os
import re
import signal
import time

import polars as pl
import pytest

from roundhouse.agents.submitter import Submitter
from roundhouse.wire.security import ClientSecurity
from tests.livecluster import TEST_PROFILE, LiveCluster, wait_until

# Real agents, schedulers or training processes on this machine (the quick loop is -m "not live").
pytestmark = pytest.mark.live

FIFO = """
round = 1s;
cluster = "2x2:V100";
profile = "profile.csv";
src :: {source};
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too (its parent, the killed agent, is gone; init reaps it).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_killed_agent_s_jobs_finish_on_the_other_agent_from_their_checkpoints(tmp_path):
    jobs = "job_id,arrival_s,gpus,model,iterations,batch_size\n" + "".join(f"{i},0,1,ResNet-18,400,16\n" for i in range(4))
    cluster = LiveCluster(
        tmp_path,
        FIFO.format(source='TraceSource(path="jobs.csv")'),
        {"profile.csv": TEST_PROFILE, "jobs.csv": jobs},
        serve_args=("--checkpoint-every", "1s"),
    )
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        cluster.wait_for(lambda: "node node-a registered" in cluster.log("scheduler"), 30, "node-a")
        cluster.start_agent("node-b")  # node-a registered first: it is node 0 of the cluster

        # Fifo and FirstFree put jobs 0 and 1 on node-a, 2 and 3 on node-b: kill node-b, whose
        # jobs then wait (behind 0 and 1, which they cannot preempt) for node-a's GPUs.
        def checkpointed_on_b() -> bool:
            rows = cluster.query("SELECT count(*) FROM attempts WHERE nodes LIKE '%node-b%' AND checkpoint_iteration > 0")
            return bool(rows) and rows[0][0] == 2

        cluster.wait_for(checkpointed_on_b, 60, "both jobs on node-b to checkpoint")
        pids = [
            int(p)
            for p in re.findall(r"started job \d+ attempt \d+ rank \d+/\d+ on GPU \d+ \(pid (\d+)\)", cluster.log("node-b"))
        ]
        assert len(pids) == 2
        cluster.kill("node-b", signal.SIGKILL)
        # Its workers die with it: nobody trains behind the scheduler's back.
        wait_until(lambda: not any(_alive(p) for p in pids), 10, "node-b's workers to die with it", every=0.1)

        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        table = pl.read_csv(cluster.folder / "out" / "jobs.csv")
        assert table["status"].to_list() == ["finished"] * 4
        assert "node node-b lost (no heartbeat" in cluster.log("scheduler")
        attempts = cluster.attempts()
        moved = [job for job, runs in attempts.items() if len(runs) > 1]
        assert moved == [2, 3], attempts
        for job in moved:
            first, second = attempts[job][0], attempts[job][1]
            assert first[2] == "killed" and second[2] == "done"
            # The relaunch resumed from the last checkpoint the lost attempt reported.
            assert first[4] > 0 and second[1] == first[4] and second[5] is not None, attempts[job]
            nodes = cluster.query("SELECT nodes FROM attempts WHERE job_id = ? AND attempt = 2", (job,))
            assert nodes == [('["node-a"]',)]
        assert (table["preemptions"] == 0).all()
    finally:
        cluster.close()


@pytest.mark.slow
def test_a_restarted_scheduler_takes_back_running_jobs_and_loses_none(tmp_path):
    cluster = LiveCluster(
        tmp_path,
        FIFO.format(source="LiveSource(jobs=6)"),
        {"profile.csv": TEST_PROFILE},
        timeout="4s",
        serve_args=("--checkpoint-every", "1s"),
    )
    insecure = ClientSecurity(None)
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        cluster.start_agent("node-b")
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler to start")
        with Submitter(cluster.address, insecure) as client:
            first = client.submit([{"model": "LM", "iterations": 800, "gpus": 1, "batch_size": 10} for _ in range(4)])
            assert first == [0, 1, 2, 3]
        running = lambda: len(cluster.query("SELECT * FROM attempts")) == 4  # noqa: E731
        cluster.wait_for(running, 30, "four jobs to be launched")
        time.sleep(1.5)
        cluster.kill("scheduler", signal.SIGKILL)
        time.sleep(1.0)  # the jobs train on meanwhile; exits that happen now wait in the agents
        cluster.start_scheduler()
        cluster.wait_for(lambda: cluster.log("scheduler").count("taking over") >= 1, 30, "the restarted scheduler")
        with Submitter(cluster.address, insecure) as client:
            more = client.submit([{"model": "Recommendation", "iterations": 100, "gpus": 1} for _ in range(2)])
        assert more == [4, 5]
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        table = pl.read_csv(cluster.folder / "out" / "jobs.csv")
        assert table["job_id"].to_list() == list(range(6))
        assert table["status"].to_list() == ["finished"] * 6
        attempts = cluster.attempts()
        # Nothing was restarted: the four jobs running when the scheduler died were taken back
        # (one attempt each, completing all their iterations).
        for job in range(4):
            assert [(r[0], r[2], r[3]) for r in attempts[job]] == [(1, "done", 800)], attempts[job]
        log = cluster.log("scheduler")
        assert "replaying" in log and "taking over: 4 running job(s)" in log
        assert "requeued" not in log
    finally:
        cluster.close()


def test_crashed_jobs_are_retried_up_to_the_limit_then_fail(tmp_path):
    marker = tmp_path / "crashed-once"
    flaky = f"sh -c 'if [ -e {marker} ]; then sleep 1; exit 0; fi; touch {marker}; exit 7'"
    jobs = (
        "job_id,arrival_s,gpus,duration_s,command\n"
        f'0,0,1,5,"{flaky}"\n'
        "1,0,1,5,\"sh -c 'echo doomed; exit 3'\"\n"
        "2,0,1,5,\"python -c 'import sys; sys.exit(0)'\"\n"
    )
    cluster = LiveCluster(
        tmp_path,
        FIFO.format(source='TraceSource(path="jobs.csv")'),
        {"profile.csv": TEST_PROFILE, "jobs.csv": jobs},
        serve_args=("--retries", "2"),
    )
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a", gpus="2:V100")
        cluster.start_agent("node-b", gpus="2:V100")
        assert cluster.wait_exit("scheduler", timeout=60) == 0, cluster.logs()
        table = {r["job_id"]: r for r in pl.read_csv(cluster.folder / "out" / "jobs.csv").iter_rows(named=True)}
        assert table[0]["status"] == "finished" and table[2]["status"] == "finished"
        assert table[1]["status"] == "failed" and table[1]["finish_s"] is None
        attempts = cluster.attempts()
        assert [r[2] for r in attempts[0]] == ["failed", "done"]
        assert [r[2] for r in attempts[1]] == ["failed"] * 3  # the first try and two retries
        log = cluster.log("scheduler")
        assert "job 1 failed 3 times; giving up" in log and "doomed" in log
        summary = (cluster.folder / "out" / "summary.json").read_text()
        assert '"jobs_failed": 1' in summary
    finally:
        cluster.close()
