"""Placement sensitivity: the per-model table, the simulator's spread slowdown, and Tiresias'
skew-aware and profile-driven placers."""

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.tiresias import ProfiledPlacer, SkewAwarePlacer, choose_fewest_holes
from roundhouse.errors import TraceError
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.types import Events, Plan, Ranking
from roundhouse.runtime.world import World
from roundhouse.traces.placement import PlacementTable
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import jobs_of


def test_table_lookup_by_any_spelling():
    table = PlacementTable.load()
    skew, slow = table.lookup(["VGG19", "ResNet50", "resnet-50", "ResNet-18", "Transformer", None])
    assert skew[:3] == pytest.approx([0.715, 0.092, 0.092])  # Tiresias Table 6
    assert skew[3] == pytest.approx(0.211)  # ours, from ResNet-18's parameter shapes
    assert np.isnan(skew[4]) and np.isnan(skew[5])
    assert slow[0] == pytest.approx(1.67) and slow[1] == 1.0 and np.isnan(slow[3])


NO_PROFILE = ProfileTable.from_frame(ProfileTable.load().frame.clear(), source="none")


def prepared(jobs, profile=NO_PROFILE, cluster="2x4:V100"):
    cl = Cluster.parse(cluster)
    batch, _ = World(cl, profile).prepare(pl.DataFrame(jobs), "test.csv")
    return batch.columns


def test_jobs_get_placement_columns_from_table_trace_or_profile():
    cols = prepared(
        [
            {"job_id": 0, "arrival_s": 0.0, "gpus": 2, "duration_s": 10.0, "model": "VGG16", "tensor_skew": None},
            {"job_id": 1, "arrival_s": 0.0, "gpus": 2, "duration_s": 10.0, "model": "VGG16", "tensor_skew": 0.1},
        ]
    )
    assert cols["tensor_skew"] == pytest.approx([0.743, 0.1])  # the trace's own cell wins
    # A profiled model's slowdown is what the profile's consolidated and spread rates imply.
    profile = ProfileTable.load()
    cols = prepared([{"job_id": 0, "arrival_s": 0.0, "gpus": 2, "model": "LM", "batch_size": 5, "iterations": 1e5}], profile)
    together = profile.rate("LM", 5, "V100", 2, True)
    apart = profile.rate("LM", 5, "V100", 2, False)
    assert cols["spread_slowdown"][0] == pytest.approx(together / apart)


@pytest.mark.parametrize(
    "column, value, message", [("tensor_skew", 1.5, "between 0 and 1"), ("spread_slowdown", 0.5, "1 or more")]
)
def test_bad_placement_cells_are_trace_errors(column, value, message):
    with pytest.raises(TraceError, match=message) as err:
        prepared([{"job_id": 4, "arrival_s": 0.0, "gpus": 2, "duration_s": 10.0, column: value}])
    assert "job 4" in str(err.value)


