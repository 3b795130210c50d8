"""Why the jobs of GavelRounds' allocation wait (elements/policies/gavel/mechanism.py), for the
run's explanations (runtime/explain.py): not chosen this round, passed over for wanting more GPUs
than their type had left, or without a share of any GPU they can use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.explain import Reason
from roundhouse.runtime.types import Ranking

if TYPE_CHECKING:
    from roundhouse.elements.policies.gavel.mechanism import GavelRounds

_NO_ENTRIES = np.zeros(0, dtype=np.int64)


def explain_round(mech: GavelRounds, ctx, picked: np.ndarray, taken: np.ndarray | None, idle: int) -> None:
    """Jobs of entries not chosen this round wait; those that ran lose their GPUs as their
    round (lease) ends. `taken` marks job rows chosen, with pairs (without, an entry not
    chosen is a job not chosen). An entry passed over because it wanted more GPUs than its
    type had left when its turn came, while entries behind it took GPUs, is not told that
    those took its place: it waits for GPUs of its type (suspended first, if it ran), with
    the count that was left."""
    missed = mech._waiting.copy()
    missed[picked] = False
    if taken is not None:
        missed &= ~taken[mech._rows]  # (a job chosen in a pair is not waiting)
    if not missed.any():
        return
    entries, rank, ahead, type_code, left = too_big(mech, missed)
    if len(entries):
        missed[entries] = False
        big = mech._rows[entries]
        ran = ctx.jobs.column("held")[big] > 0
        if ran.any():
            ctx.explain(Reason.PREEMPTED, big[ran], rank[ran], ahead[ran])
        ctx.explain(Reason.NO_FREE_TYPE, big, rank, type_code, left)
    rows = mech._rows[missed]
    if len(rows):
        ran = ctx.jobs.column("held")[rows] > 0
        code = np.where(ran, int(Reason.LEASE_END), int(Reason.NOT_CHOSEN))
        ctx.explain(code, rows, len(picked), idle)


def too_big(mech: GavelRounds, missed: np.ndarray):
    """Entries among `missed` that a column's greedy pass skipped because their GPU count
    exceeded what its type had left, with an entry behind them taken: (entries, their rank in
    that column's priority order from 1, the entries taken ahead of them, the GPU type's code,
    the GPUs left at their turn)."""
    sf = mech._sf
    parts = []  # per column: (entries, rank, ahead, type code, left), column by column
    mark = None  # (the column's picks, among its candidates: cheaper than isin)
    for c, cand, picked, before in mech._sorted:
        n = len(picked)  # (picked in the candidates' order: a prefix of them passed none over)
        if not n or picked[-1] == cand[n - 1]:
            continue
        if mark is None:
            mark = np.zeros(len(mech._rows), dtype=bool)
        mark[picked] = True
        chose = mark[cand]
        mark[picked] = False
        last = int(chose.nonzero()[0][-1])
        head, sizes = cand[:last], sf[cand[:last]]
        chose = chose[:last]
        used = np.where(chose, sizes, 0)
        left = before - (used.cumsum() - used)  # GPUs left as each candidate's turn came (whole numbers)
        skipped = (~chose & missed[head] & (sizes > left)).nonzero()[0]
        if len(skipped):
            ahead = chose.cumsum()[skipped] - chose[skipped]
            parts.append((head[skipped], skipped + 1, ahead, mech._col_type[c].repeat(len(skipped)), left[skipped]))
    if not parts:
        return _NO_ENTRIES, _NO_ENTRIES, _NO_ENTRIES, _NO_ENTRIES, _NO_ENTRIES
    if len(parts) == 1:
        entries, rank, ahead, code, left = parts[0]
    else:  # an entry passed over in several columns keeps its first column's numbers
        entries, rank, ahead, code, left = (np.concatenate([p[i] for p in parts]) for i in range(5))
        _, first = np.unique(entries, return_index=True)
        if len(first) < len(entries):
            first.sort()
            entries, rank, ahead, code, left = entries[first], rank[first], ahead[first], code[first], left[first]
    as_int = np.int64
    return entries, rank.astype(as_int), ahead.astype(as_int), code.astype(as_int), left.astype(as_int)


def explain_without_share(mech: GavelRounds, ctx, fresh: bool, ranking: Ranking) -> Ranking:
    """Record that the allocation's jobs that want none of its GPUs wait for want of a share,
    when they are worked out again (a new allocation, or jobs finished: nothing else changes
    their reason); returns `ranking`."""
    if ctx.explaining and len(mech._rows) and (fresh or len(ctx.events.finished)):
        rows = without_share(mech)
        if len(rows):
            ctx.explain(Reason.NO_SHARE, rows, int(mech._last_reset), mech.counters["idle_gpus"])
    return ranking


def without_share(mech: GavelRounds) -> np.ndarray:
    """Rows of the allocation's unfinished jobs that want none of its GPUs (no share of a type
    they can use, and not work-conserving; or no type they can use at all), alone or in a pair."""
    rows = mech._rows[mech._alive & ~mech._paired & ~mech._waiting]
    if mech._any_pairs and len(rows):
        wanting = mech._paired & mech._wanted_by_col.any(axis=0)
        rows = rows[~np.isin(rows, np.concatenate([mech._rows[wanting], mech._partner[wanting]]))]
    return rows
