"""A placer of one's own overrides `choose` (how one job's GPUs are picked); what it returns is
checked before the shared steps use it, so that a wrong answer is said as such (which GPU ids,
for how many wanted) rather than as an index error deep in the packing, or as a job silently
placed on GPUs that are busy or fewer than it asked for. The library's placers are tested."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np


def checking_choice(choose: Callable) -> Callable:
    """`choose`, its answer checked: None (the job cannot be placed), or `want` distinct ids of
    GPUs marked in `available`, as an int64 array."""

    @functools.wraps(choose)
    def checked(self, cluster, available: np.ndarray, want: int, types: list[int], one_node: bool):
        got = choose(self, cluster, available, want, types, one_node)
        if got is None:
            return None
        problem = _problem(got, available, want)
        if problem is not None:
            raise ValueError(
                f"its choose returned {problem} for a job wanting {want} GPU(s): return None when the job cannot be "
                f"placed, else an array of {want} distinct ids of GPUs free in `available`"
            )
        return np.asarray(got, dtype=np.int64)

    return checked


def _problem(got, available: np.ndarray, want: int) -> str | None:
    """What is wrong with a choice, or None."""
    ids = np.asarray(got)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        return f"{type(got).__name__} of {ids.dtype} with shape {ids.shape}, not GPU ids"
    if len(ids) != want:
        return f"{len(ids)} GPU id(s)"
    outside = ids[(ids < 0) | (ids >= len(available))]
    if len(outside):
        return f"GPU id {int(outside[0])}, outside 0..{len(available) - 1}"
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        return f"GPU id {int(values[counts > 1][0])} more than once"
    busy = ids[~available[ids]]
    if len(busy):
        return f"GPU id {int(busy[0])}, which is not free"
    return None
