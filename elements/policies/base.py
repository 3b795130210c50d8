"""What ordering policies share: the pool's jobs in, a Ranking out; and, for most of them, a rank
by one per-job key, smallest first."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from roundhouse.elements.policies.kept_order import KeptOrder, interleave, interleaving, kept_order
from roundhouse.runtime import rowsets
from roundhouse.runtime.element import Element, In, Out, element_family
from roundhouse.runtime.types import Active, Jobs, Ranking

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element_family
class Policy(Element):
    """An ordering policy: turns the pool's jobs into a Ranking.

    Ports:
        active: admitted, unfinished jobs.
        ranking: the jobs in the order to serve them.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)

    def rank_arrivals(self, ctx: RoundContext, arrivals: Jobs) -> Ranking | None:
        """A round carried out in passing (runtime/passing.py): the arriving jobs in the order,
        and with the GPUs, that this policy's ranking of the whole pool would give them among
        themselves. None: it cannot tell (the round is ticked)."""
        return None


@element_family
class KeyOrder(Policy):
    """Ranks jobs by `key(active)`, smallest first, each wanting the GPUs it asked for. The sort
    is stable over the pool's admission order, so ties go to the job admitted first. The ranking
    goes on by key (`Ranking.by_key`): below 8,192 jobs it is sorted only when its order is read,
    and a placer with room for every job reads the order of the newcomers alone. From 8,192 jobs,
    a policy whose keys move only with progress keeps its order from tick to tick and mends it
    (elements/policies/kept_order.py); another finds its order from the last one (`stable_order`).

    Arguments:
        backfill: let lower-ranked jobs run when a higher one does not fit.
    """

    backfill: bool = True
    # (the last ranking, for quiet_until; a long queue's order). A subclass that keeps more
    # writes `state = KeyOrder.state + ("_mine",)`.
    state = ("_ranked", "_kept")
    # Whether jobs whose keys are equal and move at the same speed stay equal (the key is
    # accumulated by the same additions), so that their order cannot flip by rounding.
    exact_ties: ClassVar[bool] = False
    # Whether a job's key moves only when the world adds progress to it (or never): a long
    # queue's order is then kept from round to round and mended (elements/policies/kept_order.py).
    keys_move_with_progress: ClassVar[bool] = False

    def key(self, active: Active) -> np.ndarray:
        raise NotImplementedError

    def key_speed(self, active: Active) -> np.ndarray | None:
        """How fast each job's key changes, per second, while nothing happens but running jobs'
        progress; None: not declared (the policy is then ticked every round)."""
        return None

    def start(self, ctx: RoundContext) -> None:
        # (the pool and the ranking made of it, for quiet_until and the next round's guess)
        self._ranked: tuple[Active, Ranking] | None = None
        self._kept: KeptOrder | None = None  # (a long queue's order, kept from round to round)

    def tick(self, ctx: RoundContext, active: Active) -> Ranking:
        rows = active.rows
        if len(rows) >= _GUESS_FROM and self.keys_move_with_progress and active.lineage is not None:
            kept = self._kept = kept_order(self._kept, self.key, ctx, active)
            ranking = Ranking.in_key_order(kept.rows, kept.gpus, kept.keys, backfill=self.backfill)
            self._ranked = (ctx.jobs.view(kept.rows, Active), ranking)  # (the jobs in their stored order)
            return ranking
        if self._kept is not None:  # (a short queue again: sorted as it is read)
            self._kept.reader.close()
            self._kept = None
        keys = self.key(active)
        gpus = ctx.jobs.column("gpus")[rows]
        order = None
        if len(rows) >= _GUESS_FROM:  # (smaller pools are put in order when the order is asked for)
            last = self._ranked[1] if self._ranked is not None else None
            guess = None
            if last is not None and last.keys is not None and last.ordered:
                guess = (last.rows, last.keys[last.order])
            order = stable_order(keys, rows, guess, len(ctx.jobs))
        ranking = Ranking.by_key(rows, gpus, keys, backfill=self.backfill, order=order)
        self._ranked = (active, ranking)
        return ranking

    quiet_after_change = True

    def completions_wait(self, ctx: RoundContext) -> bool:
        return True  # (its ranking depends on the pool it is given, not on past ticks)

    def arrivals_wait(self, ctx: RoundContext) -> bool:
        return True  # (its state only remembers the last ranking, to guess the next one's order)

    def rank_arrivals(self, ctx: RoundContext, arrivals: Jobs) -> Ranking:
        # Each job's key is its own, and the sort is stable over admission order, in which the
        # round's arrivals come last: among themselves they are in the order of their keys alone.
        rows = arrivals.rows
        if len(rows) > 1:  # (one arrival, a round's usual, is in order by itself)
            rows = rows[self.key(ctx.jobs.view(rows, Active)).argsort(kind="stable")]
        return Ranking(rows, ctx.jobs.column("gpus")[rows], backfill=self.backfill)

    def quiet_until(self, ctx: RoundContext) -> float | None:
        assert self._ranked is not None  # (asked after a tick)
        active, ranking = self._ranked
        speed = self.key_speed(active)
        if speed is None:
            return None
        order = ranking.order
        assert ranking.keys is not None  # (made by_key)
        keys = ranking.keys[order]
        # A round before the first moment two neighbours in the order could swap: the round
        # that ticks then sees the swap coming, and ticks each round until it has happened.
        return ctx.now + first_swap_s(keys, speed[order], self.exact_ties) - ctx.round_s


