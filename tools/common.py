"""What the commands share: command-line value types (a bad value is a UsageError naming its
flag), the repeated NAME=VALUE option of the commands that compile a graph, and the one form
in which an error is printed."""

from __future__ import annotations

import argparse
import re

from roundhouse.errors import RoundhouseError, UsageError, shown_error
from roundhouse.runtime.compiler import Override
from roundhouse.runtime.values import duration_from_text, quoted

# (digits 0-9 only, as in a duration or a .sched file: int() would read '٣' too)
_WHOLE = re.compile(r"\s*[+-]?[0-9]+\s*")
MOST_DIGITS = 4000  # (a whole number's, leading zeros aside: Python reads at most 4,300)


def whole(text: str) -> int:
    """An argparse `type` for whole numbers such as --retries (argparse names the flag, exit 2).
    How large one may be is the command's to say, in its own words."""
    if _WHOLE.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a whole number (written with the digits 0-9)")
    if len(text.strip().lstrip("+-").lstrip("0")) > MOST_DIGITS:  # (past any bound)
        raise argparse.ArgumentTypeError(f"{quoted(text)} is too large")
    return int(text)


def positive_int(text: str) -> int:
    """An argparse `type` for counts such as --workers (argparse reports the error, exit 2)."""
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# What an `endless` option's value may be for no limit (in any case): `--until inf` runs until
# every job finishes, as `Simulation.run_until(math.inf)` does. (Only there: a duration in a
# .sched file, or another option's, is finite.)
_ENDLESS = ("inf", "infinity")


def seconds(text: str | None, flag: str, positive: bool = False, endless: bool = False) -> float | None:
    """A duration given on the command line, in seconds: 0 or more (more than 0 if `positive`).
    For an `endless` option, `inf` is None, as the option not given."""
    if text is None:
        return None
    written = text.strip().lower()
    if endless and written.lstrip("+") in _ENDLESS:
        return None
    if endless and written.startswith("-") and written[1:] in _ENDLESS:
        raise UsageError(f"{flag} {text}: must be 0 or more ({flag} inf runs until every job finishes)")
    try:
        value = float(duration_from_text(text))
    except ValueError as err:
        hint = f"; {flag} inf runs until every job finishes" if endless else ""
        raise UsageError(f"{flag}: {err}{hint}") from None
    if value < 0 or (positive and value == 0):
        raise UsageError(f"{flag} {text}: must be more than 0" if positive else f"{flag} {text}: must be 0 or more")
    return value


def add_overrides(parser, help: str, flag: str = "--set") -> None:
    """A repeated `flag NAME=VALUE` option (an element argument or a graph setting), collected
    as texts in `args.overrides` for `--set` (`args.run_set` for `--run-set`); `overrides`
    parses them."""
    dest = "overrides" if flag == "--set" else flag.lstrip("-").replace("-", "_")
    parser.add_argument(flag, dest=dest, action="append", default=[], metavar="NAME=VALUE", help=help)


def overrides(texts, flag: str = "--set") -> list[Override]:
    """The texts of a repeated option made by `add_overrides`, each naming its flag in errors. A
    name given twice is refused, as a graph that sets a setting twice is: the last would win
    without a word."""
    given = [Override(text, flag) for text in texts]
    first: dict[str, Override] = {}
    for o in given:
        if o.target in first:
            raise UsageError(f"{first[o.target].label} and {o.label}: {o.target} is set twice; keep one")
        first[o.target] = o
    return given


def error_text(err: RoundhouseError) -> str:
    """How the command line prints an error: in the one form `errors.shown_error` gives, whatever raised it."""
    return shown_error(err)
