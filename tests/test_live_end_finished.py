"""A live run's end waits for the jobs it stops (at `--until`, or at a stop with `--stop-agents`):
a job that finishes during that wait is counted finished, not running, in the summary, jobs.csv
and the explanation record; the jobs the end stopped are recorded there as `run_ended`, a
suspension, and wait again. A job here that finishes during the wait is a command that ignores
its lease (it cannot checkpoint), so it goes on to its end after it is revoked."""

from __future__ import annotations

import csv
import json
import re
import signal
import time

import polars as pl
import pytest

from tests.livecluster import TEST_PROFILE, LiveCluster
from tests.test_live_until_and_options import GRAPH  # (the same one-node FIFO graph, two GPUs)

pytestmark = pytest.mark.live

LIMIT_S = 3
# Job 0 runs for 6 s, past the limit (or the stop), and ignores the revocation; job 1 trains far
# longer and checkpoints there (or, started late on a loaded machine, ends before it started).
JOBS = (
    "job_id,arrival_s,gpus,duration_s,command,model,iterations,batch_size\n"
    "0,0,1,6,\"sh -c 'sleep 6'\",,,\n"
    "1,0,1,,,LM,100000000,10\n"
)


def _note(log: str) -> tuple[int, int] | None:
    said = re.search(r"\((\d+) running, (\d+) preempted and waiting\)", " ".join(log.split()))
    return (int(said[1]), int(said[2])) if said else None


def _table(cluster: LiveCluster) -> dict[str, dict[str, str]]:
    with open(cluster.folder / "out" / "jobs.csv") as f:
        return {row["job_id"]: row for row in csv.DictReader(f)}


def _check_the_end(cluster: LiveCluster, end_s: float) -> None:
    log = cluster.log("scheduler")
    assert _note(log) == (0, 1), log
    table = _table(cluster)
    assert (table["0"]["status"], table["1"]["status"]) == ("finished", "pending"), table
    # Counted finished at the run's end, with its JCT: its books, like every job's, close there.
    assert float(table["0"]["finish_s"]) == pytest.approx(end_s) == float(table["0"]["jct_s"]), table
    assert float(table["0"]["run_s"]) == pytest.approx(end_s), table
    summary = json.loads((cluster.folder / "out" / "summary.json").read_text())
    assert (summary["jobs_finished"], summary["end_s"]) == (1, pytest.approx(end_s)), summary
    assert summary["utilization"] <= 1.0, summary
    # The sinks and the pool count it finished, and the stopped job waiting.
    counters = json.loads((cluster.folder / "out" / "run.json").read_text())["counters"]
    assert (counters["m"]["finished"], counters["JobPool@2"]["running"]) == (1, 0), counters
    # The journal: job 0's attempt done, job 1's checkpointed.
    attempts = cluster.attempts()
    assert [a[2] for a in attempts[0]] == ["done"] and [a[2] for a in attempts[1]] == ["preempted"], attempts
    record = pl.read_parquet(cluster.folder / "out" / "explain.parquet")
    last = {
        job: (row["state"], row["reason"], row["t_s"]) for job, row in ((r["job_id"], r) for r in record.iter_rows(named=True))
    }
    assert last[0] == ("finished", "finished", pytest.approx(end_s)), record
    assert last[1] == ("suspended", "run_ended", pytest.approx(end_s)), record
    assert re.search(r"1 job\(s\) ended \(done, or failed for good\) while the run's end waited for them: job 0", log), log


def test_a_job_done_while_the_time_limit_waits_is_counted_finished(tmp_path):
    files = {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS}
    cluster = LiveCluster(tmp_path, GRAPH, files, serve_args=("--until", f"{LIMIT_S}s"))
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        assert cluster.wait_exit("scheduler", 60) == 0, cluster.logs()
        _check_the_end(cluster, float(LIMIT_S))
        # (it finished, so it is not among the jobs said to resume from a checkpoint)
        assert "job 0 with no checkpoint" not in cluster.log("scheduler")
    finally:
        cluster.close()


def test_a_job_done_while_stopping_agents_checkpoint_is_counted_finished(tmp_path):
    files = {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS}
    cluster = LiveCluster(tmp_path, GRAPH, files, serve_args=("--stop-agents",))
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        cluster.wait_for(lambda: "started job 0" in cluster.log("node-a"), 30, "job 0 started")
        time.sleep(1)
        cluster.kill("scheduler", signal.SIGTERM)
        assert cluster.processes["scheduler"].returncode == 0, cluster.logs()
        end_s = json.loads((cluster.folder / "out" / "summary.json").read_text())["end_s"]
        _check_the_end(cluster, end_s)
    finally:
        cluster.close()
