"""Placement: turn a Ranking into a Plan of GPU assignments.

Every placer here works in the same steps (`Placer`), and they differ in how they pick GPUs:

1. Select, in ranking order, the jobs that fit in the cluster's capacity: a job is selected
   when its GPU count fits in what the jobs above it left (per GPU type, on the fastest type
   it can run on; a running job on its current type). A job that does not fit is skipped
   when the ranking allows backfilling; otherwise selection stops there.
2. Running jobs that were selected keep their GPUs (their lease is renewed at no cost).
   Running jobs that were not are the tail of the ranking that higher jobs need room from:
   they are marked for suspension. A running job that the ranking asks to run on another GPU
   count or type is suspended and placed again (a move).
3. The selected waiting jobs are packed onto the GPUs this leaves: jobs that want one node
   largest first, each on the node with the fewest available GPUs that holds it (best fit);
   jobs that may spread on the lowest-numbered available GPUs, in ranking order.
4. A selected job that cannot be packed (fragmentation) preempts the shortest tail of the
   selected running jobs ranked below it that makes it fit, or waits this round.
5. A running job marked in step 2 whose GPUs nobody took keeps running after all; GPUs still
   free go, in ranking order, to waiting jobs that fit (when the ranking allows backfilling).

Unlike Blox's placement module, consolidated jobs that do not fill a node exactly are placed
(Blox misspells a variable there and never places them), and the ranking is followed once per
round (Blox calls its scheduler twice).
"""

from __future__ import annotations

import bisect
from typing import ClassVar

import attrs
import numpy as np

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan, Ranking

_NEVER = np.iinfo(np.int64).max
_NONE = np.zeros(0, dtype=np.int64)


