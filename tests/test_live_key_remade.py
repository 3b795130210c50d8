"""A key made again under the same name (`roundhouse keys`, after its pair was removed) cuts off a
peer still connected with the old key from its next message on, as a removed key does, while a
peer that connects with the new key is served: the scheduler's socket and dealers with real
CURVE keys on 127.0.0.1, and the live backend with a node whose agent holds the old key."""

from __future__ import annotations

import collections
import logging
import time

import pytest
import zmq

from roundhouse.runtime.backends.live.server import Server
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire import protocol
from roundhouse.wire.security import KEY_PROPERTY, ServerSecurity
from tests.test_key_revocation_server import (
    _answers,
    _dealer,
    _KeyedAgent,
    _NoJournal,
    heartbeat_until_b_is_lost,
    two_keyed_nodes,
)
from tests.test_live_backend import round_trip, serve_until

pytestmark = pytest.mark.live


def _make_again(keys, name: str, submitter: bool = False) -> None:
    """What an operator does to make a key again: remove the pair, run `roundhouse keys` again."""
    (keys / f"{name}.key").unlink()
    (keys / f"{name}.key_secret").unlink()
    make_keys(keys, [] if submitter else [name], submitters=[name] if submitter else [])


def test_a_key_made_again_cuts_off_the_old_key_s_connection_and_serves_the_new(tmp_path, caplog):
    keys = tmp_path / "keys"
    make_keys(keys, ["n1", "n2"], submitters=["alice"])
    handled: list[tuple[str, str, str, int]] = []  # (type, User-Id, key, seq)
    server = Server(
        "tcp://127.0.0.1:*", ServerSecurity.choose(str(keys), False, ""), _NoJournal(), collections.Counter(), lambda i: None
    )  # type: ignore[arg-type]
    for type_ in ("heartbeat", "submit"):
        server.handlers[type_] = lambda identity, seq, body, frame, t=type_: handled.append(
            (t, frame.get("User-Id"), frame.get(KEY_PROPERTY), seq)
        )
    server.start()
    ctx = zmq.Context()
    old_n1_key = (keys / "n1.key").read_bytes()
    n1, n2, alice = (_dealer(ctx, keys, name, server.endpoint) for name in ("n1", "n2", "alice"))
    socks = [n1, n2, alice]
    seqs: dict = collections.defaultdict(protocol.Sequence)

    def send(sock, type_: str, **body) -> int:
        seq = seqs[sock].next()
        sock.send(protocol.encode(type_, seq, **body))
        return seq

    def serve_for(seconds: float, done=lambda: False) -> None:
        server.serve(time.time() + seconds, done, lambda: None)

    def public(name: str) -> str:
        return next(line.split('"')[1] for line in (keys / f"{name}.key").read_text().splitlines() if "public-key" in line)

    try:
        send(n1, "heartbeat", running=[])
        send(alice, "submit", jobs=[])
        serve_for(5.0, lambda: len(handled) == 2)
        # Each message says the key its connection was admitted with.
        assert sorted(h[:3] for h in handled) == [
            ("heartbeat", "agent:n1", public("n1")),
            ("submit", "submitter:alice", public("alice")),
        ]

        _make_again(keys, "n1")
        _make_again(keys, "alice", submitter=True)
        assert (keys / "n1.key").read_bytes() != old_n1_key
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="roundhouse.scheduler"):
            send(n1, "heartbeat", running=[])  # the old keys' connections: dropped from their next message on
            send(alice, "submit", jobs=[])
            kept = send(n2, "heartbeat", running=[])
            serve_for(5.0, lambda: len(handled) == 3)
            serve_for(0.3)
            for _ in range(3):  # further messages: dropped, with no new warning or answer
                send(n1, "heartbeat", running=[])
            serve_for(0.3)
        assert len(handled) == 3 and handled[-1][1:] == ("agent:n2", public("n2"), kept)
        warnings = [r.getMessage() for r in caplog.records if "was made again" in r.getMessage()]
        assert len(warnings) == 2, caplog.text
        assert any("the key of agent n1 was made again" in w and "this connection uses the old one" in w for w in warnings)
        assert any("the key of submitter alice was made again" in w for w in warnings)
        assert "was removed" not in caplog.text
        assert server.counters["refused_peers"] == 2
        # Told once: an agent's key with `key_refused` (on which its agent stops), a submitter's with `error`.
        for sock, name, told in ((n1, "n1", "key_refused"), (alice, "alice", "error")):
            answers = _answers(sock, 1.0)
            assert [t for t, _ in answers] == [told], answers
            assert (
                f"no longer admits this connection's key '{name}': a new key was made under that name" in answers[0][1]["reason"]
            )

        # Peers with the new keys are served, and the old keys' connections stay cut off.
        new_n1, new_alice = _dealer(ctx, keys, "n1", server.endpoint), _dealer(ctx, keys, "alice", server.endpoint)
        socks += [new_n1, new_alice]
        fresh = [send(new_n1, "heartbeat", running=[]), send(new_alice, "submit", jobs=[])]
        send(n1, "heartbeat", running=[])
        serve_for(5.0, lambda: len(handled) == 5)
        serve_for(0.3)
        assert sorted(handled[3:]) == sorted(
            [("heartbeat", "agent:n1", public("n1"), fresh[0]), ("submit", "submitter:alice", public("alice"), fresh[1])]
        )
        assert len(handled) == 5 and server.counters["refused_peers"] == 2
    finally:
        for sock in socks:
            sock.close()
        server.close()
        ctx.term()


def test_a_node_whose_key_is_made_again_is_lost_then_served_under_the_new_key(tmp_path, caplog):
    with two_keyed_nodes(tmp_path) as (keys, ctx, world, backend, agents, _, r1):
        _make_again(keys, "b")
        with caplog.at_level(logging.WARNING, logger="roundhouse.scheduler"):
            heartbeat_until_b_is_lost(backend, agents)  # (the old b keeps heartbeating)
        assert "refused a message from agent b: the key of agent b was made again" in caplog.text
        assert "node b lost (its key is no longer admitted)" in caplog.text
        events = round_trip(world, backend, None)
        assert events.requeued.tolist() == [r1] and events.nodes_lost == ("b",)

        # b's agent started again with its new pair: it registers and is served.
        agents[1].sock.close()
        agents[1] = new_b = _KeyedAgent(ctx, backend.server.endpoint, "b", keys)
        new_b.register()
        serve_until(backend, lambda: backend.nodes.slots[1].online, "b to register with its new key")
        assert any(t == "welcome" for t, _ in new_b.receive(1, "welcome"))
        events = round_trip(world, backend, None)
        assert events.online.tolist() == [True, True, True, True] and events.nodes_joined == ("b",)
