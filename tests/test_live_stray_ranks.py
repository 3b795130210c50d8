"""Stray workers of an attempt that still has real ranks on the node listing them: a rank left
behind by an in-place shrink whose number a grow then gave to another node, say. The scheduler
kills only the stray ranks there (a `revoke` naming them, `ranks`), and the attempt's real ranks
on that node run on, their leases standing (before, it revoked the whole attempt there: an
agent's revoke could not name ranks, so the real ranks were killed and the attempt ended). The
stray's exit is acknowledged, not taken as its rank's. A real agent and emulated nodes kill only
the ranks named; a malformed `ranks` is refused on the wire, naming the sender."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import zmq

from roundhouse.agents.agent.emulated import EmulatedNodes
from roundhouse.agents.agent.gpus import Gpu
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.types import Assignment, Plan, Resize
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity
from tests.conftest import REPO
from tests.livecluster import started_backend, stop, wait_until
from tests.test_agent_review_fixes import SCHEDULER, _launch_body
from tests.test_live_backend import FakeAgent, add_jobs, handled, live, pump, round_trip, serve_until  # noqa: F401 (live)
from tests.test_live_corners_agent import StandIn
from tests.test_wire_review_fixes import lines  # noqa: F401 (the logger-listening fixture)


def _revoke_frame(seq: int, **fields) -> bytes:
    """A revoke as sent, unchecked (`encode` would refuse a bad one)."""
    return json.dumps({"v": protocol.VERSION, "type": "revoke", "seq": seq, "job": 1, "attempt": 1, **fields}).encode()


@pytest.mark.parametrize(
    "ranks, reason",
    [
        ([], "revoke: ranks must not be empty"),
        ([1, 1], "revoke: ranks gives 1 twice"),
        (2, "revoke: ranks must be a list, got 2"),
        ([-1], "revoke: ranks[0] must be between 0 and 4095, got -1"),
        ([0, 4096], "revoke: ranks[1] must be between 0 and 4095, got 4096"),
        ([True], "revoke: ranks[0] must be a whole number, got true"),
        (["1"], 'revoke: ranks[0] must be a whole number, got "1"'),
        ([{"rank": 1}], "revoke: ranks[0] must be a whole number, got dict"),
    ],
)
def test_a_malformed_ranks_in_a_revoke_is_refused_on_the_wire(ranks, reason):
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode(_revoke_frame(1, kill=True, ranks=ranks))
    assert err.value.reason == reason
    with pytest.raises(protocol.ProtocolError):
        protocol.encode("revoke", 1, job=1, attempt=1, kill=True, ranks=ranks)


def test_a_revoke_s_ranks_are_optional_and_carried():
    assert protocol.decode(_revoke_frame(3, kill=True, ranks=[2, 0]))[2]["ranks"] == [2, 0]
    assert protocol.decode(_revoke_frame(4, kill=False))[2]["ranks"] is None
    assert protocol.decode(protocol.encode("revoke", 5, job=1, attempt=1, kill=True, ranks=[4]))[2]["ranks"] == [4]


@pytest.mark.live
def test_the_scheduler_kills_only_the_stray_rank_of_an_attempt_with_a_real_rank_on_the_node(live, lines):  # noqa: F811
    """Stand-in agents: node b lists rank 0 of an attempt whose rank 0 runs on a, beside its
    real rank 1."""
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), journal = live
    for agent in (a, b):
        agent.receive()
    (row,) = add_jobs(world, [{"job_id": 1, "arrival_s": 0.0, "gpus": 2, "model": "LM", "iterations": 1000.0}])
    round_trip(world, backend, Plan(launch_rows=[row], launch_gpus=[0, 2], launch_counts=[2]))
    pump(backend)
    a.receive(1)
    b.receive(1)
    bad_before = backend.counters["bad_messages"]
    done = handled(backend)
    running = [{"job": 1, "attempt": 1, "rank": r, "gpu": g, "iteration": 7} for r, g in ((1, 0), (0, 1))]
    b.send("heartbeat", running=running)
    serve_until(backend, done, "b's heartbeat")
    pump(backend)
    assert b.receive(1) == [("revoke", {"job": 1, "attempt": 1, "kill": True, "rank": None, "ranks": [0]})]
    assert got.having("node b runs job 1 attempt 1 rank(s) 0, which this scheduler does not have there: killing them")
    # The stray's exit is acknowledged and not taken: the attempt, its books and the journal stand.
    b.exited(1, 1, 0, "killed", 7, reason="terminated by the agent")
    pump(backend)
    assert b.receive(1) == [("ack", {"job": 1, "attempt": 1, "rank": 0})]
    att = backend.attempts.live[(1, 1)]
    assert not att.exits and not att.ended and not att.kill_sent and not att.revoked and att.iteration == 7
    assert journal.db.execute("SELECT COUNT(*) FROM exits").fetchone() == (0,)
    assert backend.counters["bad_messages"] == bad_before
    assert got.having("job 1 attempt 1 rank 0 on b, a stray worker stopped there, exited (killed at iteration 7)")
    assert a.receive() == []
    # Heard once: the same exit again is one this scheduler killed no stray for, and is refused.
    b.exited(1, 1, 0, "killed", 7, reason="terminated by the agent")
    pump(backend)
    [(kind, body)] = b.receive(1)
    assert kind == "error" and "rank 0 does not run on node b" in body["reason"]
    answered = handled(backend)
    b.send("lease", job=1, attempt=1)
    serve_until(backend, answered, "b's lease check")
    assert b.receive(1) == [("lease_reply", {"job": 1, "attempt": 1, "valid": True})]


@pytest.mark.live
def test_a_stray_rank_left_by_a_shrink_and_a_grow_is_killed_alone_on_a_real_agent(tmp_path, lines):  # noqa: F811
    """A real scheduler backend and a real agent (node b): the job runs ranks 0 and 3 on a
    stand-in node a and ranks 1 and 2 on b. A shrink in place to two workers lets ranks 2 and 3
    go (told through rank 0, on a; b's worker has not left yet), and a grow back to four gives
    ranks 2 and 3 to a's GPUs 1 and 2: b's old rank 2 is then a stray. Only it is killed; rank 1
    runs on, and the attempt with it."""
    got = lines("roundhouse.scheduler")
    world = World(Cluster.parse("2x4:V100"), ProfileTable.load(), "V100")
    backend, address, journal = started_backend(tmp_path, world)
    ctx = zmq.Context()
    a = FakeAgent(ctx, address, "a", gpus=4)
    listed: list[list[tuple[int, int, int]]] = []  # what each of b's heartbeats lists
    running = backend.nodes.on_running

    def heard(node, procs, registering) -> None:
        if node.name == "b" and not registering:
            listed.append(sorted((p["job"], p["attempt"], p["rank"]) for p in procs))
        running(node, procs, registering)

    backend.nodes.on_running = heard
    log_path = tmp_path / "agent.log"
    argv = [sys.executable, "-m", "roundhouse.tools.cli", "agent", "--scheduler", address, "--insecure", "--name", "b"]
    argv += ["--fake-gpus", "4:V100", "--workdir", str(tmp_path / "work"), "--revoke-grace", "3"]
    agent = None

    def until(check, what: str, timeout: float = 30.0) -> None:
        wait_until(lambda: check() or pump(backend, 0.05), timeout, what, lambda: log_path.read_text(), every=0)

    try:
        a.register()
        until(lambda: backend.nodes.slots[0] is not None, "a registers")
        with open(log_path, "wb") as out:
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            agent = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        until(lambda: backend.nodes.slots[1] is not None, "b registers")
        job = {
            "job_id": 1,
            "arrival_s": 0.0,
            "gpus": 4,
            "model": "LM",
            "iterations": 10**6,
            "batch_size": 40,
            "command": "sleep 120",
        }
        (row,) = add_jobs(world, [job])
        round_trip(world, backend, Plan.of([Assignment(row, [0, 4, 5, 1])]))  # ranks 0 and 3 on a; 1 and 2 on b
        until(lambda: listed and listed[-1] == [(1, 1, 1), (1, 1, 2)], "b runs ranks 1 and 2")
        round_trip(world, backend, Plan.of(resizes=[Resize(row, [0, 4], 20)]))  # ranks 2, 3 leave (told through a)
        att = backend.attempts.live[(1, 1)]
        assert att.leaving == {2, 3}
        seen = len(listed)
        until(lambda: len(listed) >= seen + 2, "b heartbeats")
        assert listed[-1] == [(1, 1, 1), (1, 1, 2)]  # (rank 2 on its way out: nothing is killed)
        round_trip(world, backend, Plan.of(resizes=[Resize(row, [0, 4, 1, 2], 40)]))  # ranks 2, 3 again, on a
        assert att.world_size == 4 and att.slots.tolist() == [0, 1, 0, 0] and not att.leaving
        until(lambda: got.having("a stray worker stopped there"), "b's old rank 2 to be killed and its exit heard")
        said = "job 1 attempt 1 rank 2 on b, a stray worker stopped there, exited (killed at iteration 0): acknowledged"
        assert got.having(said), got.lines
        seen = len(listed)
        until(lambda: len(listed) >= seen + 5, "b heartbeats")
        assert listed[-1] == [(1, 1, 1)]  # rank 1 runs on
        assert agent.poll() is None
        text = log_path.read_text()
        assert "killing job 1 attempt 1 rank 2" in text and "killing job 1 attempt 1 rank 1" not in text, text
        assert "job 1 attempt 1 rank 1 killed" not in text, text
        assert not att.exits and not att.ended and not att.kill_sent and not att.revoked
        assert backend.attempts.current[row] is att and world.running_rows.tolist() == [row]
        assert journal.db.execute("SELECT COUNT(*) FROM exits").fetchone() == (0,)
        answered = handled(backend)
        a.send("lease", job=1, attempt=1)
        serve_until(backend, answered, "a's lease check")
        assert ("lease_reply", {"job": 1, "attempt": 1, "valid": True}) in a.receive(1, "lease_reply")
    finally:
        if agent is not None:
            stop(agent)
        a.sock.close()
        backend.close()
        journal.close()
        ctx.term()


@pytest.mark.live
def test_a_real_agent_kills_only_the_ranks_a_revoke_names_and_refuses_a_malformed_one(tmp_path):
    s = StandIn(tmp_path)
    try:
        s.hear(lambda t, b: t == "register")
        s.send("welcome", node_index=0, heartbeat_s=0.2, session="s")
        s.send("launch", **_launch_body(1, [(0, 0), (1, 1)], world_size=3, command=["sleep", "60"]))
        s.hear(lambda t, b: t == "started" and b["rank"] == 0)
        s.hear(lambda t, b: t == "started" and b["rank"] == 1)
        # A malformed one: refused, naming the scheduler and the field; nothing is stopped.
        s.sock.send_multipart([s.identity, _revoke_frame(s.seq.next(), kill=True, ranks=[1, 1])])
        assert s.logged("refused a message from the scheduler: revoke: ranks gives 1 twice"), s.log()
        assert s.running() == [(1, 1, 0), (1, 1, 1)]
        # Rank 1 named: it alone is killed, its exit reported as a kill's is.
        s.send("revoke", job=1, attempt=1, kill=True, ranks=[1])
        ended = s.hear(lambda t, b: t == "exited")
        assert (ended["rank"], ended["outcome"], ended["reason"]) == (1, "killed", "terminated by the agent")
        for _ in range(5):
            assert s.running() == [(1, 1, 0)]
        assert s.exits(1) == [] and s.agent.poll() is None
        # A rank it does not run: nothing is stopped; rank 0 runs on.
        s.send("revoke", job=1, attempt=1, kill=True, ranks=[2])
        assert s.running() == [(1, 1, 0)] and s.running() == [(1, 1, 0)] and s.exits(1) == []
        s.send("revoke", job=1, attempt=1, kill=True)  # (the whole attempt, as before)
        assert s.hear(lambda t, b: t == "exited")["rank"] == 0
    finally:
        s.close()


def test_emulated_nodes_end_only_the_ranks_a_revoke_names_on_the_node_it_came_to(lines):  # noqa: F811
    said = lines("roundhouse.agent")
    security = ClientSecurity.choose(None, "emu", True, SCHEDULER)
    nodes = EmulatedNodes(SCHEDULER, "emu", 2, [Gpu(0, "V100"), Gpu(1, "V100")], security)
    sent: list[tuple[str, str, dict]] = []
    for node in nodes.nodes:
        node.link.registered = True
        node.link.send = lambda type_, node=node, **body: sent.append((node.name, type_, body)) or True
    first, second = nodes.nodes
    seq = protocol.Sequence()

    def frame(node, type_: str, **body) -> None:
        nodes._on_frame(node, [protocol.encode(type_, seq.next(), **body)])

    launch = dict(world_size=3, iters_per_s=10.0, command=["x"])
    frame(first, "launch", **_launch_body(1, [(0, 0), (1, 1)], **launch))
    frame(second, "launch", **_launch_body(1, [(2, 0)], **launch))
    # Rank 0 named to the second node, which does not run it: nothing ends anywhere.
    frame(second, "revoke", job=1, attempt=1, kill=True, ranks=[0])
    assert said.having("dropped the scheduler's revoke of job 1 attempt 1 rank(s) 0: not running here")
    # A malformed one: refused, naming the scheduler.
    nodes._on_frame(first, [_revoke_frame(seq.next(), kill=True, ranks=[])])
    assert said.having("refused a message from the scheduler: revoke: ranks must not be empty")
    assert sorted(first.jobs) == [(1, 1, 0), (1, 1, 1)] and sorted(second.jobs) == [(1, 1, 2)]
    frame(first, "revoke", job=1, attempt=1, kill=True, ranks=[1])
    exits = [(name, b["rank"], b["outcome"]) for name, t, b in sent if t == "exited"]
    assert exits == [("emu-0", 1, "killed")]
    assert sorted(first.jobs) == [(1, 1, 0)] and sorted(second.jobs) == [(1, 1, 2)]
    # Without `ranks`: every rank of the attempt, on every node here, as before.
    frame(first, "revoke", job=1, attempt=1, kill=False, rank=0)
    exits = [(name, b["rank"], b["outcome"]) for name, t, b in sent if t == "exited"]
    assert exits[1:] == [("emu-0", 0, "preempted"), ("emu-1", 2, "preempted")]
    assert not first.jobs and not second.jobs


# --- the protocol's version ---------------------------------------------------------------------
#
# Version 3's revoke had no `ranks`: an agent of that release refuses a revoke naming them as
# carrying an unknown field, and its stray worker runs on. Sent under version 3 it would be read
# as that release's message; under another version, the agent stops with a message (a side of
# another version refuses every message), and mixed releases do not misread each other.


def test_a_revoke_naming_ranks_goes_out_under_a_version_after_3():
    frame = json.loads(protocol.encode("revoke", 1, job=1, attempt=1, kill=True, ranks=[0]))
    assert frame["v"] == protocol.VERSION == 4


def test_a_message_of_version_3_is_refused_by_its_version():
    old = {"v": 3, "type": "revoke", "seq": 1, "job": 1, "attempt": 1, "kill": True}
    with pytest.raises(protocol.WrongVersion) as err:
        protocol.decode(json.dumps(old).encode())
    assert err.value.reason == "unsupported protocol version 3 (this side speaks 4)"


def test_the_docs_and_the_protocol_s_comment_say_what_every_version_added():
    """docs/live.md's table of versions, and the comment above VERSION, name every version up to this one."""
    text = (REPO / "docs" / "live.md").read_text()
    table = text[text.index("| version | what it added |") :].split("\n\n")[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", table, re.MULTILINE)
    assert [int(v) for v, _ in rows] == list(range(1, protocol.VERSION + 1))
    assert "`ranks`" in rows[-1][1]
    source = (REPO / "wire" / "protocol.py").read_text()
    comment = source[source.index("# The protocol's version") : source.index("\nVERSION = ")]
    assert [int(v) for v in re.findall(r"(\d+): ", comment)] == list(range(2, protocol.VERSION + 1))
