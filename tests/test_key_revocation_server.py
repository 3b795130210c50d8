"""A key removed from the scheduler's `authorized/` folder cuts off a peer that is already
connected: the scheduler's socket and a dealer with real CURVE keys on 127.0.0.1 (no processes)."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import time

import zmq

from roundhouse.runtime.backends.live import LiveBackend, LiveOptions
from roundhouse.runtime.backends.live import admitted as admitted_module
from roundhouse.runtime.backends.live.server import Server
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.world import World
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.traces.profiles import ProfileTable
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity, ServerSecurity
from tests.livecluster import free_port
from tests.test_live_backend import FakeAgent, launch_two, pump, register_in_order, round_trip

LOG = logging.getLogger("test")


class _NoJournal:
    def commit(self) -> None:
        pass


def _dealer(ctx, keys, name: str, address: str):
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    ClientSecurity.choose(str(keys), name, False, address).apply(sock, LOG)
    sock.connect(address)
    return sock


def _answers(sock, wait_s: float) -> list[tuple[str, dict]]:
    got = []
    while sock.poll(int(wait_s * 1000)):
        type_, _, body = protocol.decode(sock.recv())
        got.append((type_, body))
        wait_s = 0.05
    return got


def test_a_removed_key_is_refused_from_its_next_message_on(tmp_path, caplog, monkeypatch):
    keys = tmp_path / "keys"
    make_keys(keys, ["n1", "n2"], submitters=["alice"])
    handled: list[tuple[str, str, int]] = []  # (type, the key it came with, seq)
    server = Server(
        "tcp://127.0.0.1:*", ServerSecurity.choose(str(keys), False, ""), _NoJournal(), collections.Counter(), lambda i: None
    )  # type: ignore[arg-type]
    for type_ in ("heartbeat", "submit"):
        server.handlers[type_] = lambda identity, seq, body, frame, t=type_: handled.append((t, frame.get("User-Id"), seq))
    server.start()
    ctx = zmq.Context()
    n1, n2, alice = (_dealer(ctx, keys, name, server.endpoint) for name in ("n1", "n2", "alice"))
    seqs = {sock: protocol.Sequence() for sock in (n1, n2, alice)}

    def send(sock, type_: str, **body) -> int:
        seq = seqs[sock].next()
        sock.send(protocol.encode(type_, seq, **body))
        return seq

    def serve_until(done, most_s: float = 5.0) -> None:
        server.serve(time.time() + most_s, done, lambda: None)

    try:
        first = [send(n1, "heartbeat", running=[]), send(n2, "heartbeat", running=[]), send(alice, "submit", jobs=[])]
        serve_until(lambda: len(handled) == 3)
        assert sorted(handled) == sorted(
            zip(("heartbeat", "heartbeat", "submit"), ("agent:n1", "agent:n2", "submitter:alice"), first)
        )

        # Messages from admitted keys read no file: the folder is looked at by a `stat` per wake-up.
        reads = []
        real_stamp = admitted_module.folder_stamp
        monkeypatch.setattr(admitted_module, "folder_stamp", lambda folder: reads.append(folder) or real_stamp(folder))
        for _ in range(200):
            send(n2, "heartbeat", running=[])
        serve_until(lambda: len(handled) == 203)
        monkeypatch.undo()
        assert len(handled) == 203 and len(reads) <= 1  # (at most the once-a-second look for keys written over)

        (keys / "authorized" / "n1.key").unlink()
        (keys / "authorized" / "alice.key").unlink()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="roundhouse.scheduler"):
            send(n1, "heartbeat", running=[])
            send(alice, "submit", jobs=[])
            kept = send(n2, "heartbeat", running=[])
            serve_until(lambda: len(handled) == 204)
            server.serve(time.time() + 0.3, lambda: False, lambda: None)
            for _ in range(3):  # further messages: dropped, no new warning, no new answer
                send(n1, "heartbeat", running=[])
            send(alice, "submit", jobs=[])
            server.serve(time.time() + 0.3, lambda: False, lambda: None)
        assert handled[-1] == ("heartbeat", "agent:n2", kept) and len(handled) == 204  # only n2's was taken
        warnings = [r.getMessage() for r in caplog.records if "was removed" in r.getMessage()]
        assert len(warnings) == 2, warnings
        assert any("the key of agent n1 was removed" in w for w in warnings)
        assert any("the key of submitter alice was removed" in w for w in warnings)
        assert server.counters["refused_peers"] == 2
        # Told once: an agent's key with `key_refused` (on which its agent stops), a submitter's with `error`.
        for sock, name, told in ((n1, "n1", "key_refused"), (alice, "alice", "error")):
            answers = _answers(sock, 1.0)
            assert [t for t, _ in answers] == [told], answers
            assert f"no longer admits the key '{name}'" in answers[0][1]["reason"]

        # Its key put back, a peer is taken again.
        make_keys(keys, ["n1"])  # (a kept pair: `roundhouse keys` never puts a removed key back)
        assert not (keys / "authorized" / "n1.key").exists()
        (keys / "authorized" / "n1.key").write_bytes((keys / "n1.key").read_bytes())
        back = send(n1, "heartbeat", running=[])
        serve_until(lambda: handled[-1][1:] == ("agent:n1", back), 3.0)
        assert handled[-1] == ("heartbeat", "agent:n1", back)
    finally:
        for sock in (n1, n2, alice):
            sock.close()
        server.close()
        ctx.term()


class _KeyedAgent(FakeAgent):
    """The stand-in agent of tests/test_live_backend.py, connecting with its CURVE key pair."""

    def __init__(self, ctx, address: str, name: str, keys):
        self.sock = _dealer(ctx, keys, name, address)
        self.name, self.gpus, self.kind = name, 2, "V100"
        self.seq = protocol.Sequence()
        self.inbox: list[tuple[str, dict]] = []


@contextlib.contextmanager
def two_keyed_nodes(tmp_path):
    """A live backend served by keyed agents a and b (2 GPUs each), each running a job: yields
    (keys folder, ZeroMQ context, world, backend, agents, journal, b's job row)."""
    keys = tmp_path / "keys"
    make_keys(keys, ["a", "b"])
    ctx = zmq.Context()
    world = World(Cluster.parse("2x2:V100"), ProfileTable.load(), "V100")
    address = f"tcp://127.0.0.1:{free_port()}"
    journal = Journal(tmp_path / "j.sqlite")
    options = LiveOptions(
        heartbeat_s=0.1, heartbeat_timeout_s=60.0, max_retries=1, wait_for_agents_s=0.0, checkpoint_dir=str(tmp_path / "ck")
    )
    security = ServerSecurity.choose(str(keys), False, address)
    backend = LiveBackend(world, 0.2, address, security, journal, options, {"graph_digest": "x", "cluster": "c", "round_s": 0.2})
    backend.start()
    agents = [_KeyedAgent(ctx, address, name, keys) for name in ("a", "b")]
    try:
        register_in_order(backend, agents)
        _, r1 = launch_two((world, backend, agents, journal), 100.0)
        yield keys, ctx, world, backend, agents, journal, r1
    finally:
        for agent in agents:
            agent.sock.close()
        backend.close()
        journal.close()
        ctx.term()


def heartbeat_until_b_is_lost(backend, agents) -> None:
    """Every agent heartbeats until node b is lost, at most 5 s (well within the heartbeat
    timeout: b is lost because its key is refused, not because it falls silent)."""
    assert backend.options.heartbeat_timeout_s > 5
    deadline = time.time() + 5
    while time.time() < deadline and backend.nodes.slots[1].online:
        for agent in agents:
            agent.send("heartbeat", running=[])
        pump(backend, 0.1)


def test_a_node_whose_key_is_removed_is_lost_at_once_and_its_job_requeued(tmp_path, caplog):
    with two_keyed_nodes(tmp_path) as (keys, _, world, backend, agents, _, r1):
        (keys / "authorized" / "b.key").unlink()
        with caplog.at_level(logging.WARNING, logger="roundhouse.scheduler"):
            heartbeat_until_b_is_lost(backend, agents)
        assert "refused a message from agent b: the key of agent b was removed" in caplog.text
        assert "node b lost (its key is no longer admitted)" in caplog.text
        events = round_trip(world, backend, None)
        assert events.requeued.tolist() == [r1] and events.nodes_lost == ("b",)
        assert events.online.tolist() == [True, True, False, False]
        backend.journal.commit()
        assert backend.journal.stopped_nodes() == {"b"}  # (a resumed run keeps b offline until it registers)


def test_a_key_added_as_the_folder_was_read_is_not_refused(tmp_path, caplog):
    """A key file added within the same tick of the folder's clock as the last read leaves the
    folder's time as it was: a key not known is looked for again before it is refused."""
    keys = tmp_path / "keys"
    make_keys(keys, ["n1"])
    handled: list[str] = []
    server = Server(
        "tcp://127.0.0.1:*", ServerSecurity.choose(str(keys), False, ""), _NoJournal(), collections.Counter(), lambda i: None
    )  # type: ignore[arg-type]
    server.handlers["heartbeat"] = lambda identity, seq, body, frame: handled.append(frame.get("User-Id"))
    server.start()
    ctx = zmq.Context()
    authorized = keys / "authorized"
    before = authorized.stat().st_mtime_ns
    make_keys(keys, ["n2"])
    os.utime(authorized, ns=(before, before))
    n2 = _dealer(ctx, keys, "n2", server.endpoint)
    try:
        with caplog.at_level(logging.WARNING, logger="roundhouse.scheduler"):
            n2.send(protocol.encode("heartbeat", 1, running=[]))
            server.serve(time.time() + 5, lambda: bool(handled), lambda: None)
        assert handled == ["agent:n2"] and "was removed" not in caplog.text
    finally:
        n2.close()
        server.close()
        ctx.term()
