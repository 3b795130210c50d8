"""Talking to a live scheduler as a user: submit jobs, ask for its status."""

from __future__ import annotations

import logging
import time

import zmq

from roundhouse.errors import RoundhouseError
from roundhouse.wire import protocol
from roundhouse.wire.security import HANDSHAKE_FAILURES, ClientSecurity, check_connect_address

log = logging.getLogger("roundhouse.submit")


class SchedulerError(RoundhouseError):
    """The scheduler refused a request, or could not be reached."""


class Submitter:
    def __init__(self, address: str, security: ClientSecurity, timeout_s: float = 10.0):
        check_connect_address(address)
        self.address = address
        self.timeout_s = timeout_s
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        security.apply(self._socket, log)
        self._monitor = self._socket.get_monitor_socket(sum(HANDSHAKE_FAILURES))
        self._socket.connect(address)
        self._seq = protocol.Sequence()
        self._seq.n = time.time_ns() // 1000

    def close(self) -> None:
        self._monitor.close(linger=0)
        self._socket.close(linger=0)
        self._context.term()

    def __enter__(self) -> Submitter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, type_: str, expect: str, **fields) -> dict:
        try:
            frame = protocol.encode(type_, self._seq.next(), **fields)
        except protocol.ProtocolError as err:  # e.g. a trace cell the protocol cannot carry
            raise SchedulerError(f"cannot send this {type_} request: {err.reason}") from None
        self._socket.send(frame)
        deadline = time.time() + self.timeout_s
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise SchedulerError(f"no answer from the scheduler at {self.address} within {self.timeout_s:g}s")
            ready = dict(poller.poll(int(left * 1000) + 1))
            if self._monitor in ready:
                from zmq.utils.monitor import recv_monitor_message

                what = HANDSHAKE_FAILURES.get(recv_monitor_message(self._monitor).get("event"))
                if what:
                    raise SchedulerError(f"the scheduler at {self.address} refused this connection: {what}")
            if self._socket in ready:
                try:
                    got, _, body = protocol.decode(self._socket.recv(), {expect, "error"})
                except protocol.ProtocolError as err:
                    raise SchedulerError(f"bad answer from the scheduler: {err.reason}") from None
                if got == "error":
                    raise SchedulerError(f"the scheduler refused: {body['reason']}")
                return body

    def submit(self, jobs: list[dict]) -> list[int]:
        """Submit jobs (canonical trace fields: model, iterations, gpus, ... or command,
        duration_s); returns their job ids."""
        ids: list[int] = []
        for i in range(0, len(jobs), 1000):
            ids += self.request("submit", "accepted", jobs=jobs[i : i + 1000])["job_ids"]
        return ids

    def status(self) -> dict[str, float]:
        return self.request("status", "status_reply")["status"]
