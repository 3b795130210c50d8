"""What a live run says of itself once it has stopped, on loopback (emulated agents).

A run whose jobs all failed for good stopped as "every job finished"; it says they failed (and
one where some failed and the rest finished says both). A one-GPU node registered as "GPUs 0-0". `serve` on a journal whose run had ended said it was resuming the run
before refusing it."""

from __future__ import annotations

import json

import pytest

from tests.livecluster import TEST_PROFILE, LiveCluster

pytestmark = [pytest.mark.live, pytest.mark.slow]

TRACE_GRAPH = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def _failures_run_to_their_end(tmp_path, trace: str) -> str:
    """The trace served live on one emulated node to its end: the scheduler's log, its lines
    joined (rich wraps them)."""
    cluster = LiveCluster(tmp_path, TRACE_GRAPH, {"trace.csv": trace, "profile.csv": TEST_PROFILE})
    try:
        cluster.start_scheduler()
        cluster.start_agent("emu", nodes=1)
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        return " ".join(cluster.log("scheduler").split())
    finally:
        cluster.close()


def test_a_run_whose_jobs_all_failed_says_they_failed(tmp_path):
    # Jobs of a duration alone (no model, no command) cannot run live: each fails for good at
    # its launch.
    log = _failures_run_to_their_end(tmp_path, "job_id,arrival_s,gpus,duration_s\n0,0,1,5\n1,0,1,5\n")
    assert "stopped: every job failed" in log and "every job finished" not in log, log
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["stop_reason"] == "every job failed", run


def test_a_run_where_some_jobs_failed_says_how_many(tmp_path):
    trace = "job_id,arrival_s,gpus,model,iterations,batch_size,duration_s\n0,0,1,LM,40,10,\n1,0,1,,,,5\n"
    log = _failures_run_to_their_end(tmp_path, trace)
    assert "stopped: every job finished or failed (1 of 2 failed)" in log, log


ONE_GPU = """
round = 1s;
cluster = "1x1:V100";
profile = "profile.csv";
src :: LiveSource(jobs=1);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def _one_job_cluster(tmp_path) -> LiveCluster:
    """A one-GPU node's cluster, with one short job submitted."""
    from roundhouse.runtime.journal import Journal

    cluster = LiveCluster(tmp_path, ONE_GPU, {"profile.csv": TEST_PROFILE})
    journal = Journal(cluster.journal_path)
    journal.add_submission(0, {"job_id": "0", "model": "LM", "iterations": "40", "gpus": "1", "batch_size": "10"}, 0.0)
    journal.close()
    return cluster


def _run_to_its_end(cluster: LiveCluster) -> str:
    """The run to its end; its scheduler's log."""
    cluster.start_scheduler()
    cluster.start_agent("one", gpus="1:V100")
    assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
    return cluster.log("scheduler")


def test_a_one_gpu_node_registers_as_gpu_0(tmp_path):
    cluster = _one_job_cluster(tmp_path)
    try:
        first = _run_to_its_end(cluster)
        assert "node one registered as node 0: GPU 0 (1 x V100)" in first and "GPUs 0-0" not in first, first
    finally:
        cluster.close()


def test_an_ended_run_is_refused_before_serve_says_it_resumes(tmp_path):
    cluster = _one_job_cluster(tmp_path)
    try:
        first = _run_to_its_end(cluster)
        cluster.start_scheduler()
        assert cluster.wait_exit("scheduler", timeout=60) == 2, cluster.logs()
        again = cluster.log("scheduler")[len(first) :]
        assert "the run this journal holds had already ended" in again, again
        assert "resuming the journal's run" not in again, again
    finally:
        cluster.close()
