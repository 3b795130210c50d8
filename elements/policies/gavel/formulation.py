"""Gavel's allocation problem as sparse matrices: who may run where, how fast, with whom.

Every Gavel policy is written over the same quantities (§3.1): the effective throughput of each
job, `throughput(m, X) = sum_j T_mj X_mj` (plus its share of each space-sharing pair it belongs
to), the time each job is given (at most 1), and the GPUs each type gives out (at most its
count). `Formulation` builds those three as sparse matrices over the program's variables, so a
policy is only its objective and its extra rows.

Jobs that no policy could tell apart (same throughputs, GPU count and policy data such as
weight or entity) form one class with a multiplicity: by symmetry some optimal allocation gives
every member of a class the same time fractions, so the program has one row per class, not per
job. With Gavel's 26 job configurations this keeps a max-min program at a few hundred rows
however many jobs are active. Pairs of classes get pair variables: the total time, summed over
all member pairs, that the two classes spend together on each column.

Columns are GPU types, or, for placement-sensitive policies, each type twice: consolidated (all
of a job's GPUs on one node) and spread (one GPU per node), sharing the type's GPUs (§3.1);
on a type whose nodes differ in size, jobs of g GPUs or more hold no more of a consolidated
column than the type's nodes of g GPUs or more have (`Formulation.node_capacity`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.elements.policies.gavel.libraries import sp
from roundhouse.elements.policies.gavel.lp import RowBlock, sparse_rows

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


CONSOLIDATED, SPREAD = "consolidated", "spread"


@attrs.frozen
class Columns:
    """The columns of X: a GPU type each, with a placement when the policy tells them apart."""

    names: tuple[str, ...]
    gpu_type: np.ndarray  # physical type code of each column
    placement: tuple[str, ...] | None
    capacity: np.ndarray  # GPUs of each physical type
    # GPUs of each node, by physical type (placement-sensitive columns only): how many GPUs a
    # consolidated column can give jobs of each size.
    node_gpus: tuple[np.ndarray, ...] = ()

    @property
    def k(self) -> int:
        return len(self.names)

    @classmethod
    def of(cls, cluster, placement_sensitive: bool = False) -> Columns:
        types = cluster.gpu_types
        capacity = np.asarray(cluster.gpus_by_type, dtype=np.float64)
        if not placement_sensitive:
            return cls(tuple(types), np.arange(len(types)), None, capacity)
        names, codes, placement = [], [], []
        for t, name in enumerate(types):
            for how in (CONSOLIDATED, SPREAD):
                names.append(f"{name} ({how})")
                codes.append(t)
                placement.append(how)
        nodes = tuple(np.asarray(cluster.node_gpus[cluster.node_type == t], dtype=np.float64) for t in range(len(types)))
        return cls(tuple(names), np.asarray(codes), tuple(placement), capacity, nodes)


def job_throughputs(ctx: RoundContext, rows: np.ndarray, columns: Columns) -> np.ndarray:
    """Iterations/s of each job on each column at its requested GPU count; 0 where it cannot run
    (the profile says so, or the type has fewer GPUs than the job asks for, or, for a
    consolidated column, no node of the type has that many). A column that does not tell
    placements apart gives the consolidated rate where some node of the type holds the job's
    GPUs, and the spread rate where none does (the rate the job will run at there)."""
    table = ctx.jobs
    sf = table.column("gpus")[rows]
    rates = table.type_rates[rows]
    cluster = ctx.cluster
    node_max = np.array([cluster.node_gpus[cluster.node_type == t].max(initial=0) for t in range(len(cluster.gpu_types))])
    if columns.placement is None:
        T = rates[:, columns.gpu_type].copy()
        for c, t in enumerate(columns.gpu_type.tolist()):
            apart = sf > node_max[t]
            if apart.any():
                T[apart, c] = _spread_rates(ctx, rows[apart], t)
    else:
        T = np.zeros((len(rows), columns.k))
        for c, (t, how) in enumerate(zip(columns.gpu_type.tolist(), columns.placement)):
            T[:, c] = np.where(sf <= node_max[t], rates[:, t], 0.0) if how == CONSOLIDATED else _spread_rates(ctx, rows, t)
    T[sf[:, None] > columns.capacity[columns.gpu_type][None, :]] = 0.0
    return T


def _spread_rates(ctx: RoundContext, rows: np.ndarray, t: int) -> np.ndarray:
    """Each job's rate on GPU type t with its GPUs on different nodes: the profile's spread rate
    (its consolidated one where it has none); a job without a profiled model at its own rate."""
    table = ctx.jobs
    sf = table.column("gpus")[rows]
    models, batch = table.column("model")[rows], table.column("batch_size")[rows]
    has_model = table.column("has_model")[rows]
    spread = table.type_rates[rows, t].copy()
    for g in np.unique(sf[has_model]).tolist():
        sel = has_model & (sf == g)
        spread[sel] = ctx.profile.rates(models[sel], batch[sel], ctx.cluster.gpu_types[t], g, consolidated=False)
    return spread


class KeptThroughputs:
    """Jobs' throughputs per column (`job_throughputs`), kept by job row with the job, GPU count
    and batch size they were worked out for. A solver asks for the jobs still active at every
    solve, and a job's throughputs change only with its GPU count or batch size (an elastic
    job's); on one-GPU servers each multi-GPU job's spread rate is a profile lookup, the bulk of
    a solve's setup."""

    def __init__(self) -> None:
        self._T = np.zeros((0, 0))
        self._key = np.zeros((0, 3), dtype=np.int64)  # job id, GPU count, batch size (GPU count 0: none kept)

    def of(self, ctx: RoundContext, rows: np.ndarray, columns: Columns, work_out) -> np.ndarray:
        """The jobs' throughputs: those kept, and `work_out(ctx, rows, columns)` (`job_throughputs`)
        for the others, which are kept from now on."""
        table = ctx.jobs
        key = np.stack([table.column("job_id")[rows], table.column("gpus")[rows], table.column("batch_size")[rows]], axis=1)
        if self._T.shape[1] != columns.k:  # (another set of columns: nothing kept applies)
            self._T, self._key = np.zeros((0, columns.k)), np.zeros((0, 3), dtype=np.int64)
        found = rows < len(self._T)
        if found.any():
            found[found] = (self._key[rows[found]] == key[found]).all(axis=1) & (key[found, 1] > 0)
        T = np.empty((len(rows), columns.k))
        T[found] = self._T[rows[found]]
        new = ~found
        if new.any():
            fresh = T[new] = work_out(ctx, rows[new], columns)
            self._keep(rows[new], key[new], fresh)
        return T

    def _keep(self, rows: np.ndarray, key: np.ndarray, T: np.ndarray) -> None:
        n = int(rows.max()) + 1
        if n > len(self._T):
            n = max(n, 2 * len(self._T))
            grown_T, grown_key = np.zeros((n, self._T.shape[1])), np.zeros((n, 3), dtype=np.int64)
            grown_T[: len(self._T)], grown_key[: len(self._key)] = self._T, self._key
            self._T, self._key = grown_T, grown_key
        self._T[rows] = T
        self._key[rows] = key


