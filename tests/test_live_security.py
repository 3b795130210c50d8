"""CURVE authentication: known keys are admitted, unknown and unauthenticated peers refused and
logged; insecure mode only on loopback."""

from __future__ import annotations

import pytest
import zmq
import zmq.auth

from roundhouse.agents.submitter import SchedulerError, Submitter
from roundhouse.errors import UsageError
from roundhouse.tools.cli import main
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity, ServerSecurity
from tests.livecluster import LiveCluster

# Real agents, schedulers or training processes on this machine (the quick loop is -m "not live").
pytestmark = pytest.mark.live

GRAPH = """
round = 1s;
cluster = "1x2:V100";
src :: LiveSource;
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_keys_command_makes_pairs_and_admits_them(tmp_path, capsys):
    keys = tmp_path / "keys"
    assert main(["keys", str(keys), "node-a", "alice"]) == 0
    for name in (
        "scheduler.key",
        "scheduler.key_secret",
        "node-a.key",
        "node-a.key_secret",
        "alice.key_secret",
        "authorized/node-a.key",
        "authorized/alice.key",
    ):
        assert (keys / name).is_file(), name
    assert not (keys / "authorized" / "scheduler.key").exists()
    assert oct((keys / "alice.key_secret").stat().st_mode)[-3:] == "600"
    before = (keys / "alice.key_secret").read_bytes()
    assert main(["keys", str(keys), "alice"]) == 0  # existing pairs are kept
    assert (keys / "alice.key_secret").read_bytes() == before
    assert main(["keys", str(keys), "bad name"]) == 2
    assert "bad key name" in capsys.readouterr().err


def test_security_choices_are_explicit():
    with pytest.raises(UsageError, match="only for loopback"):
        ServerSecurity.choose(None, True, "tcp://0.0.0.0:5555")
    with pytest.raises(UsageError, match="--insecure for development"):
        ServerSecurity.choose(None, False, "tcp://127.0.0.1:5555")
    with pytest.raises(UsageError, match="not both"):
        ServerSecurity.choose("keys", True, "tcp://127.0.0.1:5555")
    with pytest.raises(UsageError, match="key file not found"):
        ServerSecurity.choose("/nonexistent", False, "tcp://127.0.0.1:5555")
    assert ServerSecurity.choose(None, True, "tcp://127.0.0.1:5555").insecure
    with pytest.raises(UsageError, match="only for loopback"):
        ClientSecurity.choose(None, "x", True, "tcp://10.0.0.1:5555")


def test_only_known_keys_get_in(tmp_path):
    keys = tmp_path / "keys"
    make_keys(keys, ["node-a", "alice"])
    strangers = tmp_path / "strangers"
    make_keys(strangers, ["mallory"])
    (strangers / "scheduler.key").write_bytes((keys / "scheduler.key").read_bytes())  # knows the server's public key
    cluster = LiveCluster(tmp_path / "run", GRAPH, security=("--keys", str(keys)), serve_args=("--wait-for-agents", "0s"))
    ctx = zmq.Context()
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        assert "CURVE" in cluster.log("scheduler") and "INSECURE" not in cluster.log("scheduler")

        cluster.start_agent("node-a", extra=("--keys", str(keys)))
        cluster.wait_for(lambda: "node node-a registered (key node-a)" in cluster.log("scheduler"), 30, "node-a to register")

        # A node whose key the scheduler does not know is refused; its agent says so and exits.
        intruder = cluster.start_agent("mallory", gpus="2:V100", extra=("--keys", str(strangers)))
        assert intruder.wait(timeout=30) == 2
        assert "refused this agent" in cluster.log("mallory")
        cluster.wait_for(lambda: "refused a peer with an unknown CURVE key" in cluster.log("scheduler"), 10, "the refusal log")

        # A peer that does not even speak CURVE gets nowhere either.
        plain = ctx.socket(zmq.DEALER)
        plain.setsockopt(zmq.LINGER, 0)
        plain.connect(cluster.address)
        plain.send(protocol.encode("status", 1))
        assert not plain.poll(1500)
        plain.close()
        cluster.wait_for(lambda: "refused a peer on" in cluster.log("scheduler"), 10, "the handshake refusal log")

        with pytest.raises(SchedulerError, match="refused this connection"):
            with Submitter(cluster.address, ClientSecurity(strangers, "mallory"), timeout_s=10) as client:
                client.status()
        with Submitter(cluster.address, ClientSecurity(keys, "alice")) as client:
            status = client.status()
        assert status["nodes_online"] == 1 and status.get("refused_peers", 0) >= 1
        assert cluster.processes["scheduler"].poll() is None
    finally:
        ctx.term()
        cluster.close()


def test_a_submitter_s_key_submits_but_registers_no_node_and_an_agent_s_submits_nothing(tmp_path):
    keys = tmp_path / "keys"
    make_keys(keys, ["node-a"], submitters=["alice"])
    zmq.auth.create_certificates(str(keys / "authorized"), "old")  # a key made before roles: either
    (keys / "old.key_secret").write_bytes((keys / "authorized" / "old.key_secret").read_bytes())
    (keys / "authorized" / "old.key_secret").unlink()
    job = {"command": "true", "duration_s": 1, "gpus": 1}
    cluster = LiveCluster(tmp_path / "run", GRAPH, security=("--keys", str(keys)), serve_args=("--wait-for-agents", "0s"))
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        # alice's key is a submitter's: as an agent it is refused, and the cluster's node stays free.
        posing = cluster.start_agent("alice", extra=("--keys", str(keys)))
        assert posing.wait(timeout=30) == 2
        assert "only an agent's key registers a node" in cluster.log("scheduler")
        cluster.start_agent("node-a", extra=("--keys", str(keys)))
        cluster.wait_for(lambda: "node node-a registered (key node-a)" in cluster.log("scheduler"), 30, "node-a to register")
        with Submitter(cluster.address, ClientSecurity(keys, "alice")) as client:
            assert client.status()["nodes_online"] == 1
            assert client.submit([job]) == [0]
        # node-a's key lies on the node: it gives no say over the queue (asking is allowed).
        with Submitter(cluster.address, ClientSecurity(keys, "node-a")) as client:
            with pytest.raises(SchedulerError, match="the key of agent node-a submits no jobs"):
                client.submit([job])
            assert client.status()["submitted"] == 1
        with Submitter(cluster.address, ClientSecurity(keys, "old")) as client:
            assert client.submit([job]) == [1]
        assert "refused a submission: the key of agent node-a" in cluster.log("scheduler")
    finally:
        cluster.close()
