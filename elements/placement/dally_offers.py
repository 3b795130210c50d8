"""The GPUs on offer in a round of Dally's placement (`_Free`; priced, with lease release, by
`lease_prices`), and what a job decides when offered them: Algorithm 1 for one job (`offer`;
`reoffer` for a released gang), with the timers it is held to (`timers`). `DelayPlacer` takes
`timers`, `offer` and `reoffer` in as its methods."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from roundhouse.elements.placement.dally import DelayPlacer
    from roundhouse.runtime.context import RoundContext


def _span(cluster, ids: np.ndarray) -> tuple[int, int]:
    """How many racks and machines these GPUs span."""
    return len(np.unique(cluster.gpu_rack[ids])), len(np.unique(cluster.gpu_node[ids]))


def _rings(cluster, ids: np.ndarray) -> tuple[int, int]:
    """How many racks these GPUs span, and the most machines they span in any one rack: the
    communication model's rings at the network and rack tiers."""
    nodes = np.unique(cluster.gpu_node[ids])
    per_rack = np.bincount(cluster.node_rack[nodes], minlength=cluster.n_racks)
    return int(np.count_nonzero(per_rack)), int(per_rack.max())


class _Free:
    """The GPUs on offer this round, with their counts per machine and per rack (kept up to
    date as jobs take them, rather than counted again for every offer).

    A placement is the tighter the fewer racks and then machines it spans: the communication
    model charges a spread job by its ring at each tier (the most machines it has in one rack,
    the racks it spans), whatever its model. So within a rack GPUs are taken from the fewest
    machines (those with the most GPUs on offer first), and across racks from the fewest racks,
    as few machines in any one rack as those racks allow.

    With lease release, `cost` gives each offered GPU the price of taking it: 0 for an idle
    GPU, else the higher the better the job that held it ranks. Among placements as tight,
    idle GPUs alone are taken when they hold the job, else the machine or rack whose `demand`
    cheapest GPUs cost least: idle GPUs first, then those of the lowest-ranked gangs, so that a
    higher-ranked job displaces as little as it can (first fit among equals)."""

    def __init__(self, cluster, available: np.ndarray, cost: np.ndarray | None = None) -> None:
        self.cluster = cluster
        self.available = available
        self.cost = cost
        self.node = cluster.per_node(available)
        self.rack = np.bincount(cluster.gpu_rack[available], minlength=cluster.n_racks)
        self.total = int(self.node.sum())
        self._rack_nodes: list[np.ndarray] | None = None
        if cost is not None:
            idle = available & (cost == 0)
            self.idle_node = cluster.per_node(idle)
            self.idle_rack = np.bincount(cluster.gpu_rack[idle], minlength=cluster.n_racks)

    def first(self, level: str, demand: int) -> int:
        """The machine (or rack) to take `demand` GPUs from; -1 if none has room."""
        counts = self.node if level == "machine" else self.rack
        fits = np.flatnonzero(counts >= demand)
        if self.cost is None or len(fits) <= 1:
            return int(fits[0]) if len(fits) else -1
        idle = np.flatnonzero((self.idle_node if level == "machine" else self.idle_rack) >= demand)
        if len(idle):
            return int(idle[0])
        ids = np.flatnonzero(self.available)
        group = (self.cluster.gpu_node if level == "machine" else self.cluster.gpu_rack)[ids]
        order = np.lexsort((self.cost[ids], group))  # by group, cheapest first inside one
        start = np.searchsorted(group[order], fits)
        dearest = self.cost[ids[order[start + demand - 1]]]  # the dearest GPU each group must give
        return int(fits[int(dearest.argmin())])

    def machines_needed(self, counts: np.ndarray, demand: int) -> np.ndarray:
        """Per rack: the fewest of its machines whose `counts` (GPUs per machine) hold
        `demand` (more than it has machines when they do not)."""
        node_rack = self.cluster.node_rack
        order = np.lexsort((-counts, node_rack))  # by rack, the most GPUs first inside one
        cum = np.cumsum(counts[order])
        rack = node_rack[order]
        before = np.concatenate([[0], np.cumsum(np.bincount(rack, weights=counts[order], minlength=self.cluster.n_racks))])
        short = cum - before[rack] < demand
        return np.bincount(rack[short], minlength=self.cluster.n_racks) + 1

    def fewest(self, counts: np.ndarray, idle: np.ndarray | None, demand: int) -> np.ndarray:
        """Positions in `counts` (offered GPUs per group; in all room for `demand`) of the
        fewest groups that hold `demand`: the most on offer first, the lowest position among
        equals. With lease release, groups of idle GPUs alone if as few of them hold it, else
        the most idle first among equals."""
        at = np.arange(len(counts))
        order = np.lexsort((at, -counts) if idle is None else (at, -idle, -counts))
        k = int(np.searchsorted(np.cumsum(counts[order]), demand)) + 1
        if idle is not None:
            by_idle = np.lexsort((at, -counts, -idle))
            if idle[by_idle[:k]].sum() >= demand:
                return by_idle[:k]
        return order[:k]

    def in_rack(self, rack: int, demand: int) -> np.ndarray:
        """The fewest machines of `rack` (which has room) that hold `demand`."""
        if self._rack_nodes is None:
            node_rack = self.cluster.node_rack
            self._rack_nodes = [np.flatnonzero(node_rack == r) for r in range(self.cluster.n_racks)]
        nodes = self._rack_nodes[rack]
        idle = None if self.cost is None else self.idle_node[nodes]
        return nodes[self.fewest(self.node[nodes], idle, demand)]

    def best_rack(self, demand: int, fewer_than: int | None = None) -> np.ndarray | None:
        """The machines to take `demand` GPUs from within one rack: in a rack that needs the
        fewest (with lease release, one where idle GPUs hold it on as few, else the cheapest;
        else the first). None if no rack has room (on fewer than `fewer_than` machines)."""
        fits = self.rack >= demand
        if not fits.any():
            return None
        needed = np.where(fits, self.machines_needed(self.node, demand), np.iinfo(np.int64).max)
        least = int(needed.min())
        if fewer_than is not None and least >= fewer_than:
            return None
        tightest = np.flatnonzero(needed == least)
        if self.cost is not None and len(tightest) > 1:
            idle = self.machines_needed(self.idle_node, demand)[tightest] == least
            if idle.any():
                tightest = tightest[idle]
            else:
                dearest = [self.cost[self.cheapest(self.in_rack(int(r), demand), demand)].max() for r in tightest]
                tightest = tightest[[int(np.argmin(dearest))]]
        return self.in_rack(int(tightest[0]), demand)

    def across_racks(self, demand: int) -> np.ndarray:
        """The machines to take `demand` GPUs from anywhere (room for it on offer): the
        fewest racks, and in them as few machines in any one rack as those racks allow (the
        communication model's ring at the rack tier): for the least m that does, the m machines
        of each rack with the most GPUs on offer, all of them in all racks but the last, the
        fewest in it."""
        idle = None if self.cost is None else self.idle_rack
        least = len(self.fewest(self.rack, idle, demand))
        node_rack = self.cluster.node_rack
        # Each rack's machines, the most on offer first (the most idle, then the lowest-numbered,
        # among equals), and each one's place in its rack.
        idle_node = np.zeros_like(self.node) if self.cost is None else self.idle_node
        order = np.lexsort((np.arange(len(node_rack)), -idle_node, -self.node, node_rack))
        rack = node_rack[order]
        place = np.arange(len(order)) - np.searchsorted(rack, rack)
        for m in range(1, int(place.max()) + 2):  # (the last: every machine of every rack)
            top = place < m
            room = np.bincount(rack[top], weights=self.node[order[top]], minlength=self.cluster.n_racks).astype(np.int64)
            if room.sum() < demand:
                continue
            room_idle = None
            if idle is not None:
                room_idle = np.bincount(rack[top], weights=idle_node[order[top]], minlength=self.cluster.n_racks).astype(np.int64)
            racks = self.fewest(room, room_idle, demand)
            if len(racks) == least:
                break
        full = order[top & np.isin(rack, racks[:-1]) & (self.node[order] > 0)]
        left = demand - int(room[racks[:-1]].sum())
        return np.concatenate([np.sort(full), self.in_rack(int(racks[-1]), left)])

    def tighter(self, own: np.ndarray, demand: int):
        """(GPU ids, level), not yet taken, of a placement on offer tighter than the GPUs `own`
        of a job wanting `demand` (fewer racks, else fewer machines in any one rack); None if
        there is none. Across as many racks, fewer machines in all but as many in some rack is
        not tighter: the rings at the rack and network tiers stay as they are, and the one at
        the machine tier can only grow."""
        racks, machines = _span(self.cluster, own)
        if machines == 1:
            return None
        node = self.first("machine", demand)
        if node >= 0:
            return self.cheapest(np.array([node]), demand), "machine"
        nodes = self.best_rack(demand, machines if racks == 1 else None)
        if nodes is not None:
            return self.cheapest(nodes, demand), "rack"
        if racks > 1:
            ids = self.cheapest(self.across_racks(demand), demand)
            if _rings(self.cluster, ids) < _rings(self.cluster, own):
                return ids, "network"
        return None

    def cheapest(self, nodes: np.ndarray, demand: int) -> np.ndarray:
        """The `demand` cheapest offered GPUs on these machines (lowest-numbered among equals)."""
        mask = np.zeros(self.cluster.n_nodes, dtype=bool)
        mask[nodes] = True
        ids = np.flatnonzero(self.available & mask[self.cluster.gpu_node])
        if self.cost is None:
            return ids[:demand]
        return np.sort(ids[np.argsort(self.cost[ids], kind="stable")[:demand]])

    def take(self, nodes: np.ndarray, demand: int) -> np.ndarray:
        """The `demand` cheapest offered GPUs on these machines, now taken."""
        ids = self.cheapest(nodes, demand)
        self.take_ids(ids)
        return ids

    def take_back(self, own: np.ndarray, demand: int) -> bool:
        """Whether a released gang of `demand` GPUs, all of it still on offer, is taken back."""
        if len(own) != demand or not self.available[own].all():
            return False
        self.take_ids(own)
        return True

    def take_ids(self, ids: np.ndarray) -> None:
        """These offered GPUs are now taken."""
        self.available[ids] = False
        nodes, racks = self.cluster.gpu_node[ids], self.cluster.gpu_rack[ids]
        np.subtract.at(self.node, nodes, 1)
        np.subtract.at(self.rack, racks, 1)
        self.total -= len(ids)
        if self.cost is not None:
            idle = self.cost[ids] == 0
            np.subtract.at(self.idle_node, nodes[idle], 1)
            np.subtract.at(self.idle_rack, racks[idle], 1)


