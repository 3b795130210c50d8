"""The throughput model: how fast a job runs where it is placed.

One entry point, `ThroughputModel.rates(jobs, rows, placement)`, gives the iterations per
second of each launch: the profile's value for the job's model, batch size, GPU type, GPU count
and spread (one node or not); the pair table's value when two jobs share the launch's GPUs;
one unit of work per second for jobs known only by their duration, slowed by their
`spread_slowdown` when their GPUs span more nodes than they need. A launch spread over several
GPU types runs at the pace of its slowest type. On a cluster with network tiers, a job whose
model has a communication profile runs at its consolidated rate divided by `1 + share`, the
communication share of the tiers its GPUs span (traces/communication.py), instead of at the
spread rate or slowdown. A launch given its own CPU cores and memory (`Placement.cpus`,
`memory_gb`) whose model has a CPU and memory sensitivity profile (traces/resources.py) runs at
its speed on that allocation over its speed at the GPU-proportional share of its machines
(traces/resource_shares.py); a launch given no allocation gets that share, and its rate does not change. The simulator (through the world's books) and the live backend's
predictions both come here, and so do estimates for hypothetical placements (`estimate`), which
job preparation and elements use.

Elastic jobs (an `elastic_model` row, from an elastic profile, traces/goodput.py) run at their
goodput: samples/s from Pollux's throughput model for their GPU count, the machines those span
and their global batch size, times the statistical efficiency of that batch size.

A new factor is added here: it reads what it needs from the job table and from `Placement`, and
callers do not change.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Protocol

import attrs
import numpy as np

from roundhouse.traces import resource_shares
from roundhouse.traces.jobs import JobReader

if TYPE_CHECKING:
    from roundhouse.traces.communication import CommunicationTable, Tiers
    from roundhouse.traces.goodput import ElasticProfile
    from roundhouse.traces.resources import ResourceTable

_TIER_TABLE = 1 << 18  # (entries of `tier_sizes`' dense tables at most: 2 MB)
_NO_ROWS = np.zeros(0, dtype=np.int64)
# Launches at most that `_RateCache._few` prices one by one (a round's arrivals); more go by arrays.
_FEW = 64


class ClusterShape(Protocol):
    """What the model needs to know of a cluster (runtime/cluster.py's Cluster has it)."""

    gpu_types: tuple[str, ...]
    gpu_type: np.ndarray  # GPU type code per GPU
    gpu_node: np.ndarray  # node per GPU
    n_nodes: int
    max_gpus_per_node: int
    node_cpus: np.ndarray  # CPU cores per node
    node_memory_gb: np.ndarray  # memory per node
    node_rack: np.ndarray  # rack per node
    n_racks: int
    tiers: Tiers | None  # network tiers (None: no communication model)

    def nodes_needed(self, gpus): ...  # the fewest nodes a job of this many GPUs spans


class PlacementError(Exception):
    """A launch the model cannot give a rate (two jobs sharing GPUs with no pair entry). The
    runtime reports it as a plan error, naming the element that made the plan."""


@attrs.frozen
class Placement:
    """Where a set of launches runs: launch i holds `counts[i]` GPUs, the next ones in `gpus`
    (grouped by launch); `batch[i]` its batch size (0 or None: the job's own); `partner[i]`
    the row of a job sharing exactly those GPUs (-1 or None: none); `cpus[i]` and
    `memory_gb[i]` the CPU cores and GB of memory that come with its GPUs, all machines together
    (None: the GPU-proportional share)."""

    gpus: np.ndarray
    counts: np.ndarray
    starts: np.ndarray
    batch: np.ndarray | None = None
    partner: np.ndarray | None = None
    cpus: np.ndarray | None = None
    memory_gb: np.ndarray | None = None

    @classmethod
    def of(cls, gpus, counts, batch=None, partner=None, cpus=None, memory_gb=None) -> Placement:
        counts = np.asarray(counts, dtype=np.int64)
        return cls(np.asarray(gpus, dtype=np.int64), counts, counts.cumsum() - counts, batch, partner, cpus, memory_gb)


class ThroughputModel:
    """Rates of jobs on placements, from a throughput profile and a pair table."""

    def __init__(
        self,
        profile,
        cluster: ClusterShape,
        pairs=None,
        communication: CommunicationTable | None = None,
        elastic: ElasticProfile | None = None,
    ):
        self.profile = profile
        self.cluster = cluster
        # Elastic applications (traces/goodput.py): throughput from GPU count, placement and
        # batch size, and statistical efficiency; None: no job of the run is elastic.
        self.elastic = elastic
        self._pairs = pairs  # the pair table, or where to load it from when a pair first runs
        self._gpu_share: tuple[np.ndarray, np.ndarray] | None = None  # per GPU: its machine's cores and GB over its GPUs
        # The CPU and memory sensitivity profile, loaded when an allocation first needs it.
        self._resources: ResourceTable | None = None
        # The communication profile, on a cluster with network tiers only (None: the model is off).
        self.communication = None
        if getattr(cluster, "tiers", None) is not None:
            from roundhouse.traces.communication import CommunicationTable

            self.communication = communication or CommunicationTable.load()
        self._cache = _RateCache(len(cluster.gpu_types))

    @property
    def pairs(self):
        """The pair-throughput table (space sharing), loaded on first use."""
        from roundhouse.traces.pairs import PairTable

        if not isinstance(self._pairs, PairTable):
            self._pairs = PairTable.load(self._pairs)
        return self._pairs

    # The CPU cores and memory that come with GPUs, and a launch's own allocation of them
    # (traces/resource_shares.py).
    resources = property(resource_shares.resources)
    gpu_shares = resource_shares.gpu_shares
    proportional = resource_shares.proportional
    resource_factor = resource_shares.resource_factor

    def efficiency(self, jobs: JobReader, rows: np.ndarray, batch: np.ndarray) -> np.ndarray:
        """Statistical efficiency of job `rows[i]` at global batch size `batch[i]`: the progress
        one sample makes, relative to a sample at its application's initial batch size (1 where
        no efficiency model applies)."""
        out = np.ones(len(rows))
        if self.elastic is not None and len(rows) and jobs.has_column("elastic_model"):
            app = jobs.column("elastic_model")[rows]
            sel = (app >= 0).nonzero()[0]
            if len(sel):
                out[sel] = self.elastic.efficiency(app[sel], np.asarray(batch)[sel])
        return out

    def estimate(self, models, batch, gpu_type: str, gpus, consolidated: bool = True) -> np.ndarray:
        """Rates of jobs (by model and batch size) on `gpus` GPUs of `gpu_type`, on one node or
        spread; 0 where the profile has no entry."""
        return self.profile.rates(models, batch, gpu_type, gpus, consolidated)

    def rates(
        self,
        jobs: JobReader,
        rows: np.ndarray,
        placement: Placement,
        any_model: bool = True,
        compute: np.ndarray | None = None,
    ) -> np.ndarray:
        """Iterations per second of job `rows[i]` on launch i of `placement`. `any_model`:
        whether any job of the run has a profiled model (without one, only the spread slowdown
        of jobs known by duration can matter). `compute`, if given (as long as `rows`), is
        filled with each launch's rate without communication (the same where the
        communication model does not apply)."""
        rates = np.ones(len(rows))
        if not len(rows):
            return rates
        counts = placement.counts
        # Launches the communication model covers: a model with a communication profile, on more
        # than one GPU.
        talk = None
        table, tiers = self.communication, self.cluster.tiers
        comm = _NO_ROWS
        if table is not None:
            comm = jobs.column("comm_model")[rows]
            talk = ((comm >= 0) & (counts > 1)).nonzero()[0]
        has_model = jobs.column("has_model")[rows] if any_model else np.zeros(len(rows), dtype=bool)
        elastic = None
        if self.elastic is not None and any_model and jobs.has_column("elastic_model"):
            app = jobs.column("elastic_model")[rows]
            elastic = (app >= 0).nonzero()[0]
            if len(elastic):
                has_model = has_model.copy()
                has_model[elastic] = False  # their rates come from the elastic profile, below
                if talk is not None:
                    talk = talk[app[talk] < 0]
            else:
                elastic = None
        every = bool(has_model.all())
        if not every and counts[counts.argmax()] > 1:
            self._spread_slowdown(jobs, rows, placement, rates, has_model, talk)
        if every or has_model.any():
            self._profiled(jobs, rows, placement, rates, None if every else has_model.nonzero()[0], talk)
        if elastic is not None:
            rates[elastic] = self._elastic_rates(jobs, rows, placement, elastic)
        if placement.partner is not None and np.count_nonzero(placement.partner >= 0):
            rates = self._pair_rates(jobs, rows, placement, rates)
        factor = self.resource_factor(jobs, rows, placement)
        if factor is not None:  # starved or fed CPU and memory: compute runs slower or faster
            rates = rates * factor
        if compute is not None:
            compute[:] = rates
        if talk is not None and len(talk) and table is not None and tiers is not None:
            sizes = self.tier_sizes(placement, talk)
            rates[talk] /= 1.0 + table.share(comm[talk], sizes, tiers)
        return rates

    def _elastic_rates(self, jobs: JobReader, rows, placement: Placement, launches: np.ndarray) -> np.ndarray:
        """Goodput of elastic jobs (traces/goodput.py): from their GPU count, how many machines
        those span, and their global batch size."""
        assert self.elastic is not None
        cluster, counts = self.cluster, placement.counts[launches]
        owner = np.arange(len(launches)).repeat(counts)
        offset = np.arange(int(counts.sum())) - (counts.cumsum() - counts).repeat(counts)
        node = cluster.gpu_node[placement.gpus[placement.starts[launches].repeat(counts) + offset]]
        nodes = np.bincount(np.unique(owner * cluster.n_nodes + node) // cluster.n_nodes, minlength=len(launches))
        batch = jobs.column("batch_size")[rows[launches]]
        if placement.batch is not None:
            batch = np.where(placement.batch[launches] > 0, placement.batch[launches], batch)
        return self.elastic.rates(jobs.column("elastic_model")[rows[launches]], nodes, counts, batch)

    def tier_sizes(self, placement: Placement, launches: np.ndarray) -> np.ndarray:
        """(launches, 3): the ring sizes of each launch at each tier: the most GPUs it has on
        one machine, the most machines it has in one rack, and how many racks it spans. An
        uneven spread is as slow as its largest part."""
        cluster = self.cluster
        sizes = np.empty((len(launches), 3), dtype=np.int64)
        # GPUs per (launch, machine) and machines per (launch, rack) counted into dense tables,
        # some launches at a time so that a table stays within a few MB.
        step = max(1, _TIER_TABLE // cluster.n_nodes)
        for lo in range(0, len(launches), step):
            part = launches[lo : lo + step]
            n, c = len(part), placement.counts[part]
            offset = np.arange(int(c.sum())) - (c.cumsum() - c).repeat(c)
            nodes = cluster.gpu_node[placement.gpus[placement.starts[part].repeat(c) + offset]]
            keys = np.arange(n).repeat(c) * cluster.n_nodes + nodes
            per_machine = np.bincount(keys, minlength=n * cluster.n_nodes).reshape(n, cluster.n_nodes)
            racks = (np.arange(n)[:, None] * cluster.n_racks + cluster.node_rack)[per_machine > 0]
            per_rack = np.bincount(racks, minlength=n * cluster.n_racks).reshape(n, cluster.n_racks)
            sizes[lo : lo + n, 0] = per_machine.max(axis=1)
            sizes[lo : lo + n, 1] = per_rack.max(axis=1)
            sizes[lo : lo + n, 2] = np.count_nonzero(per_rack, axis=1)
        return sizes

    def _profiled(
        self, jobs: JobReader, rows, placement: Placement, rates: np.ndarray, idx: np.ndarray | None, talk=None
    ) -> None:
        """Profile rates of the launches `idx` (None: every launch). A round's launches are a few
        jobs each, so what this costs is mostly numpy calls made per call: a cluster of one GPU
        type skips working out types, and launches all of profiled jobs skip selecting them."""
        cluster = self.cluster
        gpus, counts, starts = placement.gpus, placement.counts, placement.starts
        nodes = cluster.gpu_node[gpus]
        one_node = np.minimum.reduceat(nodes, starts) == np.maximum.reduceat(nodes, starts)
        if talk is not None and len(talk):
            one_node[talk] = True  # their compute is the consolidated rate; the tiers add communication
        if len(cluster.gpu_types) == 1:  # (every GPU is of type 0: no launch spans types)
            types = t_low = None
            uniform, mixed = idx, _NO_ROWS
        else:
            types = cluster.gpu_type[gpus]
            t_low, t_high = np.minimum.reduceat(types, starts), np.maximum.reduceat(types, starts)
            if idx is None:
                idx = np.arange(len(rows))
            same = t_low[idx] == t_high[idx]
            uniform, mixed = idx[same], idx[~same]

        def models_and_batch() -> tuple[np.ndarray, np.ndarray]:
            # (read only where the cache lacks a rate: a launch whose rate the run has seen needs neither)
            batch = jobs.column("batch_size")[rows]
            if placement.batch is not None:
                batch = np.where(placement.batch > 0, placement.batch, batch)
            return jobs.column("model")[rows], batch

        def look_up(sel: np.ndarray) -> np.ndarray:
            models, batch = models_and_batch()
            low = np.zeros(len(sel), dtype=np.int64) if t_low is None else t_low[sel]
            keys = np.stack([low, counts[sel], one_node[sel]], axis=1)
            out = np.empty(len(sel))
            for key in np.unique(keys, axis=0):
                at = (keys == key).all(axis=1)
                t, count, consolidated = (int(k) for k in key)
                out[at] = self.estimate(models[sel[at]], batch[sel[at]], cluster.gpu_types[t], count, bool(consolidated))
            return out

        if uniform is None:  # every launch, all on one type
            if placement.batch is None:
                rates[:] = self._cache.rates(jobs, rows, None, counts, one_node, None, look_up)
            else:
                rates[:] = look_up(np.arange(len(rows)))
        elif placement.batch is None and len(uniform):
            # A job's own batch size: its rate there was looked up before, unless the
            # (model, batch, type, count, one node) is new to the run.
            rates[uniform] = self._cache.rates(
                jobs,
                rows[uniform],
                None if t_low is None else t_low[uniform],
                counts[uniform],
                one_node[uniform],
                uniform,
                look_up,
            )
        elif len(uniform):
            rates[uniform] = look_up(uniform)
        if len(mixed) and types is not None:  # (rare: jobs over several GPU types; only a cluster of several has them)
            models, batch = models_and_batch()
            for j in mixed.tolist():
                on = np.unique(types[starts[j] : starts[j] + counts[j]])
                got = [
                    self.profile.rate(models[j], batch[j], cluster.gpu_types[t], int(counts[j]), bool(one_node[j])) for t in on
                ]
                rates[j] = min(r or 0.0 for r in got)

    def _spread_slowdown(self, jobs: JobReader, rows, placement: Placement, rates: np.ndarray, has_model, talk=None) -> None:
        """Jobs known by duration run `spread_slowdown` times slower when their GPUs span more
        nodes than they need (traces/placement.py); profiled jobs get the profile's spread rate,
        and jobs under the communication model (`talk`) their tiers' share instead."""
        if not jobs.has_column("spread_slowdown"):
            return
        counts = placement.counts
        # Only multi-GPU jobs known by duration with a slowdown can lose by spreading.
        slow = (counts > 1) & ~has_model
        if talk is not None and len(talk):
            slow[talk] = False
        candidates = slow.nonzero()[0]
        if len(candidates):
            factor = jobs.column("spread_slowdown")[rows[candidates]]
            candidates, factor = candidates[factor > 1.0], factor[factor > 1.0]
        if not len(candidates):
            return
        cluster, starts = self.cluster, placement.starts
        c = counts[candidates]
        owner = np.arange(len(candidates)).repeat(c)
        offset = np.arange(int(c.sum())) - (c.cumsum() - c).repeat(c)
        nodes = cluster.gpu_node[placement.gpus[starts[candidates].repeat(c) + offset]]
        nodes_used = np.bincount(np.unique(owner * cluster.n_nodes + nodes) // cluster.n_nodes, minlength=len(candidates))
        spread = nodes_used > cluster.nodes_needed(c)
        rates[candidates[spread]] /= factor[spread]

    def _pair_rates(self, jobs: JobReader, rows, placement: Placement, rates: np.ndarray) -> np.ndarray:
        """Launch throughputs with each paired launch at its pair throughput (the pair table's
        entry for the two models on that GPU type and count)."""
        partner, starts = placement.partner, placement.starts
        if partner is None:  # no launch has a partner
            return rates
        idx = np.flatnonzero(partner >= 0)
        position = {int(r): i for i, r in enumerate(rows.tolist())}
        other = np.array([position[int(p)] for p in partner[idx].tolist()], dtype=np.int64)
        types = self.cluster.gpu_type[placement.gpus[starts[idx]]]
        rates = rates.copy()
        models, batch, job_id = jobs.column("model"), jobs.column("batch_size"), jobs.column("job_id")
        names = self.cluster.gpu_types
        for t in np.unique(types).tolist():
            sel = idx[types == t]
            mates = other[types == t]
            a, b = rows[sel], rows[mates]
            ra, _ = self.pairs.rates(models[a], batch[a], models[b], batch[b], names[t], placement.counts[sel])
            bad = ~(ra > 0)
            if bad.any():
                i, j = int(sel[bad][0]), int(mates[bad][0])
                what = "has no entry for" if np.isnan(ra[bad][0]) else "says cannot share:"
                raise PlacementError(
                    f"plan launches jobs {job_id[rows[i]]} ({models[rows[i]]}) and {job_id[rows[j]]} ({models[rows[j]]}) "
                    f"on the same {placement.counts[i]} {names[t]} GPU(s), but the pair table {what} that pair"
                )
            rates[sel] = ra
        return rates


class _RateCache:
    """Profile rates already looked up, by job configuration (model and batch size) and launch
    shape (GPU type, GPU count, one node or not): most launches of a long run repeat a shape
    its job ran in before, and the profile's dictionary, asked job by job, costs far more
    than an array look-up. Its size follows the distinct configurations and shapes, not the
    jobs (each row only remembers its configuration's number)."""

    def __init__(self, n_types: int):
        self._n_types = n_types
        self._jobs: JobReader | None = None
        self._known: dict[tuple, float] = {}  # `_few`'s rates: by configuration and shape, not by row
        self._reset()

    def _reset(self) -> None:
        self._config_of_row = np.full(0, -1, dtype=np.int64)
        self._configs: dict[tuple[str, int], int] = {}
        self._column_of_shape = np.full(0, -1, dtype=np.int64)
        self._n_columns = 0  # shapes seen: columns of the table in use
        self._table = np.full((0, 0), np.nan)

    def _few(self, jobs: JobReader, rows, t, counts, one_node, at: np.ndarray | None, look_up) -> np.ndarray:
        """`rates` for a few launches, one by one: a dictionary look-up each costs less than
        the dozen numpy calls `rates` makes whatever the launches' number. Keyed by (model,
        batch size, GPU type, GPU count, one node)."""
        known = self._known
        models = jobs.column("model")[rows].tolist()
        batch = jobs.column("batch_size")[rows].tolist()
        types = itertools.repeat(0) if t is None else t.tolist()
        out = []
        for i, key in enumerate(zip(models, batch, types, counts.tolist(), one_node.tolist())):
            rate = known.get(key)
            if rate is None:  # (new to the run: the profile asked, as `rates` asks it)
                rate = known[key] = float(look_up(np.array([i]) if at is None else at[i : i + 1])[0])
            out.append(rate)
        return np.array(out, dtype=np.float64)

    def rates(self, jobs: JobReader, rows, t, counts, one_node, at: np.ndarray | None, look_up) -> np.ndarray:
        """Rates of `rows` on launches of these shapes (`t` None: all of GPU type 0);
        `look_up(at[i...])` gives the ones not seen before (`at` None: the launches themselves)."""
        if len(rows) <= _FEW:  # (a round's arrivals: a dictionary costs less than arrays)
            return self._few(jobs, rows, t, counts, one_node, at, look_up)
        if jobs is not self._jobs:  # another job table: its rows are other jobs
            self._jobs = jobs
            self._reset()
        if len(self._config_of_row) < len(jobs):
            grown = np.full(max(len(jobs), 2 * len(self._config_of_row)), -1, dtype=np.int64)
            grown[: len(self._config_of_row)] = self._config_of_row
            self._config_of_row = grown
        config = self._config_of_row[rows]
        new = rows[config < 0]  # (rows the table has not seen)
        if len(new):
            # (a batch size is a whole number: as a key, 32 and 32.0 are one)
            configs = self._configs
            keys = zip(jobs.column("model")[new].tolist(), jobs.column("batch_size")[new].tolist())
            self._config_of_row[new] = [configs.setdefault(key, len(configs)) for key in keys]
            config = self._config_of_row[rows]
        shape = counts * (2 * self._n_types) + one_node if t is None else (counts * self._n_types + t) * 2 + one_node
        top = int(shape.max())
        if len(self._column_of_shape) <= top:
            grown = np.full(2 * top + 2, -1, dtype=np.int64)
            grown[: len(self._column_of_shape)] = self._column_of_shape
            self._column_of_shape = grown
        column = self._column_of_shape[shape]
        if column.min() < 0:
            for k in np.unique(shape[column < 0]).tolist():
                self._column_of_shape[k] = self._n_columns
                self._n_columns += 1
            column = self._column_of_shape[shape]
        need = (len(self._configs), self._n_columns)
        if self._table.shape[0] < need[0] or self._table.shape[1] < need[1]:
            table = np.full((max(need[0], 2 * self._table.shape[0]), max(need[1], 2 * self._table.shape[1])), np.nan)
            table[: self._table.shape[0], : self._table.shape[1]] = self._table
            self._table = table
        out = self._table[config, column]
        missing = np.isnan(out)
        if missing.any():
            sel = missing.nonzero()[0]
            out[sel] = look_up(sel if at is None else at[sel])
            self._table[config[sel], column[sel]] = out[sel]
        return out