def equal_share(T: np.ndarray, columns: Columns) -> np.ndarray:
    """Throughput of each job when given an equal share of every GPU type (Gavel's X^equal: time
    on type j in proportion to its GPU count, one unit of time in all). With placement columns,
    a type's share goes to its faster placement."""
    weight = columns.capacity / columns.capacity.sum()
    if columns.placement is None:
        return T @ weight
    per_type = np.zeros((T.shape[0], len(columns.capacity)))
    np.maximum.at(per_type.T, columns.gpu_type, T.T)
    return per_type @ weight


# Weights are relative (only their ratios matter), but an LP solver tells coefficients apart
# only within a limited range: weights are kept within this ratio of the largest.
WEIGHT_RANGE = 1e6


def relative_weights(weights: np.ndarray) -> np.ndarray:
    """Positive weights made safe for a program's rows, their ratios kept where they can be:
    weights within [1 / WEIGHT_RANGE, WEIGHT_RANGE] and within WEIGHT_RANGE of each other are
    returned as they are; others are divided by the largest, and any below 1 / WEIGHT_RANGE of
    it raised to that (a job so light gets next to nothing either way)."""
    w = np.asarray(weights, dtype=np.float64)
    if not len(w):
        return w
    top, low = float(w.max()), float(w.min())
    if 1.0 / WEIGHT_RANGE <= low and top <= WEIGHT_RANGE and top <= low * WEIGHT_RANGE:
        return w
    return np.maximum(w / top, 1.0 / WEIGHT_RANGE)