class Placer(Element):
    """The shared steps. Subclasses set whether jobs go on one node by default, and may
    override `choose` (how one job's GPUs are picked); the built-in choice is also packed in
    bulk."""

    category = "placement"
    inputs = (In("ranking", Ranking),)
    outputs = (Out("plan", Plan),)
    consolidate_by_default: ClassVar[bool] = False

    def start(self, ctx) -> None:
        self.counters.update(launched=0, preempted=0, moved=0)

    def spreads_when_stuck(self) -> bool:
        """May a job that wants one node be spread when no node has room?"""
        return False

    def choose(self, cluster, available: np.ndarray, want: int, types: list[int], one_node: bool) -> np.ndarray | None:
        """GPU ids for one job wanting `want` GPUs of one of `types` (in preference order),
        from the GPUs marked in `available`; None if it cannot be placed."""
        if one_node:
            got = choose_consolidated(cluster, available, want, types)
            if got is None and self.spreads_when_stuck():
                got = choose_first_free(cluster, available, want, types)
            return got
        return choose_first_free(cluster, available, want, types)

    def one_node(self, ctx, ranking: Ranking) -> np.ndarray:
        """Which ranked jobs must be placed on as few nodes as possible: the ranking's say,
        else the placer's default. Placers that decide per job (by model) override this."""
        if ranking.consolidate is None:
            return _constant(len(ranking.rows), self.consolidate_by_default)
        return np.asarray(ranking.consolidate, dtype=bool)

    def _custom_choice(self) -> bool:
        return type(self).choose is not Placer.choose

    def tick(self, ctx, ranking: Ranking) -> Plan:
        cluster = ctx.cluster
        running = ctx.running_rows
        rows, want = ranking.rows, ranking.gpus
        held_r = ctx.jobs.column("held")[rows]
        is_run = held_r > 0
        stays = held_r == want  # running with what it asks for (or waiting and asking for 0)
        placed_r = None
        if ranking.gpu_type is not None:
            placed_r = ctx.jobs.column("placed_type")[rows]
            stays &= (ranking.gpu_type < 0) | (ranking.gpu_type == placed_r)
        keeps = is_run & stays  # running jobs that may keep their GPUs
        n_keeps = int(np.count_nonzero(keeps))
        if n_keeps == len(rows) == len(running):
            return Plan(keep=running)  # every job runs already: all leases renewed

        resized = int(np.count_nonzero(is_run)) - n_keeps  # running jobs asking for other GPUs
        job_types = self._job_types(ctx, ranking)
        if job_types is not None and placed_r is None:
            placed_r = ctx.jobs.column("placed_type")[rows]
        online = ctx.online  # None unless a live node is lost: then only its GPUs count
        selected, on_type = _select(cluster, ranking, job_types, keeps, placed_r, online)
        kept_mask = keeps & selected
        holder = ctx.holder
        # Running jobs not kept are marked for suspension (step 5 may keep them after all).
        marked = running[~isin_rows(running, rows[kept_mask])] if n_keeps else running
        held_by_marked = isin_rows(holder, marked)
        available = (holder < 0) | held_by_marked
        if online is not None:
            available &= online
        one_node = self.one_node(ctx, ranking)

        # Step 3: pack the selected jobs that are not kept (waiting ones, and moves).
        launches = _Launches(len(rows))
        to_place = (selected & ~keeps).nonzero()[0]
        unplaced = self._pack(cluster, available, to_place, want, on_type, one_node, job_types, launches)

        # Step 4: a selected job that found no room preempts selected running jobs below it.
        victims = _NONE
        if len(unplaced):
            victims = self._preempt_below(
                cluster, holder, available, unplaced, kept_mask.nonzero()[0], rows, want, job_types, one_node, launches
            )

        # Step 5: marked jobs none of whose GPUs were taken keep running; then backfill.
        suspend = marked
        if len(marked):
            gone = holder[held_by_marked & ~available]  # marked jobs whose GPUs someone took
            if resized:  # and those of them launched elsewhere
                gone = np.concatenate([gone, rows[launches.placed & is_run]])
            suspend = marked[isin_rows(marked, gone)]
            if len(suspend) < len(marked):
                available[held_by_marked & ~isin_rows(holder, suspend)] = False
        if len(victims):
            suspend = np.sort(np.concatenate([suspend, victims]))
        if ranking.backfill and np.count_nonzero(available):
            self._backfill(cluster, available, want, selected, is_run, job_types, one_node, launches)

        positions, counts, gpus = launches.arrays()
        if not len(positions) and not len(suspend):
            return Plan(keep=running)
        launch_rows = rows[positions]
        counters = self.counters
        counters["launched"] += len(positions)
        counters["preempted"] += len(suspend) - resized
        if resized and len(positions):  # only a running job asking for other GPUs can move
            counters["moved"] += int(np.count_nonzero(is_run[positions]))
        return Plan(
            launch_rows=launch_rows,
            launch_gpus=gpus,
            launch_counts=counts,
            launch_batch=None if ranking.batch_size is None else ranking.batch_size[positions],
            keep=running[~isin_rows(running, suspend)] if len(suspend) else running,
            suspend=suspend,
        )

    # --- the steps ---
    def _job_types(self, ctx, ranking: Ranking):
        """GPU types each ranked job may use, fastest first (None: every job may use type 0,
        the only one)."""
        cluster = ctx.cluster
        if len(cluster.gpu_types) == 1 and ranking.gpu_type is None:
            return None
        rates = ctx.jobs.type_rates[ranking.rows]
        wanted = ranking.gpu_type.tolist() if ranking.gpu_type is not None else [-1] * len(ranking.rows)
        return [_allowed_types(rates[i], wanted[i]) for i in range(len(ranking.rows))]

    def _pack(self, cluster, available, positions, want, on_type, one_node, job_types, launches) -> np.ndarray:
        """Step 3. Records placements in `launches`; returns the positions left unplaced."""
        if not len(positions):
            return positions
        if self._custom_choice():
            for i in positions.tolist():
                types = [0] if job_types is None else [int(on_type[i])]
                got = self.choose(cluster, available, int(want[i]), types, bool(one_node[i]))
                if got is not None:
                    available[got] = False
                    launches.add(i, got)
            return positions[~launches.placed[positions]]
        for t in (0,) if job_types is None else sorted(set(on_type[positions].tolist())):
            here = positions if job_types is None else positions[on_type[positions] == t]
            on_one_node = one_node[here]
            together = here[on_one_node]
            sizes = want[together]
            if job_types is None and fills_in_order(cluster, available, sizes):
                order = (-sizes).argsort(kind="stable")  # largest first, ties in ranking order
                ids = available.nonzero()[0][: int(sizes.sum())]
                available[ids] = False
                launches.add_run(together[order], sizes[order], ids)
                sizes = together = _NONE
            # Largest first; ties in ranking order (positions are ascending).
            for size in sorted(set(sizes.tolist()), reverse=True):
                group = together[sizes == size] if len(together) > 1 else together
                if size <= cluster.max_gpus_per_node:
                    taken = pack_best_fit(cluster, available, t, size, len(group))
                    launches.add_group(group[: len(taken)], taken)
                else:
                    taken = pack_whole_nodes(cluster, available, t, size, len(group))
                    launches.add_group(group[: len(taken)], taken)
                    for i in group[len(taken) :].tolist():
                        got = choose_consolidated(cluster, available, size, [t])
                        if got is None:
                            break  # GPUs only get fewer: the rest of the group fails too
                        available[got] = False
                        launches.add(i, got)
            spread = here[~on_one_node]
            if self.spreads_when_stuck():
                stuck = together[~launches.placed[together]]
                spread = np.sort(np.concatenate([spread, stuck]))
            pack_first_free(cluster, available, t, spread, want, launches)
        return positions[~launches.placed[positions]]

    def _preempt_below(
        self, cluster, holder, available, unplaced, kept_pos, rows, want, job_types, one_node, launches
    ) -> np.ndarray:
        """Step 4: for each unplaced selected job, in ranking order, the shortest tail of the
        selected running jobs ranked below it that makes it fit; those are suspended."""
        if not len(kept_pos):
            return _NONE
        kept = kept_pos.tolist()  # ascending
        # The kept jobs' GPUs, the lowest-ranked job first (found when first needed). Victims
        # are always taken from that end, so the kept jobs still running below a job are the
        # next ones in this order after the `taken` victims so far.
        tail_rows = all_ids = all_owner = None
        taken = 0
        victims: list[int] = []
        fewest = _fewest_by_search if self._custom_choice() else _fewest_builtin
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
            count = fewest(self, cluster, available, tail_ids, victim_of, g, types, together)
            if count is None:
                hopeless.add(shape)
                continue
            freed = tail_ids[: victim_of.searchsorted(count)]
            trial = available.copy()
            trial[freed] = True
            got = self.choose(cluster, trial, g, types, together)
            if got is None:  # the count said it fits; a disagreement is a bug in the placer
                raise RuntimeError(f"{type(self).__name__}: shortest-tail count and choose disagree")
            victims += tail_rows[taken : taken + count].tolist()
            taken += count
            available[freed] = True
            available[got] = False
            launches.add(i, got)
        return np.asarray(victims, dtype=np.int64)

    def _backfill(self, cluster, available, want, selected, is_run, job_types, one_node, launches) -> None:
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
            shape = np.array(
                [ids.setdefault((tuple(job_types[i]), s), len(ids)) for i, s in zip(waiting.tolist(), shape.tolist())]
            )
        fails_from = np.full(int(shape.max()) + 1, _NEVER)
        if job_types is None and len(fails_from) > 2 and not (self._custom_choice() or self.spreads_when_stuck()):
            # A job that must fit on one node fails when it is larger than any node's room.
            room = cluster.per_node(available)
            fails_from[2] = room[room.argmax()] + 1
        start = 0
        while start < len(waiting):  # one step per attempt: jump to the next job worth trying
            tail = slice(start, None)
            worth = (sizes[tail] <= left) & (sizes[tail] < fails_from[shape[tail]])
            k = start + int(worth.argmax())
            if not worth[k - start]:
                break
            i, g = int(waiting[k]), int(sizes[k])
            got = self.choose(cluster, available, g, [0] if job_types is None else job_types[i], bool(together[k]))
            if got is None:
                fails_from[shape[k]] = g
            else:
                available[got] = False
                launches.add(i, got)
                left -= g
                if left == 0:
                    break
            start = k + 1


