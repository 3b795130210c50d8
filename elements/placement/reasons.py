"""Why a placer left ranked jobs waiting, or suspended them (runtime/explain.py's reasons).

A waiting job that wants more GPUs than the round's plan leaves free waits behind the jobs ranked
ahead of it (RANKED_BEHIND); one of a ranking that names a GPU type, for GPUs of that type
(NO_FREE_TYPE); one that would fit in the GPUs left but not where it must go (one machine, say)
for room (NO_ROOM); without backfilling, every job behind the first that did not fit (the first
waiting, or a running job suspended in the round if one is ranked ahead of it) is blocked by it
(BLOCKED). A running job suspended while still ranked was preempted for the jobs ranked ahead of
it (PREEMPTED).
"""

from __future__ import annotations

import numpy as np

from roundhouse.runtime.explain import Reason
from roundhouse.runtime.rowsets import isin_rows


def explain_placement(ctx, ranking, is_run, placed: np.ndarray, suspend: np.ndarray, available: np.ndarray, skip=None) -> None:
    """Give the reasons for a placer's round: `is_run` and `placed` mark ranking positions
    running at the round's start and launched by the plan, `suspend` the rows suspended,
    `available` the GPUs the plan leaves free; `skip` marks positions the placer explained
    itself (waiting or suspended). (Called every round a placer decides: the common paths are a
    few array operations, each over the ranking at most once.)"""
    rows = ranking.rows
    idle = (~(is_run | placed)).nonzero()[0]  # waiting (suspended jobs ran at the round's start)
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
        _explain_waiting(ctx, ranking, pos, idle, hit, available)
    if hit is not None:
        # (jobs ahead that hold GPUs: all but those waiting and those suspended)
        holders = hit - idle.searchsorted(hit) - np.arange(len(hit))
        if skip is not None:
            keep = ~skip[hit]
            hit, holders = hit[keep], holders[keep]
        ctx.explain(Reason.PREEMPTED, rows[hit], hit + 1, holders)


def _explain_waiting(ctx, ranking, pos: np.ndarray, idle: np.ndarray, hit, available: np.ndarray) -> None:
    """Waiting jobs at ranking positions `pos`; `idle`: all waiting positions, `hit`: those of
    the suspended jobs (or None), for the count of jobs ranked ahead that hold GPUs and, without
    backfilling, the first job that did not fit."""
    rows, want = ranking.rows, ranking.gpus
    cluster = ctx.cluster
    # (Counts of comparisons rather than a minimum: a reduction costs several times as much,
    # and this runs every round.)
    code: int | np.ndarray
    type_of: np.ndarray | None = None
    if len(cluster.gpu_types) == 1:
        left: np.ndarray | int = int(np.count_nonzero(available))
        code = int(Reason.RANKED_BEHIND)
        # The common case at load: no ranked job fits in what is left (so none wants no GPUs
        # either). Asked of the whole ranking, which spares picking out the waiting jobs' wants.
        if np.count_nonzero(want <= left):
            pos, wanted = _wanting(pos, want[pos])
            if not len(pos):
                return
            if np.count_nonzero(wanted <= left):
                code = np.where(wanted > left, int(Reason.RANKED_BEHIND), int(Reason.NO_ROOM))
    else:
        pos, wanted = _wanting(pos, want[pos])
        if not len(pos):
            return
        free = np.bincount(cluster.gpu_type[available], minlength=len(cluster.gpu_types))
        usable = ctx.jobs.type_rates[rows[pos]] > 0
        asked = ranking.gpu_type[pos] if ranking.gpu_type is not None else None
        if asked is not None:
            usable = np.where(asked[:, None] >= 0, np.arange(len(free))[None, :] == asked[:, None], usable)
        # The type it could use with the most GPUs free, and how many.
        room = np.where(usable, free[None, :], -1)
        type_of = room.argmax(axis=1)
        left = np.maximum(room.max(axis=1), 0)
        code = np.where(wanted > left, int(Reason.RANKED_BEHIND), int(Reason.NO_ROOM))
        if asked is not None:
            code = np.where((asked >= 0) & (wanted > left), int(Reason.NO_FREE_TYPE), code)
    first = int(pos[0])
    if not ranking.backfill:
        # No job starts behind the first that did not fit: the first waiting, or a running job
        # suspended this round (it lost its GPUs) if one is ranked ahead of it.
        ahead = hit is not None and int(hit[0]) < first
        if ahead:
            first = int(hit[0])
        if ahead or len(pos) > 1:
            code = np.full(len(pos), code) if isinstance(code, int) else code
            code[0 if ahead else 1 :] = int(Reason.BLOCKED)

    def second(sel) -> np.ndarray:
        """Jobs ranked ahead that hold GPUs after the plan (all but those that wait and those
        suspended), worked out for the few whose reason changed."""
        p = pos[sel]
        b = p - idle.searchsorted(p)
        if hit is not None:
            b -= hit.searchsorted(p)
        if isinstance(code, int):
            return b
        here = code[sel]
        b = np.where(here == Reason.BLOCKED, first + 1, b)
        if type_of is not None:
            b = np.where(here == Reason.NO_FREE_TYPE, type_of[sel], b)
        return b

    ctx.explain(code, rows[pos], lambda sel: pos[sel] + 1, second, left)


def _wanting(pos: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions, and GPUs wanted, of jobs that want GPUs: a job the ranking gives none is
    not waiting for any."""
    if np.count_nonzero(wanted <= 0):
        keep = wanted > 0
        return pos[keep], wanted[keep]
    return pos, wanted
