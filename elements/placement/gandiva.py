"""Gandiva (OSDI'18) after Dally's evaluation: network-agnostic placement with machine
affinity by GPU demand, and migration of a job spread over racks into one rack when one frees
up (the class docstring says where it differs from the authors' simulator and from the paper's
description)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from roundhouse.elements.placement.placer import Placer
from roundhouse.elements.placement.reasons import explain_placement
from roundhouse.errors import SchedError
from roundhouse.runtime.element import element
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan, Ranking
from roundhouse.runtime.values import non_negative

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element
class Gandiva(Placer):
    """Gandiva's placement after Dally's evaluation: jobs of up to a machine's GPUs on one
    machine, chosen by affinity to their GPU demand; larger jobs on random free GPUs; a job
    spread over racks moves to one rack when one frees up.

    Running jobs keep their GPUs (Gandiva does not preempt here). Waiting jobs are served in
    ranking order (pair it with Fifo(backfill=true): Dally's Gandiva orders the jobs that have
    not run by arrival, and a job that fits nowhere lets later ones through); with a ranking
    that does not allow backfilling, the first waiting job it cannot place stops the round's
    starts, as in a strict queue (running jobs may still migrate). A job wanting at most one
    machine's GPUs takes, among the machines with room for it, the one with the most free GPUs
    whose affinity is its GPU demand; else an unclaimed machine (with the most free GPUs), which
    from then on has that affinity; else any machine with room; else it waits: it is never
    spread. A machine with no running job loses its affinity. A larger job takes free GPUs at
    random (seeded), whatever the tier: Gandiva knows nothing of racks. Then, in ranking order,
    a running job larger than a machine but no larger than a rack whose GPUs span several racks
    moves (suspended and launched again, paying the checkpoint) into the rack with the fewest
    GPUs open to it that holds it (the lowest-numbered of those alike), if any does: the free
    ones and its own there (the move frees them), so a rack where it holds some GPUs may take
    it with fewer free. It keeps its own GPUs in that rack and takes the lowest-numbered free
    ones for the rest; those it leaves are free for the moves after it. That is the only move, as
    in the authors' simulator: a job spread over several machines of one rack stays there even
    when whole machines free up, and a job larger than a rack never moves. Dally's paper
    describes its Gandiva more broadly, as migrating jobs "to more favorable GPU consolidation
    whenever resources become available"; the simulator its evaluation ran moves a job larger
    than a machine only from several racks into one. Needs a cluster of one GPU type.

    Differs from the authors' simulator (cluster-sim's Gandiva, the one Dally's evaluation ran):
    there, GPUs are leased: at each lease's end a running job gives its GPUs back and is placed
    afresh (a job larger than a machine again at random); here it keeps them until it ends or
    moves. There, once a GPU demand has affinity machines, a job of that demand considers only
    them; unclaimed machines, then any machine, are tried only for a demand that has no affinity
    machine yet. Its room test reads the last machine scanned rather than the one chosen, so
    such a job may wait while an affinity machine has room, or, when none has, take free GPUs
    anywhere (and later move to the machine with the most free GPUs). A machine keeps its
    affinity for good, recorded by its position in its rack, so that it holds for the machine at
    that position in every rack. Here every job falls back to an unclaimed machine, then to any
    machine with room, so fewer jobs wait; none is spread; and a machine loses its affinity when
    it runs nothing. There, a job leaving several racks goes to the first rack with room (the
    lowest-numbered; its own GPUs count, given back first) and takes random GPUs in it; here to
    the fullest rack that holds it (its own GPUs counting too), keeping those and taking the
    lowest-numbered free GPUs, so it tends to span fewer machines. There, running jobs bid
    before the jobs that have not run (bids go by first start, latest first), so a move takes
    GPUs before a waiting job can; here waiting jobs are placed first and moves take what they
    leave.

    Arguments:
        seed: seed of the random spread of large jobs (default: the graph's).
    Counters:
        affinity: jobs placed on a machine whose affinity is their GPU demand so far.
        spread: jobs larger than a machine placed on random GPUs so far.
        migrated: running jobs moved from several racks to one so far (the only move).
    Cost: O(n + G) over ranked jobs n and GPUs G (a waiting job that finds no room costs O(1)),
    plus O(l N) over the jobs l it places and machines N (O(G) for one larger than a machine, and
    for a move), plus O(m R) over the running jobs m larger than a machine and racks R (migration).
        Not ticked after a round whose plan changed nothing, until an arrival or a completion
        (event skipping).
    See also: DelayPlacer, TiresiasDally, Fifo
    Paper: Gandiva (OSDI'18), affinity and migration; Dally (IEEE BigData'25) §IV-A; cluster-sim GandivaInterJobScheduler.
    """

    state = ("_affinity", "_rng")
    # (it refuses a cluster of several GPU types: nothing to warn of there)
    heterogeneity_agnostic: ClassVar[str | None] = None
    fixed = ("_rack_size",)

    seed: int | None = attrs.field(default=None, validator=non_negative)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        cluster = ctx.cluster
        if len(cluster.gpu_types) > 1:
            raise SchedError(f"{self.name} (Gandiva): needs a cluster of one GPU type, got {', '.join(cluster.gpu_types)}")
        self.counters.update(affinity=0, spread=0, migrated=0)
        self._rng = ctx.rng(self.seed)
        self._affinity = np.zeros(cluster.n_nodes, dtype=np.int64)  # per machine: GPU demand, 0: none
        self._rack_size = int(np.bincount(cluster.gpu_rack).max())

    def _machine(self, per_node: np.ndarray, want: int) -> tuple[int, bool]:
        """(machine, whether by affinity) for a job of `want` GPUs; machine -1 if none has room."""
        room = per_node >= want
        for candidates, by_affinity in (
            (room & (self._affinity == want), True),
            (room & (self._affinity == 0), False),
            (room, False),
        ):
            if candidates.any():
                return int(np.where(candidates, per_node, -1).argmax()), by_affinity
        return -1, False

    def quiet_until(self, ctx: RoundContext) -> float | None:
        # Asked after a round whose plan changed nothing: no waiting job found room and no
        # spread job could move. Its choices read only the ranking, the GPUs' holders and the
        # machines' affinities (which follow the holders), never the jobs' progress, and its
        # random draws and counters move only with a launch: until an arrival or a completion
        # changes what it is given, each tick would give the same plan again.
        return math.inf

    @staticmethod
    def _explain(ctx: RoundContext, ranking: Ranking, held: np.ndarray, launched: list[int], moved: list[int], available) -> None:
        """The round's reasons, as the shared placers give them (reasons.py): why each ranked job
        not placed waits, with the GPUs the plan leaves free (a running job ranked behind it keeps
        its GPUs: Gandiva does not preempt). Moves suspend nobody for good."""
        placed = isin_rows(ranking.rows, np.asarray(launched, dtype=np.int64))
        explain_placement(ctx, ranking, held > 0, placed, np.asarray(moved, dtype=np.int64), available, never_preempts=True)

    def tick(self, ctx: RoundContext, ranking: Ranking) -> Plan:
        cluster = ctx.cluster
        running = ctx.running_rows
        holder = ctx.holder
        available = holder < 0
        if ctx.online is not None:
            available &= ctx.online
        busy_nodes = np.bincount(cluster.gpu_node[holder >= 0], minlength=cluster.n_nodes) > 0
        self._affinity[~busy_nodes] = 0
        rows, want = ranking.rows, ranking.gpus
        held = ctx.jobs.column("held")[rows]
        launch_rows: list[int] = []
        launch_gpus: list[np.ndarray] = []
        moved: list[int] = []
        machine_size = cluster.max_gpus_per_node
        # The free GPUs, in all and per machine, kept up to date as jobs are placed, and the
        # least demand no machine had room for (free GPUs only dwindle within a round): a job
        # that finds no room costs O(1), however long the queue behind a full cluster.
        free = int(np.count_nonzero(available))
        per_node = cluster.per_node(available)
        no_machine = machine_size + 1
        for i in np.flatnonzero((held == 0) & (want > 0)).tolist():
            demand = int(want[i])
            if demand > free:
                if ranking.backfill:
                    continue
                break  # (it holds up the jobs ranked below it)
            if demand <= machine_size:
                node, by_affinity = self._machine(per_node, demand) if demand < no_machine else (-1, False)
                if node < 0:
                    no_machine = min(no_machine, demand)
                    if ranking.backfill:
                        continue
                    break
                first = int(cluster.node_first_gpu[node])
                ids = first + np.flatnonzero(available[first : first + int(cluster.node_gpus[node])])[:demand]
                per_node[node] -= demand
                self._affinity[node] = demand if self._affinity[node] == 0 else self._affinity[node]
                self.counters["affinity"] += int(by_affinity)
            else:
                ids = np.sort(self._rng.choice(np.flatnonzero(available), size=demand, replace=False))
                per_node -= np.bincount(cluster.gpu_node[ids], minlength=cluster.n_nodes)
                self.counters["spread"] += 1
            free -= demand
            available[ids] = False
            launch_rows.append(int(rows[i]))
            launch_gpus.append(ids)
        # Migration: a running job spread over racks that one rack could now hold.
        per_rack = None
        for i in np.flatnonzero((held > 0) & (want > machine_size) & (want <= self._rack_size)).tolist():
            row = int(rows[i])
            own = np.asarray(ctx.gpus_of(row))
            own_racks = cluster.gpu_rack[own]
            if len(np.unique(own_racks)) < 2:
                continue
            if per_rack is None:
                per_rack = np.bincount(cluster.gpu_rack[available], minlength=cluster.n_racks)
            demand = int(want[i])
            # The move frees the job's own GPUs: those in a rack count toward its room there, as
            # in the authors' simulator, where a job gives its GPUs back before it is placed again.
            room = per_rack + np.bincount(own_racks, minlength=cluster.n_racks)
            slack = np.where(room >= demand, room - demand, np.iinfo(np.int64).max)
            rack = int(slack.argmin())
            if room[rack] < demand:
                continue
            # Its own GPUs in that rack first (they need no other), then the lowest-numbered free.
            stays = own[own_racks == rack]
            more = np.flatnonzero(available & (cluster.gpu_rack == rack))[: demand - len(stays)]
            ids = np.sort(np.concatenate([stays, more]))
            available[more] = False
            per_rack[rack] -= len(more)
            # Its GPUs elsewhere are free once it moves: a later move may take them.
            left = own[own_racks != rack]
            freed = left if ctx.online is None else left[ctx.online[left]]
            available[freed] = True
            per_rack += np.bincount(cluster.gpu_rack[freed], minlength=cluster.n_racks)
            launch_rows.append(row)
            launch_gpus.append(ids)
            moved.append(row)
        if ctx.explaining:
            self._explain(ctx, ranking, held, launch_rows, moved, available)
        if not launch_rows:
            return Plan(keep=running)
        self.counters["launched"] += len(launch_rows)
        self.counters["moved"] += len(moved)
        self.counters["migrated"] += len(moved)
        suspend = np.asarray(sorted(moved), dtype=np.int64)
        return Plan(
            launch_rows=np.asarray(launch_rows, dtype=np.int64),
            launch_gpus=np.concatenate(launch_gpus),
            launch_counts=np.asarray([len(g) for g in launch_gpus], dtype=np.int64),
            keep=running[~np.isin(running, suspend)] if len(suspend) else running,
            suspend=suspend,
        )
