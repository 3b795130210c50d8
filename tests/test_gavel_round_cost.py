"""The cheaper steps of a Gavel round that moves jobs give what the general ones give:
GavelPlacer's one-GPU-server pass (whose positions and counts are handed back as they are when
every entry fits, and gathered only from the first type that does not fit) against its
job-by-job search, on rankings where some types are short of GPUs, one has none free, and some
entries must sit on one server; and a ranking without partners placed with no partner steps."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.elements.policies.gavel import placement
from roundhouse.runtime.cluster import Cluster


def _case(seed: int, cluster: Cluster):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    types = rng.integers(0, len(cluster.gpu_types), n)
    want = rng.choice([1, 1, 1, 2, 4, 8], n).astype(np.int64)
    available = rng.random(cluster.n_gpus) < rng.choice([0.1, 0.5, 0.9])
    if seed % 3 == 0:  # a type with no GPU free at all
        available &= ~cluster.type_mask[int(rng.integers(0, len(cluster.gpu_types)))]
    todo = np.flatnonzero(rng.random(n) < 0.8)
    consolidate = (rng.random(n) < 0.3) if seed % 2 else None
    return available, types, want, todo, consolidate


@pytest.mark.parametrize("seed", range(60))
def test_one_gpu_server_pass_equals_the_job_by_job_search(seed):
    cluster = Cluster.parse("12:9:6")
    available, types, want, todo, consolidate = _case(seed, cluster)
    fast_free, slow_free = available.copy(), available.copy()
    fast = placement._on_one_gpu_servers(cluster, fast_free, types, want, todo, consolidate)
    slow = placement._job_by_job(cluster, slow_free, types, want, todo, consolidate)
    # The job-by-job search places type by type in the order of their codes, largest first:
    # the same entries on the same GPUs, listed in the same order.
    for got, expected, what in zip(fast, slow, ("positions", "counts", "GPUs")):
        np.testing.assert_array_equal(got, expected, err_msg=f"seed {seed}: {what}")
    np.testing.assert_array_equal(fast_free, slow_free)
    assert int(fast[1].sum()) == len(fast[2])  # every placed entry got its count


def test_a_type_without_room_between_two_that_fit_keeps_the_others_entries():
    cluster = Cluster.parse("4:4:4")
    available = np.ones(cluster.n_gpus, dtype=bool)
    available[cluster.type_mask[1]] = False  # type 1: nothing free
    types = np.array([0, 1, 2, 0, 1, 2])
    want = np.array([2, 1, 1, 2, 2, 4], dtype=np.int64)
    todo = np.arange(6)
    positions, counts, gpus = placement._on_one_gpu_servers(cluster, available, types, want, todo, None)
    # Type 0 takes both its entries (2 + 2 of 4); type 1 none; type 2 its 4-GPU entry, then
    # nothing is left for its 1-GPU entry.
    assert positions.tolist() == [0, 3, 5]
    assert counts.tolist() == [2, 2, 4]
    first = [int(np.flatnonzero(cluster.type_mask[t])[0]) for t in (0, 2)]
    assert gpus.tolist() == [first[0], first[0] + 1, first[0] + 2, first[0] + 3, *range(first[1], first[1] + 4)]
