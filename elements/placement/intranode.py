"""Intra-node placement: which GPUs of a node a multi-GPU job gets. Inside a p3.8xlarge some
GPU pairs have twice the NVLink bandwidth of others (runtime/topologies.py), so the choice
matters to jobs that exchange gradients every iteration (Blox §5.3, Table 4)."""

from __future__ import annotations

from itertools import chain, combinations
from math import comb
from typing import TYPE_CHECKING, ClassVar

import attrs
import numpy as np

from roundhouse.elements.placement.packing import choose_consolidated, fewest_nodes
from roundhouse.elements.placement.placer import Placer
from roundhouse.runtime.element import element
from roundhouse.runtime.values import non_negative

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


_NEVER = np.iinfo(np.int64).max
EXHAUSTIVE_SETS = 10_000  # BandwidthAwareIntraNode tries every set of free GPUs up to this many


class _IntraNode(Placer):
    """Consolidated placement (as few nodes as possible; a job that fits in a node goes to the
    node with the fewest free GPUs that holds it); subclasses pick the GPUs inside that node."""

    consolidate_by_default = True

    def pick(self, links: np.ndarray, free_local: np.ndarray, want: int) -> np.ndarray:
        raise NotImplementedError

    def choose(self, cluster, available, want, types, one_node):
        if not one_node or want > cluster.max_gpus_per_node or want < 2:
            return choose_consolidated(cluster, available, want, types, spread=not one_node)
        for t in types:
            if fewest_nodes(cluster, want, t) > 1:  # (nodes of this type are smaller than the job)
                got = choose_consolidated(cluster, available, want, [t])
                if got is not None:
                    return got
                continue
            mask = available if len(cluster.gpu_types) == 1 else available & cluster.type_mask[t]
            counts = cluster.per_node(mask)
            fits = counts >= want
            if not fits.any():
                continue
            fewest = counts[fits].min()
            nodes = np.flatnonzero(counts == fewest)
            best = None
            for node in self.candidate_nodes(cluster, nodes).tolist():
                first = cluster.node_first_gpu[node]
                free_local = np.flatnonzero(mask[first : first + cluster.node_gpus[node]])
                local = self.pick(cluster.node_link_gbps[node], free_local, want)
                score = _aggregate(cluster.node_link_gbps[node], local)
                if best is None or score > best[0]:
                    best = (score, first + local)
            return best[1]
        return None

    def candidate_nodes(self, cluster, nodes: np.ndarray) -> np.ndarray:
        """Nodes (all best fits) among which to choose."""
        return nodes[:1]


def _aggregate(links: np.ndarray, local: np.ndarray) -> float:
    """Sum of the link bandwidths between the GPUs (0 where unknown)."""
    sub = links[np.ix_(local, local)]
    return float(np.nansum(sub[np.triu_indices(len(local), 1)]))


@element
class BandwidthAwareIntraNode(_IntraNode):
    """Consolidated placement that gives a multi-GPU job the GPU set of its node with the
    highest aggregate link bandwidth.

    The node is chosen as Consolidated does (the one with the fewest free GPUs that holds the
    job; among equally full nodes, the one offering the best GPU set); inside it, the sets of
    free GPUs of the right size are scored by the sum of their pairwise link bandwidths and the
    best wins (ties: the lowest GPU ids). On a p3.8xlarge a 2-GPU job gets a double-NVLink
    pair (0-3 or 1-2) when one is free. The search is exhaustive when the node's free GPUs
    form at most 10,000 such sets (every node of up to 8 GPUs: at most C(8, 4) = 70, and every
    shipped topology); beyond that it is greedy: the free pair with the fastest link, then, one
    at a time, the free GPU adding the most bandwidth to those chosen (ties: the lowest id),
    which need not be the best set. A node whose links among its free GPUs are all unknown (no
    topology) scores every set 0, so it gets the lowest free GPUs without a search.

    Arguments:
        none
    Cost: O(n + G) over ranked jobs n and GPUs G, plus, per job it places and equally full node
        it tries, O(f^2) over the node's free GPUs f and O(s k^2) over the sets s of k GPUs it
        scores: every set when there are at most 10,000, else O(k f) for the greedy choice, and
        none without a known topology.
    See also: RandomIntraNode, Consolidated, LinkBandwidth
    Paper: Blox (EuroSys'24) §5.3 and Table 4 (after Blink, MLSys'20).
    """

    # On nodes of no known topology: warned of (runtime/cluster_warnings.py), saying this.
    without_topology: ClassVar[str] = "every set of a node's GPUs scores alike, so it places as Consolidated does"

    state = ()

    def candidate_nodes(self, cluster, nodes: np.ndarray) -> np.ndarray:
        return nodes

    def pick(self, links: np.ndarray, free_local: np.ndarray, want: int) -> np.ndarray:
        sub = links[np.ix_(free_local, free_local)]
        if want < 2 or np.isnan(sub[~np.eye(len(free_local), dtype=bool)]).all():
            return free_local[:want]  # every set scores 0: the first, as the search would pick
        if comb(len(free_local), want) <= EXHAUSTIVE_SETS:
            return _best_set(sub, free_local, want)
        return _greedy_set(np.nan_to_num(sub, nan=0.0), free_local, want)


