"""A strict queue (a ranking that does not allow backfilling) after the placer packs again
without the jobs below one that found no room: the jobs left out start in ranking order while
they find room, so none waits on GPUs that nothing ranked ahead of it wants."""

from __future__ import annotations

from roundhouse.elements.placement.builtin import Consolidated
from tests.test_placement import place, world_with


def test_a_job_left_out_of_the_second_packing_starts_when_it_fits():
    # Four 4-GPU nodes; job 9 (rank 1) holds two GPUs on each of nodes 2 and 3. Largest first,
    # jobs 1 and 2 (4 GPUs each) take nodes 0 and 1 and job 0 (3 GPUs, rank 2) finds no node:
    # packed again alone it takes node 0, and job 1 (rank 3) still fits on node 1.
    world = world_with("4x4:V100", [(9, 4), (0, 3), (1, 4), (2, 4)], {9: [8, 9, 12, 13]})
    launched, suspended, kept = place(Consolidated(), world, [9, 0, 1, 2], backfill=False)
    assert launched == {0: [0, 1, 2], 1: [4, 5, 6, 7]}
    assert suspended == [] and kept == [9]


def test_the_first_job_left_out_that_finds_no_room_stops_those_below_it():
    # Five 4-GPU nodes; job 9 (rank 1) holds two GPUs on each of nodes 2, 3 and 4. Largest
    # first, jobs 1 and 2 take nodes 0 and 1, job 3 (2 GPUs) node 2, and job 0 (3 GPUs, rank
    # 2) finds no node. Packed again alone, job 0 takes node 0; then job 1 starts on node 1,
    # job 2 finds no room, and job 3, which would fit on node 2, waits behind it.
    world = world_with("5x4:V100", [(9, 6), (0, 3), (1, 4), (2, 4), (3, 2)], {9: [8, 9, 12, 13, 16, 17]})
    launched, suspended, kept = place(Consolidated(), world, [9, 0, 1, 2, 3], backfill=False)
    assert launched == {0: [0, 1, 2], 1: [4, 5, 6, 7]}
    assert suspended == [] and kept == [9]


def test_with_backfilling_the_jobs_below_one_that_waits_start():
    world = world_with("5x4:V100", [(9, 6), (0, 3), (1, 4), (2, 4), (3, 2)], {9: [8, 9, 12, 13, 16, 17]})
    launched, _, _ = place(Consolidated(), world, [9, 0, 1, 2, 3], backfill=True)
    assert sorted(launched) == [1, 2, 3]  # job 0 waits for a node with three GPUs free


def test_a_job_left_out_may_preempt_a_running_job_ranked_below_it():
    # Four 4-GPU nodes. Running: job 1 (rank 5) on GPUs 0 and 5, job 2 (rank 2) on 2, 9 and
    # 11, job 5 (rank 6) on 4, 7 and 13. Job 0 (4 GPUs, rank 3) finds no node until it preempts
    # job 5, and job 3 (rank 4) was placed below it: packed again without job 3, job 0 takes
    # node 3. Job 3 then starts on node 0 by preempting job 1, ranked below it, as it would have
    # had it been packed with the jobs ahead of it.
    running = {1: [0, 5], 2: [2, 9, 11], 5: [4, 7, 13]}
    world = world_with("4x4:V100", [(0, 4), (1, 2), (2, 3), (3, 3), (4, 1), (5, 3)], running)
    launched, suspended, kept = place(Consolidated(), world, [4, 2, 0, 3, 1, 5], backfill=False)
    assert launched == {4: [6], 0: [12, 13, 14, 15], 3: [0, 1, 3]}
    assert suspended == [1, 5] and kept == [2]
