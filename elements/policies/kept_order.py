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
    """The pool's jobs in ranking order: rows, GPU counts, and each job's key and admission number
    as one complex number (the key its real part, the number its imaginary part: numpy orders
    complex numbers by real part, then imaginary part, so that one search or sort compares both);
    and what the next tick needs to follow the pool (its view's token and number, its rows in
    admission order, the next admission number) and the world (a progress reader)."""

    __slots__ = ("rows", "ranked", "gpus", "pool_rows", "token", "views", "next_admitted", "reader")

    def __init__(self, rows, ranked, gpus, pool_rows, lineage, next_admitted: int, reader: ProgressReader):
        self.rows, self.ranked, self.gpus = rows, ranked, gpus
        self.pool_rows = pool_rows
        self.token, self.views = lineage[0], lineage[1]
        self.next_admitted = next_admitted
        self.reader = reader

    @property
    def keys(self) -> np.ndarray:
        return self.ranked.real


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
    lineage = active.lineage
    assert lineage is not None  # (asked for a pool's view only)
    if not _comparable(keys):
        lineage = (None, -1, None)  # (not mended: sorted afresh each tick)
    return KeptOrder(in_order, _ranked(keys[order], order), ctx.jobs.column("gpus")[in_order], rows, lineage, len(rows), reader)


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
        k_rows, k_ranked, k_gpus = kept.rows[stay], kept.ranked[stay], kept.gpus[stay]
        a_rows, a_admitted, a_gpus = kept.rows[again], kept.ranked.imag[again], kept.gpus[again]
        if len(left):  # (jobs that left are not put back)
            back = ~isin_rows(a_rows, left)
            a_rows, a_admitted, a_gpus = a_rows[back], a_admitted[back], a_gpus[back]
    else:
        k_rows, k_ranked, k_gpus = kept.rows, kept.ranked, kept.gpus
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
        if not _comparable(a_keys):
            return None
        a_ranked = _ranked(a_keys, a_admitted)
        order = a_ranked.argsort()  # by key, ties by admission (no two jobs share a number)
        a_rows, a_ranked, a_gpus = a_rows[order], a_ranked[order], a_gpus[order]
        dest, rest = interleaving(k_ranked.searchsorted(a_ranked), len(rows))
        k_rows, k_ranked, k_gpus = (
            interleave(dest, rest, k, a) for k, a in ((k_rows, a_rows), (k_ranked, a_ranked), (k_gpus, a_gpus))
        )
    return KeptOrder(k_rows, k_ranked, k_gpus, rows, lineage, next_admitted, kept.reader)


def _comparable(keys: np.ndarray) -> bool:
    """Keys a complex number holds exactly and a search can place: floats of at most 64 bits,
    none NaN (the plain sort puts NaN last, a search has no place for it)."""
    return keys.dtype.kind == "f" and keys.dtype.itemsize <= 8 and not np.isnan(keys).any()


def _ranked(keys: np.ndarray, admitted: np.ndarray) -> np.ndarray:
    """Key and admission number as one complex number each (numbers below 2**53 are exact)."""
    ranked = np.empty(len(keys), dtype=np.complex128)
    ranked.real = keys
    ranked.imag = admitted
    return ranked


def interleaving(at: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For others merged among kept entries, `at[i]` kept entries before the i-th (not
    decreasing): the others' places in the merged arrays of length `n`, and a mask of the kept's."""
    dest = at + np.arange(len(at))
    rest = np.ones(n, dtype=bool)
    rest[dest] = False
    return dest, rest


def interleave(dest: np.ndarray, rest: np.ndarray, kept: np.ndarray, others: np.ndarray) -> np.ndarray:
    merged = np.empty(len(rest), dtype=np.result_type(kept, others))
    merged[dest] = others
    merged[rest] = kept
    return merged
