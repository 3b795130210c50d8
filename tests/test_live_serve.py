"""`roundhouse serve` as a user runs it: connections in insecure mode, stopping the agents,
resuming a run, signals while waiting for agents, jobs submitted before round 0, and the time
limit (the running jobs checkpointed, a rerun resuming them). Real agents on loopback
with emulated GPUs; every run ends by itself."""

from __future__ import annotations

import json
import signal
import time

import polars as pl
import pytest

from roundhouse.agents.submitter import Submitter
from roundhouse.wire.security import ClientSecurity
from tests.livecluster import TEST_PROFILE, LiveCluster

pytestmark = [pytest.mark.live, pytest.mark.slow]

GRAPH = """
round = {round};
cluster = "2x2:V100";
profile = "profile.csv";
src :: {source};
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def _cluster(tmp_path, source: str, jobs: str = "", round_: str = "1s", **options) -> LiveCluster:
    files = {"profile.csv": TEST_PROFILE}
    if jobs:
        files["jobs.csv"] = "job_id,arrival_s,gpus,model,iterations,batch_size\n" + jobs
    return LiveCluster(tmp_path, GRAPH.format(round=round_, source=source), files, **options)


def _trained(cluster: LiveCluster, job: int) -> float:
    """The iterations the scheduler has heard job `job` train (the journal's rounds' progress)."""
    done = 0.0
    for (record,) in cluster.query("SELECT record FROM rounds"):
        ids, iterations, *_ = json.loads(record)["progress"]
        done += sum(d for i, d in zip(ids, iterations) if i == job)
    return done


def _start_two_agents(cluster: LiveCluster) -> None:
    cluster.start_agent("node-a")
    cluster.wait_for(lambda: "node node-a registered" in cluster.log("scheduler"), 30, "node-a")
    cluster.start_agent("node-b")  # node-a registered first: it is node 0, where Fifo puts jobs first


def _start_agents(cluster: LiveCluster) -> None:
    """Both agents at once, for tests that do not care which node is which."""
    cluster.start_agent("node-a")
    cluster.start_agent("node-b")


def test_insecure_connections_are_not_counted_as_refused_peers(tmp_path):
    cluster = _cluster(tmp_path, "LiveSource(jobs=2)")
    try:
        cluster.start_scheduler()
        _start_agents(cluster)
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "round 0")
        insecure = ClientSecurity(None)
        with Submitter(cluster.address, insecure) as client:
            assert client.submit([{"model": "LM", "iterations": 50, "gpus": 1, "batch_size": 10}]) == [0]
        with Submitter(cluster.address, insecure) as client:
            assert client.status().get("refused_peers", 0) == 0
        with Submitter(cluster.address, insecure) as client:
            status = client.status()
            assert client.submit([{"model": "LM", "iterations": 50, "gpus": 1, "batch_size": 10}]) == [1]
        assert status.get("refused_peers", 0) == 0, cluster.log("scheduler")
        assert cluster.wait_exit("scheduler", timeout=60) == 0, cluster.logs()
        assert "refused a peer" not in cluster.log("scheduler"), cluster.log("scheduler")
    finally:
        cluster.close()


def test_stop_agents_stops_every_agent_and_waits_for_their_answers(tmp_path):
    # Both jobs run on node-a when the time limit ends the run; node-b has run nothing.
    jobs = "0,0,1,LM,5000,10\n1,0,1,LM,5000,10\n"
    cluster = _cluster(tmp_path, 'TraceSource(path="jobs.csv")', jobs, serve_args=("--stop-agents", "--until", "3s"))
    try:
        cluster.start_scheduler()
        _start_two_agents(cluster)
        assert cluster.wait_exit("scheduler", timeout=60) == 0, cluster.logs()
        for name in ("node-a", "node-b"):
            assert cluster.wait_exit(name, timeout=20) == 0, cluster.logs()
            assert "the scheduler asked: the scheduler's run ended" in cluster.log(name)
        assert "every one answered: node-a, node-b" in cluster.log("scheduler"), cluster.log("scheduler")
    finally:
        cluster.close()


def test_a_resumed_run_with_a_time_limit_reports_the_whole_run(tmp_path):
    # The first run ends at 3 s with both jobs running (they are checkpointed). The second, in
    # the same folder and with a limit of 2 s, replays the journal to its end (replay does not
    # count against the limit), ticks one round, which is at its limit and so launches nothing
    # (what it launched would be revoked at once), and stops; its summary covers the whole run.
    jobs = "0,0,1,LM,1600,10\n1,0,1,LM,1600,10\n"
    cluster = _cluster(tmp_path, 'TraceSource(path="jobs.csv")', jobs, serve_args=("--until", "3s"))
    out = cluster.folder / "out"
    try:
        cluster.start_scheduler()
        _start_agents(cluster)
        assert cluster.wait_exit("scheduler", timeout=60) == 0, cluster.logs()
        first = json.loads((out / "run.json").read_text())
        assert first["rounds"] == len(cluster.query("SELECT k FROM rounds")) == 4, cluster.log("scheduler")
        # A live run's --out keeps the record of its decisions too: both jobs were launched.
        record = pl.read_parquet(out / "explain.parquet")
        assert sorted(record.filter(pl.col("reason") == "launched")["job_id"].to_list()) == [0, 1], record
        cluster.serve_args[cluster.serve_args.index("--until") + 1] = "2s"
        cluster.start_scheduler()
        assert cluster.wait_exit("scheduler", timeout=60) == 0, cluster.logs()
        summary = json.loads((out / "summary.json").read_text())
        run = json.loads((out / "run.json").read_text())
        assert summary["jobs_tracked"] == 2, summary
        rounds = cluster.query("SELECT k, now, record FROM rounds ORDER BY k")
        # The replayed rounds and one more; one whole journal record per round run; the round
        # counters of summary and journal agree.
        assert run["rounds"] == first["rounds"] + 1 == len(rounds), (run, rounds)
        assert all("progress" in json.loads(r[2]) for r in rounds), rounds
        assert "at the time limit: 2 launch(es) not sent (job(s) 0, 1)" in cluster.log("scheduler")
        assert run["stop_reason"] == "reached the time limit (2s)" and run["end_s"] > 3.0, run
        assert f"{run['rounds']} rounds, ran" in cluster.log("scheduler")
    finally:
        cluster.close()


def test_sigterm_while_waiting_for_agents_stops_promptly(tmp_path):
    cluster = _cluster(tmp_path, "LiveSource", serve_args=("--wait-for-agents", "60s"))
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")  # one of the two nodes: the scheduler waits for the other
        cluster.wait_for(lambda: "1 of 2 nodes registered" in cluster.log("scheduler"), 30, "node-a")
        sent = time.time()
        cluster.kill("scheduler", signal.SIGTERM)
        assert time.time() - sent < 15, cluster.log("scheduler")  # (not the 60 s wait)
        assert cluster.processes["scheduler"].returncode == 0, cluster.log("scheduler")
        assert "stopped by SIGTERM before round 0" in cluster.log("scheduler")
        # Nothing began: a rerun starts a new run (and waits for agents again).
        assert cluster.query("SELECT count(*) FROM rounds") in ([], [(0,)])
        assert cluster.query("SELECT count(*) FROM meta") in ([], [(0,)])
    finally:
        cluster.close()


def test_sigterm_with_stop_agents_keeps_the_checkpoints_the_agents_write_as_they_stop(tmp_path):
    # The agents checkpoint a running job as they stop: the scheduler waits for its exit and
    # journals it, so that a rerun would resume it from there (it used to close first).
    jobs = "0,0,1,LM,1000000,10\n"
    cluster = _cluster(tmp_path, 'TraceSource(path="jobs.csv")', jobs, serve_args=("--stop-agents",))
    try:
        cluster.start_scheduler()
        _start_two_agents(cluster)
        cluster.wait_for(lambda: cluster.query("SELECT count(*) FROM attempts") == [(1,)], 60, "the launch")
        cluster.wait_for(lambda: "started job 0 attempt 1" in cluster.log("node-a"), 60, "the job's start")
        # It trains a while: started is not training yet (the worker builds its model first,
        # for seconds on a loaded machine), and a worker stopped before its first iteration
        # checkpoints none.
        cluster.wait_for(lambda: _trained(cluster, 0) > 0, 60, "the job to train")
        cluster.kill("scheduler", signal.SIGTERM)
        assert cluster.processes["scheduler"].returncode == 0, cluster.log("scheduler")
        [(attempt, start, outcome, _, checkpoint_iteration, _)] = cluster.attempts()[0]
        assert (attempt, start, outcome) == (1, 0, "preempted") and checkpoint_iteration > 0, cluster.logs()
        assert f"checkpointed as their agents stopped (job 0 at iteration {checkpoint_iteration})" in cluster.log("scheduler")
    finally:
        cluster.close()


def test_a_live_run_ends_at_its_time_limit_not_a_round_later(tmp_path):
    # Rounds of five minutes, a limit of 2 s: the round in progress is cut short at 2 s.
    jobs = "0,0,1,LM,5000,10\n"
    cluster = _cluster(tmp_path, 'TraceSource(path="jobs.csv")', jobs, round_="5min", serve_args=("--until", "2s"))
    try:
        cluster.start_scheduler()
        _start_agents(cluster)
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "round 0")
        started = time.time()
        assert cluster.wait_exit("scheduler", timeout=60) == 0, cluster.logs()
        # Not a round later (five minutes): the running job checkpoints and the run's files are
        # written, which takes seconds on a loaded machine.
        assert time.time() - started < 30
        run = json.loads((cluster.folder / "out" / "run.json").read_text())
        assert run["end_s"] == 2.0 and run["stop_reason"] == "reached the time limit (2s)", run
        assert run["rounds"] == 2 and [r[0] for r in cluster.query("SELECT k FROM rounds ORDER BY k")] == [0, 1]
    finally:
        cluster.close()


def test_jobs_submitted_while_waiting_for_agents_arrive_at_round_0(tmp_path):
    # The jobs are submitted before any agent runs, so before round 0: they arrive at t=0, and
    # every time of theirs is a sensible span of this short run, not one counted from 1970.
    cluster = _cluster(tmp_path, "LiveSource(jobs=2)")
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "waiting for agents: 0 of 2" in cluster.log("scheduler"), 30, "the scheduler")
        with Submitter(cluster.address, ClientSecurity(None)) as client:
            assert client.submit([{"model": "LM", "iterations": 100, "gpus": 1, "batch_size": 10}] * 2) == [0, 1]
        began = time.time()
        _start_agents(cluster)
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        took = time.time() - began
        out = cluster.folder / "out"
        jobs = [line.split(",") for line in (out / "jobs.csv").read_text().splitlines()]
        rows = [dict(zip(jobs[0], row)) for row in jobs[1:]]
        assert len(rows) == 2 and all(r["status"] == "finished" for r in rows), rows
        for r in rows:
            assert float(r["arrival_s"]) == 0.0, r
            for column in ("jct_s", "queue_s", "first_start_s", "finish_s"):
                assert 0.0 <= float(r[column]) <= took, (column, r, took)
            assert float(r["jct_s"]) >= float(r["queue_s"]), r
        summary = json.loads((out / "summary.json").read_text())
        assert 0.0 < summary["avg_jct_s"] <= took and 0.0 <= summary["avg_queue_s"] <= took, (summary, took)
    finally:
        cluster.close()


def test_a_run_ends_at_its_time_limit_with_its_jobs_checkpointed_and_a_rerun_resumes_them(tmp_path):
    # A two-worker job runs when the limit ends the run: both workers checkpoint the same
    # iteration (revoked, two-phase) before `serve` returns, and the journal says so. A rerun in
    # the same folder, without the limit, resumes the job from that checkpoint and finishes it.
    # The workers must have trained before the limit: they start once their agent's fork server
    # has imported PyTorch, seconds after round 0 on a loaded machine, hence a limit of 10 s.
    # Emulated GPUs train it at 120 iterations/s at most: fewer than 1500 by then.
    iterations = 1500
    jobs = f"0,0,2,LM,{iterations},10\n"
    cluster = _cluster(tmp_path, 'TraceSource(path="jobs.csv")', jobs, serve_args=("--until", "10s"))
    try:
        cluster.start_scheduler()
        _start_agents(cluster)
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        [(attempt, start, outcome, _, checkpoint_iteration, _)] = cluster.attempts()[0]
        assert (attempt, start, outcome) == (1, 0, "preempted"), cluster.logs()
        assert 0 < checkpoint_iteration < iterations, cluster.logs()
        exits = cluster.exits()
        assert [(e[2], e[4], e[6]) for e in exits] == [
            (0, "preempted", checkpoint_iteration),
            (1, "preempted", checkpoint_iteration),
        ]
        assert "checkpointing the 1 running job(s)" in cluster.log("scheduler"), cluster.log("scheduler")
        assert all(name in cluster.processes and cluster.processes[name].poll() is None for name in ("node-a", "node-b"))

        until = cluster.serve_args.index("--until")
        del cluster.serve_args[until : until + 2]
        cluster.serve_args.append("--stop-agents")
        cluster.start_scheduler()
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        attempts = cluster.attempts()[0]
        assert [a[:3] for a in attempts] == [(1, 0, "preempted"), (2, checkpoint_iteration, "done")], attempts
        assert attempts[1][5] is not None, attempts  # it resumed from a checkpoint file
        assert "stopped: every job finished" in cluster.log("scheduler"), cluster.log("scheduler")
    finally:
        cluster.close()
