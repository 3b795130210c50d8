"""The typed values of the `.sched` language and of element arguments.

A literal in a `.sched` file (`5min`, `8/h`, `3000..4000`, `1.2x`) is parsed into one of the
classes here; an element field annotated with one of them accepts exactly that kind of literal.
Durations are seconds and rates are events per second, so arithmetic inside elements needs no
unit handling.
"""

from __future__ import annotations

import math
import operator
import re

import attrs

# Seconds per duration unit; the only units the language knows.
DURATION_UNITS: dict[str, float] = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


class Duration(float):
    """A length of time in seconds. Written `300ms`, `5s`, `5min`, `2h`, `1d` (a bare number is seconds)."""

    def __repr__(self) -> str:
        return f"Duration({format_duration(self)})"


class Rate(float):
    """Events per second. Written `8/h`, `0.5/min`, `2/s`, `30/d`."""

    def __repr__(self) -> str:
        return f"Rate({float(self) * 3600:g}/h)"


class Multiplier(float):
    """A factor. Written `1.2x` (a bare number is accepted too)."""

    def __repr__(self) -> str:
        return f"Multiplier({float(self):g}x)"


@attrs.frozen
class IdRange:
    """A half-open range of job ids, `3000..4000` = ids 3000 to 3999 (as Python's `range`)."""

    start: int
    stop: int

    def __contains__(self, job_id: object) -> bool:
        return isinstance(job_id, int) and self.start <= job_id < self.stop

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def __str__(self) -> str:
        return f"{self.start}..{self.stop}"


@attrs.frozen
class ElementRef:
    """A reference to another element of the graph by its name."""

    name: str

    def __str__(self) -> str:
        return self.name


def element_refs(value: object) -> list[ElementRef]:
    """The element references an argument's value holds: itself, or the items of its list or
    tuple (the one place that says where a field may hold references)."""
    items = value if isinstance(value, list | tuple) else (value,)
    return [v for v in items if isinstance(v, ElementRef)]


class FilePath(str):
    """A file path; relative paths in a `.sched` file are relative to that file's folder."""


# Whole numbers must fit a 64-bit integer: ids, counts and seeds end up in numpy int64 columns.
INT64_MAX = 2**63 - 1


def finite(number: float, text: str) -> float:
    """`number` (read from `text`) if finite; ValueError otherwise (`1e999s` reads as infinity)."""
    if not math.isfinite(number):
        raise ValueError(f"'{short_text(text)}' is too large (it is not a finite number)")
    return number


def whole_number(text: str) -> int:
    """A written whole number (digits 0-9) as an int; ValueError if it is none or does not fit
    a 64-bit integer. (The length is checked first: Python refuses to convert numbers of over
    4300 digits; and int() would read other scripts' digits.)"""
    if re.fullmatch(r"\s*[+-]?[0-9]+\s*", text) is None:
        raise ValueError(f"'{short_text(text)}' is not a whole number (written with the digits 0-9)")
    written = text.strip()
    sign = "-" if written.startswith("-") else ""
    digits = written.lstrip("+-").lstrip("0") or "0"  # (leading zeros count towards Python's limit on digits)
    if len(digits) > 19 or not -INT64_MAX - 1 <= int(sign + digits) <= INT64_MAX:
        raise ValueError(f"'{short_text(text)}' is too large (whole numbers must lie within ±{INT64_MAX})")
    return int(sign + digits)


def short_text(text: str) -> str:
    """Text to quote in a message, cut short (a number may be written with thousands of digits)."""
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def quoted(text: str) -> str:
    """`text` in quotes for a message, cut short, and escaped if it holds a control character or
    a line break (written as it is, one would hide in the message, or break its line)."""
    short = short_text(text)
    return f"'{short}'" if short.isprintable() else repr(short)


# (digits 0-9 only: Python's \d, and float(), would read other scripts' digits too)
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_DURATION_RE = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-z]*)\s*$")
_RATE_RE = re.compile(rf"^\s*({_NUMBER})\s*/\s*([A-Za-z]+)\s*$")


# A duration written in several units (`1h30min`), which the language refuses too.
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z]+)")


def duration_from_text(text: str) -> Duration:
    """Parse `5min`, `300`, `1.5h` (for command-line values). Raises ValueError with the reason."""
    m = _DURATION_RE.match(text)
    if not m:
        parts = _DURATION_PART_RE.findall(text.strip())
        if len(parts) > 1 and "".join(n + u for n, u in parts) == text.strip() and all(u in DURATION_UNITS for _, u in parts):
            seconds = sum(float(n) * DURATION_UNITS[u] for n, u in parts)
            raise ValueError(
                f"{quoted(text)} is written in several units: a duration is written with one "
                f"(such as 300s, 5min, 2h, 1d; {text.strip()} is {format_duration(seconds)})"
            )
        raise ValueError(f"{quoted(text)} is not a duration (write e.g. 300s, 5min, 2h, 1d)")
    number, unit = float(m.group(1)), m.group(2) or "s"
    if unit not in DURATION_UNITS:
        raise ValueError(f"unknown time unit '{unit}' in {quoted(text)} (use {unit_list()})")
    return Duration(finite(number * DURATION_UNITS[unit], text))


