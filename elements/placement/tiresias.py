"""Tiresias' placement: consolidate only the jobs that need it, spread the rest to limit
fragmentation. Two ways to tell which jobs need it: the tensor-size skew that Tiresias'
profiler measures (SkewAwarePlacer), or a profile of each model's measured slowdown when
spread, Blox's "Tiresias+" (ProfiledPlacer). TiresiasDally is Tiresias as Dally's evaluation
ran it on a cluster of network tiers. All share the Placer steps of placer.py."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from roundhouse.elements.placement.dally import fewest_machines_in_rack, fewest_racks, tightest_rack
from roundhouse.elements.placement.packing import _of_type, choose_consolidated, first_on_node
from roundhouse.elements.placement.placer import Placer
from roundhouse.errors import SchedError
from roundhouse.runtime.element import element, element_family
from roundhouse.runtime.types import Plan, Ranking
from roundhouse.runtime.values import describe, positive
from roundhouse.traces.communication import CommunicationTable

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
        wide = ranking.gpus > 1
        picked = self.sensitive(ctx, ranking.rows) & wide
        if ranking.consolidate is not None:
            picked |= np.asarray(ranking.consolidate, dtype=bool)
        # (a one-GPU job the ranking asks to consolidate is on one node anyway: not counted)
        waiting = ~(ctx.jobs.column("held")[ranking.rows] > 0)
        self.counters["consolidated"] = int(np.count_nonzero(picked & wide & waiting))
        return picked

    def tick(self, ctx: RoundContext, ranking: Ranking) -> Plan:
        # (a round in which every ranked job already runs asks `one_node` nothing: none waits)
        self.counters["consolidated"] = 0
        return super().tick(ctx, ranking)

    def choose(self, cluster, available, want, types, one_node):
        if one_node:
            return choose_consolidated(cluster, available, want, types)
        return choose_fewest_holes(cluster, available, want, types)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self.counters["consolidated"] = 0

    def quiet_until(self, ctx: RoundContext) -> float | None:
        # Asked after a round whose plan changed nothing. The Placer steps and these choices read
        # only the ranking, who holds which GPUs and each job's model, never the clock or the
        # jobs' progress, and draw nothing: the same ranking on the same GPUs gets the same plan.
        return math.inf


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


def _a_share(instance, attribute, value: float) -> None:
    """A skew is the largest tensor's share of the model, at most 1: a limit of 1 or more would
    consolidate only the jobs of unknown skew, which is most likely a percentage written as one."""
    if not value < 1:
        raise ValueError(
            f"must be below 1, got {describe(value)}: it is a share of the model's size (0.3 consolidates the jobs "
            "whose largest tensor is more than 30% of the model)"
        )


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
        packlimit: the skew above which a job is consolidated, a share of the model below 1
          (Tiresias gives no value; any cut between 0.15 and 0.61 separates Table 6's groups).
    Cost: O(n + G) over ranked jobs n and GPUs G, plus O(l N) over the jobs l it places and nodes N
        (job by job). Not ticked after a round whose plan changed nothing, while the ranking stays
        the same and no job arrives or finishes (event skipping).
    See also: ProfiledPlacer, Consolidated, TiresiasLas
    Paper: Tiresias (NSDI'19) §3.3 and Table 6; Blox (EuroSys'24) §4.3 (Fig 10).
    """

    state = ()

    packlimit: float = attrs.field(default=0.3, validator=[positive, _a_share])

    def sensitive(self, ctx: RoundContext, rows: np.ndarray) -> np.ndarray:
        skew = ctx.jobs.column("tensor_skew")[rows]
        return np.isnan(skew) | (skew > self.packlimit)


def _a_slowdown(instance, attribute, value: float) -> None:
    """A slowdown tolerance is a slowdown: how many times slower a spread job runs, 1 or more.
    Below 1, every job whose slowdown is known would count as sensitive, even one that
    spreading does not slow."""
    if not value >= 1:  # (NaN too)
        raise ValueError(
            f"must be at least 1, got {describe(value)}: it is a slowdown (how many times slower a spread job runs), "
            "which is never below 1; 1.05 consolidates the jobs more than 5% slower spread"
        )


@element
class ProfiledPlacer(_Selective):
    """Blox's "Tiresias+": consolidate exactly the jobs whose profile says spreading slows them
    down; spread the others where they fragment the cluster least.

    A job is placement-sensitive when its `spread_slowdown` (how much slower it runs when its
    GPUs span more nodes than it needs: from the throughput profile's measured spread rates,
    the job's trace, or the placement table) exceeds `tolerance`. Unknown slowdowns count as
    not sensitive.

    Arguments:
        tolerance: the slowdown above which a job is consolidated (1.05: more than 5% slower); at
          least 1, as a slowdown is.
    Cost: O(n + G) over ranked jobs n and GPUs G, plus O(l N) over the jobs l it places and nodes N
        (job by job). Not ticked after a round whose plan changed nothing, while the ranking stays
        the same and no job arrives or finishes (event skipping).
    See also: SkewAwarePlacer, Consolidated
    Paper: Blox (EuroSys'24) §4.3 (Fig 11, Tiresias+); Tiresias (NSDI'19) §3.3.
    """

    state = ()

    tolerance: float = attrs.field(default=1.05, validator=_a_slowdown)

    def sensitive(self, ctx: RoundContext, rows: np.ndarray) -> np.ndarray:
        slowdown = ctx.jobs.column("spread_slowdown")[rows]
        with np.errstate(invalid="ignore"):
            return slowdown > self.tolerance


