"""A command's result written to standard output: a table or a timeline that is the command's
one answer, not something it only says on the way (tools/outputs/console.py drops those when
they cannot be written)."""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING, cast

from roundhouse.errors import UsageError

if TYPE_CHECKING:  # (loaded when a console is made: `run` writes counts without one)
    from rich.console import Console


def result_console() -> Console:
    """A Rich console that lays out a result for standard output (its width, and colours when it
    is a terminal) into text, for `write_result`: one writing to standard output itself drops
    what it cannot write (tools/outputs/console.py), so a full disk would go unsaid."""
    from rich.console import Console

    from roundhouse.tools.outputs.console import stdout_console

    shape = stdout_console()
    return Console(file=io.StringIO(), width=shape.width, color_system=shape.color_system, force_terminal=shape.is_terminal)


def text_of(console: Console) -> str:
    """What was printed to a `result_console`."""
    return cast(io.StringIO, console.file).getvalue()


def write_result(text: str, what: str) -> None:
    """`text` on standard output. A failure to write it (a full disk, a closed stream) is an
    error saying where and what was lost, not a status of 0 with nothing written; a reader that
    left (`| head`) is the command line's to end quietly (tools/cli.py)."""
    if sys.stdout is None:  # (started with standard output closed, `>&-`)
        raise UsageError(f"standard output: cannot write {what} (it is closed)")
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as err:  # (ValueError: the stream was closed)
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise UsageError(f"standard output: cannot write {what} ({reason})") from None


def plural(n: int, one: str, many: str | None = None) -> str:
    """A count with its noun: "1 job", "3 jobs", "2 entries" (`many` where not `one` + "s"); its
    digits grouped, "2,000,000 jobs", as an error message writes a count."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def count_text(value: object) -> str:
    """A count as a summary or a message shows it, its digits grouped ("29,564"); "—" when there
    is none. (A summary.json holds numbers: a whole number written as 1000.0 is shown as 1,000,
    and one that is not whole keeps its fraction, 1,000.5.)"""
    if value is None:
        return "—"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)