SPREAD = """
round = 100s;
src :: TraceSource(path="trace.csv", timing=duration);
src -> AcceptAll -> JobPool -> Fifo(backfill=true) -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_spread_jobs_known_by_duration_run_slower(run_graph):
    # 2-GPU nodes. Job 0 takes GPU 0; FirstFree gives the 2-GPU VGG job GPUs 1 and 2, on two
    # nodes though one would do: it runs 1.67x slower. The ResNet50 job (slowdown 1) does not.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 10000.0, "model": None},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 2, "duration_s": 1000.0, "model": "VGG19"},
        {"job_id": 2, "arrival_s": 0.0, "gpus": 2, "duration_s": 1000.0, "model": "ResNet50"},
    ]
    got = jobs_of(run_graph(SPREAD, jobs, cluster="3x2:V100"))
    assert got[1]["run_s"] == pytest.approx(1670.0)
    assert got[2]["run_s"] == pytest.approx(1000.0)
    # An 8-GPU job on 4-GPU nodes needs two nodes: that is not spread.
    big = [{"job_id": 0, "arrival_s": 0.0, "gpus": 8, "duration_s": 1000.0, "model": "VGG19"}]
    assert jobs_of(run_graph(SPREAD, big, cluster="2x4:V100"))[0]["run_s"] == pytest.approx(1000.0)


def world_with(cluster, jobs, running):
    cl = Cluster.parse(cluster)
    world = World(cl, profile=NO_PROFILE)
    batch, _ = world.prepare(pl.DataFrame(jobs), "test")
    world.add_jobs(batch)
    for job_id, gpus in running.items():
        plan = Plan(launch_rows=[world.jobs.row_of(job_id)], launch_gpus=gpus, launch_counts=[len(gpus)], keep=world.running_rows)
        world.apply_plan(plan, 0.0)
    return world


def place(placer, world, order):
    ctx = Round(world, GraphSettings(), 300.0, 1, Events(time=300.0))
    placer.start(ctx)
    rows = np.array([world.jobs.row_of(j) for j in order])
    plan = placer.tick(ctx, Ranking(rows, world.jobs.column("gpus")[rows]))
    world.check_plan(plan)
    ids = world.jobs.column("job_id")
    return {int(ids[a.row]): sorted(a.gpus) for a in plan.launch}


JOBS = [
    {"job_id": 0, "arrival_s": 0.0, "gpus": 3, "duration_s": 1e6, "model": None},
    {"job_id": 1, "arrival_s": 0.0, "gpus": 3, "duration_s": 1e6, "model": None},
    {"job_id": 2, "arrival_s": 0.0, "gpus": 2, "duration_s": 1e6, "model": "VGG19"},
    {"job_id": 3, "arrival_s": 0.0, "gpus": 2, "duration_s": 1e6, "model": "ResNet50"},
]


def test_skew_aware_placer_consolidates_only_skewed_models():
    # Two 4-GPU nodes, each with one GPU free. The VGG job (skew 0.72) waits for one node;
    # the ResNet-50 job (skew 0.09) takes the two leftover GPUs across nodes.
    world = world_with("2x4:V100", JOBS, {0: [0, 1, 2], 1: [4, 5, 6]})
    launched = place(SkewAwarePlacer(packlimit=0.3), world, [0, 1, 2, 3])
    assert launched == {3: [3, 7]}
    # A pack limit above VGG's skew spreads it too.
    world = world_with("2x4:V100", JOBS, {0: [0, 1, 2], 1: [4, 5, 6]})
    assert place(SkewAwarePlacer(packlimit=0.8), world, [0, 1, 2, 3]) == {2: [3, 7]}


def test_profiled_placer_consolidates_by_measured_slowdown():
    holes = {0: [0, 1, 2], 1: [4, 5, 6]}  # one free GPU on each of two nodes
    # The table says VGG loses 1.67x when spread and ResNet-50 nothing: ResNet-50 takes the holes.
    world = world_with("2x4:V100", JOBS, holes)
    assert place(ProfiledPlacer(), world, [0, 1, 2, 3]) == {3: [3, 7]}
    # This trace measured ResNet-50 at 1.5x too: both wait for a node.
    jobs = [dict(j) for j in JOBS]
    jobs[3]["spread_slowdown"] = 1.5
    assert place(ProfiledPlacer(), world_with("2x4:V100", jobs, holes), [0, 1, 2, 3]) == {}
    # And if nothing is sensitive, the first in the ranking gets them.
    flat = [dict(j, spread_slowdown=1.0) for j in JOBS]
    assert place(ProfiledPlacer(), world_with("2x4:V100", flat, holes), [0, 1, 2, 3]) == {2: [3, 7]}


def test_choose_fewest_holes():
    cluster = Cluster.parse("3x4:V100")
    available = np.ones(12, dtype=bool)
    available[[0, 1, 2, 4, 5]] = False  # node 0: 1 free, node 1: 2 free, node 2: 4 free
    assert list(choose_fewest_holes(cluster, available, 2, [0])) == [6, 7]  # fits in node 1
    assert list(choose_fewest_holes(cluster, available, 3, [0])) == [8, 9, 10]  # fits in node 2
    assert list(choose_fewest_holes(cluster, available, 5, [0])) == [3, 6, 7, 8, 9]  # leftovers first
    assert choose_fewest_holes(cluster, available, 8, [0]) is None
