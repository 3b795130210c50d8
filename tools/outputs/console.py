"""Standard output and error whose reader may leave (`| head`, `2>&-`): what a command only says
is then dropped, and the command goes on to do what it was asked (write its results, finish its
runs) and ends as it would have."""

from __future__ import annotations

import os
import sys
from typing import IO, cast

from rich.console import Console


class _Forgiving:
    """A text stream whose reader may go away: what is written to it then goes to the null
    device, rather than end the command with a broken pipe (or any other failure to write what
    the command only says: a stream closed, `2>&-`, or a full disk). Rich's own handling of a
    broken pipe ends the process with status 1, as if the command had failed, before it wrote
    its results."""

    def __init__(self, stream):
        self._stream = stream if stream is not None else open(os.devnull, "w")

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            self._gone()

    def _gone(self) -> None:
        """Point the stream's file at the null device: what it still holds is dropped there."""
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
            self._stream.flush()
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)  # (isatty, fileno, encoding: the stream's own)


def forgiving(stream: IO[str]) -> IO[str]:
    """`stream`, written to as one whose reader may leave."""
    return cast(IO[str], _Forgiving(stream))


def stdout_console() -> Console:
    """A Rich console on standard output, whose reader may leave."""
    return Console(file=forgiving(sys.stdout))


def stderr_console() -> Console:
    """A Rich console on standard error, whose reader may leave."""
    return Console(file=forgiving(sys.stderr), stderr=True)