# A rate written per a number of units (`8/2h`), which the language refuses too.
_RATE_PER_MANY_RE = re.compile(rf"^\s*({_NUMBER})\s*/\s*({_NUMBER})\s*([A-Za-z]+)\s*$")


def rate_from_text(text: str) -> Rate:
    m = _RATE_RE.match(text)
    if not m:
        many = _RATE_PER_MANY_RE.match(text)
        if many is not None and many.group(3) in DURATION_UNITS and float(many.group(2)) > 0:
            count, per, unit = float(many.group(1)), float(many.group(2)), many.group(3)
            raise ValueError(
                f"{quoted(text)} is not written per one unit: a rate is a count per unit of time, "
                f"such as 8/h ({text.strip()} is {count / per:g}/{unit})"
            )
        raise ValueError(f"{quoted(text)} is not a rate (write e.g. 8/h, 0.5/min)")
    number, unit = float(m.group(1)), m.group(2)
    if unit not in DURATION_UNITS:
        raise ValueError(f"unknown time unit '{unit}' in rate {quoted(text)} (use {unit_list()})")
    return Rate(finite(number / DURATION_UNITS[unit], text))


def unit_list() -> str:
    return ", ".join(DURATION_UNITS)


def format_duration(seconds: float) -> str:
    """The shortest exact way to write `seconds` in the language's units."""
    if not math.isfinite(seconds):
        return str(seconds)
    for unit in ("d", "h", "min", "s"):
        n = seconds / DURATION_UNITS[unit]
        if abs(n) >= 1 and float(n).is_integer():
            return f"{int(n)}{unit}" if abs(n) < 1e15 else f"{n:g}{unit}"  # (not 300 digits)
    return f"{seconds:g}s"


def describe(value: object) -> str:
    """A value as it would be written in a `.sched` file (for rendering and references)."""
    if isinstance(value, Duration):
        return format_duration(value)
    if isinstance(value, Rate):
        return f"{float(value) * 3600:g}/h"
    if isinstance(value, Multiplier):
        return f"{float(value):g}x"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def number(value: object) -> float:
    """An aggregate of a numeric column as a float (polars types `max()` or `mean()` as any
    literal, a date or a string included); TypeError if it is not a number."""
    if not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


# --- validators for element fields (attrs style: raise ValueError with a plain sentence) ---


def positive(instance, attribute, value) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"must be greater than 0, got {describe(value)}")


def at_most(limit):
    """The value, if given, is at most `limit` (NaN is refused too). With `positive`,
    `[positive, at_most(x)]` means finite and positive."""
    return _bound(limit, operator.le, "at most")


def at_least(limit):
    """The value, if given, is at least `limit` (NaN is refused)."""
    return _bound(limit, operator.ge, "at least")


def _bound(limit, within, words: str):
    def check(instance, attribute, value) -> None:
        if value is not None and not within(value, limit):
            raise ValueError(f"must be {words} {describe(limit)}, got {describe(value)}")

    return check


def non_negative(instance, attribute, value) -> None:
    if value is not None and not value >= 0:
        raise ValueError(f"must be 0 or more, got {describe(value)}")


def existing_file(instance, attribute, value) -> None:
    """For input files: the path must name a readable file."""
    import os

    if value is not None and not os.path.isfile(value):
        raise ValueError(f"names a folder, not a file: {value}" if os.path.isdir(value) else f"names no file: {value}")


def file_read_by(read, what: str):
    """For an input file an element reads when it starts (a history, say): the file must exist
    and `read` must take it, so that a bad one is said when the graph is checked, at the
    argument, not when the run starts. `what`: what the file should be, for the message."""
    from roundhouse.errors import TraceError

    def check(instance, attribute, value) -> None:
        if value is None:
            return
        existing_file(instance, attribute, value)
        try:
            read(value)
        except TraceError as err:
            raise ValueError(f"is no {what}: {err}") from None

    return check


def non_empty(instance, attribute, value) -> None:
    """For names (a column, an entity): not an empty string (or only spaces)."""
    if value is not None and not str(value).strip():
        raise ValueError("must not be empty")


def one_of(*choices: str):
    def check(instance, attribute, value) -> None:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(repr(c) for c in choices)}, got {describe(value)}")

    check.choices = choices  # type: ignore[attr-defined]
    return check
