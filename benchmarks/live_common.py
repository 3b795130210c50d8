"""Shared by the live benchmarks: a real scheduler on loopback, and many protocol-speaking node
agents in one process that do not start processes (so that what is measured is the scheduler).

The agents register, heartbeat and, if asked, answer each launch at once with `started` and
(after `finish_after_s`) an `exited done`, acknowledging nothing else; `barrier` waits until
the scheduler has handled all they sent."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import zmq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import not_a_script  # noqa: E402

from roundhouse.agents.submitter import Submitter  # noqa: E402
from roundhouse.tools.deferred_interrupts import deferred_interrupts  # noqa: E402
from roundhouse.tools.loopback import Loopback  # noqa: E402
from roundhouse.wire import protocol  # noqa: E402
from roundhouse.wire.security import ClientSecurity  # noqa: E402

GRAPH = """
round = {round};
cluster = "{nodes}x{gpus}:V100";
src :: LiveSource;
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


@contextmanager
def live_cluster(prefix: str, graph: str, **loopback) -> Iterator[Loopback]:
    """A Loopback cluster (its processes not started yet) in a fresh temporary folder holding
    `graph`. At the end, however it ends (the body done or failed, an interrupt, a failure
    while its processes start), every process it started is stopped. The folder is removed,
    but for a failure of the body once the cluster was made (not an interrupt): then it is kept
    for its logs, its path printed with the end of each process's log."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    cluster: Loopback | None = None
    failed = False
    try:
        (folder / "graph.sched").write_text(graph)
        cluster = Loopback(folder, folder / "graph.sched", **loopback)
        yield cluster
    except BaseException as err:
        failed = cluster is not None and not isinstance(err, KeyboardInterrupt)  # (a script's SystemExit is a failure)
        raise
    finally:
        try:
            if cluster is not None:
                cluster.close()  # (a second Ctrl-C hurries it, and is delivered once all have stopped)
        finally:
            if failed and cluster is not None:
                said = cluster.logs() if cluster.processes else ""
                print(f"the run did not finish; its folder (logs included) is kept: {folder}", file=sys.stderr)
                if said:
                    print(f"the end of its logs:\n{said}", file=sys.stderr)
            else:
                with deferred_interrupts():  # (a Ctrl-C half-way would leave part of the folder)
                    shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def running_scheduler(nodes: int, gpus: int, round_s: str = "1s") -> Iterator[Loopback]:
    """A scheduler (Fifo, FirstFree) for `nodes` agents of `gpus` GPUs, as `live_cluster`."""
    graph = GRAPH.format(round=round_s, nodes=nodes, gpus=gpus)
    serve_args = ("--wait-for-agents", "60s", "--log-level", "warning")
    with live_cluster("rh-bench-", graph, heartbeat="1s", timeout="30s", serve_args=serve_args) as cluster:
        cluster.start_scheduler()
        yield cluster


class LoadAgents:
    """`count` agents of `gpus` fake GPUs each, served from this thread."""

    def __init__(self, address: str, count: int, gpus: int, finish_after_s: float | None = None):
        self.ctx = zmq.Context()
        self.poller = zmq.Poller()
        self.socks = []
        self.seqs = []
        for _ in range(count):
            s = self.ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.SNDHWM, 1_000_000)
            s.connect(address)
            self.socks.append(s)
            self.seqs.append(protocol.Sequence())
            self.poller.register(s, zmq.POLLIN)
        self.gpus = gpus
        self.finish_after_s = finish_after_s
        self.running: list[list[tuple[int, int, int]]] = [[] for _ in range(count)]  # (job, attempt, rank)
        self.pending: list[tuple[float, int, tuple[int, int, int]]] = []
        self.launches = 0
        self.sent = 0  # messages sent to the scheduler, of every kind
        self.lease_replies = 0  # answers to `barrier`'s round trips
        self.covered = 0  # messages sent up to the last barrier's round trips (see `barrier`)
        self._last_beat = 0.0
        for i in range(len(self.socks)):
            self.send(
                i,
                "register",
                node=f"n{i}",
                address="127.0.0.1",
                session=f"s{i}",
                gpus=[{"index": g, "type": "V100"} for g in range(gpus)],
                running=[],
            )

    def send(self, i: int, type_: str, **body) -> None:
        self.socks[i].send(protocol.encode(type_, self.seqs[i].next(), **body))
        self.sent += 1

    def serve(self, seconds: float) -> None:
        deadline = time.time() + seconds
        while time.time() < deadline:
            for sock, _ in self.poller.poll(20):
                i = self.socks.index(sock)
                while sock.poll(0):
                    type_, _, body = protocol.decode(sock.recv())
                    if type_ == "lease_reply":
                        self.lease_replies += 1
                    elif type_ == "launch":
                        self.launches += 1
                        for r in body["ranks"]:
                            key = (body["job"], body["attempt"], r["rank"])
                            self.send(i, "started", job=key[0], attempt=key[1], rank=key[2])
                            if self.finish_after_s is not None:
                                self.pending.append((time.time() + self.finish_after_s, i, key))
                            else:
                                self.running[i].append(key)
            now = time.time()
            due = [p for p in self.pending if p[0] <= now]
            if due:
                self.pending = [p for p in self.pending if p[0] > now]
                for _, i, (job, attempt, rank) in due:
                    self.send(
                        i,
                        "exited",
                        job=job,
                        attempt=attempt,
                        rank=rank,
                        outcome="done",
                        iteration=1,
                        start_iteration=0,
                        permanent=False,
                        reason="",
                    )
            if now - self._last_beat >= 0.5:
                self._last_beat = now
                for i in range(len(self.socks)):
                    self.send(
                        i,
                        "heartbeat",
                        running=[{"job": j, "attempt": a, "rank": r, "gpu": 0, "iteration": 1} for j, a, r in self.running[i]],
                    )

    def barrier(self, timeout: float) -> None:
        """Return once the scheduler has handled every message the agents sent before: each agent
        sends a round-trip lease check after them, which the scheduler answers in turn (one
        connection's messages arrive in order, and each is handled before the next is read).
        Serves the agents meanwhile (their heartbeats sent meanwhile are not covered:
        `covered` is the count of messages sent up to the checks); a TimeoutError after
        `timeout` seconds."""
        expected = self.lease_replies + len(self.socks)
        for i in range(len(self.socks)):
            self.send(i, "lease", job=0, attempt=1)
        self.covered = self.sent
        wait_until(lambda: self.lease_replies >= expected, timeout, self.serve)

    def serve_in_background(self) -> None:
        """Keep heartbeating from a thread (which then owns the sockets) while this one measures."""
        import threading

        self._stop = threading.Event()

        def loop():
            while not self._stop.is_set():
                self.serve(0.2)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def close(self) -> None:
        if getattr(self, "_thread", None) is not None:
            self._stop.set()
            self._thread.join(timeout=5)
        for s in self.socks:
            s.close()
        self.ctx.term()


def submitter(address: str) -> Submitter:
    return Submitter(address, ClientSecurity(None), timeout_s=60)


def wait_until(check, timeout: float, serve=None) -> None:
    deadline = time.time() + timeout
    while not check():
        if time.time() > deadline:
            raise TimeoutError("benchmark setup timed out")
        if serve is not None:
            serve(0.2)
        else:
            time.sleep(0.2)


if __name__ == "__main__":
    not_a_script("benchmarks/scheduler_messages.py, benchmarks/lease_check.py or benchmarks/live_scale.py")
