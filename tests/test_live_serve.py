"""`roundhouse serve` as a user runs it: connections in insecure mode, stopping the agents,
resuming a run, signals while waiting for agents, and the time limit. Real agents on loopback
with emulated GPUs; every run ends by itself."""

from __future__ import annotations

import pytest

from roundhouse.agents.submitter import SchedulerError, Submitter
from roundhouse.tools.keys_cmd import make_keys
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


def _start_two_agents(cluster: LiveCluster) -> None:
    cluster.start_agent("node-a")
    cluster.wait_for(lambda: "node node-a registered" in cluster.log("scheduler"), 30, "node-a")
    cluster.start_agent("node-b")  # node-a registered first: it is node 0, where Fifo puts jobs first


def test_insecure_connections_are_not_counted_as_refused_peers(tmp_path):
    cluster = _cluster(tmp_path, "LiveSource(jobs=2)")
    try:
        cluster.start_scheduler()
        _start_two_agents(cluster)
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "round 0")
        insecure = ClientSecurity(None)
        with Submitter(cluster.address, insecure) as client:
            assert client.submit([{"model": "LM", "iterations": 50, "gpus": 1, "batch_size": 10}]) == [0]
        with Submitter(cluster.address, insecure) as client:
            assert client.status().get("refused_peers", 0) == 0
        # A peer that really fails the handshake (it speaks CURVE to an insecure scheduler) still is.
        make_keys(tmp_path / "keys", ["alice"])
        with Submitter(cluster.address, ClientSecurity(tmp_path / "keys", "alice"), timeout_s=2) as stranger:
            with pytest.raises(SchedulerError):
                stranger.status()
        with Submitter(cluster.address, insecure) as client:
            status = client.status()
            assert client.submit([{"model": "LM", "iterations": 50, "gpus": 1, "batch_size": 10}]) == [1]
        assert status.get("refused_peers", 0) == 1, cluster.log("scheduler")
        assert cluster.wait_exit("scheduler", timeout=60) == 0, cluster.logs()
        assert cluster.log("scheduler").count("refused a peer") == 1, cluster.log("scheduler")
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
