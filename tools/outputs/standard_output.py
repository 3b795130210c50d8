"""Which failures to write were standard output's. An OSError from writing it (a full disk, a
device error) names no file, and by the time the command line's last-resort handler sees it,
nothing says where it came from: a `print` in any command, or the flush at its end. While a
command runs, standard output is this module's stream, which marks its own failures, so that the
error can say `standard output:` rather than only "No space left on device"."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

_MARK = "_roundhouse_standard_output"


class _Marking:
    """Standard output, whose failures to write are marked as its own (and otherwise untouched)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as err:
            setattr(err, _MARK, True)
            raise

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as err:
            setattr(err, _MARK, True)
            raise

    def __getattr__(self, name: str):
        return getattr(self._stream, name)  # (isatty, fileno, encoding, buffer: the stream's own)


@contextlib.contextmanager
def marking() -> Iterator[None]:
    """Meanwhile, `sys.stdout` marks its failures to write. (Already marking, as in a command run
    from a thread while another runs: left as it is. Replaced meanwhile by other code: theirs
    is kept.)"""
    stream = sys.stdout
    if stream is None or isinstance(stream, _Marking):
        yield
        return
    ours = _Marking(stream)
    sys.stdout = ours  # type: ignore[assignment]
    try:
        yield
    finally:
        if sys.stdout is ours:
            sys.stdout = stream


def flush() -> None:
    """Flush standard output (if the command has one: `>&-` leaves none), a failure marked."""
    if sys.stdout is not None:
        try:
            sys.stdout.flush()
        except OSError as err:
            setattr(err, _MARK, True)
            raise


def failed_to_write(err: OSError) -> bool:
    """Whether `err` is a failure to write standard output."""
    return bool(getattr(err, _MARK, False))


def silence_stdout() -> None:
    """Point standard output at the null device, so that what is still buffered for it is
    dropped at exit rather than reported as a broken pipe (a reader that left: `| head`)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
