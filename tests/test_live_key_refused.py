"""An agent whose key the scheduler no longer admits (its key made again under the node's name,
or removed from `authorized/`) learns it and stops: the scheduler tells a registered agent with
`key_refused` (once, and logs the refusal once), and the agent stops its jobs as on a shutdown
and exits with status 2, naming the node and what to do. An agent refused when it reconnects
(the scheduler restarted meanwhile) learns it from its handshake and stops the same way. Real
`roundhouse serve` and `roundhouse agent` processes with CURVE keys on 127.0.0.1."""

from __future__ import annotations

import collections
import re
import time

import pytest
import zmq

from roundhouse.runtime.backends.live.server import Server
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire import protocol
from roundhouse.wire.protocol import ProtocolError
from roundhouse.wire.security import ServerSecurity
from tests.livecluster import TEST_PROFILE, LiveCluster
from tests.test_key_revocation_server import _answers, _dealer, _NoJournal

GRAPH = """
round = 1s;
cluster = "2x1:V100";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""
# One long job: it is still running when the node's key is withdrawn.
JOBS = "job_id,arrival_s,gpus,model,iterations,batch_size\n0,0,1,LM,1000000,10\n"


def _make_again(keys, name: str) -> None:
    """What an operator does to make a node's key again: remove the pair, run `roundhouse keys`."""
    (keys / f"{name}.key").unlink()
    (keys / f"{name}.key_secret").unlink()
    make_keys(keys, [name])


def _old_keys(keys, tmp_path):
    """A copy of the key folder as the node has it (its pair as it is now)."""
    held = tmp_path / "held"
    held.mkdir(mode=0o700)
    for name in ("scheduler.key", "node-a.key", "node-a.key_secret"):
        (held / name).write_bytes((keys / name).read_bytes())
    (held / "node-a.key_secret").chmod(0o600)
    return held


def _cluster_with_a_running_job(tmp_path):
    """A keyed scheduler and agent node-a (holding a copy of its pair, as a node does), running
    job 0: returns (cluster, the scheduler's key folder)."""
    keys = tmp_path / "keys"
    make_keys(keys, ["node-a"])
    held = _old_keys(keys, tmp_path)
    cluster = LiveCluster(
        tmp_path / "run",
        GRAPH,
        {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS},
        security=("--keys", str(keys)),
        serve_args=("--wait-for-agents", "0s"),
    )
    cluster.start_scheduler()
    cluster.start_agent("node-a", gpus="1:V100", extra=("--keys", str(held)))
    cluster.wait_for(lambda: "started job 0 attempt 1 rank 0" in cluster.log("node-a"), 60, "job 0 to start on node-a")
    return cluster, keys


def _stopped_with_status_2(cluster: LiveCluster) -> str:
    """node-a's log, once it exited by itself with status 2 after stopping its job cleanly."""
    assert cluster.wait_exit("node-a", 60) == 2, cluster.logs()
    log = cluster.log("node-a")
    assert "job 0 attempt 1 rank 0 preempted" in log, log  # (revoked: it checkpointed, as on a shutdown)
    assert "agent node-a stopped (its key is no longer admitted by the scheduler)" in log, log
    return log


@pytest.mark.live
def test_an_agent_whose_key_was_made_again_stops_its_job_and_exits_naming_what_to_do(tmp_path):
    cluster, keys = _cluster_with_a_running_job(tmp_path)
    try:
        _make_again(keys, "node-a")
        log = _stopped_with_status_2(cluster)
        assert "no longer admits the key of node node-a: a new key was made under the name 'node-a'" in log, log
        assert "copy the node's new key pair (node-a.key_secret, with scheduler.key)" in log, log
        assert "start the agent again" in log, log
        # The scheduler refused the old key once, not once per message the agent sent.
        scheduler = cluster.log("scheduler")
        assert scheduler.count("refused a message from agent node-a: the key of agent node-a was made again") == 1, scheduler
        assert "its agent is told so, and stops" in scheduler
        # Its node went offline when the agent was told, not at the heartbeat timeout.
        assert "node node-a lost (its key is no longer admitted): its GPUs are offline; requeueing job(s) 0" in scheduler
    finally:
        cluster.close()


@pytest.mark.live
def test_an_agent_whose_key_was_removed_stops_its_job_and_exits_naming_what_to_do(tmp_path):
    cluster, keys = _cluster_with_a_running_job(tmp_path)
    try:
        (keys / "authorized" / "node-a.key").unlink()
        log = _stopped_with_status_2(cluster)
        assert "no longer admits the key of node node-a: the key 'node-a' was removed from the scheduler's authorized/" in log
        assert "node-a.key copied back into the scheduler's authorized/ folder" in log, log
        scheduler = cluster.log("scheduler")
        assert scheduler.count("refused a message from agent node-a: the key of agent node-a was removed") == 1, scheduler
    finally:
        cluster.close()


@pytest.mark.live
def test_an_agent_refused_when_it_reconnects_stops_its_job_and_exits_naming_the_node(tmp_path):
    """The scheduler restarted after the node's key was made again: the agent's new connection
    is refused in its handshake (nothing reaches the agent but the handshake's failure)."""
    cluster, keys = _cluster_with_a_running_job(tmp_path)
    try:
        cluster.kill("scheduler", 15)  # (SIGTERM: the scheduler stops; the agent keeps its job and reconnects)
        _make_again(keys, "node-a")
        cluster.start_scheduler()
        log = _stopped_with_status_2(cluster)
        assert "refused node node-a when it reconnected: authentication refused" in log, log
        assert "copy the node's current key pair (node-a.key_secret, with scheduler.key)" in log, log
        assert "start the agent again" in log, log
    finally:
        cluster.close()


