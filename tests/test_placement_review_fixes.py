"""Placers after review: a preemption frees no GPUs that nobody then uses while their job could
have kept running; a job larger than a node is consolidated on the fewest nodes of several
sizes (and of its own GPU type); intra-node placers spread a job the ranking does not
consolidate; a placer that never preempts (Gandiva) does not count a running job's GPUs as
room left for a waiting one."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.builtin import Consolidated
from roundhouse.elements.placement.intranode import BandwidthAwareIntraNode, RandomIntraNode
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Events, Ranking
from tests.conftest import jobs_of, write_trace
from tests.test_placement import place, world_with


def _tick(placer, world, order, **ranking_args):
    """The plan of one round for jobs ranked in `order`: (launched job -> GPUs, suspended jobs)."""
    ctx = Round(world, GraphSettings(), 300.0, 1, Events(time=300.0))
    placer.start(ctx)
    rows = np.array([world.jobs.row_of(j) for j in order], dtype=np.int64)
    plan = placer.tick(ctx, Ranking(rows, world.jobs.column("gpus")[rows], **ranking_args))
    world.check_plan(plan)
    ids = world.jobs.column("job_id")
    return {int(ids[a.row]): sorted(a.gpus) for a in plan.launch}, sorted(int(ids[r]) for r in plan.suspend)


def test_a_victim_whose_gpus_nobody_takes_keeps_running():
    # Two 4-GPU nodes. Job 0 (4 GPUs, rank 1) finds no whole node: node 0 holds 1 (rank 2) and
    # 3 (the tail), node 1 holds 2 (rank 3). The shortest tail that makes it fit is 3 and 2, but
    # only node 1 is used: job 3's GPU stays idle, so job 3 keeps running.
    world = world_with("2x4:V100", [(0, 4), (1, 1), (2, 2), (3, 1)], {1: [1], 2: [4, 5], 3: [0]})
    placer = Consolidated()
    launched, suspended, kept = place(placer, world, [0, 1, 2, 3])
    assert launched == {0: [4, 5, 6, 7]}
    assert suspended == [2] and kept == [1, 3]
    assert placer.counters["preempted"] == 1


def test_a_job_takes_room_the_victims_of_jobs_ranked_ahead_left():
    # Three 4-GPU nodes; job 0 (rank 4) holds one GPU on each of nodes 0 and 1 and two on node 2.
    # Job 3 (rank 1, 4 GPUs) preempts it and takes node 0; job 1 (rank 5, 4 GPUs) has no running
    # job below it, but node 1 is now free: it starts rather than leave a node idle.
    world = world_with("3x4:V100", [(0, 4), (1, 4), (2, 12), (3, 4), (4, 12)], {0: [0, 6, 8, 11]})
    launched, suspended = _tick(Consolidated(), world, [3, 4, 2, 0, 1], backfill=True)
    assert suspended == [0]
    assert launched == {3: [0, 1, 2, 3], 1: [4, 5, 6, 7]}


@pytest.mark.parametrize("placer", [Consolidated, BandwidthAwareIntraNode])
def test_a_job_that_fits_in_what_victims_left_preempts_no_one_more(placer):
    # Three 8-GPU nodes. Job 1 (rank 3) preempts job 0 (the tail); job 0's GPU on node 2 leaves
    # node 2 with room for job 4 (rank 5), which must not preempt job 3 (rank 6) for it.
    running = {0: [0, 6, 16], 2: [3, 5], 3: [1, 8, 22, 23], 5: [13, 15, 17, 19], 6: [2, 9, 11]}
    world = world_with("3x8:V100", [(0, 3), (1, 4), (2, 2), (3, 4), (4, 4), (5, 4), (6, 3)], running)
    launched, suspended = _tick(placer(), world, [6, 5, 1, 2, 4, 3, 0], backfill=True)
    assert suspended == [0]
    assert sorted(launched) == [1, 4]
    assert {int(g) // 8 for g in launched[4]} == {2}


def test_a_job_as_large_as_a_cluster_of_mixed_node_sizes_is_placed():
    # Two 8-GPU and three 4-GPU nodes: 28 GPUs span all five nodes, 20 the two large ones and a small one.
    for want, nodes in ((28, 5), (20, 3)):
        world = world_with("2x8:V100,3x4:V100", [(0, want)], {})
        launched, suspended, _ = place(Consolidated(), world, [0])
        assert len(launched[0]) == want and suspended == []
        assert len({int(world.cluster.gpu_node[g]) for g in launched[0]}) == nodes


def test_a_run_with_a_job_as_large_as_a_cluster_of_mixed_node_sizes_finishes(run_graph):
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 28, "duration_s": 600.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 6, "duration_s": 600.0},
    ]
    result = run_graph(
        """
        round = 5min;
        src :: TraceSource(path="trace.csv");
        src -> AcceptAll -> JobPool -> Fifo(backfill=false) -> Consolidated -> Launch -> m :: JobMetrics;
        """,
        jobs,
        cluster="2x8:V100,3x4:V100",
    )
    done = jobs_of(result)
    assert all(done[j]["finish_s"] == done[j]["finish_s"] for j in (0, 1))  # (both finish: not NaN)


def test_a_job_larger_than_its_types_nodes_is_consolidated_on_the_fewest_of_them():
    # 8-GPU V100 nodes and 4-GPU K80 nodes: a 6-GPU job asked to run on K80 spans both K80 nodes.
    world = world_with("2x8:V100,2x4:K80", [(0, 6)], {})
    launched, suspended = _tick(Consolidated(), world, [0], gpu_type=np.array([1]), backfill=True)
    assert suspended == [] and len(launched[0]) == 6
    assert all(g >= 16 for g in launched[0])  # (the K80 GPUs are 16 to 23)


def test_intranode_placers_spread_a_job_the_ranking_does_not_consolidate():
    # Three 4-GPU nodes with one GPU free each; job 0 (3 GPUs) may spread, the others run.
    for placer in (Consolidated(), BandwidthAwareIntraNode(), RandomIntraNode(seed=1)):
        world = world_with("3x4:V100", [(0, 3), (1, 3), (2, 3), (3, 3)], {1: [0, 1, 2], 2: [4, 5, 6], 3: [8, 9, 10]})
        consolidate = np.array([True, True, True, False])
        launched, suspended = _tick(placer, world, [1, 2, 3, 0], consolidate=consolidate, backfill=True)
        assert launched == {0: [3, 7, 11]} and suspended == [], type(placer).__name__


@pytest.mark.parametrize("placer", ["Gandiva", "DelayPlacer"])
def test_a_placer_that_never_preempts_does_not_count_a_running_jobs_gpus_as_room_left_for_a_waiting_one(tmp_path, placer):
    # One 4-GPU node. Job 0 runs; under LAS job 1 soon ranks ahead of it, but the placer never
    # preempts: job 1 waits with no GPU left free, not with "4 left free, but not where its
    # placer may put it".
    write_trace(
        tmp_path / "trace.csv",
        [
            {"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 1000.0},
            {"job_id": 1, "arrival_s": 0.0, "gpus": 4, "duration_s": 1000.0},
        ],
    )
    (tmp_path / "graph.sched").write_text(
        'round = 5min;\nsrc :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> JobPool -> Las -> {placer} -> Launch -> m :: JobMetrics;\n"
    )
    result = simulate(compile_file(tmp_path / "graph.sched"), "1x4:V100", explain=True)
    frame = result.world.explain.frame(result.world).with_columns(pl.col(pl.Categorical).cast(pl.String))
    waits = frame.filter(pl.col("job_id") == 1, pl.col("state") == "waiting", pl.col("reason") != "admitted")
    assert waits.height >= 1
    assert waits["reason"].to_list() == ["ranked_behind"] * waits.height
    assert waits["c"].to_list() == [0] * waits.height  # (no GPU left free)


def test_a_job_on_the_fewest_nodes_of_several_sizes_is_not_counted_as_spread():
    # (the throughput model slows a spread job: one on the fewest nodes it can span is not)
    from roundhouse.runtime.cluster import Cluster

    cluster = Cluster.parse("2x8:V100,3x4:V100")
    assert cluster.nodes_needed(np.array([8, 9, 16, 17, 24, 28])).tolist() == [1, 2, 2, 3, 4, 5]
    assert Cluster.parse("4x4:V100").nodes_needed(np.array([4, 5, 16])).tolist() == [1, 2, 4]


@pytest.mark.parametrize("placer", ["BandwidthAwareIntraNode", "RandomIntraNode"])
def test_an_intranode_placer_puts_a_job_on_the_fewest_nodes_of_a_type_whose_nodes_are_smaller(run_graph, placer):
    # The job's fastest type, V100, has 1-GPU nodes: its 2 GPUs take two of them, as
    # Consolidated would, rather than wait for one node of two (the run stalled).
    result = run_graph(
        f'round = 5min;\nsrc :: TraceSource(path="trace.csv");\nsrc -> AcceptAll -> JobPool -> Las -> {placer} -> Launch -> m :: JobMetrics;\n',
        jobs=[{"job_id": 0, "arrival_s": 0.0, "gpus": 2, "duration_s": 600.0, "model": "ResNet-50"}],
        cluster="2x1:V100,1x4:K80",
    )
    job = jobs_of(result)[0]
    assert job["first_start_s"] == 0.0 and job["finish_s"] > 0
    assert result.counters["m"]["rack_starts"] == 1  # (two machines of one rack)
