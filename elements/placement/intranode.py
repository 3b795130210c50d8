"""Intra-node placement: which GPUs of a node a multi-GPU job gets. Inside a p3.8xlarge some
GPU pairs have twice the NVLink bandwidth of others (runtime/topologies.py), so the choice
matters to jobs that exchange gradients every iteration (Blox §5.3, Table 4)."""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.elements.placement.packing import choose_consolidated
from roundhouse.elements.placement.placer import Placer
from roundhouse.runtime.element import element
from roundhouse.runtime.values import non_negative

if TYPE_CHECKING:
    from roundhouse.runtime.context import RoundContext


_NEVER = np.iinfo(np.int64).max


class _IntraNode(Placer):
    """Consolidated placement (as few nodes as possible; a job that fits in a node goes to the
    node with the fewest free GPUs that holds it); subclasses pick the GPUs inside that node."""

    consolidate_by_default = True

    def pick(self, links: np.ndarray, free_local: np.ndarray, want: int) -> np.ndarray:
        raise NotImplementedError

    def choose(self, cluster, available, want, types, one_node):
        if not one_node or want > cluster.max_gpus_per_node or want < 2:
            return choose_consolidated(cluster, available, want, types)
        for t in types:
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
    job; among equally full nodes, the one offering the best GPU set); inside it, every set of
    free GPUs of the right size is scored by the sum of its pairwise link bandwidths and the
    best wins (ties: the lowest GPU ids). On a p3.8xlarge a 2-GPU job gets a double-NVLink
    pair (0-3 or 1-2) when one is free. Nodes without a known topology fall back to the lowest
    free GPUs.

    Arguments:
        none
    Cost: O(n + G) over ranked jobs n and GPUs G, plus O(l g^2) over the jobs l it places and a
        node's GPUs g (link bandwidths within the node).
    See also: RandomIntraNode, Consolidated, LinkBandwidth
    Paper: Blox (EuroSys'24) §5.3 and Table 4 (after Blink, MLSys'20).
    """

    state = ()

    def candidate_nodes(self, cluster, nodes: np.ndarray) -> np.ndarray:
        return nodes

    def pick(self, links: np.ndarray, free_local: np.ndarray, want: int) -> np.ndarray:
        best, best_score = free_local[:want], -1.0
        for subset in combinations(free_local.tolist(), want):  # at most C(8, 4) = 70
            local = np.asarray(subset)
            score = _aggregate(links, local)
            if score > best_score + 1e-9:
                best, best_score = local, score
        return best


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
