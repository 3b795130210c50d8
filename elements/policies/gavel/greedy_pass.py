"""Gavel's Algorithm 1 (§5), one round of it, for GavelRounds (elements/policies/gavel/mechanism.py):
visit each GPU type's queue, in GavelRounds' type order, entries in priority order (X times all time given
out on the type, over the time the entry received), and greedily take each entry that fits in the
type's GPUs left and whose jobs are not taken yet.

GavelRounds binds `schedule` as its method `_schedule`: called so, it costs what a method of its
own would, every round. The time each entry received, which sets the priorities, is the class's
bookkeeping (mechanism.py); why the entries not taken wait is wait_reasons.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.elements.policies.gavel.wait_reasons import explain_round
from roundhouse.runtime.types import Ranking

if TYPE_CHECKING:
    from roundhouse.elements.policies.gavel.mechanism import GavelRounds

_add = np.add.reduce  # (a sum without `ndarray.sum`'s Python-level wrapper: these arrays are small)


def schedule(mech: GavelRounds, ctx) -> Ranking:
    """This round's ranking: per GPU type in the mechanism's order, a greedy pass over its
    columns' entries in priority order (`greedy`); GavelRounds binds it as its `_schedule`."""
    if mech._shares is None or not len(mech._rows):
        mech.counters.update(scheduled=0, pairs=0, idle_gpus=int(ctx.cluster.n_gpus))
        return Ranking.empty()
    if len(ctx.events.finished):
        mech._update_alive(ctx)
        mech._repeat = None
    rows, partner, X, sf = mech._rows, mech._partner, mech._X, mech._sf
    if mech._repeat is not None:
        # Last round every entry that wanted GPUs got them, each could use only one type, and
        # nothing has changed since: the same entries run again (priorities cannot matter).
        ranking, picked = mech._repeat
        mech._ran_run_s = ctx.jobs.column("run_s")[rows[picked]]
        return ranking
    priority = None  # (worked out when a type's GPUs do not hold every entry that wants them)
    types = mech._rng.permutation(len(mech._cols_of_type)) if mech.order == "shuffled" else mech._type_order
    left = list(ctx.cluster.gpus_by_type)
    with_pairs = mech._any_pairs
    # Who has GPUs: by job row with pairs (a job may sit in several entries), else by entry (each its own job).
    taken = np.zeros(len(ctx.jobs) if with_pairs else len(rows), dtype=bool)
    chosen, chosen_col = [], []
    mech._sorted.clear()  # (emptied in place: an element's assignment goes through attrs' hook)
    any_taken = False
    for t in types.tolist():
        for c in mech._cols_of_type[t]:
            if left[t] <= 0:
                break
            ok = mech._wanted_by_col[c]
            if any_taken:
                if with_pairs:
                    ok = ok & ~taken[rows] & (~mech._paired | ~taken[np.maximum(partner, 0)])
                else:
                    ok = ok > taken  # (wanted and not taken, in one pass)
            cand = ok.nonzero()[0]
            if not len(cand):
                continue
            need = int(_add(sf[cand]))
            if with_pairs or need > left[t]:  # (when all fit, order does not matter)
                priority = (X * (mech._given / mech._time)).T if priority is None else priority  # (a row per column)
                tied = mech._tie_order[c]
                cand = tied[ok[tied]]
                cand = cand[(-priority[c][cand]).argsort(kind="stable")]
                before = int(left[t])  # (kept for the reasons: what was left as the column's turn came)
                picked, left[t] = greedy(cand, sf, partner, rows, taken, before, with_pairs)
                mech._sorted.append((c, cand, picked, before))
            else:  # every entry fits: all are taken (entries are jobs here: no pairs)
                picked, left[t] = cand, int(left[t]) - need
                taken[cand] = True
            if len(picked):
                chosen.append(picked)
                chosen_col.append(c)
                any_taken = True

    picked = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
    # Each entry's column: one repeat for the round rather than an array per column.
    cols = np.asarray(chosen_col, dtype=np.int64).repeat([len(p) for p in chosen])
    run_s = ctx.jobs.column("run_s")
    mech._ran, mech._ran_col = picked, cols
    mech._ran_run_s = run_s[rows[picked]]
    if mech._any_pairs:
        mech._ran_partner_run_s = run_s[np.maximum(partner[picked], 0)]
    mech.counters["scheduled"] = len(picked)
    mech.counters["pairs"] = int(mech._paired[picked].sum()) if mech._any_pairs else 0
    mech.counters["idle_gpus"] = sum(left)
    last = mech._last
    if last is not None and last[1] == picked.tobytes() and last[2] == cols.tobytes():
        # The same entries on the same columns as last round: the same ranking, so that the
        # placer sees it unchanged and renews every lease without searching again.
        ranking = last[0]
    else:
        ranking = Ranking(
            rows=rows[picked],
            gpus=sf[picked],
            gpu_type=mech._col_type[cols],
            consolidate=None if mech._consolidated is None else mech._consolidated[cols],
            backfill=False,
            partner=partner[picked] if mech._any_pairs else None,
        )
        mech._last = (ranking, picked.tobytes(), cols.tobytes())
    if mech._one_type_each and not mech._any_pairs and len(picked) == mech._wanting:
        mech._repeat = (ranking, picked)
    if ctx.explaining:
        explain_round(mech, ctx, picked, taken if with_pairs else None, sum(left))
    return ranking


def greedy(cand, sf, partner, rows, taken, left: int, with_pairs: bool):
    """Algorithm 1 on one type's queue (already in priority order): take each entry whose GPU
    count fits in what is left and whose jobs are not taken yet. Marks the jobs in `taken`;
    returns (entries taken, GPUs left). Without pairs, `taken` is by entry, not job row."""
    if not with_pairs:
        sizes = sf[cand]
        ends = sizes.cumsum()
        if ends[-1] <= left:  # everyone fits
            taken[cand] = True
            return cand, left - int(ends[-1])
        fit = int(ends.searchsorted(left, side="right"))  # the first `fit` entries all fit
        picked = cand[:fit]
        left -= int(ends[fit - 1]) if fit else 0
        if left > 0 and fit < len(cand):
            rest = sizes[fit:] <= left
            extra = []  # (a scalar walk over the few that may still fit: Python ints, not numpy's)
            for i, w in zip(cand[fit:][rest].tolist(), sizes[fit:][rest].tolist()):
                if w <= left:
                    extra.append(i)
                    left -= w
                    if left == 0:
                        break
            if extra:
                picked = np.concatenate([picked, np.asarray(extra, dtype=np.int64)])
        taken[picked] = True
        return picked, left
    pairs_picked: list[int] = []
    for i in cand.tolist():
        if sf[i] > left:
            continue
        a, b = rows[i], partner[i]
        if taken[a] or (b >= 0 and taken[b]):
            continue
        pairs_picked.append(i)
        taken[a] = True
        if b >= 0:
            taken[b] = True
        left -= int(sf[i])
        if left == 0:
            break
    return np.asarray(pairs_picked, dtype=np.int64), left
