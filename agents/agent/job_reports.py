"""The reports socket: the node's jobs push their progress, checkpoints and exits to the agent
over a node-local socket (a PULL socket: ipc, or tcp on loopback when the ipc path would be too
long); rank 0's metrics are forwarded to the scheduler, at most once per `metrics_every_s`."""

from __future__ import annotations

import logging

import zmq

from roundhouse.agents.agent.messages import FROM_JOBS, decode, drain
from roundhouse.wire import protocol
from roundhouse.wire.protocol import RefusalLog, SeqTracker

log = logging.getLogger("roundhouse.agent")


class JobReports:
    def __init__(self, counters: dict[str, int], metrics_every_s: float, find_worker):
        self.counters = counters
        self.metrics_every_s = metrics_every_s
        self.find_worker = find_worker  # (job, attempt, rank) -> the worker, or None
        self._from_jobs = SeqTracker()
        self._last_metrics: dict[tuple[int, int], float] = {}
        self._pending_metrics: dict[tuple[int, int], dict] = {}
        self.endpoint = ""
        self.refusals = RefusalLog(log)

    def open(self, context: zmq.Context, workdir) -> zmq.Socket:
        """Bind the socket (its address goes to the jobs as `endpoint`); returns it, to poll."""
        sock = context.socket(zmq.PULL)
        sock.setsockopt(zmq.MAXMSGSIZE, protocol.HARD_LIMIT)
        sock.setsockopt(zmq.LINGER, 0)
        self.endpoint = f"ipc://{workdir}/reports.sock"
        if len(self.endpoint) > 100:  # ipc paths are limited to about 107 bytes
            port = sock.bind_to_random_port("tcp://127.0.0.1")
            self.endpoint = f"tcp://127.0.0.1:{port}"
        else:
            sock.bind(self.endpoint)
        self.socket = sock
        return sock

    def close(self) -> None:
        self.socket.close(linger=0)

    def drain(self) -> None:
        drain(self.socket, self.on_frame)

    def wait(self, timeout_ms: int) -> None:
        """Wait up to `timeout_ms` for reports, and take those that come."""
        if self.socket.poll(timeout_ms):
            self.drain()

    def on_frame(self, frames) -> None:
        got = decode(frames, FROM_JOBS, "a report from a local process", self.counters)
        if got is None:
            return
        type_, seq, body = got
        w = self.find_worker((body["job"], body["attempt"], body["rank"]))
        if w is None:
            self.refusals.warn(
                "unknown_worker",
                "dropped %s from a local process for job %d attempt %d rank %d: no such worker here",
                type_,
                body["job"],
                body["attempt"],
                body["rank"],
            )
            return
        if not self._within(w, type_, body):
            return
        if not self._from_jobs.accept(w.key, seq):
            self.counters["bad_messages"] += 1
            self.refusals.warn(
                "out_of_order", "dropped an out-of-order %s from job %d attempt %d rank %d (seq %d)", type_, *w.key, seq
            )
            return
        if type_ == "report":
            w.iteration = max(w.iteration, body["iteration"])
            if w.rank == 0:
                self._pending_metrics[(w.job, w.attempt)] = {"iteration": body["iteration"], "values": body["values"]}
        elif type_ == "checkpointed":
            w.iteration = max(w.iteration, body["iteration"])
            w.checkpoint, w.checkpoint_iteration = body["path"], body["iteration"]
        else:  # exiting
            w.final = body
            w.iteration = max(w.iteration, body["iteration"])
            if body.get("checkpoint") is not None:
                w.checkpoint, w.checkpoint_iteration = body["checkpoint"], body.get("checkpoint_iteration")

    def _within(self, w, type_: str, body: dict) -> bool:
        """Whether a report stays within the iterations its launch asked for (a worker stops
        there). One past them is refused before its `seq` counts, so that a forged report
        can neither end the job early nor shut out the worker's own later reports."""
        most = (w.spec or {}).get("iterations") or 0  # (0: a job known only by its duration counts its own)
        reached = max(body["iteration"], body.get("start_iteration") or 0, body.get("checkpoint_iteration") or 0)
        if not most or reached <= most:
            return True
        self.counters["bad_messages"] += 1
        self.refusals.warn(
            "past_the_end",
            "refused %s from a local process for job %d attempt %d rank %d: iteration %d is past the launch's %d iterations",
            type_,
            *w.key,
            reached,
            most,
        )
        return False

    def forward_metrics(self, now: float, send) -> None:
        for key, report in list(self._pending_metrics.items()):
            if now - self._last_metrics.get(key, 0.0) >= self.metrics_every_s:
                self._last_metrics[key] = now
                del self._pending_metrics[key]
                send("metrics", job=key[0], attempt=key[1], rank=0, iteration=report["iteration"], values=report["values"])

    def forget(self, job: int, attempt: int) -> None:
        """An attempt's worker exited: its metrics not yet sent are dropped."""
        self._pending_metrics.pop((job, attempt), None)
