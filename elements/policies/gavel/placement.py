"""Gavel's placement (§5): the mechanism's entries onto GPUs of the type it chose."""

from __future__ import annotations

import math

import numpy as np

from roundhouse.elements.placement.packing import choose_consolidated, pack_best_fit
from roundhouse.elements.placement.selection import allowed_types
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan, Ranking

_NONE = np.zeros(0, dtype=np.int64)


@element
class GavelPlacer(Element):
    """Place each ranked entry on GPUs of its type: keep a job where it is if it can, larger jobs
    first, on one server when they fit.

    An entry whose job already runs on its GPU type with the same GPU count (and the same
    partner, for a shared GPU) keeps its GPUs: its lease is extended and it pays no checkpoint
    or restore. The other entries are placed type by type, largest GPU count first, each on the
    node with the fewest free GPUs that holds it (best fit), else on as few nodes as possible;
    an entry that must be consolidated waits when no node has room. Both jobs of a pair get the
    same GPUs. Running jobs that are not kept are suspended. Unlike Consolidated, it never
    preempts to make room and never backfills: the mechanism already chose what fits. An entry
    that names no type (a policy's ranking, not GavelRounds') takes, in ranking order, the
    fastest type it can run on with its count free, else waits for its fastest.

    Ports:
        ranking: entries to run this round, each with a GPU type (from GavelRounds).
        plan: launches, keeps and suspensions.
    Arguments:
        none
    Counters:
        launched: jobs launched so far.
        kept: lease extensions so far (running jobs that kept their GPUs).
        suspended: running jobs suspended so far.
        unplaced: entries that found no room so far.
    Cost: O(n) over the ranking's entries n when every entry keeps its GPUs (O(1) when the
        ranking is the very one it placed last round, and not ticked while the mechanism hands
        that one on: event skipping); otherwise O(n + G) on one-GPU servers
        (Gavel's simulated clusters: one pass over the GPUs per type), else O(l G) over the jobs
        l it places and the GPUs G it scans for each (server by server, in Python).
    See also: GavelRounds, Consolidated
    Paper: Gavel (OSDI'20) §5 (placement, lease renewal) and its scheduler.py.
    """

    state = ("_renewed", "_renewing", "_settled", "_ticked")

    category = "placement"
    inputs = (In("ranking", Ranking),)
    outputs = (Out("plan", Plan),)

    def start(self, ctx) -> None:
        self.counters.update(launched=0, kept=0, suspended=0, unplaced=0)
        self._settled: Ranking | None = None  # a ranking whose entries all run as placed
        # Jobs running after the last plan, and that plan's round: rounds that event skipping
        # passes renew as many leases each (counted at the next tick).
        self._renewing = 0
        self._renewed = False  # whether the last plan renewed every lease
        self._ticked: int | None = None  # the round asked about event skipping, until the next tick

    def tick(self, ctx, ranking: Ranking) -> Plan:
        if self._ticked is not None and ctx.round_index > self._ticked + 1:
            self.counters["kept"] += (ctx.round_index - self._ticked - 1) * self._renewing
        self._ticked = None
        if ranking is self._settled and not len(ctx.events.finished):
            # The same entries as last round, all placed then and untouched since: every lease renews.
            running = ctx.running_rows
            self.counters["kept"] += len(running)
            self._renewing, self._renewed = len(running), True
            return Plan(keep=running)
        unplaced = self.counters["unplaced"]
        plan = self._place(ctx, ranking)
        self._settled = ranking if self.counters["unplaced"] == unplaced else None
        self._renewing = len(plan.keep) + len(plan.launch_rows)
        self._renewed = self._settled is not None and not (len(plan.launch_rows) or len(plan.suspend))
        return plan

    # Event skipping: given again the ranking whose entries all run as placed, the plan renews
    # every lease (the mechanism hands on the very same ranking while it picks the same entries).
    # Answered only after a plan that renewed every lease: after one that moved jobs, the
    # mechanism mostly picks others the round after (Gavel's rounds rotate jobs), and asking
    # it then would cost more than the rare round it saves.
    quiet_after_change = True

    def quiet_until(self, ctx) -> float | None:
        self._ticked = ctx.round_index  # (rounds passed from here are counted at the next tick)
        return math.inf if self._renewed else None

    def _place(self, ctx, ranking: Ranking) -> Plan:
        cluster = ctx.cluster
        running = ctx.running_rows
        table = ctx.jobs
        rows, want = ranking.rows, ranking.gpus
        n = len(rows)
        partner = ranking.partner if ranking.partner is not None else np.full(n, -1, dtype=np.int64)
        held = table.column("held")[rows]
        placed = table.column("placed_type")[rows]
        types = ranking.gpu_type if ranking.gpu_type is not None else np.where(held > 0, placed, -1)
        unnamed = types < 0
        if unnamed.any():
            types = np.where(unnamed, self._fastest_type(ctx, rows), types)
        keep = (held == want) & (placed == types) & (table.column("partner")[rows] == partner)
        if ranking.consolidate is not None and keep.any():
            keep &= ~ranking.consolidate | self._on_one_node(ctx, rows, keep)
        kept = rows[keep]
        kept_mates = partner[keep & (partner >= 0)]
        if len(kept_mates):
            kept = np.concatenate([kept, kept_mates])
        if len(kept) == len(running) == n + len(kept_mates):
            self.counters["kept"] += len(kept)
            return Plan(keep=running)  # every job keeps its GPUs

        holder, co = np.asarray(ctx.holder), ctx.co_holder
        available = ~isin_rows(holder, kept)  # GPUs of jobs that stay are taken; the rest are free
        if co is not None:
            available &= ~isin_rows(np.asarray(co), kept)
        todo = (~keep).nonzero()[0]
        if len(cluster.gpu_types) > 1 and unnamed[todo].any():
            types = self._types_with_room(ctx, rows, want, types, unnamed, todo, available)
        if cluster.max_gpus_per_node == 1:
            positions, counts, gpus = _on_one_gpu_servers(cluster, available, types, want, todo, ranking.consolidate)
        else:
            positions, counts, gpus = _job_by_job(cluster, available, types, want, todo, ranking.consolidate)
        self.counters["unplaced"] += len(todo) - len(positions)

        staying = isin_rows(running, kept)
        suspend, keep_rows = running[~staying], running[staying]
        self.counters["kept"] += len(running) - len(suspend)
        self.counters["suspended"] += len(suspend)
        if not len(positions):
            return Plan(keep=keep_rows, suspend=suspend)
        launch_rows, mates = rows[positions], partner[positions]
        paired = mates >= 0
        if paired.any():  # both jobs of a pair get the same GPUs, the partner right after its entry
            starts = np.cumsum(counts) - counts
            order = np.argsort(np.concatenate([np.arange(len(positions)) * 2, np.flatnonzero(paired) * 2 + 1]), kind="stable")
            firsts = np.concatenate([starts, starts[paired]])[order]
            counts = np.concatenate([counts, counts[paired]])[order]
            launch_rows, mates = (
                np.concatenate([launch_rows, mates[paired]])[order],
                np.concatenate([mates, launch_rows[paired]])[order],
            )
            gpus = gpus[firsts.repeat(counts) + np.arange(int(counts.sum())) - (np.cumsum(counts) - counts).repeat(counts)]
        self.counters["launched"] += len(launch_rows)
        return Plan(
            launch_rows=launch_rows,
            launch_gpus=gpus,
            launch_counts=counts,
            keep=keep_rows,
            suspend=suspend,
            launch_partner=mates if paired.any() else None,
        )

    @staticmethod
    def _types_with_room(ctx, rows, want, types, unnamed, todo, available) -> np.ndarray:
        """The GPU type of each entry to place that names none (a policy's ranking, not
        GavelRounds'): walking the ranking, the fastest type it can run on whose free GPUs not
        yet taken by the entries above hold its count, else its fastest type (where it waits).
        Without this, every such entry would wait for its fastest type while others stand idle."""
        cluster = ctx.cluster
        left = np.bincount(cluster.gpu_type[available], minlength=len(cluster.gpu_types)).tolist()
        rates = ctx.jobs.type_rates[rows[todo]]
        types = types.copy()
        for k, i in enumerate(todo.tolist()):
            g = int(want[i])
            if unnamed[i]:
                fits = [t for t in allowed_types(rates[k], -1) if g <= left[t]]
                if fits:
                    types[i] = fits[0]
            if g <= left[types[i]]:
                left[types[i]] -= g
        return types

    @staticmethod
    def _fastest_type(ctx, rows: np.ndarray) -> np.ndarray:
        return np.argmax(ctx.jobs.type_rates[rows], axis=1) if len(rows) else np.zeros(0, dtype=np.int64)

    @staticmethod
    def _on_one_node(ctx, rows: np.ndarray, keep: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows), dtype=bool)
        for i in np.flatnonzero(keep).tolist():
            nodes = ctx.cluster.gpu_node[ctx.gpus_of(int(rows[i]))]
            out[i] = len(nodes) > 0 and (nodes == nodes[0]).all()
        return out


