"""Gavel's placement (§5): the mechanism's entries onto GPUs of the type it chose."""

from __future__ import annotations

import numpy as np

from roundhouse.elements.placement.packing import choose_consolidated, pack_best_fit
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
    preempts to make room and never backfills: the mechanism already chose what fits.

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
    See also: GavelRounds, Consolidated
    Paper: Gavel (OSDI'20) §5 (placement, lease renewal) and its scheduler.py.
    """

    state = ("_settled",)

    category = "placement"
    inputs = (In("ranking", Ranking),)
    outputs = (Out("plan", Plan),)

    def start(self, ctx) -> None:
        self.counters.update(launched=0, kept=0, suspended=0, unplaced=0)
        self._settled: Ranking | None = None  # a ranking whose entries all run as placed

    def tick(self, ctx, ranking: Ranking) -> Plan:
        if ranking is self._settled and not len(ctx.events.finished):
            # The same entries as last round, all placed then and untouched since: every lease renews.
            running = ctx.running_rows
            self.counters["kept"] += len(running)
            return Plan(keep=running)
        unplaced = self.counters["unplaced"]
        plan = self._place(ctx, ranking)
        self._settled = ranking if self.counters["unplaced"] == unplaced else None
        return plan

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
        if (types < 0).any():
            types = np.where(types < 0, self._fastest_type(ctx, rows), types)
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
        positions, gpus_out = [], []
        todo = np.flatnonzero(~keep)
        strict = np.zeros(n, dtype=bool) if ranking.consolidate is None else np.asarray(ranking.consolidate, dtype=bool)
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
                for i, g in zip(singles[: len(taken)].tolist(), taken):
                    positions.append(i)
                    gpus_out.append(g)
        self.counters["unplaced"] += len(todo) - len(positions)

        launch_rows, launch_gpus, counts, mates = [], [], [], []
        for i, g in zip(positions, gpus_out):
            launch_rows.append(rows[i])
            launch_gpus.append(g)
            counts.append(len(g))
            mates.append(partner[i])
            if partner[i] >= 0:
                launch_rows.append(partner[i])
                launch_gpus.append(g)
                counts.append(len(g))
                mates.append(rows[i])
        suspend = running[~isin_rows(running, kept)] if len(kept) else running
        self.counters["launched"] += len(launch_rows)
        self.counters["kept"] += len(running) - len(suspend)
        self.counters["suspended"] += len(suspend)
        if not launch_rows:
            return Plan(keep=running[isin_rows(running, kept)], suspend=suspend)
        return Plan(
            launch_rows=np.asarray(launch_rows, dtype=np.int64),
            launch_gpus=np.concatenate(launch_gpus),
            launch_counts=np.asarray(counts, dtype=np.int64),
            keep=running[isin_rows(running, kept)],
            suspend=suspend,
            launch_partner=np.asarray(mates, dtype=np.int64) if (np.asarray(mates) >= 0).any() else None,
        )

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
