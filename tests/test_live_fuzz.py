"""Fuzzing the live mode's receivers: random, truncated, mutated, oversized, multi-frame and
out-of-order frames at the scheduler and at an agent. Both must stay up and keep serving."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import pytest
import zmq

from roundhouse.agents.submitter import Submitter
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity
from tests.conftest import REPO
from tests.livecluster import LiveCluster, free_port, stop, wait_until

# Real agents, schedulers or training processes on this machine (the quick loop is -m "not live").
pytestmark = pytest.mark.live

# One valid body per message type (the fuzzer mutates these).
EXAMPLES = {
    "register": {"node": "n1", "address": "127.0.0.1", "gpus": [{"index": 0, "type": "V100"}], "running": [], "session": "s"},
    "heartbeat": {"running": [{"job": 1, "attempt": 1, "rank": 0, "gpu": 0, "iteration": 5}]},
    "started": {"job": 1, "attempt": 1, "rank": 0},
    "metrics": {"job": 1, "attempt": 1, "rank": 0, "iteration": 3, "values": {"loss": 0.5}},
    "exited": {
        "job": 1,
        "attempt": 1,
        "rank": 0,
        "outcome": "done",
        "iteration": 3,
        "start_iteration": 0,
        "permanent": False,
        "reason": "",
    },
    "welcome": {"node_index": 0, "heartbeat_s": 0.3, "session": "x"},
    "launch": {
        "job": 5,
        "attempt": 1,
        "ranks": [{"rank": 0, "gpu": 0}],
        "world_size": 1,
        "master_addr": "127.0.0.1",
        "master_port": 29999,
        "iterations": 0,
        "batch_size": 0,
        "checkpoint_dir": "/tmp/none",
        "checkpoint_every_s": 0,
        "command": ["true"],
    },
    "revoke": {"job": 1, "attempt": 1, "kill": True},
    "key_refused": {"key": "node-a", "cause": "removed", "reason": "fuzz"},
    "resize": {
        "job": 1,
        "attempt": 1,
        "generation": 1,
        "world_size": 2,
        "batch_size": 8,
        "master_addr": "127.0.0.1",
        "master_port": 29998,
        "ranks": [{"rank": 1, "gpu": 1}],
    },
    "ack": {"job": 1, "attempt": 1, "rank": 0},
    "shutdown": {"reason": "fuzz"},
    "submit": {"jobs": [{"gpus": 1, "model": "LM", "iterations": 5}]},
    "status": {},
    "lease": {"job": 1, "attempt": 1},
    "report": {"job": 1, "attempt": 1, "rank": 0, "iteration": 2, "values": {"loss": 1.0}},
    "exiting": {"job": 1, "attempt": 1, "rank": 0, "outcome": "done", "iteration": 2, "start_iteration": 0},
    "checkpointed": {"job": 1, "attempt": 1, "rank": 0, "iteration": 2, "path": "/tmp/x"},
}
ODD_VALUES = [None, -1, 0, 2**70, 1e308, -0.5, "", "x" * 5000, [], {}, True, [1, [2, [3]]], {"a": {"b": 1}}, "\u0000\ud7ff"]


def fuzz_frames(rng: random.Random, n: int, types: list[str], seq: int = 10**15) -> list[list[bytes]]:
    """Bad messages (and some odd but valid ones), each a list of frames."""
    out = []
    for _i in range(n):
        kind = rng.randrange(9)
        type_ = rng.choice(types)
        body = json.loads(json.dumps(EXAMPLES[type_]))
        seq += 1
        if kind == 0:  # random bytes
            out.append([bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300)))])
            continue
        if kind == 1:  # a valid message cut short
            frame = json.dumps({"v": protocol.VERSION, "type": type_, "seq": seq, **body}).encode()
            out.append([frame[: rng.randrange(0, len(frame))]])
            continue
        if kind == 2:  # a field set to something odd
            if body:
                body[rng.choice(list(body))] = rng.choice(ODD_VALUES)
        elif kind == 3:  # a field missing, or an unknown one
            if body and rng.random() < 0.5:
                del body[rng.choice(list(body))]
            else:
                body["surprise"] = 1
        elif kind == 4:  # wrong version or type or seq
            envelope = rng.choice([{"v": 2}, {"v": "1"}, {"type": "nonsense"}, {"seq": -5}, {"seq": "a"}, {"v": None}])
            out.append([json.dumps({"v": protocol.VERSION, "type": type_, "seq": seq, **body, **envelope}).encode()])
            continue
        elif kind == 5:  # several frames
            frame = json.dumps({"v": protocol.VERSION, "type": type_, "seq": seq, **body}).encode()
            out.append([frame, frame, b"extra"])
            continue
        elif kind == 6:  # NaN and deep nesting
            out.append([rng.choice([b'{"v":1,"type":"status","seq":NaN}', b"[" * 5000 + b"]" * 5000, b'{"v":1,"seq":1e400}'])])
            continue
        elif kind == 7:  # out of order: a seq far lower than ones already sent
            out.append([json.dumps({"v": protocol.VERSION, "type": type_, "seq": rng.randrange(1, 1000), **body}).encode()])
            continue
        else:  # not an object, or text that is not JSON
            out.append([rng.choice([b"42", b'"hello"', b"null", b"{,}", "é".encode("latin-1")])])
            continue
        out.append([json.dumps({"v": protocol.VERSION, "type": type_, "seq": seq, **body}).encode()])
    # Oversized: refused by the receiver (1 MiB limit), and beyond ZeroMQ's hard limit (dropped).
    out.append([b'{"v":1,"type":"status","seq":1,"pad":"' + b"a" * (protocol.MAX_BYTES + 10) + b'"}'])
    out.append([b"z" * (protocol.HARD_LIMIT + 100)])
    return out


def test_the_scheduler_survives_garbage_and_keeps_serving(tmp_path):
    graph = """
    round = 1s;
    cluster = "1x2:V100";
    src :: LiveSource;
    src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
    """
    cluster = LiveCluster(tmp_path, graph, timeout="1.5s", serve_args=("--wait-for-agents", "0s"))
    ctx = zmq.Context()
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        rng = random.Random(0)
        frames = fuzz_frames(rng, 1200, list(EXAMPLES))
        socks = [ctx.socket(zmq.DEALER) for _ in range(4)]
        for s in socks:
            s.setsockopt(zmq.LINGER, 0)
            s.connect(cluster.address)
        for i, message in enumerate(frames):
            socks[i % len(socks)].send_multipart(message)
        for s in socks:  # read what the scheduler answered (errors), so its queues drain
            while s.poll(300):
                s.recv_multipart()
            s.close()
        assert cluster.processes["scheduler"].poll() is None, cluster.logs()
        insecure = ClientSecurity(None)
        with Submitter(cluster.address, insecure) as client:
            # (Replies stop for a moment when the scheduler does, on a loaded machine, before
            # every frame was read; frames still queued are read after a status asked now.)
            cluster.wait_for(lambda: client.status()["bad_messages"] >= 800, 30, "the garbage to be counted")
            assert client.status().get("handler_errors", 0) == 0, cluster.logs()
            # Any node the fuzzer managed to register times out (1.5 s) before the real agent comes.
            cluster.wait_for(lambda: client.status()["nodes_online"] == 0, 10, "the fuzzed nodes to time out")
            cluster.start_agent("node-a")
            ids = client.submit([{"command": f"{sys.executable} -c pass", "duration_s": 1, "gpus": 1}])

            def finished() -> bool:
                return cluster.query("SELECT outcome FROM attempts WHERE job_id = ?", (ids[0],)) == [("done",)]

            cluster.wait_for(finished, 30, "a job to run after the fuzzing")
        log = cluster.log("scheduler")
        assert "refused a message from" in log and "not a UTF-8 JSON message" in log and "out-of-order" in log
    finally:
        ctx.term()
        cluster.close()


def test_an_agent_survives_garbage_and_keeps_serving(tmp_path):
    port = free_port()
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(f"tcp://127.0.0.1:{port}")
    workdir = tmp_path / "agent"
    log = open(tmp_path / "agent.log", "wb")
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "roundhouse.tools.cli",
            "agent",
            "--scheduler",
            f"tcp://127.0.0.1:{port}",
            "--insecure",
            "--name",
            "fz",
            "--fake-gpus",
            "1:V100",
            "--workdir",
            str(workdir),
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    seq = protocol.Sequence()
    seq.n = 10**17

    def receive(want: str, timeout: float = 20.0, job: int | None = None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if router.poll(100):
                identity, frame = router.recv_multipart()
                type_, _, body = protocol.decode(frame)
                if type_ == want and (job is None or body.get("job") == job):
                    return identity, body
        raise AssertionError(f"no {want} from the agent\n{(tmp_path / 'agent.log').read_text()}")

    try:
        identity, reg = receive("register")
        assert reg["node"] == "fz"
        router.send_multipart([identity, protocol.encode("welcome", seq.next(), node_index=0, heartbeat_s=0.2, session="t")])
        rng = random.Random(1)
        # Seqs above the welcome's: odd but valid launches and revocations reach the handlers.
        kinds = ["welcome", "launch", "revoke", "ack", "submit", "exited"]
        for message in fuzz_frames(rng, 1500, kinds, seq=seq.n + 1)[:-1]:
            router.send_multipart([identity, *message])
        # And garbage at the node-local socket the job processes report on.
        push = ctx.socket(zmq.PUSH)
        # (ipc connects in the background: a linger lets the queued garbage out before close)
        push.setsockopt(zmq.LINGER, 5000)
        push.connect(f"ipc://{workdir}/reports.sock")
        for message in fuzz_frames(random.Random(2), 300, ["report", "exiting", "checkpointed"])[:-1]:
            push.send_multipart(message)
        push.close()
        assert agent.poll() is None
        receive("heartbeat")  # still heartbeating
        launch = dict(EXAMPLES["launch"], command=[sys.executable, "-c", "pass"], job=77)
        seq.n += 10**6  # past the fuzzer's seqs
        router.send_multipart([identity, protocol.encode("launch", seq.next(), **launch)])
        receive("started", job=77)
        _, exited = receive("exited", job=77)
        assert (exited["job"], exited["outcome"]) == (77, "done")
        assert agent.poll() is None
        wanted = ("refused a message from the scheduler", "refused a report from a local process")
        said = lambda: (tmp_path / "agent.log").read_text()  # noqa: E731
        # (the agent drains the reports socket on its own schedule)
        wait_until(lambda: all(w in said() for w in wanted), 20, "both refusals", lambda: said()[-2000:], every=0.2)
        assert "Traceback" not in said()
    finally:
        stop(agent, timeout=20)
        log.close()
        router.close()
        ctx.term()
