"""The CPU cores and memory that come with a launch's GPUs, and how a launch's own allocation of
them changes its rate, for the throughput model (traces/throughput.py).

A GPU brings its machine's cores and memory divided by the machine's GPUs (the GPU-proportional
share). A launch given its own allocation (`Placement.cpus`, `memory_gb`) whose model has a CPU
and memory sensitivity profile (traces/resources.py) runs at its speed on that allocation over
its speed at the proportional share.

ThroughputModel binds these functions as its methods (and `resources` as its property): called
so, they cost what methods of its own would. What they keep (the shares per GPU, the profile
once loaded) stays on the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from roundhouse.traces.jobs import JobReader
    from roundhouse.traces.throughput import Placement, ThroughputModel


def resources(throughput: ThroughputModel):
    """The CPU and memory sensitivity profile (traces/resources.py), loaded on first use."""
    if throughput._resources is None:
        from roundhouse.traces.resources import ResourceTable

        throughput._resources = ResourceTable.load()
    return throughput._resources


def gpu_shares(throughput: ThroughputModel) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU: the CPU cores and GB of memory that come with it under a GPU-proportional
    allocation (its machine's, divided by the machine's GPUs)."""
    if throughput._gpu_share is None:
        cluster = throughput.cluster
        per_node = np.bincount(cluster.gpu_node, minlength=cluster.n_nodes)
        node = cluster.gpu_node
        throughput._gpu_share = (
            np.asarray(cluster.node_cpus, dtype=np.float64)[node] / per_node[node],
            np.asarray(cluster.node_memory_gb, dtype=np.float64)[node] / per_node[node],
        )
    return throughput._gpu_share


def proportional(throughput: ThroughputModel, placement: Placement) -> tuple[np.ndarray, np.ndarray]:
    """Each launch's GPU-proportional CPU cores and GB of memory, all its machines together
    (half of its GPUs' shares for a launch with a space-sharing partner, which has the other
    half: runtime/allocation.py `proportional_resources`)."""
    if not len(placement.counts):
        return np.zeros(0), np.zeros(0)
    cpu, memory = throughput.gpu_shares()
    gpus, starts = placement.gpus, placement.starts
    cpus, memory_gb = np.add.reduceat(cpu[gpus], starts), np.add.reduceat(memory[gpus], starts)
    if placement.partner is not None and np.count_nonzero(placement.partner >= 0):
        paired = placement.partner >= 0
        cpus, memory_gb = np.where(paired, cpus * 0.5, cpus), np.where(paired, memory_gb * 0.5, memory_gb)
    return cpus, memory_gb


def resource_factor(throughput: ThroughputModel, jobs: JobReader, rows: np.ndarray, placement: Placement) -> np.ndarray | None:
    """Each launch's speed on its CPU and memory allocation over its speed at the
    GPU-proportional share of its GPUs (1 for models without a sensitivity profile); None
    when the placement gives no allocation or no launch has such a model."""
    if placement.cpus is None or placement.memory_gb is None or not jobs.has_column("resource_model"):
        return None
    model = jobs.column("resource_model")[rows]
    sensitive = (model >= 0).nonzero()[0]
    if not len(sensitive):
        return None
    fair_cpus, fair_memory = throughput.proportional(placement)
    counts = placement.counts[sensitive]
    table, m = throughput.resources, model[sensitive]
    given = table.relative_speed(m, placement.cpus[sensitive] / counts, placement.memory_gb[sensitive] / counts)
    fair = table.relative_speed(m, fair_cpus[sensitive] / counts, fair_memory[sensitive] / counts)
    factor = np.ones(len(rows))
    factor[sensitive] = given / fair
    return factor
