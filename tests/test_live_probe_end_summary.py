"""The summary of a live run that ends at its time limit (`serve --until`), or at a stop with
`--stop-agents`, counts the jobs checkpointed at the end, and those whose launch the last round
withheld, as preempted and waiting, not running: the world is told of their exits before the
run is summed up, and `--out`'s jobs.csv says so too. The journal is as it was: the attempts
ended preempted, where a rerun resumes them."""

from __future__ import annotations

import csv
import re
import signal
import time

import pytest

from tests.livecluster import TEST_PROFILE, LiveCluster
from tests.test_live_until_and_options import GRAPH  # (the same one-node FIFO graph)

pytestmark = pytest.mark.live

LIMIT_S = 4
# Job 0 runs from round 0; job 1 arrives at the limit, a round boundary, with a GPU free: placed
# by the last round, whose launches are withheld.
JOBS = f"job_id,arrival_s,gpus,model,iterations,batch_size\n0,0,1,LM,100000000,10\n1,{LIMIT_S},1,LM,100000000,10\n"


def _note(log: str) -> tuple[int, int]:
    """(running, preempted and waiting) as the summary's note says (rich wraps its lines)."""
    said = re.search(r"\((\d+) running, (\d+) preempted and waiting\)", " ".join(log.split()))
    assert said, log
    return int(said[1]), int(said[2])


def _statuses(cluster: LiveCluster) -> dict[str, str]:
    with open(cluster.folder / "out" / "jobs.csv") as f:
        return {row["job_id"]: row["status"] for row in csv.DictReader(f)}


def test_a_run_at_its_time_limit_counts_its_checkpointed_and_withheld_jobs_waiting(tmp_path):
    files = {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS}
    cluster = LiveCluster(tmp_path, GRAPH, files, serve_args=("--until", f"{LIMIT_S}s"))
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        assert cluster.wait_exit("scheduler", 60) == 0, cluster.logs()
        first = cluster.log("scheduler")
        assert "at the time limit: 1 launch(es) not sent (job(s) 1)" in first, first
        assert _note(first) == (0, 2), first
        assert _statuses(cluster) == {"0": "pending", "1": "pending"}, first
        # The journal is unchanged by it: both attempts ended preempted.
        attempts = cluster.attempts()
        assert attempts[1] == [(1, 0, "preempted", 0, None, None)], attempts
        assert attempts[0][0][2] == "preempted", attempts
        # (a rerun resumes them from there: tests/test_live_until_and_options.py, the same run)
    finally:
        cluster.close()


def test_a_stop_with_stop_agents_counts_the_jobs_its_agents_checkpointed_waiting(tmp_path):
    jobs = "job_id,arrival_s,gpus,model,iterations,batch_size\n0,0,1,LM,100000000,10\n1,0,1,LM,100000000,10\n"
    cluster = LiveCluster(tmp_path, GRAPH, {"profile.csv": TEST_PROFILE, "jobs.csv": jobs}, serve_args=("--stop-agents",))
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        # (stopped once both jobs have trained a while: each has iterations to checkpoint)
        cluster.wait_for(lambda: len(re.findall(r"started job", cluster.log("node-a"))) >= 2, 30, "both jobs started")
        time.sleep(2)
        cluster.kill("scheduler", signal.SIGTERM)
        assert cluster.processes["scheduler"].returncode == 0, cluster.logs()
        log = cluster.log("scheduler")
        assert "job(s) checkpointed as their agents stopped" in log, log
        assert _note(log) == (0, 2), log
        assert _statuses(cluster) == {"0": "pending", "1": "pending"}, log
        assert [a[0][2] for a in cluster.attempts().values()] == ["preempted", "preempted"], cluster.attempts()
    finally:
        cluster.close()
