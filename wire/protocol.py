"""The wire protocol of live mode: versioned, validated messages (DESIGN §7).

Every message is one ZeroMQ frame holding a JSON object with an envelope and a body::

    {"v": 4, "type": "exited", "seq": 41, "job": 7, "attempt": 2, "rank": 0, ...}

`v` is the protocol version, `type` names the message, `seq` counts the sender's messages
(per connection, increasing). A receiver checks, in order: the frame count and size, that the
bytes are UTF-8 JSON (no NaN), the version, the type, every field against the type's schema
(types, ranges, lengths, strings that are text: no lone surrogate; unknown fields are
refused), and that `seq` increases. Any failure is a `ProtocolError` with a plain reason, which
shows values shortened; receivers log it and answer with an `error` message or drop the frame,
and carry on.

Who sends what:

| from -> to            | messages                                                        |
|-----------------------|-----------------------------------------------------------------|
| agent -> scheduler    | register, heartbeat, started, metrics, exited, stopping         |
| scheduler -> agent    | welcome, launch, revoke, resize, ack, unknown, shutdown, error, |
|                       | key_refused                                                     |
| submitter -> scheduler| submit, status, lease (a round-trip lease check, for comparison)|
| scheduler -> submitter| accepted, status_reply, lease_reply, error                      |
| job -> agent (local)  | report, checkpointed, exiting                                   |

This module has no dependency beyond the standard library, so that training processes can
import it cheaply.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable
from typing import Any

# The protocol's version: a side that speaks another refuses every message, so that a scheduler
# and agents of different releases stop with a message rather than misread each other. (2: a
# launch may say its work is counted in samples, and carry the learning-rate factor; 3: an agent
# whose key is no longer admitted is told so, `key_refused`; 4: a revoke may name the ranks it
# kills, `ranks`, which an agent of version 3 refuses as an unknown field, leaving them running.)
VERSION = 4
# Largest frame a receiver accepts; bigger ones are refused before parsing. ZeroMQ itself
# drops a connection above HARD_LIMIT (set as the socket's MAXMSGSIZE), protecting memory.
MAX_BYTES = 1 << 20
HARD_LIMIT = 8 << 20

NAME_RE = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
METRIC_RE = r"[a-z][a-z0-9_]{0,31}"
OUTCOMES = ("done", "preempted", "failed", "killed", "resized")  # resized: a worker a resize let go
COUNTS = ("steps", "samples")  # what a launch's iterations count (its `counts`)
KEY_REMOVED, KEY_MADE_AGAIN = "removed", "made_again"  # why a key is refused (`key_refused`)
KEY_REFUSALS = (KEY_REMOVED, KEY_MADE_AGAIN)

# Exit codes of a training process that uses the client library.
EXIT_DONE = 0
EXIT_PREEMPTED = 3


class ProtocolError(Exception):
    """A frame that is not a valid message; `reason` says why in a sentence."""

    def __init__(self, reason: str, type_: str | None = None, seq: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.type = type_
        self.seq = seq


class WrongVersion(ProtocolError):
    """A message of another version of the protocol (another release of Roundhouse)."""


# --- field specifications --------------------------------------------------------------------


class Spec:
    def check(self, value: Any, where: str) -> Any:
        raise NotImplementedError


class Int(Spec):
    def __init__(self, lo: int = 0, hi: int = 2**53):
        self.lo, self.hi = lo, hi

    def check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProtocolError(f"{where} must be a whole number, got {_show(value)}")
        if not self.lo <= value <= self.hi:
            raise ProtocolError(f"{where} must be between {self.lo} and {self.hi}, got {_show(value)}")
        return value


class Num(Spec):
    def __init__(self, lo: float = -math.inf, hi: float = math.inf):
        self.lo, self.hi = lo, hi

    def check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProtocolError(f"{where} must be a number, got {_show(value)}")
        try:
            number = float(value)
        except OverflowError:  # (a JSON integer of hundreds of digits: past any float)
            number = math.inf
        if not math.isfinite(number) or not self.lo <= number <= self.hi:
            raise ProtocolError(f"{where} must be a finite number between {self.lo:g} and {self.hi:g}, got {_show(value)}")
        return number


class Str(Spec):
    def __init__(self, max_len: int = 256, pattern: str | None = None):
        self.max_len = max_len
        self.pattern = re.compile(pattern) if pattern else None

    def check(self, value, where):
        if not isinstance(value, str):
            raise ProtocolError(f"{where} must be a string, got {_show(value)}")
        if len(value) > self.max_len:
            raise ProtocolError(f"{where} is longer than {self.max_len} characters")
        _check_text(value, where)
        if self.pattern is not None and not self.pattern.fullmatch(value):
            raise ProtocolError(f"{where} {_show(value)} is not a valid name")
        return value


class Host(Str):
    """A host name or IP address (where other nodes reach a node): no host's holds a space or a
    control character, and a registration carrying one would be taken, only for the jobs'
    rendezvous at it to fail."""

    def __init__(self) -> None:
        super().__init__(255)

    def check(self, value, where):
        value = super().check(value, where)
        if not value.strip():
            raise ProtocolError(f"{where}: empty, where a host name or IP address is wanted")
        bad = next((c for c in value if c.isspace() or not c.isprintable()), None)
        if bad is not None:
            raise ProtocolError(f"{where} {_show(value)}: holds {_show(bad)}, which no host name or IP address holds")
        return value


class Bool(Spec):
    def check(self, value, where):
        if not isinstance(value, bool):
            raise ProtocolError(f"{where} must be true or false, got {_show(value)}")
        return value


class Choice(Spec):
    def __init__(self, *choices: str):
        self.choices = choices

    def check(self, value, where):
        if value not in self.choices:
            raise ProtocolError(f"{where} must be one of {', '.join(self.choices)}, got {_show(value)}")
        return value


class Nullable(Spec):
    def __init__(self, inner: Spec):
        self.inner = inner

    def check(self, value, where):
        return None if value is None else self.inner.check(value, where)


class ListOf(Spec):
    """A list of `item`s; `unique`: no entry given twice (for lists that name things)."""

    def __init__(self, item: Spec, max_len: int = 1024, min_len: int = 0, unique: bool = False):
        self.item, self.max_len, self.min_len, self.unique = item, max_len, min_len, unique

    def check(self, value, where):
        if not isinstance(value, list):
            raise ProtocolError(f"{where} must be a list, got {_show(value)}")
        if len(value) < self.min_len:
            raise ProtocolError(
                f"{where} must not be empty" if self.min_len == 1 else f"{where} has fewer than {self.min_len} entries"
            )
        if len(value) > self.max_len:
            raise ProtocolError(f"{where} has more than {self.max_len} entries")
        out = [self.item.check(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if self.unique:
            seen = set()
            for v in out:
                if v in seen:
                    raise ProtocolError(f"{where} gives {_show(v)} twice")
                seen.add(v)
        return out


class MapOf(Spec):
    def __init__(self, value: Spec, max_len: int = 64, key_pattern: str = METRIC_RE):
        self.value, self.max_len = value, max_len
        self.key = re.compile(key_pattern)

    def check(self, value, where):
        if not isinstance(value, dict):
            raise ProtocolError(f"{where} must be an object, got {_show(value)}")
        if len(value) > self.max_len:
            raise ProtocolError(f"{where} has more than {self.max_len} entries")
        out = {}
        for k, v in value.items():
            if not self.key.fullmatch(k):
                raise ProtocolError(f"{where} has a bad key {_show(k)}")
            out[k] = self.value.check(v, f"{where}.{k}")
        return out


class Obj(Spec):
    """An object with these fields; `optional` ones may be missing (they read as None)."""

    def __init__(self, fields: dict[str, Spec], optional: dict[str, Spec] | None = None):
        self.fields = fields
        self.optional = optional or {}

    def check(self, value, where):
        if not isinstance(value, dict):
            raise ProtocolError(f"{where} must be an object, got {_show(value)}")
        out = {}
        for name, spec in self.fields.items():
            if name not in value:
                raise ProtocolError(f"{where + ': ' if where else ''}missing field '{name}'")
            out[name] = spec.check(value[name], f"{where}.{name}" if where else name)
        for name, spec in self.optional.items():
            got = value.get(name)
            out[name] = None if got is None else spec.check(got, f"{where}.{name}" if where else name)
        extra = [k for k in value if k not in self.fields and k not in self.optional]
        if extra:
            raise ProtocolError(f"{where or 'message'}: unknown field '{json.dumps(str(extra[0]))[1:-1][:40]}'")
        return out


def _show(value: Any, most: int = 40) -> str:
    """A value as a message shows it: as JSON (ASCII only, so a log or a reply can always hold
    it), shortened to about `most` characters; a whole number of many digits says how many."""
    if not isinstance(value, (str, int, float, bool, type(None))):
        return type(value).__name__
    if isinstance(value, float) and math.isinf(value):  # (JSON reads 1e400 so: never "Infinity", refused as a word)
        return "a number past any float"
    try:
        text = json.dumps(value)
    except ValueError:  # (an integer of more digits than Python turns into text)
        return "a whole number of thousands of digits"
    if len(text) <= most:
        return text
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{text[:20]}... (a number of {len(text.lstrip('-'))} digits)"
    return text[: most - 3] + "..."


def _check_text(value: str, where: str) -> None:
    """Refuse a string that is not text: JSON may escape a lone UTF-16 surrogate (`\\ud800`),
    which no UTF-8 file, journal or log can hold."""
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(value[err.start])
        raise ProtocolError(
            f"{where} is not valid text: it holds a lone surrogate (\\u{code:04x}) at character {err.start + 1}"
        ) from None


# --- the messages ---------------------------------------------------------------------------


COMMAND_WORDS = 256  # the most words a command (a launch's, a submitted job's) has


class _Cell(Spec):
    """A submitted job's cell: a number, a string, a boolean, null, or a command as a list of
    words (the trace schema checks the rest, column by column)."""

    def check(self, value, where):
        if value is None or isinstance(value, (bool, int, str)):
            if isinstance(value, str) and len(value) > 4096:
                raise ProtocolError(f"{where} is longer than 4096 characters")
            if isinstance(value, str):
                _check_text(value, where)
            return value
        if isinstance(value, float):
            if not math.isfinite(value):  # (only 1e400 and the like: JSON has no NaN)
                raise ProtocolError(f"{where} is a number past any float (written 1e309 or more, or -1e309 or less)")
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            # A command line, as a list of words: within what a launch carries.
            if len(value) > COMMAND_WORDS:
                raise ProtocolError(f"{where} has {len(value)} words, more than the {COMMAND_WORDS} a launch carries")
            for i, word in enumerate(value):
                if len(word) > 4096:
                    raise ProtocolError(f"{where}[{i}] is longer than 4096 characters")
                _check_text(word, f"{where}[{i}]")
            return value
        raise ProtocolError(f"{where} must be a number, string, boolean or list of strings, got {_show(value)}")


JOB = Int(0, 2**62)
# A message's `seq`: one within what an `error` reply may refer back to (`ref`).
SEQ_MAX = 2**62
ATTEMPT = Int(1, 10**6)
RANK = Int(0, 4095)
GPU = Int(0, 4095)
ITERATION = Int(0, 2**53)
BATCH_SIZE = Int(0, 2**31)
PATH = Str(4096)
METRICS = MapOf(Num())

_PROCESS = Obj(
    {"job": JOB, "attempt": ATTEMPT, "rank": RANK, "gpu": GPU, "iteration": ITERATION},
    {"checkpoint": PATH, "checkpoint_iteration": ITERATION},
)

SCHEMAS: dict[str, Obj] = {
    # agent -> scheduler
    "register": Obj(
        {
            "node": Str(64, NAME_RE),
            "address": Host(),
            "gpus": ListOf(Obj({"index": GPU, "type": Str(64, NAME_RE)}), 1024),
            "running": ListOf(_PROCESS, 4096),
            "session": Str(64),
        }
    ),
    "heartbeat": Obj({"running": ListOf(_PROCESS, 4096)}),
    "started": Obj({"job": JOB, "attempt": ATTEMPT, "rank": RANK}),
    "metrics": Obj({"job": JOB, "attempt": ATTEMPT, "rank": RANK, "iteration": ITERATION, "values": METRICS}),
    "exited": Obj(
        {
            "job": JOB,
            "attempt": ATTEMPT,
            "rank": RANK,
            "outcome": Choice(*OUTCOMES),
            "iteration": ITERATION,
            "start_iteration": ITERATION,
            "permanent": Bool(),
            "reason": Str(4000),
        },
        {"checkpoint": PATH, "checkpoint_iteration": ITERATION, "exit_code": Int(-255, 255)},
    ),
    # The answer to `shutdown` (the agent stops its workers and exits), or said unasked by an
    # agent leaving (a signal) once its exits are reported: the scheduler takes its node offline.
    "stopping": Obj({}),
    # scheduler -> agent
    "welcome": Obj({"node_index": Int(0, 10**6), "heartbeat_s": Num(0.01, 3600), "session": Str(64)}),
    "launch": Obj(
        {
            "job": JOB,
            "attempt": ATTEMPT,
            "ranks": ListOf(Obj({"rank": RANK, "gpu": GPU}), 4096),
            "world_size": Int(1, 4096),
            "master_addr": Str(255),
            "master_port": Int(1, 65535),
            "iterations": ITERATION,
            "batch_size": BATCH_SIZE,
            "checkpoint_dir": PATH,
            "checkpoint_every_s": Num(0, 10**7),
        },
        {
            "workload": Str(128, r"[A-Za-z_][A-Za-z0-9_.]*"),
            "command": ListOf(Str(4096), COMMAND_WORDS, min_len=1),  # (its first word: the program)
            "model": Str(128),
            "resume": PATH,
            "resume_iteration": ITERATION,
            "seed": Int(0, 2**31),
            "iters_per_s": Num(0, 10**9),  # the profile's speed for this placement (emulated GPUs run at it)
            # What `iterations`, `resume_iteration`, `iters_per_s` and every report and exit of
            # the attempt count: optimizer steps (absent: steps), or for an elastic job the
            # samples it has trained (its work as the scheduler counts it).
            "counts": Choice(*COUNTS),
            # The factor the scheduler's learning-rate rule gives the job's own learning rate for
            # the global batch it is launched with (absent: the job keeps the one it has).
            "lr_scale": Num(0, 10**6),
        },
    ),
    # Stop an attempt's workers on the node it is sent to: all of them (`ranks` absent), or only
    # the ranks it names (stray workers of the attempt there, which the scheduler does not have
    # on that node, while its real ranks there run on). `kill`: at once; else through the lease,
    # `rank` being the one rank told (the workers agree on their exit among themselves).
    "revoke": Obj({"job": JOB, "attempt": ATTEMPT, "kill": Bool()}, {"rank": RANK, "ranks": ListOf(RANK, 4096, 1, True)}),
    # Grow or shrink a running attempt in place: to the node of its rank 0 (which tells the job)
    # and to every node that starts new ranks (`ranks`: those to start there; ranks at or beyond
    # the new world size leave by themselves). `generation` counts the attempt's resizes.
    "resize": Obj(
        {
            "job": JOB,
            "attempt": ATTEMPT,
            "generation": Int(1, 2**31),
            "world_size": Int(1, 4096),
            "batch_size": Int(1, 2**31),
            "master_addr": Str(255),
            "master_port": Int(1, 65535),
            "ranks": ListOf(Obj({"rank": RANK, "gpu": GPU}), 4096),
        },
        # The learning-rate factor the plan's rule gives (runtime/types.py LR_RULES; absent:
        # the job adapts its learning rate itself).
        {"iters_per_s": Num(0, 10**9), "lr_scale": Num(0, 10**6)},
    ),
    "ack": Obj({"job": JOB, "attempt": ATTEMPT, "rank": RANK}),
    "shutdown": Obj({"reason": Str(1000)}),
    "unknown": Obj({"reason": Str(1000)}),
    "error": Obj({"reason": Str(4000)}, {"ref": Int(0, SEQ_MAX)}),
    # To a registered agent whose key the scheduler no longer admits (its file removed from
    # `authorized/`, or a new key made under its name): its messages are dropped from now on,
    # so the agent stops its workers and exits rather than run on unheard. Said once.
    "key_refused": Obj({"key": Str(64, NAME_RE), "cause": Choice(*KEY_REFUSALS), "reason": Str(1000)}),
    # submitter -> scheduler
    "submit": Obj({"jobs": ListOf(MapOf(_Cell(), 32, r"[a-z][a-z0-9_]{0,31}"), 10000)}),
    "status": Obj({}),
    "lease": Obj({"job": JOB, "attempt": ATTEMPT}),
    # scheduler -> submitter
    "accepted": Obj({"job_ids": ListOf(JOB, 10000)}),
    "status_reply": Obj({"status": MapOf(Num(), 64)}),
    "lease_reply": Obj({"job": JOB, "attempt": ATTEMPT, "valid": Bool()}),
    # job process -> its agent (over the node-local socket)
    "report": Obj(
        {"job": JOB, "attempt": ATTEMPT, "rank": RANK, "iteration": ITERATION, "values": METRICS},
    ),
    "checkpointed": Obj({"job": JOB, "attempt": ATTEMPT, "rank": RANK, "iteration": ITERATION, "path": PATH}),
    "exiting": Obj(
        {
            "job": JOB,
            "attempt": ATTEMPT,
            "rank": RANK,
            "outcome": Choice("done", "preempted", "resized"),
            "iteration": ITERATION,
            "start_iteration": ITERATION,
        },
        {"checkpoint": PATH, "checkpoint_iteration": ITERATION},
    ),
}


# --- encoding and decoding ------------------------------------------------------------------


def encode(type_: str, seq: int, **fields: Any) -> bytes:
    """One message as a frame. The body is checked against its schema (a bug otherwise)."""
    schema = SCHEMAS.get(type_)
    if schema is None:
        raise ValueError(f"unknown message type {type_!r}")
    body = _without_nulls(schema.check(fields, ""))
    frame = json.dumps({"v": VERSION, "type": type_, "seq": seq, **body}, separators=(",", ":"), allow_nan=False)
    data = frame.encode()
    if len(data) > MAX_BYTES:
        raise ValueError(f"{type_} message of {len(data)} bytes exceeds the {MAX_BYTES}-byte limit")
    return data


def _without_nulls(value: Any) -> Any:
    """Absent optional fields are left out of the frame (they read back as None)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _no_constant(name: str):
    raise ProtocolError(f"{name} is not allowed in a message")