_CONSTANTS: dict[tuple, np.ndarray] = {}


def _constant(n: int, value) -> np.ndarray:
    """A read-only array of n copies of `value` (False, True or the integer 0): a view of a
    shared buffer, so that a round does not allocate one."""
    key = (type(value), value)  # False and 0 are equal keys otherwise
    buffer = _CONSTANTS.get(key)
    if buffer is None or len(buffer) < n:
        buffer = _CONSTANTS[key] = np.full(max(2 * n, 1024), value)
        buffer.setflags(write=False)
    return buffer[:n]


def _gpus_in_order(holder: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The GPUs held by `rows`, grouped by job in the order of `rows`, and whose each is."""
    held = isin_rows(holder, rows).nonzero()[0]
    by_row = rows.argsort()
    owner = by_row[rows[by_row].searchsorted(holder[held])]
    order = owner.argsort(kind="stable")
    return held[order], owner[order]


class _Launches:
    """The round's assignments as arrays: ranking positions, GPU counts, GPU ids."""

    def __init__(self, n: int):
        self.placed = np.zeros(n, dtype=bool)
        self._positions: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        self._gpus: list[np.ndarray] = []

    def add_group(self, positions: np.ndarray, gpus: np.ndarray) -> None:
        """Jobs at `positions`, job k on the GPUs in row k of `gpus` (all the same count)."""
        if len(positions):
            self.placed[positions] = True
            self._positions.append(positions)
            self._counts.append(np.zeros(len(positions), dtype=np.int64) + gpus.shape[1])
            self._gpus.append(gpus.ravel())

    def add_run(self, positions: np.ndarray, counts: np.ndarray, gpus: np.ndarray) -> None:
        """Jobs at `positions` with these GPU counts, their GPUs one after another in `gpus`."""
        if len(positions):
            self.placed[positions] = True
            self._positions.append(positions)
            self._counts.append(counts)
            self._gpus.append(gpus)

    def add(self, position: int, gpus: np.ndarray) -> None:
        self.add_run(np.array([position], dtype=np.int64), np.array([len(gpus)], dtype=np.int64), gpus)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if len(self._positions) <= 1:  # none, or one run (whole free nodes filled in order)
            return (self._positions[0], self._counts[0], self._gpus[0]) if self._positions else (_NONE, _NONE, _NONE)
        return np.concatenate(self._positions), np.concatenate(self._counts), np.concatenate(self._gpus)


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
            fits = (want[i:] - 1).view(np.uint64) < left  # 1 <= want <= left
            j = int(fits.argmax())
            if not fits[j]:
                break
            i += j
            selected[i] = True
            left -= int(want[i])
            i += 1
        return selected, on_type
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


def _allowed_types(rates: np.ndarray, wanted_type: int) -> list[int]:
    """GPU types a job can run on, fastest first; only `wanted_type` if one is asked for."""
    if wanted_type >= 0:
        return [wanted_type] if rates[wanted_type] > 0 else []
    order = (-rates).argsort(kind="stable")
    return [int(t) for t in order if rates[t] > 0]


def _of_type(cluster, mask: np.ndarray, t: int) -> np.ndarray:
    return mask if len(cluster.gpu_types) == 1 else mask & cluster.type_mask[t]


def fills_in_order(cluster, available: np.ndarray, sizes: np.ndarray) -> bool:
    """Whether best fit, largest first, would place jobs of these sizes (one GPU type, one node
    each, or whole nodes) on the available GPUs one after another in id order: true when the
    nodes are uniform with a power-of-two GPU count, each node is fully available or not at
    all, every size is a power of two, and all fit. Then each job either fills whole nodes or
    goes to the node being filled, whose room left is a multiple of its size (every earlier
    size was a multiple of it) and is the fewest of any node. LAS rotating the whole cluster
    every round makes this the common case."""
    per = cluster.max_gpus_per_node
    if not len(sizes) or not cluster.uniform_nodes or per & (per - 1):
        return False
    free = np.count_nonzero(available)
    if free % per:  # the cheapest sign of a partly available node, first
        return False
    return (
        np.count_nonzero(cluster.per_node(available) == per) * per == free
        and not np.count_nonzero(sizes & (sizes - 1))
        and int(sizes.sum()) <= free
    )


def pack_best_fit(cluster, available: np.ndarray, t: int, size: int, count: int) -> np.ndarray:
    """Place up to `count` jobs of `size` GPUs (at most a node's worth) of type t, each on the
    node with the fewest available GPUs that holds it, one after another. Since a node that
    just received a job stays the best fit while it can hold another, this is: nodes in
    ascending order of available GPUs, each filled while it can hold a job. Marks the GPUs
    taken; returns them, one row per job placed (the first jobs, in order)."""
    mask = _of_type(cluster, available, t)
    counts = cluster.per_node(mask)
    if size == 1:  # each job on one GPU: the GPUs of the fullest nodes first
        ids = mask.nonzero()[0]
        taken = ids[counts[cluster.gpu_node[ids]].argsort(kind="stable")[:count]][:, None]
    elif cluster.uniform_nodes and size == cluster.max_gpus_per_node:  # whole nodes, in order
        nodes = (counts == size).nonzero()[0][:count]
        taken = cluster.node_first_gpu[nodes][:, None] + np.arange(size)
    elif count == 1:  # one job: straight to the best-fit node
        got = _best_fit_on_one_node(cluster, mask, counts, size)
        taken = np.zeros((0, size), dtype=np.int64) if got is None else got[None, :]
    else:
        ids = mask.nonzero()[0]  # grouped by node, ascending
        slots = counts // size
        order = counts.argsort(kind="stable")
        per_node = slots[order]
        node_of_job = order.repeat(per_node)[:count]
        # k-th job on its node: its place in the run of that node's slots.
        nth = (np.arange(int(per_node.sum())) - (per_node.cumsum() - per_node).repeat(per_node))[:count]
        node_start = cluster.gpu_node[ids].searchsorted(node_of_job)
        taken = ids[(node_start + nth * size)[:, None] + np.arange(size)]
    available[taken.ravel()] = False
    return taken


def pack_whole_nodes(cluster, available: np.ndarray, t: int, size: int, count: int) -> np.ndarray:
    """Jobs spanning several whole nodes (size a multiple of a uniform node size): each takes
    the lowest-numbered fully available nodes, as `choose_consolidated` would one by one (the
    fullest nodes first, ties by number). Places as many as whole nodes allow; marks the GPUs."""
    per = cluster.max_gpus_per_node
    if not cluster.uniform_nodes or size % per:
        return np.zeros((0, size), dtype=np.int64)
    counts = cluster.per_node(_of_type(cluster, available, t))
    whole = (counts == per).nonzero()[0]
    jobs = min(count, len(whole) // (size // per))
    nodes = whole[: jobs * (size // per)]
    taken = (cluster.node_first_gpu[nodes][:, None] + np.arange(per)).reshape(jobs, size)
    available[taken.ravel()] = False
    return taken


def pack_first_free(cluster, available: np.ndarray, t: int, positions: np.ndarray, want: np.ndarray, launches) -> None:
    """Jobs at `positions`, in that order, each on the lowest-numbered available GPUs of type t.
    The ones that fit take consecutive runs of the available ids; marks the GPUs taken."""
    if not len(positions):
        return
    ids = _of_type(cluster, available, t).nonzero()[0]
    sizes = want[positions]
    ends = sizes.cumsum()
    fit = int(ends.searchsorted(len(ids), side="right"))  # the first `fit` jobs fit
    if fit:
        taken = ids[: int(ends[fit - 1])]
        available[taken] = False
        launches.add_run(positions[:fit], sizes[:fit], taken)
    for i in positions[fit:].tolist():  # smaller jobs after the first that did not fit
        got = choose_first_free(cluster, available, int(want[i]), [t])
        if got is not None:
            available[got] = False
            launches.add(i, got)


def choose_first_free(cluster, available: np.ndarray, want: int, types: list[int]) -> np.ndarray | None:
    """The lowest-numbered available GPUs of the first type (in preference order) with enough."""
    for t in types:
        ids = _of_type(cluster, available, t).nonzero()[0]
        if len(ids) >= want:
            return ids[:want]
    return None


def _best_fit_on_one_node(cluster, mask: np.ndarray, counts: np.ndarray, want: int) -> np.ndarray | None:
    """The first `want` GPUs marked in `mask` on the node with the fewest marked GPUs that
    still has `want` (`counts`: marked GPUs per node); None if no node has."""
    node = int((counts - want).view(np.uint64).argmin())  # least slack; as unsigned, a negative one is huge
    if counts[node] < want:
        return None
    start = int(cluster.node_first_gpu[node])
    return start + mask[start : start + int(cluster.node_gpus[node])].nonzero()[0][:want]


def choose_consolidated(cluster, available: np.ndarray, want: int, types: list[int]) -> np.ndarray | None:
    """GPUs on as few nodes as possible: one node when the job fits in one (best fit: the node
    with the fewest available GPUs that still fits), else the fewest nodes, fullest first."""
    for t in types:
        mask = _of_type(cluster, available, t)
        counts = cluster.per_node(mask)
        if want <= cluster.max_gpus_per_node:
            got = _best_fit_on_one_node(cluster, mask, counts, want)
            if got is None:
                continue
            return got
        order = (-counts).argsort(kind="stable")
        cumulative = counts[order].cumsum()
        if cumulative[-1] < want:
            continue
        picked = order[: int(cumulative.searchsorted(want)) + 1]
        firsts, sizes = cluster.node_first_gpu[picked], cluster.node_gpus[picked]
        return np.concatenate([f + mask[f : f + s].nonzero()[0] for f, s in zip(firsts, sizes)])[:want]
    return None


def _fewest_builtin(placer, cluster, free, tail_ids, victim_of, want, types, one_node) -> int | None:
    """Fewest tail victims (their GPUs in `tail_ids`, `victim_of` saying whose) after which the
    built-in choice succeeds, counted rather than searched."""
    best = _NEVER
    for t in types:
        if one_node and want <= cluster.max_gpus_per_node:
            best = min(best, _fewest_for_one_node(cluster, free, tail_ids, victim_of, want, t))
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


def _fewest_for_one_node(cluster, free, tail_ids, victim_of, want, t) -> int:
    """Fewest tail victims after which some node of type t has `want` available GPUs."""
    counts = cluster.per_node(_of_type(cluster, free, t))
    need = want - counts
    if len(cluster.gpu_types) > 1:
        need = np.where(cluster.node_type == t, need, _NEVER)
    if need[need.argmin()] <= 0:  # (an index lookup: cheaper than .min())
        return 0
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


def _fewest_by_search(placer, cluster, free, tail_ids, victim_of, want, types, one_node) -> int | None:
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


@element
class FirstFree(Placer):
    """Place each job on the lowest-numbered free GPUs, wherever they are.

    Ports:
        ranking: jobs in the order to serve them.
        plan: launches, keeps and suspensions.
    Arguments:
        none
    Counters:
        launched: jobs launched so far.
        preempted: running jobs preempted to make room so far.
        moved: jobs suspended and launched again elsewhere in the same round.
    See also: Consolidated, Launch
    Paper: Blox (EuroSys'24) placement/first-gpu.py and §7 (the fidelity experiment).
    """

    consolidate_by_default = False


@element
class Consolidated(Placer):
    """Place each job on as few nodes as possible: one node whenever it fits in one.

    Jobs are packed largest first, each on the node with the fewest free GPUs that can hold it
    (best fit), as Gavel's placement does. With `strict=true` a job that cannot be
    consolidated waits (and may preempt lower-ranked jobs to make room); with `strict=false`
    it is spread over free GPUs instead. A ranking entry that says whether to consolidate
    overrides the default.

    Ports:
        ranking: jobs in the order to serve them.
        plan: launches, keeps and suspensions.
    Arguments:
        strict: wait for a consolidated placement rather than spread the job.
    Counters:
        launched: jobs launched so far.
        preempted: running jobs preempted to make room so far.
        moved: jobs suspended and launched again elsewhere in the same round.
    See also: FirstFree, Launch
    Paper: Blox (EuroSys'24) placement/consolidated.py; Gavel (OSDI'20) §5 (placement).
    """

    consolidate_by_default = True

    strict: bool = attrs.field(default=True)

    def spreads_when_stuck(self) -> bool:
        return not self.strict
