"""Steps 4 and 5 of every placer: a selected job that found no room preempts the shortest tail of
the running jobs ranked below it; GPUs still free afterwards go to waiting jobs (backfill)."""

from __future__ import annotations

import numpy as np

from roundhouse.elements.placement.packing import (
    _NEVER,
    _NONE,
    _best_fit_on_one_node,
    _of_type,
    choose_first_free,
    fewest_nodes,
)
from roundhouse.runtime.rowsets import index_in


def preempt_below(
    placer, cluster, holder, available, unplaced, kept_pos, rows, want, job_types, one_node, launches
) -> np.ndarray:
    """Step 4: for each unplaced selected job, in ranking order, the shortest tail of the
    selected running jobs ranked below it that makes it fit; those are suspended. A job that
    fits in what the victims of jobs ranked ahead freed and left takes it, with no victim; so
    does one, on a cluster of several GPU types, that fits in the GPUs left free of another
    type it may run on (step 3 packed it on the type step 1 chose for it only)."""
    # (On one GPU type a job step 3 could not pack finds no more room until a victim frees some.)
    other_types = job_types is not None and len(cluster.gpu_types) > 1
    if not len(kept_pos) and not other_types:
        return _NONE
    # Kept jobs ranked below each unplaced job (`kept_pos` ascends); the victims taken later
    # come off it. A job with none below it cannot preempt: it may only take what victims of
    # jobs ranked ahead freed and left.
    below_at = len(kept_pos) - kept_pos.searchsorted(unplaced, side="right")
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
    quick = fewest is _fewest_builtin and job_types is None and not placer.spreads_when_stuck()
    node_free: np.ndarray | None = None  # available GPUs per node (None: to count again)
    placed: list[int] = []
    taken_gpus: list[np.ndarray] = []
    # Shapes that found no room in what the victims so far left, and how many victims that was.
    no_room: dict[tuple, int] = {}
    for i, below in zip(unplaced.tolist(), below_at.tolist()):
        below -= taken  # kept jobs below i still running
        if below <= 0 and not taken and not other_types:
            continue  # (nothing freed yet: no room, as in step 3)
        types = [0] if job_types is None else job_types[i]
        g, together = int(want[i]), bool(one_node[i])
        shape = (g, tuple(types), together)
        if shape in hopeless:
            continue
        if below <= 0:
            if no_room.get(shape) == taken:
                continue
            got = placer.choose(cluster, available, g, types, together)
            if got is None:
                no_room[shape] = taken
                continue
            available[got] = False
            node_free = None
            placed.append(i)
            taken_gpus.append(got)
            continue
        if tail_rows is None:
            tail_rows = rows[kept_pos[::-1]]
            all_ids, all_owner = _gpus_in_order(holder, tail_rows)
        lo, hi = all_owner.searchsorted((taken, taken + below))
        if by_node is None and fewest is _fewest_builtin:
            by_node = _TailByNode(cluster, all_ids, all_owner)
        if quick and together and g <= cluster.max_gpus_per_node:
            # The built-in count and choice (`_fewest_for_one_node`, `choose_consolidated`) on
            # the nodes' available counts, kept up to date here rather than counted per job.
            assert by_node is not None
            if node_free is None:
                node_free = cluster.per_node(available)
            need = g - node_free
            # (none when GPUs the victims of jobs ranked ahead freed are room enough)
            count = 0 if need[need.argmin()] <= 0 else by_node.fewest(need, lo, hi, taken)
            if count == _NEVER:
                hopeless.add(shape)
                continue
            freed = all_ids[lo : all_owner.searchsorted(taken + count)]
            available[freed] = True
            node_free += np.bincount(cluster.gpu_node[freed], minlength=cluster.n_nodes)
            got = _best_fit_on_one_node(cluster, available, node_free, g)
            if got is not None:
                node_free[cluster.gpu_node[got[0]]] -= g
        else:
            tail_ids, victim_of = all_ids[lo:hi], all_owner[lo:hi] - taken
            found = fewest(placer, cluster, available, tail_ids, victim_of, g, types, together, (by_node, lo, hi, taken))
            if found is None:
                hopeless.add(shape)
                continue
            count = found
            freed = tail_ids[: victim_of.searchsorted(count)]
            trial = available.copy()
            trial[freed] = True
            got = placer.choose(cluster, trial, g, types, together)
            available[freed] = True
            node_free = None
        if got is None:  # the count said it fits; a disagreement is a bug in the placer
            raise RuntimeError(f"{type(placer).__name__}: shortest-tail count and choose disagree")
        victims += tail_rows[taken : taken + count].tolist()
        taken += count
        available[got] = False
        placed.append(i)
        taken_gpus.append(got)
    if placed:
        launches.add_run(
            np.asarray(placed, dtype=np.int64),
            np.asarray([len(t) for t in taken_gpus], dtype=np.int64),
            np.concatenate(taken_gpus),
        )
    return np.asarray(victims, dtype=np.int64)