@pytest.mark.live
def test_emulated_nodes_stop_when_one_node_s_key_is_removed(tmp_path):
    keys = tmp_path / "keys"
    make_keys(keys, ["emu-0", "emu-1"])
    cluster = LiveCluster(
        tmp_path / "run", GRAPH, {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS}, security=("--keys", str(keys))
    )
    try:
        cluster.start_scheduler()
        cluster.start_agent("emu", "1:V100", extra=("--keys", str(keys)), nodes=2)
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 60, "both nodes")
        cluster.wait_for(lambda: "attempt 1" in cluster.log("scheduler"), 60, "job 0 to start")
        (keys / "authorized" / "emu-1.key").unlink()
        assert cluster.wait_exit("emu", 60) == 2, cluster.logs()
        log = cluster.log("emu")
        assert "no longer admits the key of node emu-1: the key 'emu-1' was removed" in log, log
        assert "emulated nodes stopped (a node's key is no longer admitted by the scheduler)" in log, log
    finally:
        cluster.close()


@pytest.mark.live
def test_a_registered_agent_is_told_key_refused_and_other_peers_an_error(tmp_path):
    """The scheduler's socket on its own: a connection it knows as a node's is still routable
    once its key is withdrawn, and is told once with `key_refused`; so is one with an agent's key
    it does not know as a node's (its node taken over by another registration); a submitter
    with `error`."""
    keys = tmp_path / "keys"
    make_keys(keys, ["n1", "n3"], submitters=["n2"])
    ctx = zmq.Context()
    nodes: dict[bytes, str] = {}
    server = Server(
        "tcp://127.0.0.1:*", ServerSecurity.choose(str(keys), False, ""), _NoJournal(), collections.Counter(), nodes.get
    )  # type: ignore[arg-type]
    heard: list[tuple[bytes, str]] = []  # (identity, User-Id)
    server.handlers["heartbeat"] = lambda identity, seq, body, frame: heard.append((identity, frame.get("User-Id")))
    server.start()
    peers = [_dealer(ctx, keys, name, server.endpoint) for name in ("n1", "n2", "n3")]
    try:
        for sock in peers:
            sock.send(protocol.encode("heartbeat", 1, running=[]))
        server.serve(time.time() + 5, lambda: len(heard) == 3, lambda: None)
        nodes.update((identity, "n1") for identity, user in heard if user == "agent:n1")  # (n1 registered; n3 not)
        for name in ("n1", "n2", "n3"):
            (keys / "authorized" / f"{name}.key").unlink()
        for seq in (2, 3, 4):  # (told once, however many messages follow)
            for sock in peers:
                sock.send(protocol.encode("heartbeat", seq, running=[]))
        server.serve(time.time() + 1.0, lambda: False, lambda: None)
        told_n1, told_n2, told_n3 = (_answers(sock, 1.0) for sock in peers)
        assert [t for t, _ in told_n1] == ["key_refused"], told_n1
        assert told_n1[0][1]["key"] == "n1" and told_n1[0][1]["cause"] == "removed"
        assert "it was removed from the scheduler's authorized/ folder" in told_n1[0][1]["reason"]
        assert [t for t, _ in told_n3] == ["key_refused"], told_n3
        assert [t for t, _ in told_n2] == ["error"], told_n2
        assert len(heard) == 3 and server.counters["refused_peers"] == 3
    finally:
        for sock in peers:
            sock.close()
        server.close()
        ctx.term()


def test_key_refused_is_checked_as_every_message_is():
    frame = protocol.encode("key_refused", 1, key="node-a", cause="made_again", reason="a new key was made")
    assert protocol.decode(frame) == ("key_refused", 1, {"key": "node-a", "cause": "made_again", "reason": "a new key was made"})
    with pytest.raises(ProtocolError, match="cause must be one of removed, made_again"):
        protocol.decode(frame.replace(b'"made_again"', b'"lost"'))
    with pytest.raises(ProtocolError, match="key .* is not a valid name"):
        protocol.decode(frame.replace(b'"node-a"', b'"../x"'))
    with pytest.raises(ProtocolError, match="missing field 'reason'"):
        protocol.decode(b'{"v":%d,"type":"key_refused","seq":2,"key":"n","cause":"removed"}' % protocol.VERSION)
    # Only an agent takes it; the submitter's vocabulary does not hold it.
    with pytest.raises(ProtocolError, match="not a message this side accepts"):
        protocol.decode(frame, {"accepted", "error"})


def test_the_security_paragraph_says_a_node_on_an_old_key_goes_offline_when_told():
    # docs/live.md: a node whose agent holds a key made again goes offline once the agent is
    # told (`key_refused`), as `test_an_agent_whose_key_was_made_again_...` shows, not after
    # the heartbeat timeout.
    from tests.conftest import REPO

    page = (REPO / "docs" / "live.md").read_text()
    paragraph = page.split("**Security.**", 1)[1].split("\n\n", 1)[0]
    told = [s for s in re.split(r"(?<=[.;])\s+", " ".join(paragraph.split())) if "old key" in s]
    assert told and not [s for s in told if "--heartbeat-timeout" in s], told