def _first_with_room(counts: np.ndarray, want: int) -> int:
    """The first group (machine or rack) with at least `want` GPUs free; -1 if none."""
    fits = counts >= want
    group = int(fits.argmax())
    return group if fits[group] else -1


def _fewest_with_room(counts: np.ndarray, want: int) -> int:
    """The group with the fewest free GPUs that still holds `want` (best fit); -1 if none."""
    slack = np.where(counts >= want, counts - want, np.iinfo(np.int64).max)
    group = int(slack.argmin())
    return group if counts[group] >= want else -1


@element
class TiresiasDally(_Selective):
    """Tiresias as Dally's evaluation ran it: high-skew models consolidated without relaxation,
    the others placed on the first machine, rack or cluster-wide set of free GPUs that holds them.

    A job of a model in `high_skew` (Dally's Table I labels VGG11, AlexNet and MobileNetV3 high
    skew; any spelling the communication profile knows) takes the machine with the fewest free
    GPUs that holds it (a job larger than a machine: the fewest machines of the rack that holds
    it on the fewest, the fullest rack among equals; larger than a rack: the fewest racks), and
    otherwise waits, however long: Tiresias has no timer that relaxes consolidation. Every other
    job takes the first machine with room (the lowest-numbered, however many GPUs others have
    free), else the fewest machines of the first rack with room, else the fewest racks, at once,
    whatever the tier. Those fewest machines (and racks) are the ones with the most free GPUs,
    the lowest-numbered among equals, and a job takes the lowest-numbered free GPUs of those
    chosen. For a job larger than a machine, Dally's simulator takes the rack
    with the fewest free GPUs (high skew) or the first with room, and there, or across the
    cluster, the first free GPUs in its own order, which can spread a job over more machines or
    racks than it needs while fewer have room; as DelayPlacer, this baseline does not, so that
    the two differ in when they relax consolidation, not in how tightly they place within a
    tier. Pair it with Las (continuous 2D attained service, GPUs x time, lowest first), not with
    TiresiasLas' discrete queues: Dally's Tiresias orders jobs by their attained service itself.
    Running jobs the ranking no longer selects are preempted (the Placer steps). Dally's
    simulator also lets a high-skew job fall back to a rack when eight or more GPUs are free;
    that quirk is not reproduced. On a cluster without network tiers no job has a communication
    profile, so none is consolidated.

    Arguments:
        high_skew: the models consolidated (names in the communication profile).
    Cost: O(n + G) over ranked jobs n and GPUs G, plus O(l N) over the jobs l it places and nodes N
        (the machine or rack that holds it). Not ticked after a round whose plan changed nothing,
        while the ranking stays the same and no job arrives or finishes (event skipping).
    See also: SkewAwarePlacer, Las, DelayPlacer, Gandiva
    Paper: Dally (IEEE BigData'25) §IV-A and Table I; Tiresias (NSDI'19) §3.3; cluster-sim TiresiasInterJobScheduler.
    """

    state = ()
    fixed = ("_skewed_models",)
    # Its consolidation is by machines and racks, which only network tiers make faster: `check`
    # and `run` warn of a cluster without them (runtime/useless_runs.py).
    needs_tiers: ClassVar[bool] = True

    high_skew: list[str] = attrs.field(factory=lambda: ["VGG11", "AlexNet", "MobileNetV3"])

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        rows = CommunicationTable.load().index(self.high_skew)
        if (rows < 0).any():
            missing = [m for m, r in zip(self.high_skew, rows) if r < 0]
            raise SchedError(
                f"{self.name} (TiresiasDally): high_skew names models with no communication profile: {', '.join(missing)}"
            )
        self._skewed_models = rows

    def sensitive(self, ctx: RoundContext, rows: np.ndarray) -> np.ndarray:
        # (a few models: compared one by one, cheaper than a set membership test that sorts)
        return (ctx.jobs.column("comm_model")[rows, None] == self._skewed_models).any(axis=1)

    def choose(self, cluster, available, want, types, one_node):
        pick = _fewest_with_room if one_node else _first_with_room
        for t in types:
            mask = _of_type(cluster, available, t)
            per_node = cluster.per_node(mask)
            node = pick(per_node, want)
            if node >= 0:
                return first_on_node(cluster, mask, node, want)
            if one_node and want <= cluster.max_gpus_per_node:
                continue  # consolidated on one machine or not at all
            per_rack = np.bincount(cluster.gpu_rack[mask], minlength=cluster.n_racks)
            rack = tightest_rack(cluster, mask, want) if one_node else _first_with_room(per_rack, want)
            if rack >= 0:
                return fewest_machines_in_rack(cluster, mask, rack, want)
            if one_node and want <= int(np.bincount(cluster.gpu_rack).max()):
                continue
            if per_node.sum() >= want:
                return fewest_racks(cluster, mask, want)
        return None
