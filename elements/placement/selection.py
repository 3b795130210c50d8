"""Step 1 of every placer: which ranked jobs fit in the cluster's capacity, and on which GPU type."""

from __future__ import annotations

import numpy as np

from roundhouse.elements.placement.packing import _NEVER, _constant, next_true
from roundhouse.runtime.types import Ranking


def _select(cluster, ranking: Ranking, job_types, keeps: np.ndarray, placed_r: np.ndarray | None, online=None):
    """Step 1. Returns (selected mask, GPU type each selected job runs on). `online`: the
    GPUs that count towards capacity (None: all)."""
    want = ranking.gpus
    n = len(want)
    selected = np.zeros(n, dtype=bool)
    if job_types is None:  # one GPU type: every job runs on type 0
        on_type = _constant(n, 0)
        capacity = cluster.n_gpus if online is None else int(np.count_nonzero(online))
        # The jobs that fill the capacity in ranking order: among the first capacity + 1,
        # unless some ask for no GPU.
        m = n if n <= capacity + 1 else capacity + 1
        cumulative = np.maximum(want[:m], 0).cumsum()
        k = int(cumulative.searchsorted(capacity, side="right"))
        if k == m < n:
            m = n
            cumulative = np.maximum(want, 0).cumsum()
            k = int(cumulative.searchsorted(capacity, side="right"))
        selected[:k] = want[:k] > 0
        left = capacity - (int(cumulative[k - 1]) if k else 0)
        if k == n or not ranking.backfill or left == 0:
            return selected, on_type
        i = k
        while left > 0 and i < n:  # a few jobs at most: jump to the next one that fits what is left
            i = next_true(lambda a, b, left=left: (want[a:b] - 1).view(np.uint64) < left, i, n)  # 1 <= want <= left
            if i < 0:
                break
            selected[i] = True
            left -= int(want[i])
            i += 1
        return selected, on_type
    assert placed_r is not None  # the placer gives it with the job types
    on_type = np.zeros(n, dtype=np.int64)
    if n == 0:
        return selected, on_type
    by_type = cluster.gpus_by_type if online is None else np.bincount(cluster.gpu_type[online], minlength=len(cluster.gpu_types))
    left = by_type.astype(np.int64).tolist()
    least_from = np.minimum.accumulate(np.where(want > 0, want, _NEVER)[::-1])[::-1].tolist()
    for i in range(n):
        g = int(want[i])
        if g <= 0:
            continue
        options = [int(placed_r[i])] if keeps[i] else job_types[i]
        t = next((t for t in options if g <= left[t]), None)
        if t is None:
            if not ranking.backfill:
                break
            continue
        selected[i] = True
        on_type[i] = t
        left[t] -= g
        if i + 1 < n and max(left) < least_from[i + 1]:
            break
    return selected, on_type


def allowed_types(rates: np.ndarray, wanted_type: int) -> list[int]:
    """GPU types a job can run on, fastest first; only `wanted_type` if one is asked for."""
    if wanted_type >= 0:
        return [wanted_type] if rates[wanted_type] > 0 else []
    order = (-rates).argsort(kind="stable")
    return [int(t) for t in order if rates[t] > 0]