def decode(frame: bytes, allowed: frozenset[str] | set[str] | None = None) -> tuple[str, int, dict]:
    """(type, seq, body) of a frame, or ProtocolError. `allowed`: the types this receiver takes."""
    if not isinstance(frame, (bytes, bytearray, memoryview)):
        raise ProtocolError("a message is one frame of bytes")
    if len(frame) > MAX_BYTES:
        raise ProtocolError(f"message of {len(frame)} bytes exceeds the {MAX_BYTES}-byte limit")
    try:
        raw = json.loads(bytes(frame).decode("utf-8"), parse_constant=_no_constant)
    except ProtocolError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError("not a UTF-8 JSON message") from None
    if not isinstance(raw, dict):
        raise ProtocolError("a message must be a JSON object")
    version = raw.get("v")
    if type(version) is not int or version != VERSION:  # (not `true`, nor 1.0: JSON keeps them apart)
        raise WrongVersion(f"unsupported protocol version {_show(version)} (this side speaks {VERSION})")
    type_ = raw.get("type")
    seq = raw.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= SEQ_MAX:
        raise ProtocolError("missing or bad 'seq'", type_ if isinstance(type_, str) else None)
    if not isinstance(type_, str) or type_ not in SCHEMAS:
        raise ProtocolError(f"unknown message type {_show(type_)}", None, seq)
    if allowed is not None and type_ not in allowed:
        raise ProtocolError(f"'{type_}' is not a message this side accepts", type_, seq)
    fields = {k: v for k, v in raw.items() if k not in ("v", "type", "seq")}
    try:
        body = SCHEMAS[type_].check(fields, "")
    except ProtocolError as err:
        raise ProtocolError(f"{type_}: {err.reason}", type_, seq) from None
    return type_, seq, body


