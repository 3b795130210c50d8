"""Talking to a live scheduler as a user: submit jobs, ask for its status."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence

import zmq

from roundhouse.errors import RoundhouseError, UsageError
from roundhouse.wire import protocol
from roundhouse.wire.security import (
    HANDSHAKE_FAILURES,
    MECHANISM_MISMATCH,
    REFUSALS,
    SAME_SECURITY,
    ClientSecurity,
    allow_ipv6,
    check_connect_address,
    refusal,
    zmq_reason,
)

log = logging.getLogger("roundhouse.submit")


class SchedulerError(RoundhouseError):
    """The scheduler refused a request, or could not be reached. `accepted`: the ids of jobs it
    had accepted before, in a submission sent as several messages."""

    def __init__(self, message: str, accepted: list[int] | None = None):
        super().__init__(message)
        self.accepted = accepted or []


class Submitter:
    def __init__(self, address: str, security: ClientSecurity, timeout_s: float = 10.0):
        check_connect_address(address)
        self.address = address
        self.timeout_s = timeout_s
        self._secured = not security.insecure
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._monitor: zmq.Socket | None = None
        try:  # (a socket left open would make `term()` hang: close what was made on any refusal)
            security.apply(self._socket, log)
            events = sum(HANDSHAKE_FAILURES) | zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED
            self._monitor = self._socket.get_monitor_socket(events)
            allow_ipv6(self._socket, address)
            self._socket.connect(address)
        except zmq.ZMQError as err:
            self.close()
            raise UsageError(f"cannot connect to {address}: {zmq_reason(err)}") from None
        except BaseException:
            self.close()
            raise
        self._seq = protocol.Sequence()
        self._seq.n = time.time_ns() // 1000
        self._sent = False  # whether the request being made has gone to the socket

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.close(linger=0)
        self._socket.close(linger=0)
        self._context.term()

    def __enter__(self) -> Submitter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, type_: str, expect: str, **fields) -> dict:
        """Send one request and wait for its answer. A handshake refused on the protocol or the
        key ends the wait; a connection closed during the handshake does not (ZeroMQ reconnects,
        and the request goes when one succeeds), but a wait that then runs out says so, as it
        says a connection made on which no handshake ever completed (nothing there speaks ZeroMQ)."""
        self._sent = False
        try:
            frame = protocol.encode(type_, self._seq.next(), **fields)
        except protocol.ProtocolError as err:  # e.g. a trace cell the protocol cannot carry
            raise SchedulerError(f"cannot send this {type_} request: {err.reason}") from None
        self._socket.send(frame)
        self._sent = True
        deadline = time.time() + self.timeout_s
        monitor = self._monitor
        assert monitor is not None  # (made in __init__)
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        cut = 0  # connections closed during the handshake
        connected = shaken = False  # a connection made; a handshake completed
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise SchedulerError(
                    f"no answer from the scheduler at {self.address} within {self.timeout_s:g}s"
                    + (
                        self._silent_note()
                        if connected and not shaken and not cut
                        else self._cut_note(cut) or self._unmade_note(connected)
                    )
                )
            ready = dict(poller.poll(int(left * 1000) + 1))
            if monitor in ready:
                from zmq.utils.monitor import recv_monitor_message

                said = recv_monitor_message(monitor)
                event = said.get("event")
                if event in REFUSALS:
                    why = refusal(said, self._secured, "submitter")
                    todo = f"; {SAME_SECURITY}" if said.get("value") == MECHANISM_MISMATCH else ""
                    raise SchedulerError(f"the scheduler at {self.address} refused this connection: {why}{todo}")
                cut += event in HANDSHAKE_FAILURES
                connected |= event == zmq.EVENT_CONNECTED
                shaken |= event == zmq.EVENT_HANDSHAKE_SUCCEEDED
            if self._socket in ready:
                try:
                    got, _, body = protocol.decode(self._socket.recv(), {expect, "error"})
                except protocol.ProtocolError as err:
                    raise SchedulerError(f"bad answer from the scheduler: {err.reason}") from None
                if got == "error":
                    raise SchedulerError(f"the scheduler refused: {body['reason']}")
                return body

    def _cut_note(self, cut: int) -> str:
        """What a wait that ran out says of the connections closed during the handshake."""
        if not cut:
            return ""
        keys = ", or is the scheduler.key in the key folder another scheduler's" if self._secured else ""
        return f"; {cut} connection(s) to it closed during the handshake (is something else listening at that address{keys}?)"

    @staticmethod
    def _unmade_note(connected: bool) -> str:
        """What a wait that ran out says when no connection was ever made."""
        return (
            ""
            if connected
            else "; no connection to it could be made (is `roundhouse serve` running at that address, and reachable from here?)"
        )

    def _silent_note(self) -> str:
        """What a wait that ran out says of a connection made on which no handshake completed."""
        if self._secured:
            return (
                "; a connection to it was made, but the handshake never completed: nothing there seems to speak "
                "ZeroMQ with CURVE keys (is something other than a Roundhouse scheduler listening at that address, "
                "or are the keys mismatched: is the scheduler.key in the key folder another scheduler's?)"
            )
        return (
            "; a connection to it was made, but the handshake never completed: nothing there seems to speak ZeroMQ "
            "(is something other than a Roundhouse scheduler listening at that address?)"
        )

    def submit(self, jobs: list[dict], where: Sequence[str] | None = None) -> list[int]:
        """Submit jobs (canonical trace fields: model, iterations, gpus, ... or command,
        duration_s); returns their job ids. `where[i]` names job i for the user (`t.csv:12`, the
        line of a file); by default `job i+1`.

        Jobs go in one `submit` message when they fit in one (so the scheduler accepts all of them
        or none); otherwise in as few as they fit in, and a refusal after some were accepted says
        which ids were accepted and which job was refused."""
        where = list(where) if where is not None else [f"job {i + 1}" for i in range(len(jobs))]
        for i, job in enumerate(jobs):
            try:
                _SUBMITTED_JOB.check(job, "job")
            except protocol.ProtocolError as err:
                raise SchedulerError(f"{where[i]}: cannot send it: {err.reason}") from None
        ids: list[int] = []
        for start, end in _chunks(jobs, where):
            try:
                got = self.request("submit", "accepted", jobs=jobs[start:end])["job_ids"]
                if len(got) != end - start:  # (ids that cannot be paired with the jobs sent name none of them)
                    sent = end - start
                    raise SchedulerError(
                        f"bad answer from the scheduler: it accepted {len(got)} job id(s) for the {sent} job(s) sent"
                    )
            except KeyboardInterrupt:  # (Ctrl-C, SIGTERM: say what the scheduler may hold, then stop)
                note = self._interrupted_note(ids, where, start, end, len(jobs))
                if note:
                    log.warning("%s", note)
                raise
            except SchedulerError as err:
                reason = _name_rows(str(err), where, start, jobs)
                if not ids:
                    raise SchedulerError(reason) from None
                rest = (
                    f"whether it accepted {where[start]} to {where[end - 1]} is not known "
                    f"(`roundhouse submit {self.address} --status` counts what it holds), and later jobs were not sent"
                    if reason.startswith("no answer")
                    else f"jobs from {where[start]} on were not submitted"
                )
                raise SchedulerError(
                    f"{reason}\nthe scheduler had already accepted {len(ids)} job(s), {where[0]} to {where[start - 1]} "
                    f"(ids {id_ranges(ids)}); {rest}",
                    accepted=ids,
                ) from None
            ids += got
        return ids

    def _interrupted_note(self, ids: list[int], where: list[str], start: int, end: int, total: int) -> str:
        """What a submission stopped while it waited for the scheduler leaves behind: the jobs it
        had accepted, the ones whose answer did not come, the ones never sent. Empty when nothing
        was sent (submitting them again submits each once)."""
        if not ids and not self._sent:
            return ""
        parts = ["interrupted while submitting"]
        if ids:
            parts.append(
                f"the scheduler had already accepted {len(ids)} job(s), {where[0]} to {where[start - 1]} (ids {id_ranges(ids)})"
            )
        span = where[start] if end - start == 1 else f"{where[start]} to {where[end - 1]}"
        if self._sent:
            parts.append(
                f"whether it accepted {span} is not known (`roundhouse submit {self.address} --status` counts what it holds)"
            )
            later = end
        else:
            later = start
        if later < total:
            parts.append(f"jobs from {where[later]} on were not sent")
        return "; ".join(parts)

    def status(self) -> dict[str, float]:
        return self.request("status", "status_reply")["status"]


# One submitted job as the wire carries it, and the most jobs one `submit` message holds.
_SUBMITTED = protocol.SCHEMAS["submit"].fields["jobs"]
assert isinstance(_SUBMITTED, protocol.ListOf)
_SUBMITTED_JOB = _SUBMITTED.item
MAX_JOBS_PER_MESSAGE = _SUBMITTED.max_len
# How the scheduler names a submitted row in a refusal: `submission:N:`, N counted from 1 in
# the message (trace errors name the row; runtime/backends/live/submissions.py).
_ROW = re.compile(r"\bsubmission:(\d+):")
# What follows it when the message names the job by the id the scheduler gave it, after the
# column, if any: `error: job 6: ...`, `error: column 'iterations': job 6: ...`, `error: job 6 asks ...`
# (dropped, or said as `it`).
_CHOSEN_ID = re.compile(r"^( error: (?:column '[^']*': )?)job \d+(: |(?= ))")


def plain_names(n: int) -> list[str]:
    """How to name jobs that are no file's rows (the command line's, `--count N` of them)."""
    return ["the job"] if n == 1 else [f"job {i + 1} of {n}" for i in range(n)]


def _name_rows(text: str, where: list[str], offset: int, jobs: list[dict] | None = None) -> str:
    """The scheduler's `submission:N:` (N counted in one message) as the user's name for the
    job. The id the scheduler chose for a job that gave none is dropped, in whatever form the
    message names it: the job was refused, so the id was not kept, and the next job accepted
    may well be given it."""
    match = _ROW.search(text)
    if match is None:
        return text
    index = offset + int(match.group(1)) - 1
    if not 0 <= index < len(where):
        return text
    rest = text[match.end() :]
    if jobs is not None and "job_id" not in jobs[index]:
        rest = _CHOSEN_ID.sub(lambda m: m.group(1) if m.group(2) else f"{m.group(1)}it", rest, count=1)
    return f"{text[: match.start()]}{where[index]}:{rest}"


def _chunks(jobs: list[dict], where: list[str] | None = None) -> list[tuple[int, int]]:
    """[start, end) ranges of jobs, each as many as one message carries (count and size)."""
    out = []
    start = 0
    while start < len(jobs):
        size = min(MAX_JOBS_PER_MESSAGE, len(jobs) - start)
        while True:
            try:  # (the largest `seq`, so that the message sent later is no larger)
                protocol.encode("submit", protocol.SEQ_MAX, jobs=jobs[start : start + size])
                break
            except ValueError:  # larger than a message
                if size == 1:
                    raise SchedulerError(
                        f"{where[start] if where else f'job {start + 1}'}: larger than a message carries ({protocol.MAX_BYTES:,} bytes)"
                    ) from None
                size //= 2
        out.append((start, start + size))
        start += size
    return out


def id_ranges(ids: list[int]) -> str:
    """`0-999, 1200, 1202-1203`: job ids as runs of consecutive numbers."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
