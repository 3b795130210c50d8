"""Errors a person can act on.

Everything the user hands us (a `.sched` file, a trace, a cluster spec, a command-line value)
is checked, and a problem becomes a `RoundhouseError`: the command line prints its text and
exits with status 2, never a Python traceback. Errors inside `.sched` files carry a `Location`
and print as `path:line:col: message`, then the source line with the offending text underlined.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import unicodedata
from collections.abc import Iterable

import attrs

EXIT_USER_ERROR = 2


class RoundhouseError(Exception):
    """A problem with something the user gave us. Printed as is; exit status 2."""

    exit_code = EXIT_USER_ERROR

    def __reduce__(self):
        # Rebuilt from its text and attributes, not by calling __init__ again: the subclasses'
        # arguments are not their `args`, and an error raised in a worker process (a sweep's,
        # a reproduction's) must reach the parent as itself, not as a failed unpickling.
        return _rebuild, (type(self), self.args, self.__dict__, self._quoted_sources())

    def _quoted_sources(self) -> dict[str, str]:
        """The source texts (by path) that its text quotes, sent with it to another process."""
        return {}


def _rebuild(cls: type[RoundhouseError], args: tuple, state: dict, sources: dict[str, str]) -> RoundhouseError:
    for path, text in sources.items():
        _SOURCES.setdefault(path, text)  # (this process's own copy, if it has one, stays)
    err = cls.__new__(cls, *args)  # (BaseException.__new__ keeps `args`)
    err.__dict__.update(state)
    return err


@attrs.frozen
class Location:
    """A place in a source file: 1-based line and column, and how many characters to underline."""

    path: str
    line: int
    column: int
    length: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


# Source texts by path, so that an error can quote its line long after parsing.
_SOURCES: dict[str, str] = {}


def remember_source(path: str, text: str) -> None:
    _SOURCES[path] = text


def source_lines(text: str) -> list[str]:
    """The lines of a source text as the parser counts them: a newline or a carriage return not
    followed by one ends a line (an old Mac file's lines end with it alone); a form feed or
    U+2028, which `str.splitlines` would also split at, does not."""
    return re.split(r"\n|\r(?!\n)", text)


def source_line(location: Location) -> str | None:
    text = _SOURCES.get(location.path)
    if text is None:
        return None
    lines = source_lines(text)
    if 1 <= location.line <= len(lines):
        # Other line-breaking characters, and control characters (an escape would be obeyed by
        # the terminal), are shown as spaces, so that the underline stays below the column the
        # error names.
        return lines[location.line - 1].translate(_SHOWN_AS_SPACE)
    return None


_SHOWN_AS_SPACE = {code: " " for code in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029] if code != ord("\t")}


# How much of a long line an error quotes around its column: a file written on one line (or a
# generated one) would otherwise be quoted whole under each of its errors.
QUOTED_WIDTH = 100

# How many errors are printed of several found together; the rest are counted.
MAX_SHOWN = 20


def _quoted(line: str, start: int, length: int) -> tuple[str, int, int]:
    """The part of `line` quoted for an error at 0-based column `start`, underlining `length`
    characters: (text, where the underline starts in it, its width). A line longer than
    `QUOTED_WIDTH` is cut around the column, each cut shown as '…'."""
    width = max(1, min(length, max(len(line) - start, 1)))
    if len(line) <= QUOTED_WIDTH:
        return line, start, width
    left = max(0, min(start - QUOTED_WIDTH // 3, len(line) - QUOTED_WIDTH))
    right = left + QUOTED_WIDTH
    head = "…" if left > 0 else ""
    tail = "…" if right < len(line) else ""
    return head + line[left:right] + tail, len(head) + start - left, max(1, min(width, right - start))


def display_width(text: str) -> int:
    """How many columns a terminal gives `text`: two for each East Asian wide or full-width
    character (日, Ｖ), none for a combining mark or a format character (a zero-width space),
    one for the others; so that an underline lines up below the characters it marks."""
    return sum(_char_width(ch) for ch in text)


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def listed(errors: list, what: str = "error") -> str:
    """Errors printed one after another, at most `MAX_SHOWN` of them, then how many more there are."""
    shown = [shown_error(e) for e in errors[:MAX_SHOWN]]
    if len(errors) > MAX_SHOWN:
        shown.append(f"…and {len(errors) - MAX_SHOWN} more {what}(s)")
    return "\n".join(shown)


# An error message names its place, if it has one, then says "error:" (`g.sched:3:9: error: ...`,
# `t.csv:4: error: ...`); one without a place starts with it (`error: --cluster: ...`).
ERROR_FORM = re.compile(r"([^\n]*?: )?error: ")


def shown_error(err: BaseException) -> str:
    """How an error is printed: in the one form above, whatever raised it; a control character
    in it (of a file's name: an escape, a bell) written as its escape, not obeyed by the terminal."""
    text = shown_text(str(err))
    return text if ERROR_FORM.match(text) else f"error: {text}"


def shown_text(text: str) -> str:
    """`text` with each control character but a tab or a line break written as its escape
    (`\\x1b`): a name printed to a terminal (which would obey an escape or ring a bell), or drawn
    in a page or a figure (where the character would break the file, an SVG being no XML with
    one, or be drawn as an empty box), as it is written."""
    return "".join(repr(ch)[1:-1] if ch not in "\t\n\r" and unicodedata.category(ch) == "Cc" else ch for ch in text)


def print_warning(line: str, file=None) -> None:
    """A warning's line (`warning: ...`, or `where: warning: ...`) on `file`, by default standard
    error, as `shown_text` shows it: a warning names files and values the user gave, whose
    control characters a terminal would obey."""
    print(shown_text(line), file=sys.stderr if file is None else file)


def first_line(err: BaseException) -> str:
    """The first line of a library's error, to quote after our own words (its name if it says nothing)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def closest(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The known names nearest to `name`, best first (case-insensitive)."""
    known = sorted(set(known))
    by_lower = {k.lower(): k for k in known}
    hits = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.6)
    return [by_lower[h] for h in hits]


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    hits = closest(name, known)
    if not hits:
        return None
    return "did you mean " + " or ".join(f"'{h}'" for h in hits) + "?"


class SchedError(RoundhouseError):
    """One problem in a `.sched` file (or a value given for one), at a location."""

    def __init__(self, message: str, location: Location | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint

    def _quoted_sources(self) -> dict[str, str]:
        if self.location is None or self.location.path not in _SOURCES:
            return {}
        return {self.location.path: _SOURCES[self.location.path]}

    def __str__(self) -> str:
        if self.location is None:
            head = f"error: {self.message}"
            return head + (f"\n  hint: {self.hint}" if self.hint else "")
        loc = self.location
        out = [f"{loc}: error: {self.message}"]
        line = source_line(loc)
        if line is not None:
            number = str(loc.line)
            gutter = " " * len(number)
            shown, start, width = _quoted(line.expandtabs(1), max(loc.column - 1, 0), loc.length)
            out.append(f" {number} | {shown}")
            # (the underline counts the columns the quoted characters take, not the characters)
            pad, marks = display_width(shown[:start]), max(1, display_width(shown[start : start + width]))
            out.append(f" {gutter} | {' ' * pad}{'^' * marks}")
        if self.hint:
            out.append(f"  hint: {self.hint}")
        return "\n".join(out)


class SchedErrors(RoundhouseError):
    """Several problems found in one pass (the compiler reports all it can, as Click does)."""

    def __init__(self, errors: list[SchedError]):
        super().__init__(f"{len(errors)} error(s)")
        self.errors = sorted(
            errors,
            key=lambda e: (
                e.location.path if e.location else "",
                e.location.line if e.location else 0,
                e.location.column if e.location else 0,
            ),
        )

    def __str__(self) -> str:
        return listed(self.errors)


class RoundhouseErrors(RoundhouseError):
    """Several problems of different kinds found together (a graph's traces, each a file of its
    own, and its `.sched` lines), each printed as it would be alone."""

    def __init__(self, errors: list[RoundhouseError]):
        super().__init__(f"{len(errors)} error(s)")
        self.errors = list(errors)

    def __str__(self) -> str:
        return listed(self.errors)


class TraceError(RoundhouseError):
    """A bad trace file or row. `row` is the 1-based line (CSV) or record number (JSON, Parquet);
    `also`, counted the same way, is another row the problem involves (where a repeated value
    was first used), named at the end of the message."""

    def __init__(self, path: str, message: str, row: int | None = None, column: str | None = None, also: int | None = None):
        self.path = str(path)
        self.row = row
        self.column = column
        self.also = also
        self.message = message if also is None else f"{message}: here and at {self.path}:{also}"
        where = self.path if row is None else f"{self.path}:{row}"
        what = f"column '{column}': {self.message}" if column else self.message
        super().__init__(f"{where}: error: {what}")


class ClusterError(RoundhouseError):
    """A bad cluster spec (file or command-line shorthand). `path` says where, if in a spec file:
    the file, and the line when the problem has one of its own ("spec.toml:14"), so that whoever
    gave the spec can say where it came from around `message`."""

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        super().__init__(message if path is None else f"{path}: error: {message}")


class UsageError(RoundhouseError):
    """A bad command-line value."""


class RoundhouseWarning(UserWarning):
    """What a graph run from Python would run to no use (what `roundhouse run` warns of on
    standard error: a trace that brings no job, a policy that will never start its jobs):
    `warnings.filterwarnings("ignore", category=RoundhouseWarning)` silences them."""
