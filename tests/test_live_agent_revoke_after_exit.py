"""A revoke that crosses the exit of the attempt it names (the agent stopped by Ctrl-C, twice,
killed its worker and reported the exit while the scheduler's round was revoking that attempt)
is expected, and harmless: the scheduler learns the attempt's end from the exit report. The
agent drops it quietly; a revoke of an attempt that never ran here is still warned of."""

from __future__ import annotations

import signal
import time

import pytest

from roundhouse.agents.agent.leases import Revocations
from roundhouse.wire import protocol
from tests.test_agent_review_fixes import _emulated, _launch_body
from tests.test_live_corners_agent import StandIn
from tests.test_wire_review_fixes import lines  # noqa: F401 (the fixture)

DROPPED = "dropped the scheduler's revoke of job"


@pytest.mark.live
def test_an_agent_stopped_twice_drops_quietly_a_revoke_that_crossed_its_workers_exit(tmp_path):
    s = StandIn(tmp_path)
    try:
        s.hear(lambda t, b: t == "register")
        s.send("welcome", node_index=0, heartbeat_s=0.5, session="s")
        s.send("launch", **_launch_body(3, [(0, 0)], world_size=1, command=["sleep", "60"]))
        s.hear(lambda t, b: t == "started" and b["job"] == 3)
        s.agent.send_signal(signal.SIGINT)
        assert s.logged("again kills its workers now")
        s.agent.send_signal(signal.SIGINT)
        # The exit comes; the round's revoke of that attempt is sent before its acknowledgement.
        deadline = time.time() + 30
        while True:
            assert time.time() < deadline, s.log()
            if not s.sock.poll(100):
                continue
            s.identity, frame = s.sock.recv_multipart()
            type_, _, body = protocol.decode(frame)
            if type_ == "exited" and body["job"] == 3:
                break
        s.send("revoke", job=3, attempt=1, kill=False)
        s.send("ack", job=3, attempt=1, rank=0)
        assert s.agent.wait(timeout=30) == 0
        assert s.logged("agent a stopped")
        assert DROPPED not in s.log()
    finally:
        s.close()


def test_a_revoke_of_an_attempt_whose_exit_was_reported_is_not_warned_of(lines):  # noqa: F811
    got = lines("roundhouse.agent")

    class NoWorkers:
        def all(self):
            return []

    ran = {(5, 2)}
    revocations = Revocations(NoWorkers(), grace_s=60.0, ended_here=lambda job, attempt: (job, attempt) in ran)  # type: ignore[arg-type]
    revocations.on_revoke({"job": 5, "attempt": 2, "kill": False})
    assert not got.having(DROPPED)
    revocations.on_revoke({"job": 5, "attempt": 3, "kill": False})  # (never ran here: warned)
    assert got.having("dropped the scheduler's revoke of job 5 attempt 3: not running here")


def test_emulated_nodes_drop_quietly_a_revoke_of_an_attempt_that_ended_there(lines):  # noqa: F811
    got = lines("roundhouse.agent")
    nodes, _ = _emulated()
    nodes._launch(nodes.nodes[0], _launch_body(7, [(0, 0)], world_size=1, iters_per_s=10.0))
    nodes._revoke({"job": 7, "attempt": 1, "kill": True})
    nodes._revoke({"job": 7, "attempt": 1, "kill": False})  # (crossed the exit)
    assert not got.having(DROPPED)
    nodes._revoke({"job": 7, "attempt": 2, "kill": False})
    assert got.having("dropped the scheduler's revoke of job 7 attempt 2: not running here")
