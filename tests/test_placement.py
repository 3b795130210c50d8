"""Placers on hand-made worlds: what keeps running, what is preempted, where jobs go."""

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.builtin import Consolidated, FirstFree
from roundhouse.elements.placement.packing import (
    choose_consolidated,
    fills_in_order,
    pack_best_fit,
    pack_best_fit_one_by_one,
)
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.types import Events, Plan, Ranking
from roundhouse.runtime.world import World
from tests.conftest import best_fit_job_by_job


def world_with(cluster: str, jobs: list[tuple[int, int]], running: dict[int, list[int]]):
    """jobs: (job_id, gpus); running: job_id -> GPU ids it holds."""
    cl = Cluster.parse(cluster)
    world = World(cl, profile=None)
    frame = pl.DataFrame(
        {
            "job_id": [j for j, _ in jobs],
            "arrival_s": [0.0] * len(jobs),
            "gpus": [g for _, g in jobs],
            "duration_s": [1e6] * len(jobs),
        }
    )
    batch, _ = world.prepare(frame, "test")
    world.add_jobs(batch)
    launches = [(world.jobs.row_of(j), gpus) for j, gpus in running.items()]
    if launches:
        plan = Plan(
            launch_rows=[r for r, _ in launches],
            launch_gpus=np.concatenate([g for _, g in launches]),
            launch_counts=[len(g) for _, g in launches],
        )
        world.check_plan(plan)
        world.apply_plan(plan, 0.0)
    return world


def place(placer, world, order, backfill=True):
    ctx = Round(world, GraphSettings(), 300.0, 1, Events(time=300.0))
    placer.start(ctx)
    rows = np.array([world.jobs.row_of(j) for j in order])
    ranking = Ranking(rows, world.jobs.column("gpus")[rows], backfill=backfill)
    plan = placer.tick(ctx, ranking)
    world.check_plan(plan)  # every plan a placer makes must be valid
    ids = world.jobs.column("job_id")
    launched = {int(ids[a.row]): sorted(a.gpus) for a in plan.launch}
    return launched, sorted(int(ids[r]) for r in plan.suspend), sorted(int(ids[r]) for r in plan.keep)


def test_running_jobs_keep_their_gpus_and_new_ones_take_free_ones():
    world = world_with("1x4:V100", [(0, 2), (1, 1)], {0: [0, 1]})
    launched, suspended, kept = place(FirstFree(), world, [0, 1])
    assert launched == {1: [2]} and suspended == [] and kept == [0]


def test_a_higher_job_preempts_from_the_tail_of_the_ranking():
    # 4 GPUs, all busy: 10 (rank 3), 11 (rank 2), 12 (rank 4, the tail). New job 13 ranks first.
    world = world_with("1x4:V100", [(10, 2), (11, 1), (12, 1), (13, 1)], {10: [0, 1], 11: [2], 12: [3]})
    launched, suspended, kept = place(FirstFree(), world, [13, 11, 10, 12])
    assert suspended == [12] and launched == {13: [3]} and kept == [10, 11]


def test_jobs_left_out_of_the_ranking_go_first():
    world = world_with("1x2:V100", [(0, 1), (1, 1), (2, 1)], {0: [0], 1: [1]})
    launched, suspended, kept = place(FirstFree(), world, [2, 0])  # job 1 is not ranked at all
    assert suspended == [1] and launched == {2: [1]} and kept == [0]


def test_unused_victims_keep_running():
    # Job 0 wants 4 GPUs on one node; two 4-GPU nodes; node 0 has jobs 1, 2 (ranked low),
    # node 1 has jobs 3 (ranked high) and 4 (the tail). Consolidating job 0 needs a whole node.
    world = world_with("2x4:V100", [(0, 4), (1, 2), (2, 2), (3, 3), (4, 1)], {1: [0, 1], 2: [2, 3], 3: [4, 5, 6], 4: [7]})
    launched, suspended, kept = place(Consolidated(), world, [0, 3, 1, 2, 4])
    # Capacity: 0 (4) + 3 (3) = 7, then 1 (2) does not fit, 2 (2) does not fit, 4 (1) does: 8.
    # Jobs 1 and 2 are preempted; job 0 takes node 0; job 4 keeps its GPU.
    assert launched == {0: [0, 1, 2, 3]} and suspended == [1, 2] and kept == [3, 4]


def test_fragmentation_preempts_the_shortest_tail_below():
    # 2 nodes x 4. Job 9 (4 GPUs, rank 1) is selected by capacity but no node is free; the
    # running jobs below it, from the tail: 8 (node 1, rank 4), 7 (node 0, rank 3), 6 (node 1).
    world = world_with("2x4:V100", [(9, 4), (5, 2), (6, 2), (7, 2), (8, 2)], {5: [0, 1], 7: [2, 3], 6: [4, 5], 8: [6, 7]})
    launched, suspended, kept = place(Consolidated(), world, [9, 5, 6, 7, 8], backfill=False)
    # Selection: 9 (4) + 5 (2) + 6 (2) = 8: 7 and 8 are marked. Their GPUs (one pair on each
    # node) do not make a whole node; job 9 then preempts from the tail of the selected jobs
    # below it: 6 (node 1) frees node 1 together with 8's pair. Nobody took 7's GPUs, so 7
    # keeps running after all.
    assert launched == {9: [4, 5, 6, 7]}
    assert suspended == [6, 8] and kept == [5, 7]


