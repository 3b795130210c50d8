"""Command-line pieces shared by the live subcommands (serve, run --live, agent, submit):
logging, security flags and durations (bounded by what the wire carries)."""

from __future__ import annotations

import logging
import sys

from roundhouse.errors import UsageError

# The most CPU threads one job process (a profiled worker, or a job on an agent's GPU) is given:
# fake GPUs share one machine, so more is a mistake, not a wish.
MAX_THREADS = 256


class _StderrHandler(logging.StreamHandler):
    """Writes to `sys.stderr` as it is when a line is logged, not as it was at set-up (a command
    run in-process, as the tests do, may have had its stderr swapped and closed since)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def setup_logging(level: str = "info") -> None:
    """Clear, timestamped lines on stderr: what a cluster operator reads."""
    numeric = getattr(logging, level.upper(), None)
    if not isinstance(numeric, int):
        raise UsageError(f"--log-level: '{level}' is not one of debug, info, warning, error")
    root = logging.getLogger("roundhouse")
    if not root.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s", "%H:%M:%S"))
        root.addHandler(handler)
    root.setLevel(numeric)
    root.propagate = False


def add_security(parser, who: str) -> None:
    parser.add_argument("--keys", metavar="DIR", help=f"CURVE key folder made by `roundhouse keys` ({who})")
    parser.add_argument("--insecure", action="store_true", help="no authentication or encryption: loopback development only")


def check_named(args, *names: str) -> None:
    """A UsageError for a path option given as blank text (`--journal ""`, often an unset shell
    variable): left to the code that reads it, it would be taken as not given at all."""
    for name in names:
        value = getattr(args, name, None)
        if value is not None and not value.strip():
            raise UsageError(f"--{name.replace('_', '-')}: the name is empty")


def wire_bounds(message: str, field: str) -> tuple[float, float]:
    """The range of a numeric field of a protocol message (wire/protocol.py), e.g. the
    heartbeat period a `welcome` carries."""
    from roundhouse.wire import protocol

    spec = protocol.SCHEMAS[message].fields[field]
    assert isinstance(spec, (protocol.Num, protocol.Int)), f"{message}.{field} is not a number"
    return float(spec.lo), float(spec.hi)


def duration_within(value: float, text: str, flag: str, message: str, field: str) -> float:
    """`value` (from `flag TEXT`) if a `message` can carry it as `field`; else a UsageError
    naming the flag and the range."""
    from roundhouse.runtime.values import format_duration

    lo, hi = wire_bounds(message, field)
    if lo <= value <= hi:
        return value
    span = f"at most {format_duration(hi)}" if lo == 0 else f"between {format_duration(lo)} and {format_duration(hi)}"
    raise UsageError(f"{flag} {text}: must be {span} (what the protocol's {message} message carries)")
