"""Throughput estimation for pairs that were never measured (Gavel §3.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active
from roundhouse.runtime.values import FilePath, at_most, existing_file, non_negative, positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


_MU = 1e-2  # PMF regularization (Gavel's value)
# The reference of a job that cannot be fingerprinted (no model, or one the profile does not
# know): it has no speeds to compare with the references', so it is never paired.
UNMATCHED = -1


def complete(matrix: np.ndarray, rank: int, mu: float = _MU, iterations: int = 60, seed: int = 0) -> np.ndarray:
    """Low-rank completion of a matrix with NaN for missing entries (probabilistic matrix
    factorization by alternating least squares): minimize the squared error on the known entries
    plus mu times the squared norms of the factors. Known entries are kept as they are."""
    known = ~np.isnan(matrix)
    values = np.where(known, matrix, 0.0)
    n, m = matrix.shape
    rank = max(1, min(rank, n, m))
    rng = np.random.default_rng(seed)
    u = rng.normal(scale=0.1, size=(n, rank))
    v = rng.normal(scale=0.1, size=(m, rank))
    eye = mu * np.eye(rank)
    weight = known.astype(np.float64)
    for _ in range(iterations):
        # Each row's (then column's) factor is a small ridge regression on its known entries,
        # all solved at once as a batch of rank x rank systems.
        gram = np.einsum("ij,jk,jl->ikl", weight, v, v) + eye
        u = np.linalg.solve(gram, ((weight * values) @ v)[:, :, None])[:, :, 0]
        gram = np.einsum("ij,ik,il->jkl", weight, u, u) + eye
        v = np.linalg.solve(gram, ((weight * values).T @ u)[:, :, None])[:, :, 0]
    return np.where(known, matrix, u @ v.T)


class PairEstimates:
    """What a PairEstimator knows, as of one round: a port value (PairEstimator to Gavel's
    solvers), immutable. For each job it has seen, the reference configuration it matched;
    the references' pairwise fingerprints; the pairs measured so far and a table measured in
    advance. Solvers ask it for the throughputs of job pairs sharing GPUs.

    Read-only by convention: it holds plain dicts, not read-only views, because a simulation's
    fork and save copy it with everything else (deepcopy and pickle cannot copy a view)."""

    __slots__ = ("_match", "_R", "_types", "_known", "_measured", "_jobs")

    def __init__(self, match, R, types, known, measured, jobs):
        self._match = match  # (built anew each round by its PairEstimator)
        self._R, self._types, self._known = R, tuple(types), known
        self._measured = dict(measured)  # (its PairEstimator's own keeps growing)
        self._jobs = jobs

    def reference_of(self, rows: np.ndarray) -> np.ndarray:
        """The reference configuration each job matched (0 for a job not seen yet, UNMATCHED
        for one without a profiled model)."""
        match = self._match
        return np.array([match.get(r, 0) for r in rows.tolist()], dtype=np.int64)

    def pair_rates(self, rows_a: np.ndarray, rows_b: np.ndarray, gpu_type: str, gpus) -> tuple[np.ndarray, np.ndarray]:
        """Each job's throughput when the pair shares `gpus` GPUs of `gpu_type`: measured where
        known, estimated otherwise (NaN: the type is not in the cluster, or a job has no
        profiled model and so no estimate)."""
        table = self._jobs
        models, batch = table.column("model"), table.column("batch_size")
        gpus = np.broadcast_to(np.asarray(gpus), (len(rows_a),))
        ra, rb = np.full(len(rows_a), np.nan), np.full(len(rows_a), np.nan)
        if gpu_type not in self._types:
            return ra, rb
        ref_a, ref_b = self.reference_of(rows_a), self.reference_of(rows_b)
        matched = (ref_a != UNMATCHED) & (ref_b != UNMATCHED)
        if self._known is not None:
            ra, rb = self._known.rates(models[rows_a], batch[rows_a], models[rows_b], batch[rows_b], gpu_type, gpus)
        t = self._types.index(gpu_type)
        iso = table.type_rates
        for i in np.flatnonzero(np.isnan(ra) & matched).tolist():
            a, b = int(rows_a[i]), int(rows_b[i])
            key = (models[a], int(batch[a]), models[b], int(batch[b]), gpu_type, int(gpus[i]))
            seen = self._measured.get(key)
            if seen is not None:
                ra[i], rb[i] = seen
                continue
            ra[i] = self._R[ref_a[i], t, ref_b[i]] * iso[a, t]
            rb[i] = self._R[ref_b[i], t, ref_a[i]] * iso[b, t]
        ra[~matched], rb[~matched] = np.nan, np.nan
        return ra, rb


@element
class PairEstimator(Element):
    """Estimate space-sharing throughputs of job pairs nobody measured, from reference jobs (§3.3).

    Each new job is profiled against reference job configurations: sharing a GPU with each,
    on each type, it runs at some fraction of its isolated speed (its fingerprint). Entries not
    profiled (a fraction `1 - profiled` of them, or pairs reality cannot say) are filled by
    low-rank matrix completion together with the references' own pairwise fingerprints, and the
    job is matched to the reference whose fingerprint is nearest (cosine distance). A job
    without a model, or with one the profile does not know, has no fingerprint and is never
    paired. A pair's
    estimated throughput is the matched references' pair throughput, relative to their isolated
    speed, times each job's isolated speed. Pairs in the `known` table, and pairs of job
    configurations that have already run together (measured online), use measured values.
    Connect its `estimates` to a solver's `pairs` port.

    Ports:
        active: admitted, unfinished jobs (fingerprinted as they arrive).
        estimates: what it knows this round, for the solvers (PairEstimates).
    Arguments:
        references: how many reference job configurations (the profile's first single-GPU ones; all of them when it has fewer).
        profiled: fraction of fingerprint entries measured; the rest are completed.
        rank: rank of the matrix completion (at most the fingerprint matrix's smaller side).
        known: a pair-throughput table the scheduler has measured in advance (default: none).
        seed: seed for which entries are profiled (default: derived from the graph's seed).
    Counters:
        fingerprinted: jobs matched to a reference.
        measured: job-configuration pairs seen running together so far.
    Cost: O(n) over the pool's jobs n (a look-up each, in Python), plus measuring each job new to it.
    See also: MaxMinFairness, GavelRounds
    Paper: Gavel (OSDI'20) §3.3 and §7.6 (Fig. 14); Quasar (ASPLOS'14) for the method.
    """

    state = ("_R", "_by_config", "_match", "_measured", "_rng", "estimates")
    fixed = ("_known", "_ref_iso", "_refs", "_types")

    category = "solver"
    inputs = (In("active", Active),)
    outputs = (Out("estimates", PairEstimates),)

    references: int = attrs.field(default=26, validator=positive)
    profiled: float = attrs.field(default=1.0, validator=[non_negative, at_most(1.0)])
    rank: int = attrs.field(default=10, validator=positive)
    known: FilePath | None = attrs.field(default=None, validator=existing_file)
    seed: int | None = attrs.field(default=None, validator=non_negative)

    def start(self, ctx: RoundContext) -> None:
        from roundhouse.traces.pairs import PairTable

        self._rng = ctx.rng(self.seed)
        self._known = PairTable.load(self.known) if self.known is not None else None
        profile, reality = ctx.profile, ctx.pairs
        self._types = list(ctx.cluster.gpu_types)
        self._refs = profile.configs(1)[: self.references]
        refs = self._refs
        self._ref_iso = np.array([[profile.rate(m, b, t, 1) or 0.0 for t in self._types] for m, b in refs])
        # The references' fingerprints, profiled offline: R[i, t, j] = speed of reference i with
        # reference j on type t, relative to i alone.
        R = np.zeros((len(refs), len(self._types), len(refs)))
        for t, name in enumerate(self._types):
            for i, (mi, bi) in enumerate(refs):
                got_a, _ = reality.rates([mi] * len(refs), bi, [m for m, _ in refs], [b for _, b in refs], name, 1)
                R[i, t] = np.nan_to_num(got_a, nan=0.0) / max(self._ref_iso[i, t], 1e-300)
        self._R = np.clip(R, 0.0, 1.0)
        self._match: dict[int, int] = {}  # job row -> reference index
        self._by_config: dict[tuple, int] = {}
        self._measured: dict[tuple, tuple[float, float]] = {}
        self.estimates: PairEstimates | None = None  # the last emitted (for tools and tests)
        self.counters.update(fingerprinted=0, measured=0)

    def tick(self, ctx: RoundContext, active: Active) -> PairEstimates:
        match = {}
        for r in active.rows.tolist():
            got = self._match.get(r)
            if got is None:
                got = self._match[r] = self._fingerprint(ctx, r)
            match[r] = got
        self._observe(ctx)
        self.estimates = PairEstimates(match, self._R, self._types, self._known, self._measured, ctx.jobs)
        return self.estimates

    # --- inside ---
    def _fingerprint(self, ctx: RoundContext, row: int) -> int:
        table = ctx.jobs
        model = table.column("model")[row]
        refs, types = self._refs, self._types
        if model is None:
            return UNMATCHED
        batch = int(table.column("batch_size")[row])
        iso = np.array([ctx.profile.rate(model, batch, t, 1) or 0.0 for t in types])
        if not (iso > 0).any():
            return UNMATCHED
        mask = self._rng.random((len(types), len(refs))) < self.profiled
        cache_key = (model, batch) if mask.all() else None
        if cache_key is not None and cache_key in self._by_config:
            self.counters["fingerprinted"] += 1
            return self._by_config[cache_key]
        row_vec = np.full((len(types), len(refs)), np.nan)
        for t, name in enumerate(types):
            got, _ = ctx.pairs.rates([model] * len(refs), batch, [m for m, _ in refs], [b for _, b in refs], name, 1)
            row_vec[t] = got / max(iso[t], 1e-300)
        row_vec[~mask] = np.nan
        matrix = np.vstack([self._R.reshape(len(refs), -1), row_vec.reshape(1, -1)])
        filled = np.clip(complete(matrix, self.rank), 0.0, 1.0)[-1]
        refs_flat = self._R.reshape(len(refs), -1)
        norms = np.linalg.norm(refs_flat, axis=1) * max(np.linalg.norm(filled), 1e-300)
        similarity = refs_flat @ filled / np.maximum(norms, 1e-300)
        match = int(np.argmax(similarity))
        if cache_key is not None:
            self._by_config[cache_key] = match
        self.counters["fingerprinted"] += 1
        return match

    def _observe(self, ctx: RoundContext) -> None:
        """Pairs running now were measured: remember their speeds by job configuration."""
        running = ctx.running_rows
        if not len(running) or ctx.co_holder is None:
            return
        table = ctx.jobs
        partner = table.column("partner")[running]
        paired = running[partner >= 0]
        if not len(paired):
            return
        models, batch, rate = table.column("model"), table.column("batch_size"), table.column("rate")
        placed, gpus = table.column("placed_type"), table.column("gpus")
        for a in paired.tolist():
            b = int(table.column("partner")[a])
            key = (models[a], int(batch[a]), models[b], int(batch[b]), self._types[placed[a]], int(gpus[a]))
            if key not in self._measured:
                self._measured[key] = (float(rate[a]), float(rate[b]))
                self.counters["measured"] += 1
