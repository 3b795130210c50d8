"""Optimus' room check: where a consolidating placer puts the jobs of Optimus' GPU counts, so
that Optimus asks only for counts the placer can hold (elements/policies/optimus.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.rowsets import index_in
from roundhouse.runtime.types import Active

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


_NO_ROOM = np.iinfo(np.int64).max


class Layout:
    """Where a consolidating placer puts the jobs of Optimus' counts, worked out from what the
    round context shows every element (who holds which GPU, on which type, the cluster's
    nodes), as docs/semantics.md (Placement) states the placer's steps: a running job asked for
    the count it holds keeps its GPUs; walking the ranking, every other job takes the fastest
    GPU type it can run on that has its count left (a job runs on GPUs of one type); then each
    is packed on the GPUs of its type left, largest first (ties in ranking order), on the node
    with the fewest available GPUs that holds it, one larger than a node on the fewest nodes,
    those with the most available first. Every job asks for a consolidated placement, so a
    count that finds no room there would leave the job without GPUs: a job whose type has its
    count left but no room for it (the type's free GPUs scattered over its nodes) goes to the
    next of its types, fastest first, with its count left and room for it. The placer, which
    picks types by count alone, would not send it there, so then every job's type is named to
    it (`pinned`)."""

    def __init__(self, ctx: RoundContext, active: Active, order: np.ndarray):
        cluster = ctx.cluster
        self.size = cluster.max_gpus_per_node
        online = np.ones(cluster.n_gpus, dtype=bool) if ctx.online is None else np.asarray(ctx.online, dtype=bool)
        self.room = cluster.per_node(online)
        self.total = int(self.room.sum())
        self._cluster = cluster
        self._at = np.where(online, index_in(ctx.holder, active.rows), -1)  # each GPU's holder, by place in `active`
        n, mine = len(active), self._at >= 0
        low, high = np.full(n, cluster.n_nodes), np.full(n, -1)
        np.minimum.at(low, self._at[mine], cluster.gpu_node[mine])
        np.maximum.at(high, self._at[mine], cluster.gpu_node[mine])
        self._home = np.where(low == high, high, -1)  # the one node each running job is on (-1: none, or several)
        self._rank = np.empty(n, dtype=np.int64)
        self._rank[order] = np.arange(n)
        self._order = order
        self.left, self.node = self.room.copy(), self._home.copy()
        self.no_room = np.zeros(n, dtype=bool)  # jobs whose count found no room, at some point
        # GPU types: those each job may run on, fastest first (as the placer offers them), the
        # one a running job holds, and the room of each type (one type: all of them, type 0).
        self._typed = len(cluster.gpu_types) > 1
        self._node_type = np.asarray(cluster.node_type, dtype=np.int64)
        self._all_nodes = np.ones(cluster.n_nodes, dtype=bool)
        self._capacity = np.bincount(cluster.gpu_type[online], minlength=len(cluster.gpu_types))
        if self._typed:
            rates = np.asarray(ctx.jobs.type_rates[active.rows])
            ranked = np.argsort(-rates, axis=1, kind="stable")
            self._types = [[int(t) for t in ranked[i] if rates[i, t] > 0] for i in range(n)]
            self._held_type = ctx.jobs.column("placed_type")[active.rows]
        else:
            self._types = [[0]] * n
            self._held_type = np.zeros(n, dtype=np.int64)
        self.on_type = np.where(self._home >= 0, self._held_type, -1)  # the type each job is packed on
        self._type_left = self._capacity.astype(np.int64).tolist()  # GPUs of each type not yet given
        self.retyped = False  # a job went to a type other than the first of its types with its count left
        self._spots: dict[int, list[tuple[int, int]]] = {}  # each packed job's (node, GPUs) beyond its home

    # --- packing, as the placer would ---
    def fit(self, alloc, given, held, base, options, counts) -> bool:
        """Pack the counts; where one finds no room, a running job goes back to the count it
        holds; a waiting job given extra GPUs goes down to the largest of its `options` (jobs,
        counts) that fits the room left on its types; one at its first allocation takes extra
        GPUs back from another job (those not running before those running, the lowest ranked
        first), since every job gets its first allocation before any gets more. Again until
        every count finds room. A job none of that helps (one that runs only on the GPUs it
        asked for) keeps its count and is left to the placer, which may preempt jobs ranked
        below it, as for any job. Returns whether any count was cut."""
        kept = given & (held > 0) & (alloc == held)
        left_out = ~given | (alloc <= 0)
        cut = False
        while True:
            todo = np.flatnonzero(~kept & ~left_out)
            failed = self._pack(alloc, given, kept, todo[np.lexsort((self._rank[todo], -alloc[todo]))])
            self.no_room[failed] = True
            back = [i for i in failed if held[i] > 0]
            if back:
                alloc[back], kept[back], cut = held[back], True, True
                continue
            if not failed:
                return cut
            i = failed[0]
            fits = options[i] & (counts < alloc[i]) & (counts <= self._most_left(i))
            donors = np.flatnonzero(given & ~left_out & (alloc > base))
            if alloc[i] > base[i] and fits.any():
                alloc[i] = counts[fits][-1]
            elif len(donors):
                j = donors[np.lexsort((-self._rank[donors], kept[donors]))[0]]
                alloc[j], kept[j] = counts[options[j] & (counts < alloc[j])][-1], False
            else:
                left_out[i] = True
                continue
            cut = True

    def _pick_types(self, alloc, given, kept) -> None:
        """Step 1 of the placer: walking the ranking, each job given GPUs takes the first of its
        types (the one it holds, if it keeps its GPUs) that has its count left (-1: none)."""
        self.on_type = np.where(kept, self._held_type, -1)
        if not self._typed:
            self.on_type = np.where(given & (alloc > 0), 0, -1)
            return
        left = self._type_left = self._capacity.astype(np.int64).tolist()
        for i in self._order[(given & (alloc > 0))[self._order]].tolist():
            want = int(alloc[i])
            options = [int(self._held_type[i])] if kept[i] else self._types[i]
            t = next((t for t in options if 0 <= t and want <= left[t]), -1)
            if t >= 0:
                left[t] -= want
                self.on_type[i] = t

    def pinned(self, given) -> np.ndarray | None:
        """The GPU type of each job given GPUs (-1 for the others, and for a job left to the
        placer), for the ranking to name, when some job goes to a type the placer would not
        pick by count alone (None otherwise: the placer picks as the layout did)."""
        if not self.retyped:
            return None
        return np.where(given, self.on_type, -1).astype(np.int64)

    def _other_type(self, i: int, want: int, t: int) -> list[tuple[int, int]] | None:
        """Where job `i`, with no room for `want` GPUs on type t, goes instead: the first other
        of its types, fastest first, with its count left and room for it (None: none). Moves
        its count to that type."""
        left = self._type_left
        for u in self._types[i]:
            spots = self._find(want, u) if u != t and want <= left[u] else None
            if spots is not None:
                left[t], left[u] = left[t] + want, left[u] - want
                self.on_type[i], self.retyped = u, True
                return spots
        return None

    def _pack(self, alloc, given, kept, todo) -> list[int]:
        """Place the jobs of `todo` in that order beside the `kept` ones; returns those that found no room."""
        self.left = self.room - self._cluster.per_node(np.append(kept, False)[self._at])
        self.node = np.where(kept, self._home, -1)
        self._spots = {}
        self.retyped = False  # (`fit` packs last: its types are the ones the ranking names)
        self._pick_types(alloc, given, kept)
        failed = []
        for i in todo.tolist():
            t, want = int(self.on_type[i]), int(alloc[i])
            spots = self._find(want, t) if t >= 0 else None
            if spots is None and t >= 0 and self._typed:
                spots = self._other_type(i, want, t)
            if spots is None:
                failed.append(i)
            else:
                self._occupy(i, spots)
        return failed

    def _find(self, want: int, t: int) -> list[tuple[int, int]] | None:
        """Where a job of `want` GPUs of type t goes on the room left: (node, GPUs) pairs, or None."""
        left = self.left
        if want <= self.size:
            fits = np.where((left >= want) & self._of_type(t), left, _NO_ROOM)
            best = int(np.argmin(fits))
            return None if fits[best] == _NO_ROOM else [(best, want)]
        nodes = np.flatnonzero(self._of_type(t))
        most = nodes[np.argsort(-left[nodes], kind="stable")][: -(-want // self.size)]
        if int(left[most].sum()) < want:
            return None
        spots = []
        for m in most.tolist():
            took = min(int(left[m]), want)
            spots.append((m, took))
            want -= took
        return spots

    def _of_type(self, t: int) -> np.ndarray:
        """Which nodes have GPUs of type t."""
        return self._node_type == t if self._typed else self._all_nodes

    def _occupy(self, i: int, spots: list[tuple[int, int]]) -> None:
        for m, k in spots:
            self.left[m] -= k
        self.node[i] = spots[0][0] if len(spots) == 1 else -1
        self._spots[i] = spots

    def _release(self, i: int, held: int) -> list[tuple[int, int]]:
        """Give back the GPUs job `i` (packed with `held`) holds in the layout; returns where they were."""
        spots = self._spots.pop(i, None)
        if spots is None and self.node[i] >= 0:
            spots = [(int(self.node[i]), held)]
        elif spots is None:  # a job kept on several nodes: its GPUs there
            per_node = np.bincount(self._cluster.gpu_node[self._at == i], minlength=len(self.left))
            spots = [(int(m), int(per_node[m])) for m in np.flatnonzero(per_node)]
        for m, k in spots:
            self.left[m] += k
        return spots

    def _most_left(self, i: int, have: int = 0) -> int:
        """The most GPUs left on one node of a type job `i` may run on (the type it is packed
        on, when it is packed with `have` GPUs)."""
        if not self._typed:
            return int(self.left.max())
        types = [int(self.on_type[i])] if have and self.on_type[i] >= 0 else self._types[i]
        mask = np.isin(self._node_type, types)
        return int(self.left[mask].max()) if mask.any() else 0

    # --- the GPUs handed out again ---
    def reachable(self, rows, have, counts) -> np.ndarray:
        """(rows, counts): the counts each job, packed with `have` GPUs, could find room for now:
        on its own node or on another of its type, a count larger than a node on the fewest
        nodes of its type (room only shrinks as GPUs are handed out)."""
        home = self.node[rows]
        own = np.where((home >= 0) & (have > 0), self.left[np.maximum(home, 0)], -1)
        grow = counts[None, :] - have[:, None] <= own[:, None]
        if self._typed:
            most = np.array([self._most_left(i, have=h) for i, h in zip(rows.tolist(), have.tolist())], dtype=np.int64)
        else:
            most = np.full(len(rows), int(self.left.max()) if len(self.left) else 0)
        out = (grow | (counts[None, :] <= most[:, None])) & (counts[None, :] <= self.size)
        for k in np.flatnonzero(counts > self.size).tolist():
            c = int(counts[k])
            for r, (i, h) in enumerate(zip(rows.tolist(), have.tolist())):
                out[r, k] = c > h and self._room_for(i, h, c, take=False)
        return out

    def take(self, i: int, held: int, want: int) -> bool:
        """Whether job `i`, packed with `held` GPUs (0: none), finds room for `want`: on its own
        node, else where a job of that count would be packed on its type (first of its types
        with room, fastest first, for a job not yet packed); if so, takes it."""
        return self._room_for(i, held, want, take=True)

    def _room_for(self, i: int, held: int, want: int, take: bool) -> bool:
        home = int(self.node[i]) if held else -1
        if home >= 0 and want <= self.size and self.left[home] >= want - held:
            if take:
                self.left[home] -= want - held
                self._spots[i] = [(home, want)]
            return True
        types = [int(self.on_type[i])] if held and self.on_type[i] >= 0 else self._types[i]
        was = self._release(i, held) if held else []
        spots, t = None, -1
        for t in types:
            spots = self._find(want, t)
            if spots is not None:
                break
        if spots is None or not take:
            for m, k in was:
                self.left[m] -= k
            if was:
                self._spots[i] = was
            return spots is not None
        self._occupy(i, spots)
        self.on_type[i] = t
        return True