def backfill(placer, cluster, available, want, selected, is_run, job_types, one_node, launches) -> None:
    """Step 5: GPUs still free go to waiting jobs that were not selected, in ranking order."""
    left = int(np.count_nonzero(available))
    # Jobs of one shape (GPU types, on one node or not, more than a node or not) fail alike:
    # as GPUs only get fewer, a size that failed fails again for every larger one. Shapes on one
    # GPU type: 0 spread, 2 on one node, 3 on whole nodes; with types, one id per (types, shape).
    fails_from = [_NEVER] * 4
    shape_ids: dict[tuple, int] | None = None if job_types is None else {}
    if job_types is None and not (placer._custom_choice() or placer.spreads_when_stuck()):
        # A job that must fit on one node fails when it is larger than any node's room.
        room = cluster.per_node(available)
        fails_from[2] = int(room[room.argmax()]) + 1

    def candidates(a: int, b: int) -> tuple[list[int], list[int], list[bool], list[int]]:
        """The waiting jobs at ranking positions a..b that fit what is left and whose shape has
        not failed at their size: positions, sizes, on one node or not, shapes."""
        w = want[a:b]
        at = (~(selected[a:b] | is_run[a:b]) & (w > 0) & (w <= left)).nonzero()[0]
        sizes, together = w[at], one_node[a:b][at]
        shape = together * 2 + (together & (sizes > cluster.max_gpus_per_node))
        if shape_ids is not None:
            shape = np.array(
                [shape_ids.setdefault((tuple(job_types[a + i]), s), len(shape_ids)) for i, s in zip(at.tolist(), shape.tolist())],
                dtype=np.int64,
            )
            fails_from.extend([_NEVER] * (len(shape_ids) - len(fails_from)))
        worth = (sizes < np.asarray(fails_from)[shape]).nonzero()[0] if len(at) else at
        return (at[worth] + a).tolist(), sizes[worth].tolist(), together[worth].tolist(), shape[worth].tolist()

    # The built-in choice on one GPU type keeps the nodes' available counts, and the available
    # GPUs in order, up to date itself rather than counting every GPU per attempt (None: to
    # count again).
    fast = job_types is None and not placer._custom_choice()
    spread = placer.spreads_when_stuck()
    counts: np.ndarray | None = None
    free_ids: np.ndarray | None = None
    placed: list[int] = []
    taken: list[np.ndarray] = []
    # Windows of the ranking, each one's candidates found at once and read only as far as GPUs
    # are left (a long queue's tail is never looked at); a candidate is tested again when its
    # turn comes, as what is left only shrinks. Windows grow fourfold from 64 while they hold
    # none, so that finding the next candidate costs about the distance to it.
    start, width, n = 0, 64, len(want)
    while start < n and left > 0:
        end = min(start + width, n)
        positions, sizes, together, shapes = candidates(start, end)
        width = 64 if positions else 4 * width
        for i, g, together_k, sh in zip(positions, sizes, together, shapes):
            if g > left or g >= fails_from[sh]:
                continue
            if fast and together_k and g <= cluster.max_gpus_per_node:
                if counts is None:
                    counts = cluster.per_node(available)
                got = _best_fit_on_one_node(cluster, available, counts, g)
                if got is not None:
                    counts[cluster.gpu_node[got[0]]] -= g
                    free_ids = None
                elif spread:
                    got = choose_first_free(cluster, available, g, [0])
                    counts = free_ids = None
            elif fast and not together_k:  # the lowest-numbered available GPUs
                if free_ids is None:
                    free_ids = available.nonzero()[0]
                got, free_ids = free_ids[:g], free_ids[g:]  # (g <= left: there are enough)
                counts = None
            else:
                got = placer.choose(cluster, available, g, [0] if job_types is None else job_types[i], together_k)
                counts = free_ids = None
            if got is None:
                fails_from[sh] = g
                continue
            available[got] = False
            placed.append(i)
            taken.append(got)
            left -= g
            if left == 0:
                break
        start = end
    if placed:
        launches.add_run(
            np.asarray(placed, dtype=np.int64), np.asarray([len(t) for t in taken], dtype=np.int64), np.concatenate(taken)
        )