def test_strict_fifo_stops_at_the_first_job_that_does_not_fit():
    world = world_with("1x4:V100", [(0, 3), (1, 4), (2, 1)], {0: [0, 1, 2]})
    launched, suspended, kept = place(FirstFree(), world, [0, 1, 2], backfill=False)
    assert launched == {} and kept == [0]
    launched, _, _ = place(FirstFree(), world, [0, 1, 2], backfill=True)
    assert launched == {2: [3]}


def test_without_backfilling_no_job_starts_below_one_held_up_by_fragmentation():
    # 2 nodes x 4, two GPUs free on each. Job 4 (3 GPUs, rank 1) fits the capacity but no
    # node: it waits. Job 5 (1 GPU, rank 2) also fits, and a strict queue keeps it behind 4.
    world = world_with("2x4:V100", [(0, 2), (2, 2), (4, 3), (5, 1)], {0: [0, 1], 2: [4, 5]})
    launched, suspended, kept = place(Consolidated(), world, [0, 2, 4, 5], backfill=False)
    assert launched == {} and suspended == [] and kept == [0, 2]
    launched, _, _ = place(Consolidated(), world, [0, 2, 4, 5], backfill=True)
    assert launched == {5: [2]}
    # Below the job that waits, none starts; above it, every job that found room does.
    world = world_with("2x4:V100", [(0, 2), (2, 2), (3, 2), (4, 3), (5, 1)], {0: [0, 1], 2: [4, 5]})
    launched, _, kept = place(Consolidated(), world, [0, 2, 3, 4, 5], backfill=False)
    assert launched == {3: [2, 3]} and kept == [0, 2]


def test_best_fit_packs_small_jobs_on_the_fullest_nodes():
    cluster = Cluster.parse("3x4:V100")
    available = np.array([1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1], dtype=bool)  # free: 4, 2, 1
    taken = pack_best_fit(cluster, available, 0, 1, 3)
    assert taken.ravel().tolist() == [11, 6, 7]  # node 2 (1 free), then node 1 (2 free)
    available = np.array([1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1], dtype=bool)
    taken = pack_best_fit(cluster, available, 0, 2, 2)
    assert taken.tolist() == [[6, 7], [0, 1]]


@pytest.mark.parametrize("spec", ["40x8:V100", "12x4:V100", "9x2:V100", "4x8:V100,4x8:K80"])
@pytest.mark.parametrize("seed", range(6))
def test_packing_one_by_one_is_best_fit_a_size_at_a_time(spec, seed):
    # A few jobs of several sizes on nodes partly taken, placed one by one on lists of nodes:
    # each must land where best fit, largest first, puts it job by job (`choose_consolidated`
    # on one node) and where `pack_best_fit` puts it a size at a time, in the same order.
    rng = np.random.default_rng(seed)
    cluster = Cluster.parse(spec)
    per = cluster.max_gpus_per_node
    for jobs in (2, 5, 13, 32, 60):
        available = rng.random(cluster.n_gpus) < rng.uniform(0.2, 0.9)
        sizes = np.sort(rng.choice([s for s in (1, 2, 3, 4, 8) if s <= per], size=jobs))[::-1].astype(np.int64)
        placed_expected, expected, by_job = best_fit_job_by_job(cluster, available, sizes)
        by_size, grouped = available.copy(), []
        for size in sorted(set(sizes.tolist()), reverse=True):
            grouped.extend(pack_best_fit(cluster, by_size, 0, size, int((sizes == size).sum())).ravel().tolist())
        placed, gpus = pack_best_fit_one_by_one(cluster, available, 0, sizes)
        assert placed.tolist() == placed_expected
        assert gpus.tolist() == expected == grouped
        assert (available == by_job).all() and (available == by_size).all()