def classes(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group jobs whose keys all match. Returns (class of each job, a representative job of each
    class (its first), how many jobs each class has)."""
    n = len(keys[0])
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    table = np.column_stack([np.asarray(k, dtype=np.float64).reshape(n, -1) for k in keys])
    # Rows sorted by value (a stable sort: each class's first member leads its run), then runs of
    # equal rows; several times cheaper than np.unique(axis=0) on a solver's few hundred rows.
    order = np.lexsort(table.T[::-1])
    ordered = table[order]
    leads = np.empty(n, dtype=bool)
    leads[0] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=leads[1:])
    starts = np.flatnonzero(leads)
    group = np.cumsum(leads) - 1
    first, counts = order[starts], np.diff(starts, append=n)
    # Number classes in order of first appearance, so that the program's rows follow the jobs.
    by_first = np.argsort(first, kind="stable")
    rank = np.empty_like(by_first)
    rank[by_first] = np.arange(len(by_first))
    class_of = np.empty(n, dtype=np.int64)
    class_of[order] = rank[group]
    return class_of, first[by_first], counts[by_first]


@attrs.frozen
class PairBlock:
    """Candidate space-sharing pairs between classes: class a and class b (a <= b) and each
    one's throughput when sharing, per column (0 where they may not share there)."""

    a: np.ndarray
    b: np.ndarray
    rate_a: np.ndarray
    rate_b: np.ndarray

    def __len__(self) -> int:
        return len(self.a)

    @classmethod
    def empty(cls, k: int) -> PairBlock:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, np.zeros((0, k)), np.zeros((0, k)))


