"""Tiresias' placement: consolidate only the jobs that need it, spread the rest to limit
fragmentation. Two ways to tell which jobs need it: the tensor-size skew that Tiresias'
profiler measures (SkewAwarePlacer), or a profile of each model's measured slowdown when
spread, Blox's "Tiresias+" (ProfiledPlacer). Both share the Placer steps of placer.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.elements.placement.packing import choose_consolidated
from roundhouse.elements.placement.placer import Placer
from roundhouse.runtime.element import element, element_family
from roundhouse.runtime.types import Ranking
from roundhouse.runtime.values import positive

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element_family
class _Selective(Placer):
    """Consolidates the jobs `sensitive` picks (and any the ranking asks to); places the others
    on the GPUs that fragment the cluster least.

    Counters:
        consolidated: waiting multi-GPU jobs this round that must be consolidated.
    """

    def sensitive(self, ctx: RoundContext, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def one_node(self, ctx: RoundContext, ranking: Ranking) -> np.ndarray:
        picked = self.sensitive(ctx, ranking.rows) & (ranking.gpus > 1)
        if ranking.consolidate is not None:
            picked |= np.asarray(ranking.consolidate, dtype=bool)
        self.counters["consolidated"] = int(np.count_nonzero(picked & ~(ctx.jobs.column("held")[ranking.rows] > 0)))
        return picked

    def choose(self, cluster, available, want, types, one_node):
        if one_node:
            return choose_consolidated(cluster, available, want, types)
        return choose_fewest_holes(cluster, available, want, types)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self.counters["consolidated"] = 0


def choose_fewest_holes(cluster, available: np.ndarray, want: int, types: list[int]) -> np.ndarray | None:
    """GPUs that leave the cluster least fragmented: one node if the job fits in one (the node
    with the fewest available GPUs that holds it), else the leftover GPUs of the fullest nodes
    first, so that whole free nodes stay whole for jobs that must be consolidated."""
    for t in types:
        mask = available if len(cluster.gpu_types) == 1 else available & cluster.type_mask[t]
        counts = cluster.per_node(mask)
        if counts.sum() < want:
            continue
        if want <= cluster.max_gpus_per_node and (counts >= want).any():
            return choose_consolidated(cluster, available, want, [t])
        ids = np.flatnonzero(mask)
        order = np.argsort(counts[cluster.gpu_node[ids]], kind="stable")  # fullest nodes first
        return np.sort(ids[order[:want]])
    return None


@element
class SkewAwarePlacer(_Selective):
    """Tiresias' placement: consolidate jobs whose model's tensor-size skew exceeds `packlimit`;
    spread the others where they fragment the cluster least.

    A model with one dominant tensor makes one parameter server hot, so its job slows down when
    its workers span machines (Tiresias §3.3, Table 6: VGG and AlexNet have a largest tensor of
    61-77% of the model, the others under 15%). The skew is the job's `tensor_skew` (from its
    trace or the placement table, traces/profiles/placement.csv); a job whose skew is unknown is
    consolidated. Other jobs fit in one node when one has room, else take the leftover GPUs of
    the fullest nodes.

    Arguments:
        packlimit: the skew above which a job is consolidated (Tiresias gives no value; any cut
          between 0.15 and 0.61 separates Table 6's groups).
    See also: ProfiledPlacer, Consolidated, TiresiasLas
    Paper: Tiresias (NSDI'19) §3.3 and Table 6; Blox (EuroSys'24) §4.3 (Fig 10).
    """

    state = ()

    packlimit: float = attrs.field(default=0.3, validator=positive)

    def sensitive(self, ctx: RoundContext, rows: np.ndarray) -> np.ndarray:
        skew = ctx.jobs.column("tensor_skew")[rows]
        return np.isnan(skew) | (skew > self.packlimit)


@element
class ProfiledPlacer(_Selective):
    """Blox's "Tiresias+": consolidate exactly the jobs whose profile says spreading slows them
    down; spread the others where they fragment the cluster least.

    A job is placement-sensitive when its `spread_slowdown` (how much slower it runs when its
    GPUs span more nodes than it needs: from the throughput profile's measured spread rates,
    the job's trace, or the placement table) exceeds `tolerance`. Unknown slowdowns count as
    not sensitive.

    Arguments:
        tolerance: the slowdown above which a job is consolidated (1.05: more than 5% slower).
    See also: SkewAwarePlacer, Consolidated
    Paper: Blox (EuroSys'24) §4.3 (Fig 11, Tiresias+); Tiresias (NSDI'19) §3.3.
    """

    state = ()

    tolerance: float = attrs.field(default=1.05, validator=positive)

    def sensitive(self, ctx: RoundContext, rows: np.ndarray) -> np.ndarray:
        slowdown = ctx.jobs.column("spread_slowdown")[rows]
        with np.errstate(invalid="ignore"):
            return slowdown > self.tolerance