def lease_prices(ctx: RoundContext, rows: np.ndarray, available: np.ndarray) -> np.ndarray:
    """With lease release every lease ends at the round: the gangs are offered again, priced by
    their rank among the ranked `rows`. Marks the GPUs running jobs hold as offered in
    `available`; returns each GPU's price (`_Free`'s `cost`)."""
    holder = ctx.holder
    held_now = holder >= 0
    if ctx.online is not None:
        held_now &= ctx.online
    available |= held_now
    price = np.zeros(len(ctx.jobs) + 1)
    price[rows] = len(rows) - np.arange(len(rows), dtype=np.float64)
    price[len(ctx.jobs)] = 0.0  # (index of the idle GPUs' holder, -1)
    cost = np.where(held_now, price[holder], 0.0)
    cost[held_now & (cost == 0)] = 0.5  # held by a job the ranking leaves out: cheap, not free
    return cost


def timers(placer: DelayPlacer, demand: int, now: float) -> tuple[float, float]:
    """(T_Mc, T_Rk) for a job wanting `demand` GPUs, Algorithm 1's zero rules applied."""
    if demand > placer._rack_size:
        return 0.0, 0.0
    if placer.mode == "no_wait":
        t_mc, t_rk = 0.0, 0.0
    elif placer.mode == "fully_consolidated":
        t_mc, t_rk = math.inf, math.inf
    elif placer.tuned:
        t_mc, t_rk = placer._tuner.timers(demand, now)
    else:
        t_mc, t_rk = placer.machine_timer, placer.rack_timer
    if demand > placer._machine_size:
        t_mc = 0.0
    # (the timeline reports the timers the job is held to, the zero rule applied)
    if placer.tuned and placer.timeline and placer._last_timers.get(demand) != (t_mc, t_rk):
        placer._last_timers[demand] = (t_mc, t_rk)
        placer._timeline.append((now, demand, t_mc, t_rk))
    return t_mc, t_rk


