"""Placement: turn a Ranking into a Plan of GPU assignments.

Every placer here works in the same steps (`Placer`), and they differ in how they pick GPUs:

1. Select, in ranking order, the jobs that fit in the cluster's capacity: a job is selected
   when its GPU count fits in what the jobs above it left (per GPU type, on the fastest type
   it can run on; a running job on its current type). A job that does not fit is skipped
   when the ranking allows backfilling; otherwise selection stops there.
2. Running jobs that were selected keep their GPUs (their lease is renewed at no cost).
   Running jobs that were not are the tail of the ranking that higher jobs need room from:
   they are marked for suspension. A running job that the ranking asks to run on another GPU
   count or type is suspended and placed again (a move).
3. The selected waiting jobs are packed onto the GPUs this leaves: jobs that want one node
   largest first, each on the node with the fewest available GPUs that holds it (best fit);
   jobs that may spread on the lowest-numbered available GPUs, in ranking order.
4. A selected job that cannot be packed (fragmentation) preempts the shortest tail of the
   selected running jobs ranked below it that makes it fit, or waits this round. On a cluster
   of several GPU types the tail is the shortest on any type the job may run on: one that fits
   in the free GPUs of a type other than the one step 1 chose for it takes them, preempting
   no one, whether or not running jobs are ranked below it. When the
   ranking does not allow backfilling, no job starts below one that waits: steps 3 and 4 are
   done again without the jobs ranked below the first that found no room, as a strict queue
   (and Blox's placement, which stops at the first job it cannot place) would have it; when
   every job of that packing is placed, the jobs left out start after them in ranking order
   until one finds no room.
5. A running job marked in step 2 or preempted in step 4 whose GPUs nobody took keeps running
   after all; GPUs still free go, in ranking order, to waiting jobs that fit (when the ranking
   allows backfilling).

When every running job is ranked and kept and every ranked job fits, the steps come down to
step 3 for the jobs not running, in ranking order among themselves: a ranking by key is then not
put in order as a whole (`Placer._place_newcomers`).

Unlike Blox's placement module, consolidated jobs that do not fill a node exactly are placed
(Blox misspells a variable there and never places them), and the ranking is followed once per
round (Blox calls its scheduler twice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from roundhouse.elements.placement.own_choices import checking_choice
from roundhouse.elements.placement.packing import (
    _NONE,
    FEW_JOBS,
    MAX_ONE_BY_ONE,
    _constant,
    _Launches,
    choose_consolidated,
    choose_first_free,
    pack_few_best_fit,
)
from roundhouse.elements.placement.preemption import backfill, preempt_below
from roundhouse.elements.placement.reasons import explain_placement
from roundhouse.elements.placement.selected_packing import pack_selected
from roundhouse.elements.placement.selection import _select, allowed_types
from roundhouse.runtime.element import Element, In, Out, element_family
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.types import Plan, Ranking

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


@element_family
class Placer(Element):
    """The shared steps. Subclasses set whether jobs go on one node by default, and may
    override `choose` (how one job's GPUs are picked); the built-in choice is also packed in
    bulk.

    Ports:
        ranking: jobs in the order to serve them.
        plan: launches, keeps and suspensions.
    Counters:
        launched: jobs launched so far.
        preempted: running jobs this placer's plans suspended so far, not counting those it
            launched again in the same round (moves). It counts what the placer plans, not what
            happens: a running job left out of the ranking is counted when its GPUs go to
            another job, even if a later element completes it instead (LossTermination's
            converged jobs, through Launch's `finish` port); Launch's `suspended` counts only
            real suspensions.
        moved: jobs suspended and launched again elsewhere in the same round.
    """

    category = "placement"
    inputs = (In("ranking", Ranking),)
    outputs = (Out("plan", Plan),)
    consolidate_by_default: ClassVar[bool] = False
    # Step 1 types jobs one at a time, in ranking order: on a cluster of several GPU types whose
    # throughputs differ, `check` and `run` warn of it (runtime/cluster_warnings.py), saying this.
    heterogeneity_agnostic: ClassVar[str | None] = (
        "each job goes, in ranking order, to the type it runs fastest on that has room for it, whatever "
        "another job would gain there, and stays on it while it runs"
    )

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("choose")
        if own is not None and not cls.__module__.startswith("roundhouse."):  # (the library's are tested)
            cls.choose = checking_choice(own)  # type: ignore[method-assign]

    def start(self, ctx: RoundContext) -> None:
        self.counters.update(launched=0, preempted=0, moved=0)

    def spreads_when_stuck(self) -> bool:
        """May a job that wants one node be spread when no node has room?"""
        return False

    def choose(self, cluster, available: np.ndarray, want: int, types: list[int], one_node: bool) -> np.ndarray | None:
        """GPU ids for one job wanting `want` GPUs of one of `types` (in preference order),
        from the GPUs marked in `available`; None if it cannot be placed."""
        if one_node:
            got = choose_consolidated(cluster, available, want, types)
            if got is None and self.spreads_when_stuck():
                got = choose_first_free(cluster, available, want, types)
            return got
        return choose_first_free(cluster, available, want, types)

    def one_node(self, ctx: RoundContext, ranking: Ranking) -> np.ndarray:
        """Which ranked jobs must be placed on as few nodes as possible: the ranking's say,
        else the placer's default. Placers that decide per job (by model) override this."""
        if ranking.consolidate is None:
            return _constant(len(ranking), self.consolidate_by_default)
        return np.asarray(ranking.consolidate, dtype=bool)

    def _custom_choice(self) -> bool:
        return type(self).choose is not Placer.choose

    def _keeps(self, ctx: RoundContext, ranking: Ranking) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Per ranked job: GPUs held, whether it runs on what it asks for (so may keep its
        GPUs), and the GPU type it is placed on (None when the ranking names no types)."""
        rows = ranking.rows
        at = _running_places(ctx, rows)
        held_r = _read_ranked(ctx, "held", rows, at, 0)
        keeps = held_r == ranking.gpus  # running with what it asks for (or waiting and asking for 0)
        placed_r = None
        if ranking.gpu_type is not None:
            placed_r = _read_ranked(ctx, "placed_type", rows, at, -1)
            keeps &= (ranking.gpu_type < 0) | (ranking.gpu_type == placed_r)
        keeps &= held_r > 0
        return held_r, keeps, placed_r

    def renews_all(self, ctx: RoundContext, ranking: Ranking) -> bool:
        """Whether every ranked job runs on what it asks for and nothing else runs: this
        ranking's plan renews every lease."""
        if len(ranking) != len(ctx.running_rows):
            return False
        if ranking.gpu_type is None:  # (the order does not matter: not sorted for this)
            return int(np.count_nonzero(_keeps_any_order(ctx, ranking)[2])) == len(ranking)
        return bool(self._keeps(ctx, ranking)[1].all())

    def tick(self, ctx: RoundContext, ranking: Ranking) -> Plan:
        # A queue that wants more GPUs than there are cannot all run: the plan of newcomers alone
        # and step 1's shortcut are out (the cheapest test first, on a ranking not put in order).
        overfull = False
        if not ranking.ordered and ctx.online is None and len(ctx.cluster.gpu_types) == 1:
            overfull = int(ranking.any_order()[1].sum()) > ctx.cluster.n_gpus
            plan = None if overfull else self._place_newcomers(ctx, ranking)
            if plan is not None:
                return plan
        cluster = ctx.cluster
        running = ctx.running_rows
        rows, want = ranking.rows, ranking.gpus
        held_r, keeps, placed_r = self._keeps(ctx, ranking)
        is_run = held_r > 0
        n_keeps = int(np.count_nonzero(keeps))
        if n_keeps == len(rows) == len(running):
            return Plan(keep=running)  # every job runs already: all leases renewed

        resized = int(np.count_nonzero(is_run)) - n_keeps  # running jobs asking for other GPUs
        job_types = self._job_types(ctx, ranking)
        if job_types is not None and placed_r is None:
            placed_r = ctx.jobs.column("placed_type")[rows]
        online = ctx.online  # None unless a live node is lost: then only its GPUs count
        # Every running job ranked and kept, and every ranked job fits (one GPU type): step 1
        # selects them all, and nothing is left for step 5's backfill.
        all_fit = (
            not overfull and job_types is None and online is None and n_keeps == len(running) and _wants_fit(want, cluster.n_gpus)
        )
        if all_fit:
            selected, on_type = want > 0, _constant(len(rows), 0)
        else:
            selected, on_type = _select(cluster, ranking, job_types, keeps, placed_r, online)
        kept_mask = keeps & selected
        holder = ctx.holder
        # Running jobs not kept are marked for suspension (step 5 may keep them after all).
        marked = running[~isin_rows(running, rows[kept_mask])] if n_keeps else running
        available = holder < 0
        held_by_marked = available  # (read only when some are marked)
        if len(marked):
            held_by_marked = isin_rows(holder, marked)
            available |= held_by_marked
        if online is not None:
            available &= online
        one_node = self.one_node(ctx, ranking)

        # Steps 3 and 4: pack the selected jobs that are not kept (waiting ones, and moves); a
        # selected job that found no room preempts selected running jobs below it.
        to_place = (selected & ~keeps).nonzero()[0]
        kept_pos = kept_mask.nonzero()[0]
        if ranking.backfill:
            launches, victims = _pack_and_preempt(
                self, cluster, holder, available, to_place, kept_pos, ranking, on_type, one_node, job_types
            )
        else:
            launches, victims, available = _pack_in_line(
                self, cluster, holder, available, to_place, kept_pos, ranking, on_type, one_node, job_types
            )

        # Step 5: marked jobs and victims none of whose GPUs were taken keep running; then backfill.
        suspend = marked
        if len(marked):
            gone = holder[held_by_marked & ~available]  # marked jobs whose GPUs someone took
            if resized:  # and those of them launched elsewhere
                gone = np.concatenate([gone, rows[launches.placed & is_run]])
            suspend = marked[isin_rows(marked, gone)]
            if len(suspend) < len(marked):
                available[held_by_marked & ~isin_rows(holder, suspend)] = False
        if len(victims):
            victims = _taken_from(holder, available, victims)
            suspend = np.sort(np.concatenate([suspend, victims]), kind="stable")
        if ranking.backfill and not all_fit and np.count_nonzero(available):
            backfill(self, cluster, available, want, selected, is_run, job_types, one_node, launches)

        if ctx.explaining:
            explain_placement(ctx, ranking, is_run, launches.placed, suspend, available)
        positions, counts, gpus = launches.arrays()
        if not len(positions) and not len(suspend):
            return Plan(keep=running)
        launch_rows = rows[positions]
        counters = self.counters
        counters["launched"] += len(positions)
        moved = int(np.count_nonzero(is_run[positions])) if resized and len(positions) else 0
        counters["preempted"] += len(suspend) - moved
        counters["moved"] += moved  # only a running job asking for other GPUs can move
        return Plan(
            launch_rows=launch_rows,
            launch_gpus=gpus,
            launch_counts=counts,
            launch_batch=None if ranking.batch_size is None else ranking.batch_size[positions],
            keep=running[~isin_rows(running, suspend)] if len(suspend) else running,
            suspend=suspend,
        )

    def _place_newcomers(self, ctx: RoundContext, ranking: Ranking) -> Plan | None:
        """The round's plan when every running job is ranked and kept and every ranked job fits
        (one GPU type, every GPU online, each job asking for GPUs), and the jobs not running all
        find room: every running job keeps its GPUs and the others are packed as step 3 packs
        them, in ranking order among themselves; so only they are put in order. None when
        any of this does not hold (the steps decide, over the whole ranking in order). `tick`
        asks only on a cluster of one GPU type, every GPU online, when the ranked jobs want no
        more GPUs than there are."""
        running = ctx.running_rows
        rows, want, keeps = _keeps_any_order(ctx, ranking)
        n_keeps = int(np.count_nonzero(keeps))
        if n_keeps != len(running) or np.count_nonzero(want <= 0):
            return None
        if n_keeps == len(rows):
            return Plan(keep=running)  # every job runs already: all leases renewed
        newcomers = ranking.order_of((~keeps).nonzero()[0])
        return self._launch_newcomers(ctx, Ranking(rows[newcomers], want[newcomers], backfill=ranking.backfill), ctx.holder < 0)

    def place_arrivals(self, ctx: RoundContext, arrivals: Ranking) -> Plan | None:
        """A round carried out in passing (runtime/passing.py), in which every job in the system
        runs on what it asks for: the plan that would place `arrivals` (in the policy's order)
        and renew every lease, or None when one of them would not find room on free GPUs (the
        round is ticked). None by default: placers that declare `arrivals_wait` implement it."""
        return None

    # Whether `pack_arrivals` is given (rounds are carried out in bulk only with such a placer).
    packs_arrivals = False

    def pack_arrivals(self, ctx: RoundContext, arrivals: Ranking, available: np.ndarray):
        """`place_arrivals` on the GPUs marked in `available` (those it takes are marked taken),
        for rounds carried out in bulk (runtime/bulk.py): the rows launched, their GPU counts and
        their GPUs (grouped by launch, in order), or None. None by default; a placer that gives
        it says so with `packs_arrivals = True`."""
        return None

    def _launch_newcomers(self, ctx: RoundContext, mine: Ranking, available: np.ndarray) -> Plan | None:
        """Every running job keeps its GPUs, and the jobs of `mine` (none running, in ranking
        order) are packed on the `available` GPUs as step 3 packs them; None when one finds no room
        (it may preempt: step 4)."""
        return self._keeping_all(ctx, self._pack_newcomers(ctx, mine, available))

    @staticmethod
    def _keeping_all(ctx: RoundContext, packed) -> Plan | None:
        """The plan that launches `packed` (rows, GPU counts, GPUs) and renews every lease (None: no packing)."""
        if packed is None:
            return None
        rows, counts, gpus = packed
        return Plan(launch_rows=rows, launch_gpus=gpus, launch_counts=counts, keep=ctx.running_rows)

    def _pack_newcomers(self, ctx: RoundContext, mine: Ranking, available: np.ndarray):
        """`_launch_newcomers`' launches: the rows placed, their GPU counts and their GPUs (grouped
        by launch, in order); None when one finds no room."""
        packed = _pack_one_by_one(self, ctx, mine, available)
        if packed is not _BY_THE_STEPS:
            return packed
        launches = _Launches(len(mine))
        at = np.arange(len(mine))
        if len(
            self._pack(ctx.cluster, available, at, mine.gpus, _constant(len(mine), 0), self.one_node(ctx, mine), None, launches)
        ):
            return None
        positions, counts, gpus = launches.arrays()
        self.counters["launched"] += len(positions)
        return mine.rows[positions], counts, gpus

    # --- the steps ---
    def _job_types(self, ctx: RoundContext, ranking: Ranking):
        """GPU types each ranked job may use, fastest first (None: every job may use type 0,
        the only one)."""
        cluster = ctx.cluster
        if len(cluster.gpu_types) == 1 and ranking.gpu_type is None:
            return None
        rates = ctx.jobs.type_rates[ranking.rows]
        wanted = ranking.gpu_type.tolist() if ranking.gpu_type is not None else [-1] * len(ranking.rows)
        return [allowed_types(rates[i], wanted[i]) for i in range(len(ranking.rows))]

    # Step 3 (selected_packing.py); a placer may override it (`_pack_one_by_one` checks).
    _pack = pack_selected


_BY_THE_STEPS = object()  # (`_pack_one_by_one`: not packed job by job)


def _pack_one_by_one(placer: Placer, ctx: RoundContext, mine: Ranking, available: np.ndarray):
    """`Placer._pack_newcomers` for a round's usual arrivals, job by job: one job gets what
    `choose` picks (what step 3 gives it); a few jobs that each want one node, by the built-in
    choice on uniform nodes of one GPU type, are packed as `pack_few_best_fit` packs them (what
    step 3 does). `_BY_THE_STEPS` when neither is so, or when one of the few finds no room and the
    placer may spread it."""
    cluster = ctx.cluster
    if len(mine) == 1:
        want = int(mine.gpus[0])
        if not 0 < want <= cluster.max_gpus_per_node:
            return _BY_THE_STEPS
        got = placer.choose(cluster, available, want, [0], bool(placer.one_node(ctx, mine)[0]))
        if got is None:
            return None
        available[got] = False
        placer.counters["launched"] += 1
        return mine.rows, np.array([want], dtype=np.int64), got
    if not (
        len(mine) <= FEW_JOBS
        and cluster.uniform_nodes
        and cluster.max_gpus_per_node <= MAX_ONE_BY_ONE
        and len(cluster.gpu_types) == 1
        and mine.consolidate is None
        and placer.consolidate_by_default
        and type(placer).one_node is Placer.one_node
        and type(placer)._pack is Placer._pack
        and not placer._custom_choice()
    ):
        return _BY_THE_STEPS
    sizes = mine.gpus.tolist()
    if not (sizes and 0 < min(sizes) and max(sizes) <= cluster.max_gpus_per_node):
        return _BY_THE_STEPS
    packed = pack_few_best_fit(cluster, available, sizes)
    if packed is None:
        return _BY_THE_STEPS if placer.spreads_when_stuck() else None  # (one finds no room: as in the steps, where it waits)
    order, gpus = packed
    placer.counters["launched"] += len(order)
    return mine.rows[order], mine.gpus[order], gpus


def _taken_from(holder: np.ndarray, available: np.ndarray, victims: np.ndarray) -> np.ndarray:
    """The step-4 victims some of whose GPUs a launch took. The others (a longer tail freed more
    than the job needed, on other nodes) keep running: their GPUs are marked taken again."""
    held = isin_rows(holder, victims)
    taken = held & ~available
    if np.count_nonzero(taken) == np.count_nonzero(held):
        return victims
    victims = victims[isin_rows(victims, holder[taken])]
    available[held & ~isin_rows(holder, victims)] = False
    return victims


def _pack_and_preempt(placer, cluster, holder, available, to_place, kept_pos, ranking, on_type, one_node, job_types):
    """Steps 3 and 4 on the GPUs marked in `available` (those taken are marked taken): the
    launches, and the running jobs preempted for them."""
    rows, want = ranking.rows, ranking.gpus
    launches = _Launches(len(rows))
    unplaced = placer._pack(cluster, available, to_place, want, on_type, one_node, job_types, launches)
    victims = _NONE
    if len(unplaced):
        victims = preempt_below(placer, cluster, holder, available, unplaced, kept_pos, rows, want, job_types, one_node, launches)
    return launches, victims


def _pack_in_line(placer, cluster, holder, available, to_place, kept_pos, ranking, on_type, one_node, job_types):
    """Steps 3 and 4 for a ranking that does not allow backfilling: no job starts ahead of a
    higher-ranked one that waits. Step 3 packs largest first, so a job ranked below one
    that found no room (fragmentation) may have been placed: then the two steps are done
    again without the jobs below it, until none is placed below a job that waits (each pass
    packs fewer jobs, so this ends). When the last pass places every job it packs, the jobs
    left out start after them in ranking order while they find room (`_start_in_order`), so
    that none waits on GPUs nothing ahead of it wants. Returns the launches, the victims and
    the GPUs left."""
    dropped = to_place[:0]
    while True:
        left = available.copy()
        launches, victims = _pack_and_preempt(
            placer, cluster, holder, left, to_place, kept_pos, ranking, on_type, one_node, job_types
        )
        placed = launches.placed
        waits = to_place[~placed[to_place]]
        if not len(waits):
            if len(dropped):
                victims = _start_in_order(
                    placer, cluster, holder, left, dropped, kept_pos, ranking, on_type, one_node, job_types, launches, victims
                )
            return launches, victims, left
        if not placed[waits[0] + 1 :].any():
            return launches, victims, left
        dropped = np.concatenate([to_place[to_place > waits[0]], dropped])
        to_place = to_place[to_place <= waits[0]]


def _start_in_order(placer, cluster, holder, left, dropped, kept_pos, ranking, on_type, one_node, job_types, launches, victims):
    """Steps 3 and 4 for the jobs `_pack_in_line` left out, one at a time in ranking order on
    the GPUs `left` (marked taken as they are), until one finds no room: it waits, and so do
    those below it. A job may preempt selected running jobs ranked below it that are not
    victims already. Adds to `launches`; returns the victims."""
    rows = ranking.rows
    for position in dropped.tolist():
        below = kept_pos[kept_pos > position]
        if len(victims) and len(below):
            below = below[~isin_rows(rows[below], victims)]
        trial = left.copy()
        one = np.array([position], dtype=np.int64)
        started, more = _pack_and_preempt(placer, cluster, holder, trial, one, below, ranking, on_type, one_node, job_types)
        if not started.placed[position]:
            return victims
        left[:] = trial
        launches.add_run(*started.arrays())
        if len(more):
            victims = np.concatenate([victims, more])
    return victims


# From this many ranked jobs, when at most a quarter of them run, `Placer._keeps` reads the job
# table only at the running jobs' places: found with a byte per job row, that costs a fraction of
# reading every ranked job's held count from the table, in ranking order (measured: about 0.3 ms
# against 1.1 ms for 134,000 ranked jobs; below a few thousand the plain reading has fewer calls).
_FEW_RUN_FROM = 8192


def _wants_fit(want: np.ndarray, gpus: int) -> bool:
    """Whether the GPUs the ranked jobs want (none for a job wanting none) add up to at most
    `gpus`. A long queue's first gpus + 1 jobs usually want more already: only they are added."""
    if int(np.maximum(want[: gpus + 1], 0).sum()) > gpus:
        return False
    return len(want) <= gpus + 1 or int(np.maximum(want, 0).sum()) <= gpus


def _running_places(ctx: RoundContext, rows: np.ndarray) -> np.ndarray | None:
    """Where running jobs are ranked, in a long ranking with few of them running; None: read
    every ranked job. A job holds GPUs only while it runs (the world sets its held count when it
    launches and clears it when it stops), so the others hold none and are placed on no type."""
    if len(rows) < _FEW_RUN_FROM or len(ctx.running_rows) * 4 > len(rows):
        return None
    return isin_rows(rows, ctx.running_rows).nonzero()[0]


def _read_ranked(ctx: RoundContext, name: str, rows: np.ndarray, at: np.ndarray | None, fill: int) -> np.ndarray:
    """The job table's column `name` for the ranked `rows`, read at places `at` only (`fill`
    elsewhere) or, with `at` None, everywhere."""
    column = ctx.jobs.column(name)
    if at is None:
        return column[rows]
    out = np.full(len(rows), fill, dtype=column.dtype)
    out[at] = column[rows[at]]
    return out


def _keeps_any_order(ctx: RoundContext, ranking: Ranking) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ranked jobs and their GPU counts in any order (`Ranking.any_order`, not sorted), and
    which of them run on what they ask for (for a ranking that names no GPU types)."""
    rows, want = ranking.any_order()
    held = ctx.jobs.column("held")[rows]
    keeps = held == want
    keeps &= held > 0
    return rows, want, keeps