# Below this many jobs a plain sort costs less than guessing its order (measured: the guess is
# about 2-3 times faster from 10,000 jobs, slower below about 5,000).
_GUESS_FROM = 8192
_NO_PLACES = np.zeros(0, dtype=np.int64)


def stable_order(keys: np.ndarray, rows: np.ndarray, last: tuple | None, table_rows: int) -> np.ndarray:
    """`keys.argsort(kind="stable")`, found from the last ranking (`last`: its rows, and their
    keys then): the jobs whose key did not move keep their order, which is still sorted by key and
    then by place in `rows`; only the others (the running jobs, the new ones) are sorted, and
    merged in by (key, place), so that the work beyond a few passes over the arrays follows the
    jobs whose key moved."""
    n = len(rows)
    if last is None or n < _GUESS_FROM or n == 0:
        return keys.argsort(kind="stable")
    last_rows, last_keys = last
    rowsets.reserve(table_rows)  # (rows of the job table, which only grows)
    guess = rowsets.index_in(last_rows, rows)
    same = (guess >= 0) & (keys[guess] == last_keys)  # (a -1 reads the last key, and is masked)
    kept = guess[same]
    kept_keys = last_keys[same]
    # They are in order if the rows kept their order (a pool only adds and removes jobs): checked.
    ahead, behind = kept_keys[:-1], kept_keys[1:]
    if np.count_nonzero((behind < ahead) | ((behind == ahead) & (kept[1:] < kept[:-1]))):
        return keys.argsort(kind="stable")
    if len(kept) == n:
        return kept
    moved = np.ones(n, dtype=bool)
    moved[kept] = False
    others = moved.nonzero()[0]
    others = others[keys[others].argsort(kind="stable")]
    at = merge_places(kept_keys, kept, keys[others], others)
    # Merged: the moved jobs' places in the result are their places in the kept order, shifted
    # by the moved jobs before them (`at` does not decrease: both are sorted).
    if len(at) > 1 and np.count_nonzero(at[1:] < at[:-1]):
        return np.insert(kept, at, others)  # (not expected; np.insert orders them itself)
    return interleave(*interleaving(at, n), kept, others)


def merge_places(kept_keys: np.ndarray, kept_second: np.ndarray, other_keys: np.ndarray, other_second: np.ndarray) -> np.ndarray:
    """Where each of the others goes among the kept: how many kept entries come before it. Both
    are sorted by key, then by a second number (a place, an admission number; distinct between
    the two); the result does not decrease."""
    n = len(kept_keys)
    at = kept_keys.searchsorted(other_keys)
    tied = (kept_keys[np.minimum(at, n - 1)] == other_keys).nonzero()[0] if n else _NO_PLACES
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


def first_swap_s(keys: np.ndarray, speed: np.ndarray, exact_ties: bool) -> float:
    """Seconds until two neighbours of a sorted key array could change places, each key moving
    at its speed (0: they could now; inf: never). The order of a sorted array changes first
    between neighbours. A margin covers the rounding of keys accumulated round by round."""
    if len(keys) < 2:
        return np.inf
    if not np.isfinite(keys).all():
        return 0.0
    gap = keys[1:] - keys[:-1]
    closing = speed[:-1] - speed[1:]
    margin = 1e-9 * (np.abs(keys[1:]) + np.abs(keys[:-1]))
    # Neighbours at the same speed keep their gap, but rounding could close a tiny one.
    level = (closing == 0) & (gap <= margin) & (speed[:-1] != 0)
    if exact_ties:
        level &= gap > 0
    if level.any():
        return 0.0
    near = closing > 0
    if not near.any():
        return np.inf
    return max(0.0, float(((gap[near] - margin[near]) / closing[near]).min()))


def job_column(ctx: RoundContext, name: str, rows: np.ndarray, default: float) -> np.ndarray:
    """A job-table column at `rows` as floats, or `default` for each row if the table has no
    such column (a trace's optional extras: `max_gpus`, `epoch_size`, ...)."""
    if ctx.jobs.has_column(name):
        return np.asarray(ctx.jobs.column(name)[rows], dtype=np.float64)
    return np.full(len(rows), default, dtype=np.float64)
