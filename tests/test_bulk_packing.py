"""A round's few arrivals packed job by job (`pack_few_best_fit`, `pack_best_fit_one_by_one`): the
GPUs and the order step 3 of the placer's steps gives them, on any uniform cluster; and the
arrivals' books a round carried out in bulk keeps (a slice's length, the first arrival)."""

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.builtin import Consolidated
from roundhouse.elements.placement.packing import (
    _Launches,
    choose_consolidated,
    pack_best_fit_one_by_one,
    pack_few_best_fit,
)
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.world import World
from tests.conftest import best_fit_job_by_job

# Nodes of 8, 4, 2 and 1 GPUs (each node's flags one word of the mask), and of 16, 6 and 3.
SPECS = ["40x8:V100", "12x4:V100", "9x2:V100", "10x1:V100", "6x16:V100", "7x6:V100", "11x3:V100"]


def by_the_steps(cluster, available, sizes):
    """Step 3 of the placer's steps for jobs that each want one node (Consolidated, strict)."""
    launches = _Launches(len(sizes))
    positions = np.arange(len(sizes))
    want = np.array(sizes, dtype=np.int64)
    unplaced = Consolidated()._pack(
        cluster, available, positions, want, np.zeros(len(sizes), dtype=np.int64), np.ones(len(sizes), dtype=bool), None, launches
    )
    return unplaced, launches.arrays()


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("seed", range(5))
def test_a_few_arrivals_go_where_the_steps_put_them(spec, seed):
    # Random free GPUs, partly taken nodes, a dozen jobs of several sizes (and a few that do not
    # fit): placed in the steps' order on the steps' GPUs, or not at all, the mask untouched.
    rng = np.random.default_rng(seed)
    cluster = Cluster.parse(spec)
    per = cluster.max_gpus_per_node
    placed = refused = 0
    for _ in range(40):
        available = rng.random(cluster.n_gpus) < rng.uniform(0.1, 0.95)
        sizes = rng.choice([s for s in (1, 2, 3, 4, 6, 8, 16) if s <= per], size=int(rng.integers(2, 13))).tolist()
        steps = available.copy()
        unplaced, (positions, counts, gpus) = by_the_steps(cluster, steps, sizes)
        by_job, expected = available.copy(), []  # (best fit job by job, largest first: the reference)
        for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
            one = choose_consolidated(cluster, by_job, sizes[i], [0])
            expected.append(None if one is None else one.tolist())
            if one is not None:
                by_job[one] = False
        mine = available.copy()
        got = pack_few_best_fit(cluster, mine, sizes)
        if None in expected:
            assert got is None and len(unplaced)
            assert (mine == available).all()
            refused += 1
            continue
        assert got is not None
        order, taken = got
        assert order.tolist() == positions.tolist()
        assert [sizes[i] for i in order.tolist()] == counts.tolist()
        assert taken.tolist() == gpus.tolist() == [g for one in expected for g in one]
        assert (mine == steps).all() and (mine == by_job).all()
        placed += 1
    assert placed >= 5 and refused > 0


@pytest.mark.parametrize("spec", ["6x16:V100", "7x6:V100", "11x3:V100"])
@pytest.mark.parametrize("seed", range(4))
def test_packing_one_by_one_is_best_fit_on_nodes_of_any_size(spec, seed):
    # Nodes whose flags are no word of the mask: counted node by node, the same best fit.
    rng = np.random.default_rng(seed)
    cluster = Cluster.parse(spec)
    per = cluster.max_gpus_per_node
    for jobs in (2, 5, 13, 30):
        available = rng.random(cluster.n_gpus) < rng.uniform(0.2, 0.9)
        sizes = np.sort(rng.choice([s for s in (1, 2, 3, 5, 6, 16) if s <= per], size=jobs))[::-1].astype(np.int64)
        placed_expected, expected, by_job = best_fit_job_by_job(cluster, available, sizes)
        placed, gpus = pack_best_fit_one_by_one(cluster, available, 0, sizes)
        assert placed.tolist() == placed_expected
        assert gpus.tolist() == expected
        assert (available == by_job).all()


def test_a_slice_knows_its_length_and_the_world_its_first_arrival():
    # Slices as a source cuts them (one past the end too); the world's first arrival is the
    # earliest of what it was given, whether or not the batch's earliest job came first.
    world = World(Cluster.parse("2x4:V100"), profile=None)
    frame = pl.DataFrame(
        {"job_id": [1, 2, 3, 4, 5], "arrival_s": [50.0, 20.0, 30.0, 10.0, 60.0], "gpus": [1] * 5, "duration_s": [100.0] * 5}
    )
    batch, _ = world.prepare(frame, "test")
    assert [len(batch.slice(a, b)) for a, b in ((0, 0), (0, 2), (1, 4), (3, 9), (5, 7))] == [0, 2, 3, 2, 0]
    firsts = []
    for a, b in ((0, 1), (1, 3), (3, 4), (4, 5)):
        world.add_jobs(batch.slice(a, b))
        firsts.append(world.first_arrival_s)
    assert firsts == [50.0, 20.0, 10.0, 10.0]
    assert len(world.jobs) == 5


def test_a_slice_saved_without_its_length_gets_it_back_when_loaded():
    # A snapshot saved by code whose slices kept no length: loading works it out.
    import pickle

    from roundhouse.traces.jobs import _SliceColumns

    whole = {"job_id": np.arange(10), "arrival_s": np.arange(10.0)}
    assert pickle.loads(pickle.dumps(_SliceColumns(whole, 3, 7))).length == 4
    state = _SliceColumns(whole, 8, 20).__reduce_ex__(2)[2]
    old = (state[0], {k: v for k, v in state[1].items() if k != "length"})
    loaded = _SliceColumns.__new__(_SliceColumns)
    loaded.__setstate__(old)  # (what unpickling does with the saved state)
    assert loaded.length == 2 and loaded["job_id"].tolist() == [8, 9]