def offer(placer: DelayPlacer, free: _Free, demand: int, starvation: float, now: float):
    """Algorithm 1 for one job: (GPU ids, level), or (None, level) when it declines to wait
    for a placement on one machine or one rack."""
    node = free.first("machine", demand)
    if node >= 0:
        if placer.tuned:
            placer._tuner.record("machine", demand, starvation, now)
        return free.take(np.array([node]), demand), "machine"
    t_mc, t_rk = placer.timers(demand, now)
    if starvation < t_mc:
        return None, "machine"
    nodes = free.best_rack(demand)
    if nodes is not None:
        if placer.tuned:
            placer._tuner.record("rack", demand, starvation, now)
        return free.take(nodes, demand), "rack"
    if starvation < t_rk:
        return None, "rack"
    return free.take(free.across_racks(demand), demand), "network"


def reoffer(placer: DelayPlacer, free: _Free, own: np.ndarray, demand: int):
    """A released gang whose GPUs are all offered again: (GPU ids, level) of a tighter
    placement if one has room now (taken at once, as Algorithm 1 takes a machine), else
    (own GPUs, None): it keeps them."""
    tighter = free.tighter(own, demand)
    if tighter is None:
        free.take_ids(own)
        return own, None
    free.take_ids(tighter[0])
    return tighter