def _best_set(sub: np.ndarray, free_local: np.ndarray, want: int) -> np.ndarray:
    """The set of `want` GPUs (of `free_local`, links among them `sub`) with the highest summed
    link bandwidth, trying every one: the first in lexicographic order that beats each earlier
    one by more than 1e-9 (ties: the lowest ids)."""
    n_sets = comb(len(free_local), want)
    sets = np.fromiter(chain.from_iterable(combinations(range(len(free_local)), want)), dtype=np.int64, count=n_sets * want)
    sets = sets.reshape(n_sets, want)
    first, second = np.triu_indices(want, 1)
    scores = np.nansum(sub[sets[:, first], sets[:, second]], axis=1).tolist()
    best, best_score = 0, -1.0
    for i, score in enumerate(scores):
        if score > best_score + 1e-9:
            best, best_score = i, score
    return free_local[sets[best]]


def _greedy_set(sub: np.ndarray, free_local: np.ndarray, want: int) -> np.ndarray:
    """A set of `want` GPUs with high summed link bandwidth, built greedily: the pair with the
    fastest link, then the GPU adding the most bandwidth to those chosen, one at a time (ties:
    the lowest ids). `sub` holds the links among `free_local` (0 where unknown)."""
    upper = np.triu(sub, 1) - np.tril(np.ones_like(sub))  # each pair once, below the diagonal never
    a, b = divmod(int(upper.argmax()), len(free_local))
    chosen = np.zeros(len(free_local), dtype=bool)
    chosen[[a, b]] = True
    gain = sub[a] + sub[b]
    for _ in range(want - 2):
        i = int(np.where(chosen, -np.inf, gain).argmax())
        chosen[i] = True
        gain += sub[i]
    return free_local[chosen]


@element
class RandomIntraNode(_IntraNode):
    """Consolidated placement that gives a multi-GPU job a random set of free GPUs in its node.

    The node is chosen as Consolidated does; the GPUs inside it are drawn uniformly among the
    free ones (seeded). The baseline of Blox's intra-node experiment: a placer unaware of the
    node's links.

    Arguments:
        seed: seed for the draws (default: derived from the graph's seed).
    Cost: O(n + G) over ranked jobs n and GPUs G, plus O(l g) over the jobs l it places and a node's
        GPUs g.
    See also: BandwidthAwareIntraNode, Consolidated
    Paper: Blox (EuroSys'24) §5.3 and Table 4 ("Random").
    """

    state = ("_rng",)

    seed: int | None = attrs.field(default=None, validator=non_negative)

    def start(self, ctx: RoundContext) -> None:
        super().start(ctx)
        self._rng = ctx.rng(self.seed)

    def pick(self, links: np.ndarray, free_local: np.ndarray, want: int) -> np.ndarray:
        return np.sort(self._rng.choice(free_local, size=want, replace=False))
