"""Gavel's round-based scheduling mechanism (§5): realize an allocation X round by round.

GavelRounds keeps the books of the allocation it realizes: its entries, the time each received
and their deficits, and when event skipping may pass rounds. Each round's pass of Algorithm 1 is
greedy_pass.py, whose function the class binds as its method; why jobs wait, for the run's
explanations, is wait_reasons.py.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from roundhouse.elements.policies.gavel import greedy_pass
from roundhouse.elements.policies.gavel.greedy_pass import greedy as _greedy
from roundhouse.elements.policies.gavel.solvers import KeptShares, solved_shares
from roundhouse.elements.policies.gavel.wait_reasons import explain_without_share
from roundhouse.elements.policies.gavel.wait_reasons import too_big as _too_big
from roundhouse.runtime.element import Element, In, Out, element, rounds_add_exactly
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Ranking, Shares
from roundhouse.runtime.values import non_negative, one_of
from roundhouse.traces.jobs import FINISHED

# Besides GavelRounds: names moved to modules of their own that tests reach here, kept here for them.
__all__ = ["GavelRounds", "_greedy", "_too_big"]


@element
class GavelRounds(Element):
    """Gavel's round-based mechanism: run, each round, the jobs furthest behind their allocation.

    For every job (and, with space sharing, every pair of jobs) and GPU type, it tracks the time received
    since the last reset, as a fraction f of all time given out on that type; the priority is X / f (no
    share: 0), so an entry that has had less than its share comes first. Each round it visits one queue
    per GPU type, in the order `order` sets, entries sorted by priority, then deficit, then allocation,
    and greedily takes each entry that fits in the type's GPUs left and whose jobs are not taken yet
    (Algorithm 1). When the solver hands over a new allocation (after jobs arrive or finish, at most
    once per solver interval), the times restart at half a round and what each entry was owed (X
    times the elapsed time, minus what it got) is added to its deficit, the tie-breaker. Jobs that
    arrived since the last solve wait for the next one; those gone since (ended early, say) are not
    chosen. The output ranking names a GPU type (and, for
    placement-sensitive shares, a layout, and for pairs a partner) for every entry; GavelPlacer carries it out.

    The order of the types decides which type a job that several want goes to. "fastest" works it
    out at each allocation from the allocated jobs: the types by their mean throughput relative to
    each job's best type. "cluster" visits them in the order the cluster lists them (its spec's
    groups; 36:36:36 lists V100, P100, K80), which on Gavel's clusters is Gavel's scheduler's fixed
    v100, p100, k80 order for its heterogeneity-aware policies; the two differ when the allocated
    jobs run faster on average on a P100 than on a V100 (Recoder, ResNet-18 at small batches).
    "fastest" is the default because a cluster's listed order usually means nothing (a spec may
    list its slowest type first); the shipped Gavel graphs name "cluster". "shuffled" draws a new
    order every round, as Gavel's heterogeneity-agnostic policies do.

    Ports:
        shares: the allocation (time fractions per job, or pair, and GPU type).
        ranking: the entries to run this round, each with its GPU type.
    Arguments:
        order: the order the GPU types are visited in: fastest (fastest first, from the allocated jobs), cluster (as the cluster lists them: Gavel's fixed order on its clusters) or shuffled (a random order every round).
        work_conserving: let a job with no share of a type use its GPUs when no entry with a share wants them (Gavel's FIFO does not).
        seed: seed for the shuffled order (default: derived from the graph's seed).
    Counters:
        resets: allocations received (each restarts the time fractions).
        scheduled: entries chosen in the last round.
        pairs: pair entries chosen in the last round.
        idle_gpus: GPUs left without a job in the last round.
    Cost: O(n c) over jobs n and allocation columns c (GPU types, with pairs), plus a sort of the
        jobs by priority, O(n log n), on a type whose GPUs do not hold every entry that wants
        them. A round that picks the same entries as the last hands on the same ranking; event
        skipping passes the rounds ahead that would pick them again (O(n) to find how many:
        the first meeting of neighbouring priorities), except with the shuffled order or pairs.
    See also: MaxMinFairness, GavelPlacer, Hierarchical
    Paper: Gavel (OSDI'20) §5 (round-based mechanism, Algorithm 1) and its scheduler.py.
    """

    state = (
        "_X",
        "_tie_order",
        "_type_order",
        "_alive",
        "_any_pairs",
        "_col_type",
        "_cols_of_type",
        "_consolidated",
        "_deficit",
        "_given",
        "_last",
        "_last_reset",
        "_one_type_each",
        "_pair_deficit",
        "_paired",
        "_partner",
        "_ran",
        "_ran_col",
        "_ran_partner_run_s",
        "_ran_run_s",
        "_repeat",
        "_rng",
        "_row_deficit",
        "_rows",
        "_sf",
        "_shares",
        "_sorted",
        "_ticked",
        "_time",
        "_wanted",
        "_waiting",
        "_wanted_by_col",
        "_wanting",
    )

    category = "mechanism"
    inputs = (In("shares", Shares),)
    outputs = (Out("ranking", Ranking),)

    order: str = attrs.field(default="fastest", validator=one_of("fastest", "cluster", "shuffled"))
    work_conserving: bool = True
    seed: int | None = attrs.field(default=None, validator=non_negative)

    def start(self, ctx) -> None:
        self._rng = ctx.rng(self.seed)
        self._shares: Shares | None = None
        self._last_reset = ctx.now
        self._row_deficit = np.zeros((1024, 0))
        self._pair_deficit: dict[tuple[int, int], np.ndarray] = {}
        # Entries of the current allocation: job rows, partners (-1), X, time received, deficit.
        self._rows = np.zeros(0, dtype=np.int64)
        self._partner = np.zeros(0, dtype=np.int64)
        self._X = np.zeros((0, 0))
        self._time = np.zeros((0, 0))
        self._deficit = np.zeros((0, 0))
        self._given = np.zeros(0)  # time given out per column since the last reset
        self._any_pairs = False
        self._repeat: tuple[Ranking, np.ndarray] | None = None
        self._last: tuple[Ranking, bytes, bytes] | None = None  # last round's ranking, its entries and columns
        # What was handed to the placer last round, to account for the time it received.
        self._ran, self._ran_col = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        self._ran_run_s = np.zeros(0)
        self._ran_partner_run_s = np.zeros(0)
        self._sorted: list[tuple[int, np.ndarray, np.ndarray, int]] = []  # per column sorted: candidates, taken, GPUs left before
        self._ticked: int | None = None  # the round asked about event skipping, until the next tick
        self.counters.update(resets=0, scheduled=0, pairs=0, idle_gpus=0)

    def tick(self, ctx, shares: Shares) -> Ranking:
        self._account(ctx)
        self._ticked = None
        if fresh := solved_shares(shares) is not solved_shares(self._shares):
            self._reset(ctx, shares)
        changed = fresh or _limited(self, ctx, shares)  # (or the same allocation, limited to other jobs)
        return explain_without_share(self, ctx, changed, self._schedule(ctx))

    # --- event skipping ---
    quiet_after_change = True

    def quiet_until(self, ctx) -> float | None:
        """The rounds ahead that pick the same entries on the same columns (`_repeating`)."""
        self._ticked = ctx.round_index  # (rounds passed from here are credited at the next tick)
        if self._shares is None or not len(self._rows) or self._repeat is not None:
            return math.inf  # the same ranking until an event (no entries, or all that want run)
        if self.order == "shuffled" or self._any_pairs:
            return None
        return _repeating(self._sorted, self._X, self._time, len(self._rows), ctx)

    # --- bookkeeping ---
    def _account(self, ctx) -> None:
        """Credit the entries that ran last round with the time they held their GPUs (and the
        rounds event skipping did not tick as those ticks would have: `_credit`)."""
        if not len(self._ran):
            return
        run_s = ctx.jobs.column("run_s")
        passed = ctx.round_index - self._ticked - 1 if self._ticked is not None else 0
        if passed > 0:  # (with every wanting entry running, ticks credit only the first round)
            rounds = 1 if self._repeat is not None else passed
            self._ran_run_s = _credit(self._time, self._given, self._ran, self._ran_col, self._ran_run_s, ctx.round_s, rounds)
            if self._repeat is not None:
                self._ran = self._ran[:0]
                return
        got = run_s[self._rows[self._ran]] - self._ran_run_s
        if self._any_pairs:
            partner = self._partner[self._ran]
            mate = run_s[np.maximum(partner, 0)] - self._ran_partner_run_s
            got = np.where(partner >= 0, np.maximum(got, mate), got)
        self._time[self._ran, self._ran_col] += got  # (each entry ran once: no repeated cell)
        np.add.at(self._given, self._ran_col, got)
        self._ran = self._ran[:0]

    def _reset(self, ctx, shares: Shares) -> None:
        """A new allocation: settle what each entry was owed into its deficit, restart times."""
        elapsed = ctx.now - self._last_reset
        k = len(shares.gpu_types)
        if self._shares is not None and len(self._rows) and self._X.shape[1] == k:
            owed = self._X * elapsed - (self._time - ctx.round_s / 2)
            single = self._partner < 0
            self._row_deficit = _grown(self._row_deficit, len(ctx.jobs), k)
            self._row_deficit[self._rows[single]] += owed[single]
            for i in np.flatnonzero(~single).tolist():
                key = (int(self._rows[i]), int(self._partner[i]))
                self._pair_deficit[key] = self._pair_deficit.get(key, 0.0) + owed[i]
        self._row_deficit = _grown(self._row_deficit, len(ctx.jobs), k)
        rows, X = shares.rows, shares.fractions
        partner = np.full(len(rows), -1, dtype=np.int64)
        deficit = self._row_deficit[rows]
        if shares.pairs is not None and shares.pair_fractions is not None and len(shares.pairs):
            pairs = shares.pairs
            rows = np.concatenate([rows, pairs[:, 0]])
            partner = np.concatenate([partner, pairs[:, 1]])
            X = np.vstack([X, shares.pair_fractions])
            zero = np.zeros(k)
            deficit = np.vstack([deficit, np.array([self._pair_deficit.get((int(a), int(b)), zero) for a, b in pairs.tolist()])])
        self._shares = shares
        self._rows, self._partner, self._X = rows, partner, np.asarray(X)
        self._deficit = deficit
        # Per column, entries in tie-break order (deficit, allocation, entry) until the next allocation.
        entry = np.arange(len(rows))
        self._tie_order = [np.lexsort((entry, -self._X[:, c], -deficit[:, c])) for c in range(k)]
        # Times restart at half a round (Gavel's choice), so every fraction is positive and
        # the priority X / f is finite: X times all time given out on the type, over own time.
        self._time = np.full(self._X.shape, ctx.round_s / 2)
        self._given = np.full(k, ctx.round_s / 2 * len(rows))
        self._last_reset = ctx.now
        self._ran = self._ran[:0]
        self.counters["resets"] += 1

        # What stays fixed until the next allocation.
        table, cluster = ctx.jobs, ctx.cluster
        self._paired = partner >= 0
        self._any_pairs = bool(self._paired.any())
        self._sf = table.column("gpus")[rows]
        self._col_type = np.array([cluster.type_code(t) for t in shares.gpu_types], dtype=np.int64)
        usable = np.where(self._paired[:, None], self._X > 0, table.type_rates[rows][:, self._col_type] > 0)
        if shares.placement is not None:  # a consolidated column needs a node with enough GPUs
            largest = np.array([cluster.node_gpus[cluster.node_type == t].max(initial=0) for t in self._col_type])
            one_node = np.array([p == "consolidated" for p in shares.placement])
            usable &= ~one_node[None, :] | (self._sf[:, None] <= largest[None, :])
        self._wanted = usable & ((self._X > 0) | (self.work_conserving & ~self._paired[:, None]))
        self._one_type_each = bool((self._wanted.sum(axis=1) <= 1).all())
        self._repeat = None
        self._last = None
        self._alive = np.ones(len(rows), dtype=bool)
        self._update_alive(ctx)
        placements = shares.placement
        by_type = []
        for t in range(len(cluster.gpu_types)):
            cols = np.flatnonzero(self._col_type == t)
            if placements is not None:  # consolidated before spread
                cols = cols[np.argsort([placements[c] != "consolidated" for c in cols], kind="stable")]
            by_type.append(cols.tolist())
        self._cols_of_type = by_type
        # The order the types are visited in until the next allocation (shuffled draws its own each round).
        self._type_order = _fastest_first(ctx, shares) if self.order == "fastest" else np.arange(len(cluster.gpu_types))
        self._consolidated = None if placements is None else np.array([p == "consolidated" for p in placements])

    def _update_alive(self, ctx) -> None:
        self._alive, self._waiting, self._wanted_by_col, self._wanting = _alive(self, ctx)

    # Algorithm 1, this round's pass (greedy_pass.py).
    _schedule = greedy_pass.schedule


def _limited(mech: GavelRounds, ctx, shares: Shares) -> bool:
    """Take `shares`, the current allocation limited to other jobs (the solver keeps it within
    its interval without the jobs that left its input), if it is not the one held; whether it was."""
    if shares is mech._shares:
        return False
    mech._shares = shares
    mech._update_alive(ctx)
    mech._repeat = None
    return True


def _alive(mech: GavelRounds, ctx) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Entries whose jobs have all not finished and are still in the allocation (a solver's
    allocation kept within its interval leaves out the jobs gone since); the single entries among
    them that want GPUs (those that wait when not chosen); by column, those that want it (a row
    each: read every round); and how many entries want any."""
    status = ctx.jobs.column("status")
    alive = status[mech._rows] != FINISHED
    if mech._any_pairs:
        alive &= ~mech._paired | (status[np.maximum(mech._partner, 0)] != FINISHED)
    if isinstance(mech._shares, KeptShares):  # (jobs the solver no longer has, such as those ended early)
        kept = mech._shares.rows
        alive &= isin_rows(mech._rows, kept)
        if mech._any_pairs:
            alive &= ~mech._paired | isin_rows(np.maximum(mech._partner, 0), kept)
    wanted = mech._wanted & alive[:, None]
    wanting = wanted.any(axis=1)
    return alive, wanting & ~mech._paired, np.ascontiguousarray(wanted.T), int(wanting.sum())


def _fastest_first(ctx, shares: Shares) -> np.ndarray:
    """Physical GPU types, fastest first: by the jobs' mean throughput relative to their best."""
    n_types = len(ctx.cluster.gpu_types)
    rates = ctx.jobs.type_rates[shares.rows] if len(shares.rows) else np.ones((1, n_types))
    relative = rates / np.maximum(rates.max(axis=1, keepdims=True), 1e-300)
    return np.argsort(-relative.mean(axis=0), kind="stable")


def _credit(time: np.ndarray, given: np.ndarray, ran: np.ndarray, col: np.ndarray, run_s: np.ndarray, r: float, rounds: int):
    """Credit entries that ran `rounds` whole rounds that event skipping did not tick, each as
    its tick would have (the difference the world's addition of a round made to `run_s`,
    round by round, to the bit); returns `run_s` after them."""
    for _ in range(rounds):
        after = run_s + r
        step = after - run_s
        time[ran, col] += step
        np.add.at(given, col, step)
        run_s = after
    return run_s


def _repeating(sorted_cols, X: np.ndarray, time: np.ndarray, n: int, ctx) -> float | None:
    """Until when the mechanism picks the same entries on the same columns, nothing happening.
    Between events only the entries picked gain time, a round's worth each per round on their
    column: in a column whose candidates were sorted (`sorted_cols`: the column, its candidates
    in priority order, those it took), each key X / f keeps its order with its neighbours until
    the first pair meets (`_rounds_in_order`); a column whose candidates all fit stays so. Only
    for whole-second rounds, where a round adds exactly r to a running job's run_s (what
    `_credit` replays)."""
    if not rounds_add_exactly(ctx):
        return None
    r = float(ctx.round_s)
    rounds = math.inf
    mark = np.zeros(n, dtype=bool)
    for c, cand, picked, _ in sorted_cols:
        mark[picked] = True
        rounds = min(rounds, _rounds_in_order(X[cand, c], time[cand, c], mark[cand], r))
        if rounds < 1:
            return None
        mark[picked] = False
    return ctx.now + (rounds + 0.5) * r


# Keys that stay this much apart (relatively) keep their order in floating point, however the
# priority X * given / time is rounded: event skipping's margin.
_MARGIN = 1e-9


def _rounds_in_order(X: np.ndarray, T: np.ndarray, on: np.ndarray, r: float) -> float:
    """How many rounds ahead a column's candidates (in priority order: keys X / T, T the time
    received) keep their order when those `on` the column gain r a round and the others
    nothing: the first meeting of neighbours, less a relative margin. Neighbours alike (same X,
    same T, both gaining or neither) stay tied, and a key of 0 stays behind or tied. 0 when two
    neighbours are closer than the margin already."""
    if len(X) < 2:
        return math.inf
    xa, xb, ta, tb = X[:-1], X[1:], T[:-1], T[1:]
    pa, pb = on[:-1], on[1:]
    # d(m) = X_a (T_b + m r p_b) - (1 + margin) X_b (T_a + m r p_a): the ahead stays ahead while d >= 0.
    wide = (1.0 + _MARGIN) * xb
    d0 = xa * tb - wide * ta
    s = r * (xa * pb - wide * pa)
    open_ = ~(((xa == xb) & (ta == tb) & (pa == pb)) | (xb == 0))
    if np.count_nonzero(open_ & (d0 + s < 0)):
        return 0.0
    falling = open_ & (s < 0)
    if not np.count_nonzero(falling):
        return math.inf
    return float(math.floor((-d0[falling] / s[falling]).min()))


def _grown(a: np.ndarray, n: int, k: int) -> np.ndarray:
    """`a` with at least n rows and exactly k columns (new cells zero)."""
    if a.shape[1] != k:
        a = np.zeros((max(len(a), n), k))
    if len(a) >= n:
        return a
    out = np.zeros((max(n, 2 * len(a)), k))
    out[: len(a)] = a
    return out
