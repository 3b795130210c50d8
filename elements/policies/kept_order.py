"""A ranking by key kept from one tick to the next, for long queues.

A policy whose keys move only as jobs progress (`KeyOrder.keys_move_with_progress`: attained
service, arrival time) sees, from one round to the next, most of a long queue unchanged: a
waiting job's key does not move. So the pool's jobs are kept in ranking order (by key, ties by
admission), with their keys, admission numbers and GPU counts, and mended each tick: the jobs
the world added progress to (runtime/progress_log.py) and those that left the pool are taken
out, and those of them still in the pool, with the jobs that joined, are sorted by their new
keys and merged back in. The pool's view says what joined and left (`Active.lineage`); where it
cannot be followed (another pool's view, a reader that lost track, a key that is not a number),
the order is sorted afresh. Either way the order is the stable sort of the pool's keys in
admission order, the one a plain sort gives: the same jobs in the same places.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime import rowsets
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Active

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext
    from roundhouse.runtime.progress_log import ProgressReader

_NONE = np.zeros(0, dtype=np.int64)


class KeptOrder:
    """The pool's jobs in ranking order: rows, keys, admission numbers and GPU counts, and what
    the next tick needs to follow the pool (its view's token and number, its rows in admission
    order, the next admission number) and the world (a progress reader)."""

    __slots__ = ("rows", "keys", "admitted", "gpus", "pool_rows", "token", "views", "next_admitted", "reader")

    def __init__(self, rows, keys, admitted, gpus, pool_rows, lineage, next_admitted: int, reader: ProgressReader):
        self.rows, self.keys, self.admitted, self.gpus = rows, keys, admitted, gpus
        self.pool_rows = pool_rows
        self.token, self.views = lineage[0], lineage[1]
        self.next_admitted = next_admitted
        self.reader = reader


Key = Callable[[Active], np.ndarray]


def kept_order(kept: KeptOrder | None, key: Key, ctx: RoundContext, active: Active) -> KeptOrder:
    """This tick's order: `kept` mended, or sorted afresh when it cannot be."""
    if kept is not None:
        mended = _mend(kept, key, ctx, active)
        if mended is not None:
            return mended
        reader = kept.reader
        reader.take()  # (what it noted is in the keys read now)
    else:
        reader = ctx.progress_reader()
    rows = active.rows
    keys = key(active)
    order = keys.argsort(kind="stable")  # (an admission number is a place in the pool's order)
    in_order = rows[order]
    gpus = ctx.jobs.column("gpus")[in_order]
    lineage = active.lineage
    assert lineage is not None  # (asked for a pool's view only)
    if keys.dtype.kind != "f" or np.isnan(keys).any():
        lineage = (None, -1, None)  # (not mended: NaN has no place in a sorted search)
    return KeptOrder(in_order, keys[order], order, gpus, rows, lineage, len(rows), reader)


