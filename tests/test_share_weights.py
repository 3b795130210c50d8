"""One rule spreads a job's CPU cores and memory over its machines, by each machine's share per
GPU: runtime/plan_resources.py `share_weights`, which the plan check applies GPU by GPU and Synergy's
allocators (elements/placement/synergy.py `machine_weights`) machine by machine."""

import numpy as np
import pytest

from roundhouse.elements.placement import synergy
from roundhouse.runtime import plans
from roundhouse.runtime.plans import share_weights


def dense_reference(per_node: np.ndarray, node_share: np.ndarray) -> np.ndarray:
    """The allocators' arithmetic as it was written over (jobs, machines) before the rule was
    shared: their results must not move by a bit."""
    counts = per_node.sum(axis=1)
    by_count = per_node / np.maximum(counts, 1)[:, None]
    weighted = per_node[:, :, None] * node_share[None, :, :]
    total = weighted.sum(axis=1, keepdims=True)
    weighted = weighted / np.where(total > 0, total, 1.0)
    on = per_node > 0
    high = np.where(on[:, :, None], node_share[None, :, :], -np.inf).max(axis=1)
    low = np.where(on[:, :, None], node_share[None, :, :], np.inf).min(axis=1)
    return np.where((high == low)[:, None, :], by_count[:, :, None], weighted)


def random_jobs(rng, n_jobs, n_nodes):
    kinds = np.array([[3.0, 62.5], [12.0, 25.0], [4.0, 37.5], [0.1, 1 / 3], [7.3, 20.83]])
    node_share = kinds[rng.integers(0, rng.integers(1, 6), n_nodes)]
    if rng.random() < 0.3:
        node_share = rng.random((n_nodes, 2)) * 50
    per_node = np.zeros((n_jobs, n_nodes))
    for j in range(n_jobs):
        on = rng.choice(n_nodes, rng.integers(1, min(n_nodes, 40) + 1), replace=False)
        per_node[j, on] = rng.integers(1, 9, len(on))
    return per_node, node_share


def test_the_allocators_and_the_plan_check_share_one_rule():
    assert synergy.share_weights is plans.share_weights


def test_the_allocators_spread_exactly_as_before():
    rng = np.random.default_rng(7)
    for _ in range(300):
        per_node, node_share = random_jobs(rng, int(rng.integers(1, 30)), int(rng.integers(1, 200)))
        assert synergy.machine_weights(per_node, node_share).tobytes() == dense_reference(per_node, node_share).tobytes()


def test_gpu_by_gpu_and_machine_by_machine_agree():
    rng = np.random.default_rng(3)
    for _ in range(100):
        per_node, node_share = random_jobs(rng, int(rng.integers(1, 10)), int(rng.integers(1, 30)))
        by_machine = synergy.machine_weights(per_node, node_share)
        job, node = np.nonzero(per_node)
        counts = per_node[job, node].astype(int)
        gpu_job, gpu_node = job.repeat(counts), node.repeat(counts)
        by_gpu = share_weights(gpu_job, np.ones(len(gpu_job)), node_share[gpu_node])
        summed = np.zeros_like(by_machine)
        np.add.at(summed, (gpu_job, gpu_node), by_gpu)
        assert summed == pytest.approx(by_machine, rel=1e-12, abs=1e-15)
        assert by_gpu.sum(axis=0) == pytest.approx(np.full(2, float(len(per_node))))  # each job's parts add up to 1


def test_a_job_on_machines_of_different_shapes_is_spread_by_their_shares():
    # One job: 2 GPUs on a machine of 3 cores and 62.5 GB per GPU, 1 on one of 12 cores and 25 GB.
    w = share_weights(np.array([0, 0, 0]), np.ones(3), np.array([[3.0, 62.5], [3.0, 62.5], [12.0, 25.0]]))
    assert w[:, 0] == pytest.approx([3 / 18, 3 / 18, 12 / 18]) and w[:, 1] == pytest.approx([62.5 / 150, 62.5 / 150, 25 / 150])
    # Alike machines: by GPU count, exactly.
    w = share_weights(np.array([0, 1, 1, 1]), np.array([1.0, 1.0, 1.0, 1.0]), np.full((4, 2), 0.1))
    assert w[:, 0].tolist() == [1.0, 1 / 3, 1 / 3, 1 / 3]
