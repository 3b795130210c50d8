"""Why a placer left ranked jobs waiting, or suspended them (runtime/explain.py's reasons).

A waiting job that wants more GPUs than the jobs ranked ahead of it leave free waits behind them
(RANKED_BEHIND); one of a ranking that names a GPU type, for GPUs of that type (NO_FREE_TYPE);
one that would fit in the GPUs they leave but not where it must go (one machine, say), or whose
room went to jobs ranked behind it (backfilled, or kept running), for room (NO_ROOM). The GPUs
left free, for a waiting job, are those the plan leaves free and those it leaves to jobs ranked
behind it (for a placer that never preempts, such as Gandiva, only those it launches: a running
job ranked behind keeps its GPUs whatever the ranking); without backfilling, every job behind the first that did not fit (the first
waiting, or a running job suspended in the round if one is ranked ahead of it) is blocked by it
(BLOCKED). A running job suspended while still ranked was preempted for the jobs ranked ahead of
it (PREEMPTED).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from roundhouse.runtime.explain import Number, Reason
from roundhouse.runtime.rowsets import isin_rows


def explain_placement(
    ctx, ranking, is_run, placed: np.ndarray, suspend: np.ndarray, available: np.ndarray, skip=None, never_preempts=False
) -> None:
    """Give the reasons for a placer's round: `is_run` and `placed` mark ranking positions
    running at the round's start and launched by the plan, `suspend` the rows suspended,
    `available` the GPUs the plan leaves free; `skip` marks positions the placer explained
    itself (waiting or suspended). `never_preempts`: the placer never takes a running job's GPUs
    for a job ranked ahead of it, so the GPUs of jobs ranked behind that kept running are not
    room left for it (only those of jobs launched behind it are). (Called every round a placer
    decides: the common paths are a few array operations, each over the ranking at most once.)"""
    rows = ranking.rows
    busy = is_run | placed
    idle = (~busy).nonzero()[0]  # waiting (suspended jobs ran at the round's start)
    pos = idle if skip is None else idle[~skip[idle]]
    hit = None
    if len(suspend):
        # Positions of the jobs suspended and not launched again (one launched again was moved),
        # looked for where jobs ran at the round's start: only a running job is suspended.
        ran = is_run.nonzero()[0]
        hit = ran[isin_rows(rows[ran], suspend) > placed[ran]]
        if not len(hit):
            hit = None
    if len(pos):
        _explain_waiting(ctx, ranking, pos, idle, hit, available, placed if never_preempts else busy, is_run, placed)
    if hit is not None:
        # (jobs ahead that hold GPUs: all but those waiting and those suspended)
        holders = hit - idle.searchsorted(hit) - np.arange(len(hit))
        if skip is not None:
            keep = ~skip[hit]
            hit, holders = hit[keep], holders[keep]
        ctx.explain(Reason.PREEMPTED, rows[hit], hit + 1, holders)


def _explain_waiting(ctx, ranking, pos: np.ndarray, idle: np.ndarray, hit, available: np.ndarray, busy, is_run, placed) -> None:
    """Waiting jobs at ranking positions `pos`; `idle`: all waiting positions, `hit`: those of
    the suspended jobs (or None), for the count of jobs ranked ahead that hold GPUs and, without
    backfilling, the first job that did not fit; `busy`: positions whose GPUs after the plan are
    room a job ranked ahead might have had (running or launched; for a placer that never
    preempts, launched); `is_run`, `placed`: positions running at the round's start, launched
    by the plan (for the GPUs, and their type, that jobs ranked behind hold)."""
    rows, want = ranking.rows, ranking.gpus
    cluster = ctx.cluster
    start = int(pos[0])  # (the first waiting job, whether or not it wants GPUs)
    # (Counts of comparisons rather than a minimum: a reduction costs several times as much,
    # and this runs every round.)
    code: int | np.ndarray
    type_of: np.ndarray | None = None
    behind: tuple[int, np.ndarray] | None = None  # (GPUs free and held, GPUs held up to each position)
    if len(cluster.gpu_types) == 1:
        n_free = int(np.count_nonzero(available))
        left: Number = n_free
        code = int(Reason.RANKED_BEHIND)
        every = np.count_nonzero(want > 0) == len(want)  # (every ranked job wants GPUs: the common case)
        held = _held_from(want, busy, hit, start, every)
        if held is not None:  # room a job ranked behind took was left free by the jobs ahead
            if not every:
                pos = pos[want[pos] > 0]  # (as `_wanting`)
                if not len(pos):
                    return
            # A waiting job's GPUs left are those the plan leaves free and all those held, less
            # those held up to it: it fits in them when what it wants and what those ahead hold
            # come to no more than the GPUs free and held (one comparison, for the ranking's
            # sums: the numbers left are worked out only for the jobs whose reason changed).
            total = n_free + int(held[-1])
            code = np.where((want + held).take(pos) > total, _RANKED_BEHIND, _NO_ROOM)
            behind = (total, held)
        # The common case at load: no ranked job fits in what is left (so none wants no GPUs
        # either). Asked of the whole ranking, which spares picking out the waiting jobs' wants.
        elif np.count_nonzero(want <= n_free):
            pos, wanted = _wanting(pos, want[pos])
            if not len(pos):
                return
            if np.count_nonzero(wanted <= n_free):
                code = np.where(wanted > n_free, int(Reason.RANKED_BEHIND), int(Reason.NO_ROOM))
    else:
        pos, wanted = _wanting(pos, want[pos])
        if not len(pos):
            return
        free = np.bincount(cluster.gpu_type[available], minlength=len(cluster.gpu_types))
        holding = _holding_behind(want, busy, hit, start)
        if holding is not None:
            free = free[None, :] + _held_behind_by_type(ctx, ranking, holding, is_run & ~placed, len(free))[pos]
        usable = ctx.jobs.type_rates[rows[pos]] > 0
        asked = ranking.gpu_type[pos] if ranking.gpu_type is not None else None
        if asked is not None:
            usable = np.where(asked[:, None] >= 0, np.arange(len(free))[None, :] == asked[:, None], usable)
        # The type it could use with the most GPUs free, and how many.
        room = np.where(usable, free if free.ndim == 2 else free[None, :], -1)
        type_of = room.argmax(axis=1)
        left = np.maximum(room.max(axis=1), 0)
        code = np.where(wanted > left, int(Reason.RANKED_BEHIND), int(Reason.NO_ROOM))
        if asked is not None:
            code = np.where((asked >= 0) & (wanted > left), int(Reason.NO_FREE_TYPE), code)
    first = int(pos[0])
    blocked = False
    if not ranking.backfill:
        # No job starts behind the first that did not fit: the first waiting, or a running job
        # suspended this round (it lost its GPUs) if one is ranked ahead of it.
        ahead = hit is not None and int(hit[0]) < first
        if ahead:
            first = int(hit[0])
        if ahead or len(pos) > 1:
            code = np.full(len(pos), code) if isinstance(code, int) else code
            code[0 if ahead else 1 :] = int(Reason.BLOCKED)
            blocked = True

    def second(sel) -> np.ndarray:
        """Jobs ranked ahead that hold GPUs after the plan (all but those that wait and those
        suspended), worked out for the few whose reason changed."""
        p = pos[sel]
        b = p - idle.searchsorted(p)
        if hit is not None:
            b -= hit.searchsorted(p)
        if isinstance(code, int) or not (blocked or type_of is not None):
            return b
        here = code[sel]
        if blocked:
            b = np.where(here == _BLOCKED, first + 1, b)
        if type_of is not None:
            b = np.where(here == _NO_FREE_TYPE, type_of[sel], b)
        return b

    ctx.explain(code, rows[pos], lambda sel: pos[sel] + 1, second, left if behind is None else _left(behind, pos))


_BLOCKED, _NO_FREE_TYPE = int(Reason.BLOCKED), int(Reason.NO_FREE_TYPE)
_RANKED_BEHIND, _NO_ROOM = int(Reason.RANKED_BEHIND), int(Reason.NO_ROOM)


def _left(behind: tuple[int, np.ndarray], pos: np.ndarray) -> Callable[[Any], np.ndarray]:
    """The GPUs left for the waiting jobs at ranking positions `pos`, as a function of the
    positions (in `pos`) of those recorded: those free and held, less those held up to each
    (`behind`)."""
    total, held = behind
    return lambda sel: total - held[pos[sel]]


def _held_from(want: np.ndarray, busy: np.ndarray, hit, first: int, every: bool) -> np.ndarray | None:
    """Per ranking position, the GPUs held after the plan by the jobs up to it (all but the
    waiting and the suspended hold theirs), or None when none ranked behind the first waiting
    job, at position `first`, holds any. `every`: every ranked job wants GPUs (then one behind
    holds some when the sum grows past `first`, which spares a pass)."""
    held = want * busy
    if hit is not None:
        held[hit] = 0
    if not every:
        return held.cumsum() if np.count_nonzero(held[first:] > 0) else None
    held = held.cumsum()
    return held if held[-1] > (held[first - 1] if first else 0) else None


def _holding_behind(want: np.ndarray, busy: np.ndarray, hit, first: int) -> np.ndarray | None:
    """Which ranking positions hold GPUs after the plan (all but the waiting and the suspended)
    and are ranked behind the first waiting job, at position `first`, or None when none of them
    wants GPUs (the common case)."""
    holding = busy.copy()
    if hit is not None:
        holding[hit] = False
    holding[:first] = False  # (only those behind a waiting job matter)
    return holding if np.count_nonzero(holding & (want > 0)) else None


def _held_behind_by_type(ctx, ranking, holding: np.ndarray, kept: np.ndarray, n_types: int) -> np.ndarray:
    """(positions, types): GPUs of each type held after the plan by the jobs ranked behind each
    position. A job's type is the one its ranking names, else, running on, the one it runs on; a
    job launched on a type the ranking does not name is not counted (its GPUs are not known here)."""
    types = np.full(len(holding), -1, dtype=np.int64)
    if ranking.gpu_type is not None:
        types = np.asarray(ranking.gpu_type, dtype=np.int64).copy()
    on = kept & (types < 0)
    if on.any():
        types[on] = ctx.jobs.column("placed_type")[ranking.rows[on]]
    counted = holding & (types >= 0)
    held = np.zeros((len(holding), n_types), dtype=np.int64)
    held[counted, types[counted]] = ranking.gpus[counted]
    return np.cumsum(held[::-1], axis=0)[::-1]


def _wanting(pos: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions, and GPUs wanted, of jobs that want GPUs: a job the ranking gives none is
    not waiting for any."""
    if np.count_nonzero(wanted <= 0):
        keep = wanted > 0
        return pos[keep], wanted[keep]
    return pos, wanted
