"""A live scheduler with agents and submitters: two agents under one node name (the second is
refused, a restarted one still takes over), keyed peers not counted as refused, and a refusal
the scheduler finds named by the file's line."""

from __future__ import annotations

import pytest

from roundhouse.agents.submitter import Submitter
from roundhouse.tools.cli import main
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire.security import ClientSecurity, check_connect_address
from tests.livecluster import LiveCluster

# Real agents and schedulers on this machine (the quick loop is -m "not live").
pytestmark = [pytest.mark.live]

GRAPH = """
round = 1s;
cluster = "2x2:V100";
src :: LiveSource;
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_a_second_agent_under_a_node_s_name_is_refused_and_a_restarted_one_takes_over(tmp_path):
    cluster = LiveCluster(tmp_path, GRAPH, serve_args=("--wait-for-agents", "0s"))
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        cluster.wait_for(lambda: "node node-a registered" in cluster.log("scheduler"), 30, "node-a")
        twin = cluster.start_agent("twin", extra=("--insecure", "--name", "node-a"))  # (its log "twin", its node node-a)
        assert twin.wait(timeout=30) == 2, cluster.logs()
        assert "the scheduler refused to register node node-a: node node-a is already registered by another agent" in (
            cluster.log("twin")
        )
        # So is one of other GPUs: the clash is its reason, not GPUs unlike the node's.
        other = cluster.start_agent("other", gpus="2:K80", extra=("--insecure", "--name", "node-a"))
        assert other.wait(timeout=30) == 2, cluster.logs()
        assert "node node-a is already registered by another agent" in cluster.log("other"), cluster.log("other")
        log = cluster.log("scheduler")
        assert log.count("name clash") == 2 and "node node-a lost" not in log and log.count("node node-a registered") == 1
        assert cluster.processes["node-a"].poll() is None
        # An agent restarted (the old one silent) takes the node over, as before.
        cluster.kill("node-a")
        cluster.start_agent("again", extra=("--insecure", "--name", "node-a"))
        cluster.wait_for(lambda: cluster.log("scheduler").count("node node-a registered") == 2, 30, "the restarted agent")
        # (the scheduler logs the registration before the agent reads the reply)
        cluster.wait_for(lambda: "registered as node 0" in cluster.log("again"), 30, "the restarted agent's reply")
        assert cluster.processes["again"].poll() is None
    finally:
        cluster.close()


def test_keyed_peers_are_not_counted_as_refused(tmp_path, capsys):
    keys = tmp_path / "keys"
    make_keys(keys, ["node-a"], submitters=["alice"])
    cluster = LiveCluster(tmp_path / "run", GRAPH, security=("--keys", str(keys)), serve_args=("--wait-for-agents", "0s"))
    alice = ClientSecurity(keys, "alice")
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        with Submitter(cluster.address, alice) as client:
            assert client.status()["refused_peers"] == 0  # (listed before anything was refused)
        cluster.start_agent("node-a", extra=("--keys", str(keys)))
        cluster.wait_for(lambda: "node node-a registered (key node-a)" in cluster.log("scheduler"), 30, "node-a")
        for _ in range(20):
            check_connect_address(cluster.address)
            with Submitter(cluster.address, alice) as client:
                client.status()
        # A refusal the scheduler finds (not the file's reader) names the file's line.
        trace = tmp_path / "jobs.csv"
        trace.write_text("job_id,model,iterations,gpus\n100,ResNet-18,10,1\n101,Foo,5,1\n")
        capsys.readouterr()
        assert main(["submit", cluster.address, "--keys", str(keys), "--name", "alice", str(trace)]) == 2
        assert f"{trace}:3: error: job 101: model 'Foo' is not in the profile" in capsys.readouterr().err
        with Submitter(cluster.address, alice) as client:
            assert client.status()["refused_peers"] == 0
        assert "refused a peer" not in cluster.log("scheduler")
    finally:
        cluster.close()
