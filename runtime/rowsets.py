"""Fast membership tests for small sets of job rows.

`np.isin` sorts its inputs and costs tens of microseconds even for a handful of rows, which
adds up when called several times a round for thousands of rounds. Rows are small non-negative
integers, so a reusable mark array answers in about a microsecond.
"""

from __future__ import annotations

import numpy as np

_marks = np.zeros(1024, dtype=bool)
# row -> its place in the rows asked about, -1 between calls (32-bit: half the memory to scatter into)
_places = np.full(1024, -1, dtype=np.int32)


def reserve(rows: int) -> None:
    """Make room for job rows 0..rows-1 (the job table calls this as it grows), so that
    membership tests need not scan their inputs for the largest row."""
    global _marks, _places
    if len(_marks) <= rows + 1:
        _marks = np.zeros(max(rows + 2, 2 * len(_marks)), dtype=bool)
        _places = np.full(len(_marks), -1, dtype=np.int32)


def isin_rows(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`values` in `rows`, elementwise. Both hold job rows (reserved with `reserve`); `values`
    may hold -1 (a free GPU in the holder array), which is never a member."""
    if len(rows) == 0:
        return np.zeros(len(values), dtype=bool)
    _marks[rows] = True  # the last mark stays False, and -1 lands there
    out = _marks[values]
    _marks[rows] = False
    return out


def index_in(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of `values`, its place in `rows` (distinct job rows, reserved with `reserve`),
    or -1 where it is not there; `values` may hold -1. One scatter and one gather, where a
    search would sort `rows` first. (32-bit integers.)"""
    if len(rows) == 0:
        return np.full(len(values), -1, dtype=np.int32)
    _places[rows] = np.arange(len(rows), dtype=np.int32)  # the last entry stays -1, and -1 lands there
    out = _places[values]
    _places[rows] = -1
    return out


def without(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rows of `a` that are not in `b`, in `a`'s order."""
    return a[~isin_rows(a, b)] if len(a) and len(b) else a