@pytest.mark.parametrize("spec", ["8x4:V100", "4x8:V100", "6x2:V100"])
@pytest.mark.parametrize("seed", range(8))
def test_packing_whole_free_nodes_in_order_is_best_fit_largest_first(spec, seed):
    # Kept jobs hold whole nodes; waiting jobs of power-of-two sizes fill the free nodes. The
    # in-order shortcut must give what best fit, largest first, gives job by job.
    rng = np.random.default_rng(seed)
    cluster = Cluster.parse(spec)
    per, nodes = cluster.max_gpus_per_node, cluster.n_nodes
    held = sorted(rng.choice(nodes, size=int(rng.integers(0, nodes)), replace=False).tolist())
    running = {100 + k: list(range(n * per, (n + 1) * per)) for k, n in enumerate(held)}
    free, jobs, sizes = (nodes - len(held)) * per, [], []
    while True:
        size = int(rng.choice([1, 2, 4, 8, 16]))
        if size > free or len(jobs) > 20:
            break
        jobs.append(len(jobs))
        sizes.append(size)
        free -= size
    world = world_with(spec, [(j, per) for j in running] + list(zip(jobs, sizes)), running)
    available = world.holder < 0
    assert fills_in_order(cluster, available, np.array(sizes, dtype=np.int64)) == bool(jobs)
    expected = {}
    for j in sorted(jobs, key=lambda j: -sizes[j]):  # stable: ties in ranking order
        got = choose_consolidated(cluster, available, sizes[j], [0])
        available[got] = False
        expected[j] = sorted(got.tolist())
    launched, suspended, kept = place(Consolidated(), world, list(running) + jobs)
    assert launched == expected and suspended == [] and kept == sorted(running)


def test_packing_in_order_needs_whole_free_nodes_and_power_of_two_sizes():
    cluster = Cluster.parse("2x4:V100")
    whole = np.array([0, 0, 0, 0, 1, 1, 1, 1], dtype=bool)
    assert fills_in_order(cluster, whole, np.array([2, 1, 1]))
    assert not fills_in_order(cluster, whole, np.array([3, 1]))  # 3 is not a power of two
    assert not fills_in_order(cluster, whole, np.array([4, 2]))  # more than is free
    assert not fills_in_order(cluster, np.array([0, 0, 0, 1, 1, 1, 1, 1], dtype=bool), np.array([1]))  # a partial node
    assert not fills_in_order(Cluster.parse("2x3:V100"), np.ones(6, dtype=bool), np.array([1]))  # 3 GPUs a node


def test_heterogeneous_cluster_uses_each_jobs_fastest_type():
    world = world_with("1x2:V100,1x2:K80", [(0, 2), (1, 2), (2, 1)], {})
    launched, _, _ = place(Consolidated(), world, [0, 1, 2])
    # Duration-only jobs run equally fast anywhere; types are tried in cluster order.
    assert launched[0] == [0, 1] and launched[1] == [2, 3] and 2 not in launched


def test_a_move_is_a_suspension_and_a_launch():
    world = world_with("1x4:V100", [(0, 1)], {0: [3]})
    ctx = Round(world, GraphSettings(), 300.0, 1, Events(time=300.0))
    placer = FirstFree()
    placer.start(ctx)
    row = world.jobs.row_of(0)
    plan = placer.tick(ctx, Ranking([row], [2]))  # the policy now wants 2 GPUs for it
    world.check_plan(plan)
    assert plan.suspend.tolist() == [row] and [a.gpus for a in plan.launch] == [(0, 1)]
    assert placer.counters["moved"] == 1


def test_invalid_plans_are_refused_with_the_job_named():
    from roundhouse.runtime.world import PlanError

    world = world_with("1x4:V100", [(0, 1), (1, 1), (2, 1)], {0: [0]})
    row = world.jobs.row_of
    with pytest.raises(PlanError, match="job 0 is neither kept nor suspended"):
        world.check_plan(Plan())
    with pytest.raises(PlanError, match="GPU 0, which job 0 holds"):
        world.check_plan(Plan(launch_rows=[row(1)], launch_gpus=[0], launch_counts=[1], keep=[row(0)]))
    with pytest.raises(PlanError, match="two jobs"):
        world.check_plan(Plan(launch_rows=[row(1), row(2)], launch_gpus=[1, 1], launch_counts=[1, 1], keep=[row(0)]))
    with pytest.raises(PlanError, match="which is running"):
        world.check_plan(Plan(launch_rows=[row(0)], launch_gpus=[1], launch_counts=[1], keep=[row(0)]))
    with pytest.raises(PlanError, match="does not exist"):
        world.check_plan(Plan(launch_rows=[row(1)], launch_gpus=[9], launch_counts=[1], keep=[row(0)]))
    with pytest.raises(PlanError, match="GPU -1, which does not exist"):
        world.check_plan(Plan(launch_rows=[row(1)], launch_gpus=[-1], launch_counts=[1], keep=[row(0)]))
    with pytest.raises(PlanError, match="launches row -2, which is not a row of the job table"):
        world.check_plan(Plan(launch_rows=[-2], launch_gpus=[1], launch_counts=[1], keep=[row(0)]))


def test_kept_jobs_may_be_listed_in_any_order():
    world = world_with("1x4:V100", [(0, 1), (1, 1), (2, 1)], {0: [0], 1: [1], 2: [2]})
    rows = [world.jobs.row_of(j) for j in (2, 0, 1)]
    world.check_plan(Plan(keep=rows))  # accepted: every running job is kept, once
    from roundhouse.runtime.world import PlanError

    with pytest.raises(PlanError, match="twice"):
        world.check_plan(Plan(keep=rows + rows[:1]))
