"""Shared by the benchmark scripts: argument types that refuse out-of-range values with a usage
error (exit status 2) before anything starts, and the refusal of a helper module run as a script."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn


def at_least(minimum: float) -> Callable[[str], float]:
    """An argparse type: a number of at least `minimum`, a whole number if `minimum` is an int."""
    return _bounded(minimum, lambda value: value >= minimum, f"at least {minimum:g}")


def above(minimum: float) -> Callable[[str], float]:
    """An argparse type: a number greater than `minimum`."""
    return _bounded(minimum, lambda value: value > minimum, f"greater than {minimum:g}")


def _bounded(minimum: float, fits: Callable[[float], bool], wanted: str) -> Callable[[str], float]:
    kind = int if isinstance(minimum, int) else float

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'a whole number' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if not fits(value):  # (NaN fits nothing)
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text}")
        return value

    return convert


def not_a_script(instead: str) -> NoReturn:
    """For a helper module run directly: say what to run instead, and exit with a usage error."""
    print(f"this module is a helper of the benchmarks and does nothing on its own; run {instead}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    not_a_script("one of the scripts in benchmarks/ (see docs/cost-model.md)")