def _job_by_job(cluster, available, types, want, todo, consolidate):
    """Entries placed type by type, largest first, each on the best-fit node (or as few nodes
    as possible); single-GPU entries packed at once. Returns (positions, counts, GPUs)."""
    positions, gpus_out = [], []
    strict = np.zeros(len(want), dtype=bool) if consolidate is None else np.asarray(consolidate, dtype=bool)
    for t in np.unique(types[todo]).tolist():
        here = todo[types[todo] == t]
        here = here[np.argsort(-want[here], kind="stable")]  # largest first, then ranking order
        singles = here[want[here] == 1]
        for i in here[want[here] > 1].tolist():
            got = _choose(cluster, available, int(want[i]), t, bool(strict[i]))
            if got is not None:
                available[got] = False
                positions.append(i)
                gpus_out.append(got)
        if len(singles):
            taken = pack_best_fit(cluster, available, t, 1, len(singles))
            positions.extend(singles[: len(taken)].tolist())
            gpus_out.extend(taken)
    if not positions:
        return _NONE, _NONE, _NONE
    return (
        np.asarray(positions, dtype=np.int64),
        np.array([len(g) for g in gpus_out], dtype=np.int64),
        np.concatenate(gpus_out).astype(np.int64, copy=False),
    )


def _on_one_gpu_servers(cluster, available, types, want, todo, consolidate):
    """`_job_by_job` where every server has one GPU (Gavel's simulated clusters), without a
    search per job: there the best fit and the fewest-nodes choice both come down to the
    lowest-numbered free GPUs of the type, so each type's entries, largest first, take the
    next free GPUs in turn (an entry that does not fit is skipped; one that must sit on one
    server cannot, beyond one GPU). Cost: one pass over the GPUs per type, not per job."""
    if not len(todo):
        return _NONE, _NONE, _NONE
    t_todo = types[todo]
    order = np.lexsort((-want[todo], t_todo))  # by type, then largest first, then ranking order
    todo, t_todo = todo[order], t_todo[order]
    sizes = want[todo]
    if consolidate is not None:
        fits_one = ~np.asarray(consolidate, dtype=bool)[todo] | (sizes <= 1)
        todo, t_todo, sizes = todo[fits_one], t_todo[fits_one], sizes[fits_one]
    edges = np.empty(len(t_todo) + 1, dtype=bool)  # (np.r_ costs more than the rest of this line)
    edges[0] = edges[-1] = True
    np.not_equal(t_todo[1:], t_todo[:-1], out=edges[1:-1])
    bounds = edges.nonzero()[0]
    positions, counts, gpus = [], [], []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        t = int(t_todo[a])
        ids = (available & cluster.type_mask[t] if len(cluster.gpu_types) > 1 else available).nonzero()[0]
        s = sizes[a:b]
        total = int(np.add.reduce(s))  # (without `ndarray.sum`'s wrapper: a few entries)
        if total <= len(ids):  # everyone fits
            take = slice(a, b)  # (a slice: no index array to build)
        else:  # greedy with skips: the wants are few, a scalar walk is cheapest
            room, picked = len(ids), []
            for k, w in enumerate(s.tolist()):
                if w <= room:
                    picked.append(a + k)
                    room -= w
            if not picked:
                continue
            take = np.asarray(picked, dtype=np.int64)
            total = len(ids) - room
        c = sizes[take]
        got = ids[:total]
        available[got] = False
        positions.append(todo[take])
        counts.append(c)
        gpus.append(got)
    if not positions:
        return _NONE, _NONE, _NONE
    return np.concatenate(positions), np.concatenate(counts), np.concatenate(gpus)


def _choose(cluster, available: np.ndarray, want: int, t: int, one_node: bool):
    """GPUs of type t for one job: one node if possible (best fit); else, unless it must be one
    node, as few nodes as possible, fullest first."""
    got = choose_consolidated(cluster, available, want, [t]) if want <= cluster.max_gpus_per_node else None
    if got is not None or one_node:
        return got
    mask = available & cluster.type_mask[t] if len(cluster.gpu_types) > 1 else available
    counts = cluster.per_node(mask)
    if counts.sum() < want:
        return None
    order = np.argsort(-counts, kind="stable")
    picked = order[: int(np.searchsorted(np.cumsum(counts[order]), want)) + 1]
    firsts, sizes = cluster.node_first_gpu[picked], cluster.node_gpus[picked]
    return np.concatenate([f + np.flatnonzero(mask[f : f + s]) for f, s in zip(firsts, sizes)])[:want]
