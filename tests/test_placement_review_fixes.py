"""Placers after review: a job larger than a node is consolidated on the fewest nodes of
several sizes (and of its own GPU type); Gandiva, which never preempts, does not count a running
job's GPUs as room left for a waiting one."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.builtin import Consolidated
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