def pair_block(T, sf, counts, pair_rates, threshold: float = 1.0, limit: int | None = None) -> PairBlock:
    """Pairs of classes worth sharing GPUs. `pair_rates(a, b)` gives, for class index arrays a
    and b, each side's throughput per column (NaN or 0: cannot share). A pair is kept on a column
    when the two together do more than `threshold` of their isolated work there (time slicing
    does exactly 1), and only between classes with the same GPU count; at most `limit` pairs,
    the best first."""
    c, k = T.shape
    a, b = np.triu_indices(c)
    keep = (sf[a] == sf[b]) & ((a != b) | (counts[a] >= 2))
    keep &= (T[a] > 0).any(axis=1) & (T[b] > 0).any(axis=1)
    a, b = a[keep], b[keep]
    if not len(a):
        return PairBlock.empty(k)
    ra, rb = pair_rates(a, b)
    ra, rb = np.nan_to_num(ra, nan=0.0), np.nan_to_num(rb, nan=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        combined = np.where((T[a] > 0) & (T[b] > 0), ra / T[a] + rb / T[b], 0.0)
    ok = (ra > 0) & (rb > 0) & (combined > threshold)
    ra, rb = np.where(ok, ra, 0.0), np.where(ok, rb, 0.0)
    best = np.where(ok, combined, 0.0).max(axis=1)
    useful = best > 0
    order = np.argsort(-best[useful], kind="stable")
    if limit is not None:
        order = order[:limit]
    idx = np.flatnonzero(useful)[np.sort(order)]
    return PairBlock(a[idx], b[idx], ra[idx], rb[idx])


class Formulation:
    """The validity constraints and effective throughputs of Gavel's problem over classes.

    Variables: x[c, j] (the time fraction of each member of class c on column j) and, with
    pairs, y[q, j] (total time pair q's member pairs spend together on column j).
    """

    def __init__(self, T: np.ndarray, sf: np.ndarray, counts: np.ndarray, columns: Columns, pairs: PairBlock | None = None):
        self.T = T
        self.sf = np.asarray(sf, dtype=np.float64)
        self.counts = np.asarray(counts, dtype=np.float64)
        self.columns = columns
        self.pairs = pairs if pairs is not None and len(pairs) else None
        self.c, self.k = T.shape
        # Variable indices, set by `add_variables` (y only with pairs): x[c, j], y[q, j].
        self.x: np.ndarray
        self.y: np.ndarray
        self.n_vars = 0

    @property
    def runnable(self) -> np.ndarray:
        """Classes that can run on some column."""
        return np.any(self.T > 0, axis=1)

    def add_variables(self, lp, scaled: bool = False) -> None:
        """Add x (and y). With `scaled`, x is a scaled allocation (Charnes-Cooper: t * X), bounded
        by the program's own rows rather than by 1."""
        top = np.inf if scaled else 1.0
        self.x = lp.variables(self.c * self.k, 0.0, np.where(self.T > 0, top, 0.0).ravel()).reshape(self.c, self.k)
        if self.pairs is not None:
            q = len(self.pairs)
            usable = (self.pairs.rate_a > 0).ravel()
            self.y = lp.variables(q * self.k, 0.0, np.where(usable, np.inf, 0.0)).reshape(q, self.k)
        self.n_vars = lp.n_vars

    # --- the three shared quantities ---
    def throughput(self, scale: np.ndarray | None = None) -> sp.csr_matrix:
        """Effective throughput of one member of each class, times `scale` per class."""
        scale = np.ones(self.c) if scale is None else np.asarray(scale, dtype=np.float64)
        rows = [np.repeat(np.arange(self.c), self.k)]
        cols = [self.x.ravel()]
        vals = [(self.T * scale[:, None]).ravel()]
        if self.pairs is not None:
            p = self.pairs
            for side, rate in ((p.a, p.rate_a), (p.b, p.rate_b)):
                rows.append(np.repeat(side, self.k))
                cols.append(self.y.ravel())
                vals.append((rate * (scale[side] / self.counts[side])[:, None]).ravel())
        return self._matrix(rows, cols, vals, self.c)

    def time(self) -> sp.csr_matrix:
        """Fraction of time each member of a class is given (x, plus its share of pair time)."""
        rows = [np.repeat(np.arange(self.c), self.k)]
        cols = [self.x.ravel()]
        vals = [np.ones(self.c * self.k)]
        if self.pairs is not None:
            p = self.pairs
            for side in (p.a, p.b):
                rows.append(np.repeat(side, self.k))
                cols.append(self.y.ravel())
                vals.append(np.repeat(1.0 / self.counts[side], self.k))
        return self._matrix(rows, cols, vals, self.c)

    def capacity(self) -> sp.csr_matrix:
        """GPUs of each physical type in use, on average (one row per type)."""
        gpu_type = np.tile(self.columns.gpu_type, self.c)
        rows = [gpu_type]
        cols = [self.x.ravel()]
        vals = [np.repeat(self.counts * self.sf, self.k)]
        if self.pairs is not None:
            q = len(self.pairs)
            rows.append(np.tile(self.columns.gpu_type, q))
            cols.append(self.y.ravel())
            vals.append(np.repeat(self.sf[self.pairs.a], self.k))  # a pair uses its GPUs once
        return self._matrix(rows, cols, vals, len(self.columns.capacity))

    def cost(self, price_per_gpu: np.ndarray) -> sp.csr_matrix:
        """Average spend per unit of time (one row): each GPU in use at its column's price,
        counted once for a pair (§4.2: a shared instance is paid for once)."""
        rows = [np.zeros(self.c * self.k, dtype=np.int64)]
        cols = [self.x.ravel()]
        vals = [((self.counts * self.sf)[:, None] * price_per_gpu[None, :]).ravel()]
        if self.pairs is not None:
            rows.append(np.zeros(self.y.size, dtype=np.int64))
            cols.append(self.y.ravel())
            vals.append((self.sf[self.pairs.a][:, None] * price_per_gpu[None, :]).ravel())
        return self._matrix(rows, cols, vals, 1)

    def node_capacity(self) -> tuple[sp.csr_matrix, np.ndarray] | None:
        """Consolidated columns' rows (placement-sensitive columns, on a type whose nodes differ
        in size): a job of g GPUs runs consolidated only on a node with g GPUs or more, so the
        GPUs that jobs of g or more GPUs hold on a type's consolidated column are at most those
        of its nodes that large. Returns (rows, their limits), one row per type and GPU count g
        for which some node of the type is smaller than g; None when there is none."""
        columns = self.columns
        if columns.placement is None or not columns.node_gpus:
            return None
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        limits: list[float] = []
        sizes = np.unique(self.sf)
        for j in range(self.k):
            if columns.placement[j] != CONSOLIDATED:
                continue
            nodes = columns.node_gpus[int(columns.gpu_type[j])]
            for g in sizes[(sizes > nodes.min(initial=np.inf)) & (sizes <= nodes.max(initial=0))].tolist():
                row = len(limits)
                big = np.flatnonzero(self.sf >= g)
                rows.append(np.full(len(big), row))
                cols.append(self.x[big, j])
                vals.append(self.counts[big] * self.sf[big])
                if self.pairs is not None:
                    q = np.flatnonzero(self.sf[self.pairs.a] >= g)
                    rows.append(np.full(len(q), row))
                    cols.append(self.y[q, j])
                    vals.append(self.sf[self.pairs.a[q]])  # (a pair uses its GPUs once)
                limits.append(float(nodes[nodes >= g].sum()))
        if not limits:
            return None
        return self._matrix(rows, cols, vals, len(limits)), np.asarray(limits)

    def validity(self, lp) -> None:
        """Each member's time at most 1; each type's GPUs at most its count (and, with
        placement-sensitive columns, `node_capacity`)."""
        nodes = self.node_capacity()
        if nodes is not None:
            lp.constraints(nodes[0], ub=nodes[1])
        if self.pairs is None and self._x_in_order():
            lp.constraints(self._time_rows(), ub=1.0)
            lp.constraints(self._capacity_rows(), ub=self.columns.capacity)
            return
        lp.constraints(self.time(), ub=1.0)
        lp.constraints(self.capacity(), ub=self.columns.capacity)

    # --- the same rows laid out directly (no pairs; x numbered class by class, column by
    # column, as `add_variables` numbers it): what `_matrix` makes, without sorting ---
    def _x_in_order(self) -> bool:
        x = self.x.ravel()
        return len(x) == 0 or (x[0] + len(x) - 1 == x[-1] and bool(np.all(x[1:] > x[:-1])))

    def _time_rows(self) -> RowBlock:
        n = self.c * self.k
        return RowBlock(np.ones(n), self.x.ravel(), np.arange(0, n + 1, self.k, dtype=np.int64))

    def _capacity_rows(self) -> RowBlock:
        per_class = self.counts * self.sf
        data, indices, ends = [], [], [0]
        for t in range(len(self.columns.capacity)):
            on = self.columns.gpu_type == t
            vals = np.repeat(per_class, int(np.count_nonzero(on)))
            keep = vals != 0
            data.append(vals[keep])
            indices.append(self.x[:, on].ravel()[keep])
            ends.append(ends[-1] + int(np.count_nonzero(keep)))
        return RowBlock(np.concatenate(data), np.concatenate(indices), np.asarray(ends, dtype=np.int64))

    def throughput_rows(self, scale: np.ndarray, rows: np.ndarray, var: int, coefficient: float) -> RowBlock | None:
        """`with_column(throughput(scale)[rows], var, coefficient)` laid out directly, for the
        classes `rows` (ascending) and a variable `var` numbered after x; None when it cannot
        be (pairs, or x not numbered in order)."""
        if (
            self.pairs is not None
            or not self._x_in_order()
            or (len(self.x.ravel()) and var <= self.x.ravel()[-1])
            or not coefficient
        ):
            return None
        vals = (self.T * np.asarray(scale, dtype=np.float64)[:, None])[rows]
        n = len(vals)
        keep = np.concatenate([vals != 0, np.ones((n, 1), dtype=bool)], axis=1)
        data = np.concatenate([vals, np.full((n, 1), float(coefficient))], axis=1)[keep]
        indices = np.concatenate([self.x[rows], np.full((n, 1), var, dtype=np.int64)], axis=1)[keep]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(keep.sum(axis=1), out=indptr[1:])
        return RowBlock(data, indices, indptr)

    def _matrix(self, rows, cols, vals, n_rows) -> sp.csr_matrix:
        rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
        keep = vals != 0
        return sparse_rows(rows[keep], cols[keep], vals[keep], (n_rows, self.n_vars))

    # --- reading a solution ---
    def class_fractions(self, values: np.ndarray) -> np.ndarray:
        return np.clip(values[self.x], 0.0, 1.0)

    def job_pairs(self, values: np.ndarray, class_of: np.ndarray, rows: np.ndarray):
        """The solution's pair time as job pairs: (pairs (p, 2) of job rows, fractions (p, k)),
        each member pair of a class pair getting an equal part of the pair's time."""
        k = self.k
        if self.pairs is None:
            return np.zeros((0, 2), dtype=np.int64), np.zeros((0, k))
        y = np.clip(values[self.y], 0.0, None)
        used = np.flatnonzero(y.max(axis=1) > 1e-9)
        members = [rows[class_of == c] for c in range(self.c)]
        out_pairs, out_frac = [], []
        for q in used.tolist():
            a, b = int(self.pairs.a[q]), int(self.pairs.b[q])
            ma, mb = members[a], members[b]
            if a == b:
                i, j = np.triu_indices(len(ma), 1)
                got = np.column_stack([ma[i], ma[j]])
            else:
                got = np.column_stack([np.repeat(ma, len(mb)), np.tile(mb, len(ma))])
            out_pairs.append(got)
            out_frac.append(np.repeat((y[q] / len(got))[None, :], len(got), axis=0))
        if not out_pairs:
            return np.zeros((0, 2), dtype=np.int64), np.zeros((0, k))
        return np.concatenate(out_pairs), np.clip(np.concatenate(out_frac), 0.0, 1.0)