def _gpus_in_order(holder: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The GPUs held by `rows`, grouped by job in the order of `rows`, and whose each is."""
    place = index_in(holder, rows)
    held = (place >= 0).nonzero()[0]
    owner = place[held]
    order = _small_ints(owner, len(rows)).argsort(kind="stable")  # (ascending GPU ids within a job)
    return held[order], owner[order]


def _small_ints(values: np.ndarray, bound: int) -> np.ndarray:
    """Non-negative integers below `bound`, as 16-bit ones where they fit: numpy's stable sort
    of those is a radix sort, one pass per byte, rather than a merge sort."""
    return values.astype(np.int16) if bound < 32768 else values


class _TailByNode:
    """The tail's GPUs (in tail order, with whose each is) grouped by node, tail order inside a
    node, and for each node how many of its GPUs lie before the stretch of the tail asked about
    and before the stretch's end. The stretch only moves one way as the round's jobs are
    taken in ranking order (its start down the tail as victims are taken, its end up it as jobs
    rank lower), so the counts follow it by counting the GPUs it passed, and each job's count
    costs a few passes over the nodes, not a search per node."""

    def __init__(self, cluster, ids: np.ndarray, owner: np.ndarray):
        self.nodes = cluster.gpu_node[ids]
        self.n_nodes = cluster.n_nodes
        self.order = _small_ints(self.nodes, cluster.n_nodes).argsort(kind="stable")
        self.end = np.bincount(self.nodes, minlength=cluster.n_nodes)  # (the whole tail, at first)
        self.first = self.end.cumsum() - self.end  # where each node's group starts in `order`
        self.start = np.zeros(cluster.n_nodes, dtype=np.int64)
        self.lo, self.hi = 0, len(ids)
        # Whose each GPU in `order` is, and past the end `_NEVER`: where a node has too few.
        self.owner_in_order = np.append(owner[self.order], _NEVER)

    def _follow(self, lo: int, hi: int) -> None:
        if lo != self.lo:
            a, b = sorted((self.lo, lo))
            moved = np.bincount(self.nodes[a:b], minlength=self.n_nodes)
            self.start += moved if lo > self.lo else -moved
            self.lo = lo
        if hi != self.hi:
            a, b = sorted((self.hi, hi))
            moved = np.bincount(self.nodes[a:b], minlength=self.n_nodes)
            self.end += moved if hi > self.hi else -moved
            self.hi = hi

    def fewest(self, need: np.ndarray, lo: int, hi: int, taken: int) -> int:
        """Fewest victims (counted from `taken`) after which some node gets `need` more GPUs
        (per node, at least 1) from the tail's stretch lo..hi."""
        self._follow(lo, hi)
        at = self.first + self.start
        at += need
        at -= 1
        enough_at = self.owner_in_order[np.where(need <= self.end - self.start, at, len(self.owner_in_order) - 1)]
        first = int(enough_at[enough_at.argmin()])
        return _NEVER if first == _NEVER else first - taken + 1


def _fewest_builtin(placer, cluster, free, tail_ids, victim_of, want, types, one_node, stretch=None) -> int | None:
    """Fewest tail victims (their GPUs in `tail_ids`, `victim_of` saying whose) after which the
    built-in choice succeeds, counted rather than searched. `stretch`: the whole tail grouped by
    node (`_TailByNode`), and where `tail_ids` lies in it (lo, hi) and how many victims it
    starts after."""
    best = _NEVER
    for t in types:
        if one_node and fewest_nodes(cluster, want, t) == 1:
            best = min(best, _fewest_for_one_node(cluster, free, tail_ids, victim_of, want, t, stretch))
        elif one_node:
            best = min(best, _fewest_for_nodes(cluster, free, tail_ids, victim_of, want, t))
        if not one_node or placer.spreads_when_stuck():
            best = min(best, _fewest_for_count(cluster, free, tail_ids, victim_of, want, t))
    return None if best == _NEVER else best


def _fewest_for_count(cluster, free, tail_ids, victim_of, want, t) -> int:
    """Fewest tail victims after which `want` GPUs of type t are available anywhere."""
    need = want - int(np.count_nonzero(_of_type(cluster, free, t)))
    if need <= 0:
        return 0
    of_type = victim_of if len(cluster.gpu_types) == 1 else victim_of[cluster.gpu_type[tail_ids] == t]
    return int(of_type[need - 1]) + 1 if len(of_type) >= need else _NEVER


def _fewest_for_nodes(cluster, free, tail_ids, victim_of, want, t) -> int:
    """Fewest tail victims after which the fewest nodes a job of `want` GPUs spans
    (`fewest_nodes`) have that many available GPUs of type t between them: a job larger
    than a node, consolidated (`choose_consolidated`). Freeing more never undoes it, so the
    count is searched by halves."""
    k = fewest_nodes(cluster, want, t)

    def fits(victims: int) -> bool:
        trial = free.copy()
        trial[tail_ids[victim_of < victims]] = True
        counts = cluster.per_node(_of_type(cluster, trial, t))
        return len(counts) >= k and int(np.partition(counts, len(counts) - k)[len(counts) - k :].sum()) >= want

    if fits(0):
        return 0
    found = _searched(fits, victim_of)
    return _NEVER if found is None else found


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

    if placer.choose(cluster, free, want, types, one_node) is not None:
        return 0  # (GPUs the victims of jobs ranked ahead freed are room enough)
    return _searched(fits, victim_of)


def _searched(fits, victim_of: np.ndarray) -> int | None:
    """The fewest victims, one or more, after which `fits` holds, found by halves (freeing more
    never makes a placement impossible); None if not even all of them do."""
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