class SeqTracker:
    """Refuses messages whose `seq` does not increase, per sender (out of order or replayed)."""

    def __init__(self, limit: int = 100_000):
        self._last: dict[Any, int] = {}
        self._limit = limit

    def accept(self, sender: Any, seq: int) -> bool:
        last = self._last.get(sender)
        if last is not None and seq <= last:
            return False
        if last is None and len(self._last) >= self._limit:
            self._last.clear()  # a flood of senders: forget (a message may then pass twice, never crash)
        self._last[sender] = seq
        return True

    def forget(self, sender: Any) -> None:
        self._last.pop(sender, None)


class Sequence:
    """A sender's message counter."""

    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


class RefusalLog:
    """Warnings about messages refused or dropped, at most `most` of each kind per `period_s`
    seconds, so that a flood of bad frames cannot fill the log; how many were left out is said
    with the next warning of that kind. Kinds are a few fixed names (not senders), so the
    books stay small whoever floods."""

    def __init__(self, log: logging.Logger, most: int = 20, period_s: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.log = log
        self.most = most
        self.period_s = period_s
        self.clock = clock
        self._kinds: dict[str, list] = {}  # kind -> [window start, warnings logged in it, left out since the last]

    def warn(self, kind: str, message: str, *args: Any) -> None:
        now = self.clock()
        window = self._kinds.setdefault(kind, [now, 0, 0])
        if now - window[0] >= self.period_s:
            window[0], window[1] = now, 0
        if window[1] >= self.most:
            window[2] += 1
            return
        window[1] += 1
        left_out, window[2] = window[2], 0
        if left_out:
            message += f" (and {left_out} more like it, not logged)"
        self.log.warning(message, *args)
