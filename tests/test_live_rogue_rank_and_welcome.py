"""Two confused or rogue peers on the live wire, on real ZeroMQ sockets. An agent whose heartbeat
lists a rank its attempt never had: the scheduler logs it, naming the sender, the node, the job,
the attempt and the rank, and otherwise ignores it (before, it revoked the whole attempt there,
killing the attempt's real ranks: an agent's revoke has no one-rank kill). And a scheduler's
side that sends an agent a welcome it did not ask for: the agent logs it, naming what it
carried, and keeps the node index, heartbeat interval and session it has (before, it took
them); a welcome answering a registration anew is still taken."""

from __future__ import annotations

import time

import pytest

from roundhouse.runtime.types import Plan
from roundhouse.wire import protocol
from tests.test_agent_review_fixes import _emulated
from tests.test_live_backend import add_jobs, handled, live, pump, round_trip, serve_until  # noqa: F401  (live: the fixture)
from tests.test_live_corners_agent import StandIn
from tests.test_wire_review_fixes import lines  # noqa: F401  (the logger-listening fixture)

pytestmark = pytest.mark.live


def _worker(job: int, rank: int, gpu: int, iteration: int) -> dict:
    return {"job": job, "attempt": 1, "rank": rank, "gpu": gpu, "iteration": iteration}


def test_a_heartbeat_listing_a_rank_its_attempt_never_had_is_logged_and_the_attempt_runs_on(live, lines):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), _ = live
    for agent in (a, b):
        agent.receive()
    (row,) = add_jobs(world, [{"job_id": 1, "arrival_s": 0.0, "gpus": 2, "model": "LM", "iterations": 1000.0}])
    round_trip(world, backend, Plan(launch_rows=[row], launch_gpus=[0, 1], launch_counts=[2]))  # ranks 0 and 1 on a
    pump(backend)
    assert [t for t, _ in a.receive(1)] == ["launch"]
    bad_before = backend.counters["bad_messages"]
    done = handled(backend)
    a.send("heartbeat", running=[_worker(1, 0, 0, 7), _worker(1, 1, 1, 7), _worker(1, 5, 1, 7)])
    serve_until(backend, done, "a's heartbeat")
    said = got.having("ignored job 1 attempt 1 rank 5 in the heartbeat of ")
    assert said and said[0].endswith("(node a): job 1 attempt 1 has 2 rank(s), not rank 5"), got.lines
    assert backend.counters["bad_messages"] == bad_before + 1
    # Nothing is revoked: the real ranks run on, their progress taken, their lease standing.
    att = backend.attempts.live[(1, 1)]
    assert not att.revoked and not att.kill_sent and not att.exits and not att.ended and att.iteration == 7
    answered = handled(backend)
    a.send("lease", job=1, attempt=1)
    serve_until(backend, answered, "a's lease check")
    pump(backend)
    replies = a.receive(1)
    assert ("lease_reply", {"job": 1, "attempt": 1, "valid": True}) in replies, replies
    assert not [t for t, _ in replies if t == "revoke"], replies
    # A rank of the attempt not on the node that lists it is still taken as a stray worker there.
    done = handled(backend)
    b.send("heartbeat", running=[_worker(1, 1, 0, 7)])
    serve_until(backend, done, "b's heartbeat")
    pump(backend)
    assert [(t, m["job"], m["kill"]) for t, m in b.receive(1)] == [("revoke", 1, True)]


def _heartbeats_in(s: StandIn, seconds: float) -> int:
    s.heard.clear()
    deadline = time.time() + seconds
    while time.time() < deadline:
        if s.sock.poll(50):
            s.hear(lambda t, b: True)
    return sum(t == "heartbeat" for t, _ in s.heard)


def test_an_agent_ignores_a_welcome_it_did_not_ask_for_and_takes_one_that_answers_it(tmp_path):
    s = StandIn(tmp_path)
    try:
        s.hear(lambda t, b: t == "register")
        s.send("welcome", node_index=0, heartbeat_s=0.2, session="first")
        assert s.logged("agent a registered as node 0 (scheduler session first)"), s.log()
        s.hear(lambda t, b: t == "heartbeat")
        # Unasked: every value it carries differs from what the agent holds.
        s.send("welcome", node_index=5, heartbeat_s=30.0, session="second")
        assert _heartbeats_in(s, 2.0) >= 4, (s.heard, s.log())  # still every 0.2 s (taken, 30 s: none)
        said = (
            "ignored a welcome from the scheduler that answers no registration of node a (node index 5, heartbeats "
            "every 30 s, session second): it keeps node index 0, heartbeats every 0.2 s, session first"
        )
        assert s.logged(said), s.log()
        assert "registered as node 5" not in s.log() and "session second" not in s.log().replace(said, "")
        # Asked anew (the scheduler forgot it): the welcome answering its registration is taken.
        s.send("unknown", reason="this scheduler does not know this agent: register")
        s.hear(lambda t, b: t == "register")
        s.send("welcome", node_index=1, heartbeat_s=1.5, session="third")
        assert s.logged("agent a registered as node 1 (scheduler session third)"), s.log()
        assert _heartbeats_in(s, 2.0) <= 2, s.heard  # every 1.5 s now
        assert s.agent.poll() is None
    finally:
        s.close()


def test_emulated_nodes_ignore_a_welcome_they_did_not_ask_for_as_a_real_agent_does(lines):  # noqa: F811
    said = lines("roundhouse.agent")
    nodes, _ = _emulated()
    node = nodes.nodes[0]
    sent: list[str] = []
    node.link.send = lambda type_, **body: sent.append(type_) or True  # (its registrations: `node` among them)
    seq = protocol.Sequence()

    def welcome(**body) -> None:
        nodes._on_frame(node, [protocol.encode("welcome", seq.next(), **body)])

    node.link.register([])
    welcome(node_index=0, heartbeat_s=0.2, session="first")
    welcome(node_index=0, heartbeat_s=0.2, session="first")  # (the answer to a registration sent again: unsaid)
    assert not said.having("ignored a welcome")
    welcome(node_index=3, heartbeat_s=30.0, session="second")
    assert said.having("ignored a welcome from the scheduler that answers no registration of node emu-0 (node index 3")
    assert (node.link.node_index, node.link.heartbeat_s, node.link.scheduler_session) == (0, 0.2, "first")
    node.link.register([])  # (asked anew: its answer is taken)
    welcome(node_index=3, heartbeat_s=30.0, session="second")
    assert (node.link.node_index, node.link.heartbeat_s, node.link.scheduler_session) == (3, 30.0, "second")
    assert sent == ["register", "register"]