def _mend(kept: KeptOrder, key: Key, ctx: RoundContext, active: Active) -> KeptOrder | None:
    lineage = active.lineage
    if lineage is None or lineage[0] is not kept.token or not kept.views <= lineage[1] <= kept.views + 1:
        return None
    moved = kept.reader.take()
    if moved is None:
        return None
    rows = active.rows
    left, joined = _NONE, _NONE
    if lineage[1] > kept.views:  # (else the same view as last time: nothing joined or left)
        stayed = lineage[2]
        if stayed is not None:
            left = kept.pool_rows[~stayed]
        joined = rows[len(kept.pool_rows) - len(left) :]
    out = np.concatenate([moved, left]) if len(left) else moved
    rowsets.reserve(len(ctx.jobs))
    hit = isin_rows(kept.rows, out) if len(out) else None
    if hit is not None and np.count_nonzero(hit):
        again = hit.nonzero()[0]
        stay = ~hit
        k_rows, k_keys, k_admitted, k_gpus = kept.rows[stay], kept.keys[stay], kept.admitted[stay], kept.gpus[stay]
        a_rows, a_admitted, a_gpus = kept.rows[again], kept.admitted[again], kept.gpus[again]
        if len(left):  # (jobs that left are not put back)
            back = ~isin_rows(a_rows, left)
            a_rows, a_admitted, a_gpus = a_rows[back], a_admitted[back], a_gpus[back]
    else:
        k_rows, k_keys, k_admitted, k_gpus = kept.rows, kept.keys, kept.admitted, kept.gpus
        a_rows, a_admitted, a_gpus = _NONE, _NONE, _NONE
    next_admitted = kept.next_admitted + len(joined)
    if len(joined):
        a_rows = np.concatenate([a_rows, joined])
        a_admitted = np.concatenate([a_admitted, np.arange(kept.next_admitted, next_admitted)])
        a_gpus = np.concatenate([a_gpus, ctx.jobs.column("gpus")[joined]])
    if len(k_rows) + len(a_rows) != len(rows):
        return None  # (not the pool it follows: sorted afresh)
    if len(a_rows):
        a_keys = key(ctx.jobs.view(a_rows, Active))
        if a_keys.dtype.kind != "f" or np.isnan(a_keys).any() or k_keys.dtype != a_keys.dtype:
            return None  # (NaN has no place in a sorted search; the plain sort puts it last)
        order = a_admitted.argsort(kind="stable")
        order = order[a_keys[order].argsort(kind="stable")]  # by key, ties by admission
        a_rows, a_keys, a_admitted, a_gpus = a_rows[order], a_keys[order], a_admitted[order], a_gpus[order]
        at = merge_places(k_keys, k_admitted, a_keys, a_admitted)
        dest, rest = interleaving(at, len(rows))
        k_rows, k_keys, k_admitted, k_gpus = (
            interleave(dest, rest, k, a)
            for k, a in ((k_rows, a_rows), (k_keys, a_keys), (k_admitted, a_admitted), (k_gpus, a_gpus))
        )
    return KeptOrder(k_rows, k_keys, k_admitted, k_gpus, rows, lineage, next_admitted, kept.reader)


def merge_places(kept_keys: np.ndarray, kept_second: np.ndarray, other_keys: np.ndarray, other_second: np.ndarray) -> np.ndarray:
    """Where each of the others goes among the kept: how many kept entries come before it. Both
    are sorted by key, then by a second number (a place, an admission number; distinct between
    the two); the result does not decrease."""
    n = len(kept_keys)
    at = kept_keys.searchsorted(other_keys)
    tied = (kept_keys[np.minimum(at, n - 1)] == other_keys).nonzero()[0] if n else _NONE
    if not len(tied):
        return at
    # Within a run of equal keys the kept are in order of their second numbers, and the others
    # tied with one run are next to each other: each such group is placed among its run by one
    # search. Runs are few (services grow by whole rounds); where they are many, (run, second)
    # is compared over the whole kept order.
    starts = at[tied]
    cuts = (starts[1:] != starts[:-1]).nonzero()[0] + 1
    if len(cuts) < 64:
        for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(tied)]):
            group = tied[a:b]
            lo = int(starts[a])
            hi = int(kept_keys.searchsorted(other_keys[group[0]], side="right"))
            at[group] = lo + kept_second[lo:hi].searchsorted(other_second[group].astype(kept_second.dtype))
        return at
    run_start = np.arange(n)
    run_start[1:] *= kept_keys[1:] != kept_keys[:-1]  # (0 inside a run; the accumulated maximum fills it)
    np.maximum.accumulate(run_start, out=run_start)
    width = int(max(kept_second.max(), other_second.max())) + 2
    where = at * width - 1
    where[tied] += other_second[tied] + 1
    return (run_start * width + kept_second).searchsorted(where)


def interleaving(at: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For `merge_places`' result: the others' places in the merged arrays of length `n`, and a
    mask of the kept's places."""
    dest = at + np.arange(len(at))
    rest = np.ones(n, dtype=bool)
    rest[dest] = False
    return dest, rest


def interleave(dest: np.ndarray, rest: np.ndarray, kept: np.ndarray, others: np.ndarray) -> np.ndarray:
    merged = np.empty(len(rest), dtype=np.result_type(kept, others))
    merged[dest] = others
    merged[rest] = kept
    return merged
