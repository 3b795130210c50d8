"""Command-line pieces shared by the live subcommands (serve, run --live, agent, submit):
logging, security flags and durations."""

from __future__ import annotations

import logging
import sys

from roundhouse.errors import UsageError


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
