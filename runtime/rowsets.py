"""Fast membership tests for small sets of job rows.

`np.isin` sorts its inputs and costs tens of microseconds even for a handful of rows, which
adds up when called several times a round for thousands of rounds. Rows are small non-negative
integers, so a reusable mark array answers in about a microsecond.
"""

from __future__ import annotations

import numpy as np

_marks = np.zeros(1024, dtype=bool)


def reserve(rows: int) -> None:
    """Make room for job rows 0..rows-1 (the job table calls this as it grows), so that
    membership tests need not scan their inputs for the largest row."""
    global _marks
    if len(_marks) <= rows + 1:
        _marks = np.zeros(max(rows + 2, 2 * len(_marks)), dtype=bool)


def isin_rows(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`values` in `rows`, elementwise. Both hold job rows (reserved with `reserve`); `values`
    may hold -1 (a free GPU in the holder array), which is never a member."""
    if len(rows) == 0:
        return np.zeros(len(values), dtype=bool)
    _marks[rows] = True  # the last mark stays False, and -1 lands there
    out = _marks[values]
    _marks[rows] = False
    return out


def without(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rows of `a` that are not in `b`, in `a`'s order."""
    return a[~isin_rows(a, b)] if len(a) and len(b) else a
