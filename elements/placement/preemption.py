"""Steps 4 and 5 of every placer: a selected job that found no room preempts the shortest tail of
the running jobs ranked below it; GPUs still free afterwards go to waiting jobs (backfill)."""

from __future__ import annotations

import bisect

import numpy as np

from roundhouse.elements.placement.packing import _NEVER, _NONE, _of_type, next_true
from roundhouse.runtime.rowsets import isin_rows


def preempt_below(
    placer, cluster, holder, available, unplaced, kept_pos, rows, want, job_types, one_node, launches
) -> np.ndarray:
    """Step 4: for each unplaced selected job, in ranking order, the shortest tail of the
    selected running jobs ranked below it that makes it fit; those are suspended."""
    if not len(kept_pos):
        return _NONE
    kept = kept_pos.tolist()  # ascending
    # The kept jobs' GPUs, the lowest-ranked job first (found when first needed). Victims
    # are always taken from that end, so the kept jobs still running below a job are the
    # next ones in this order after the `taken` victims so far.
    tail_rows: np.ndarray | None = None
    all_ids = all_owner = _NONE
    by_node: _TailByNode | None = None
    taken = 0
    victims: list[int] = []
    fewest = _fewest_by_search if placer._custom_choice() else _fewest_builtin
    # A job that cannot fit even with its whole tail suspended fails again for any job of
    # the same shape ranked below it: its tail is shorter, and GPUs only leave that pool.
    hopeless: set[tuple] = set()
    for i in unplaced.tolist():
        below = len(kept) - bisect.bisect_right(kept, i) - taken  # kept jobs below i still running
        if below <= 0:
            continue
        types = [0] if job_types is None else job_types[i]
        g, together = int(want[i]), bool(one_node[i])
        shape = (g, tuple(types), together)
        if shape in hopeless:
            continue
        if tail_rows is None:
            tail_rows = rows[kept_pos[::-1]]
            all_ids, all_owner = _gpus_in_order(holder, tail_rows)
        lo, hi = all_owner.searchsorted((taken, taken + below))
        tail_ids, victim_of = all_ids[lo:hi], all_owner[lo:hi] - taken
        if by_node is None and fewest is _fewest_builtin:
            by_node = _TailByNode(cluster, all_ids, all_owner)
        count = fewest(placer, cluster, available, tail_ids, victim_of, g, types, together, (by_node, lo, hi, taken))
        if count is None:
            hopeless.add(shape)
            continue
        freed = tail_ids[: victim_of.searchsorted(count)]
        trial = available.copy()
        trial[freed] = True
        got = placer.choose(cluster, trial, g, types, together)
        if got is None:  # the count said it fits; a disagreement is a bug in the placer
            raise RuntimeError(f"{type(placer).__name__}: shortest-tail count and choose disagree")
        victims += tail_rows[taken : taken + count].tolist()
        taken += count
        available[freed] = True
        available[got] = False
        launches.add(i, got)
    return np.asarray(victims, dtype=np.int64)


def backfill(placer, cluster, available, want, selected, is_run, job_types, one_node, launches) -> None:
    """Step 5: GPUs still free go to waiting jobs that were not selected, in ranking order."""
    left = int(np.count_nonzero(available))
    waiting = (~(selected | is_run) & (want > 0) & (want <= left)).nonzero()[0]
    if not len(waiting):
        return
    sizes, together = want[waiting], one_node[waiting]
    # Jobs of one shape (GPU types, on one node or not, more than a node or not) fail alike:
    # as GPUs only get fewer, a size that failed fails again for every larger one.
    shape = together * 2 + (together & (sizes > cluster.max_gpus_per_node))
    if job_types is not None:
        ids: dict[tuple, int] = {}
        shape = np.array([ids.setdefault((tuple(job_types[i]), s), len(ids)) for i, s in zip(waiting.tolist(), shape.tolist())])
    fails_from = np.full(int(shape.max()) + 1, _NEVER)
    if job_types is None and len(fails_from) > 2 and not (placer._custom_choice() or placer.spreads_when_stuck()):
        # A job that must fit on one node fails when it is larger than any node's room.
        room = cluster.per_node(available)
        fails_from[2] = room[room.argmax()] + 1

    def worth(a: int, b: int) -> np.ndarray:
        return (sizes[a:b] <= left) & (sizes[a:b] < fails_from[shape[a:b]])

    start = 0
    while start < len(waiting):  # one step per attempt: jump to the next job worth trying
        k = next_true(worth, start, len(waiting))
        if k < 0:
            break
        i, g = int(waiting[k]), int(sizes[k])
        got = placer.choose(cluster, available, g, [0] if job_types is None else job_types[i], bool(together[k]))
        if got is None:
            fails_from[shape[k]] = g
        else:
            available[got] = False
            launches.add(i, got)
            left -= g
            if left == 0:
                break
        start = k + 1


