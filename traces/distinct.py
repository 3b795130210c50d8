"""A column of names (a trace's models) as its distinct names and, per row, an index into them.

A trace of a million jobs names a few dozen models. Whatever depends on the name alone (its
profile entry, its communication, placement and resource profiles, its elastic application) is
worked out once per distinct name and gathered for the rows, never once per job in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import polars as pl

# Up to this many rows the names are split by a dictionary, beyond it by polars (measured: about
# 0.4 ms for polars' calls, 1 µs a row for the dictionary).
_FEW_ROWS = 1024


@attrs.frozen
class DistinctNames:
    """`names`: the distinct names, in order of first appearance; `codes[i]`: row i's index into
    them, -1 where the row names none."""

    names: list[str]
    codes: np.ndarray

    @classmethod
    def of(cls, column: pl.Series | None, n: int) -> DistinctNames:
        """The names of a string column (None: a trace without the column, n rows naming none)."""
        if column is None:
            return cls([], np.full(n, -1, dtype=np.int64))
        if n <= _FEW_ROWS:  # (a handful of jobs, as live submissions bring: a dictionary costs less than polars' calls)
            index: dict[str, int] = {}
            found = [-1 if name is None else index.setdefault(name, len(index)) for name in column.to_list()]
            return cls(list(index), np.array(found, dtype=np.int64))
        names = column.drop_nulls().unique(maintain_order=True)
        at = pl.int_range(len(names), eager=True)
        codes = column.replace_strict(names, at, default=None, return_dtype=pl.Int64).fill_null(-1)
        return cls(names.to_list(), codes.to_numpy())

    def name_of(self, row: int) -> str | None:
        code = int(self.codes[row])
        return None if code < 0 else self.names[code]

    def per_row(self, per_name: Sequence | np.ndarray, default, dtype=None) -> np.ndarray:
        """`per_name[k]` for every row naming `names[k]`; `default` for a row naming none."""
        values = np.empty(len(self.names) + 1, dtype=dtype if dtype is not None else object)
        values[: len(self.names)] = per_name
        values[-1] = default  # (code -1 reads the last entry)
        return values[self.codes]