def _gpus_in_order(holder: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The GPUs held by `rows`, grouped by job in the order of `rows`, and whose each is."""
    held = isin_rows(holder, rows).nonzero()[0]
    by_row = rows.argsort()
    owner = by_row[rows[by_row].searchsorted(holder[held])]
    order = owner.argsort(kind="stable")
    return held[order], owner[order]


class _TailByNode:
    """The tail's GPUs (in tail order, with whose each is) grouped by node, tail order inside a
    node: the GPUs of a stretch of the tail on one node are then a run found by two searches,
    so that each job's count costs a search per node rather than a sort of its stretch."""

    def __init__(self, cluster, ids: np.ndarray, owner: np.ndarray):
        nodes = cluster.gpu_node[ids]
        self.order = nodes.argsort(kind="stable")
        width = len(ids) + 1
        self.key = nodes[self.order] * width + self.order
        self.base = np.arange(cluster.n_nodes, dtype=np.int64) * width
        self.owner = owner

    def fewest(self, need: np.ndarray, lo: int, hi: int, taken: int) -> int:
        """Fewest victims (counted from `taken`) after which some node gets `need` more GPUs
        (per node, at least 1) from the tail's stretch lo..hi."""
        start = self.key.searchsorted(self.base + lo)
        ok = need <= self.key.searchsorted(self.base + hi) - start
        if not np.count_nonzero(ok):
            return _NEVER
        enough_at = self.owner[self.order[start[ok] + need[ok] - 1]]
        return int(enough_at[enough_at.argmin()]) - taken + 1


def _fewest_builtin(placer, cluster, free, tail_ids, victim_of, want, types, one_node, stretch=None) -> int | None:
    """Fewest tail victims (their GPUs in `tail_ids`, `victim_of` saying whose) after which the
    built-in choice succeeds, counted rather than searched. `stretch`: the whole tail grouped by
    node (`_TailByNode`), and where `tail_ids` lies in it (lo, hi) and how many victims it
    starts after."""
    best = _NEVER
    for t in types:
        if one_node and want <= cluster.max_gpus_per_node:
            best = min(best, _fewest_for_one_node(cluster, free, tail_ids, victim_of, want, t, stretch))
        if not one_node or want > cluster.max_gpus_per_node or placer.spreads_when_stuck():
            best = min(best, _fewest_for_count(cluster, free, tail_ids, victim_of, want, t))
    return None if best == _NEVER else max(best, 1)


def _fewest_for_count(cluster, free, tail_ids, victim_of, want, t) -> int:
    """Fewest tail victims after which `want` GPUs of type t are available anywhere."""
    need = want - int(np.count_nonzero(_of_type(cluster, free, t)))
    if need <= 0:
        return 0
    of_type = victim_of if len(cluster.gpu_types) == 1 else victim_of[cluster.gpu_type[tail_ids] == t]
    return int(of_type[need - 1]) + 1 if len(of_type) >= need else _NEVER


def _fewest_for_one_node(cluster, free, tail_ids, victim_of, want, t, stretch=None) -> int:
    """Fewest tail victims after which some node of type t has `want` available GPUs."""
    counts = cluster.per_node(_of_type(cluster, free, t))
    need = want - counts
    if len(cluster.gpu_types) > 1:
        need = np.where(cluster.node_type == t, need, _NEVER)
    if need[need.argmin()] <= 0:  # (an index lookup: cheaper than .min())
        return 0
    if stretch is not None and stretch[0] is not None:
        by_node, lo, hi, taken = stretch
        return by_node.fewest(need, lo, hi, taken)
    nodes = cluster.gpu_node[tail_ids]
    have = np.bincount(nodes, minlength=cluster.n_nodes)  # tail GPUs on each node
    ok = need <= have
    if not np.count_nonzero(ok):
        return _NEVER
    order = nodes.argsort(kind="stable")  # grouped by node, tail order inside a group
    first = have.cumsum() - have
    where = first[ok] + need[ok] - 1  # the need-th victim GPU on each node that can get there
    enough_at = victim_of[order[where]]
    return int(enough_at[enough_at.argmin()]) + 1


def _fewest_by_search(placer, cluster, free, tail_ids, victim_of, want, types, one_node, stretch=None) -> int | None:
    """For placers with their own `choose`: binary search on how many tail victims to free
    (freeing more never makes a placement impossible)."""

    def fits(k: int) -> bool:
        trial = free.copy()
        trial[tail_ids[victim_of < k]] = True
        return placer.choose(cluster, trial, want, types, one_node) is not None

    total = int(victim_of[-1]) + 1 if len(victim_of) else 0
    if total == 0 or not fits(total):
        return None
    lo, hi = 1, total
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
