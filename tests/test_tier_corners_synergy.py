"""Synergy's allocators behind resizes: a job whose trace gives its CPU and memory demand (no
sensitivity profile) asks for as much per GPU when it is resized as its trace says, and the
machine's books stay whole through the resizes of an elastic policy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.synergy import SynergyOpt, SynergyTune
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.simulate import new_engine
from roundhouse.runtime.types import Events, Plan
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import REPO

# One machine like Synergy's: 8 GPUs, 24 cores, 500 GB (3 cores and 62.5 GB per GPU).
MACHINE = 'name = "one"\n[[group]]\nnodes = 1\ngpus_per_node = 8\ncpus = 24\nmemory_gb = 500\n'


def world_with_demands(tmp_path, jobs):
    """jobs: (job_id, gpus, model, cpus, memory_gb), all known by duration."""
    path = tmp_path / "one.toml"
    path.write_text(MACHINE)
    world = World(Cluster.parse(str(path)), ProfileTable.load())
    frame = pl.DataFrame(
        {
            "job_id": [j[0] for j in jobs],
            "arrival_s": [0.0] * len(jobs),
            "gpus": [j[1] for j in jobs],
            "duration_s": [1e6] * len(jobs),
            "model": [j[2] for j in jobs],
            "cpus": [float(j[3]) for j in jobs],
            "memory_gb": [float(j[4]) for j in jobs],
        }
    )
    batch, _ = world.prepare(frame, "test")
    world.add_jobs(batch)
    return world


def carry_out(world, element, plan, now):
    """The allocator's plan for `plan`, checked and carried out."""
    ctx = Round(world, GraphSettings(), now, 1, Events(time=now))
    element.start(ctx)
    out = element.tick(ctx, plan)
    world.check_plan(out)
    world.apply_plan(out, now)
    return out


@pytest.mark.parametrize("allocator", [SynergyTune, SynergyOpt])
def test_a_resized_job_asks_for_its_trace_demand_per_gpu(tmp_path, allocator):
    # VGG has no sensitivity profile: its demand is the trace's, 8 cores and 160 GB for its 4
    # GPUs (2 cores and 40 GB a GPU, below the machine's share of 3 and 62.5). Shrunk to 1 GPU
    # it asks for 2 cores and 40 GB, not for the 8 and 160 of four GPUs (more than a GPU's
    # share: the spare of the machine, held by one GPU); grown to 8 GPUs, for 16 and 320.
    world = world_with_demands(tmp_path, [(0, 4, "VGG", 8, 160)])
    cols = world.jobs.writable
    carry_out(world, allocator(), Plan(launch_rows=[0], launch_gpus=[0, 1, 2, 3], launch_counts=[4]), 0.0)
    assert (cols["cpus_held"][0], cols["memory_held_gb"][0]) == pytest.approx((8.0, 160.0))
    carry_out(world, allocator(), Plan(resize_rows=[0], resize_gpus=[0], resize_counts=[1]), 300.0)
    assert cols["held"][0] == 1
    assert (cols["cpus_held"][0], cols["memory_held_gb"][0]) == pytest.approx((2.0, 40.0))
    carry_out(world, allocator(), Plan(resize_rows=[0], resize_gpus=list(range(8)), resize_counts=[8]), 600.0)
    assert (cols["cpus_held"][0], cols["memory_held_gb"][0]) == pytest.approx((16.0, 320.0))


def test_a_shrunk_job_leaves_the_spare_to_the_job_that_wants_it(tmp_path):
    # Job 0 (VGG, asks 3 cores a GPU: 12 for 4 GPUs) shrinks to 1 GPU; job 1 (VGG, 4 GPUs, asks
    # 5 cores a GPU: 20) starts beside it. Job 0 needs 3 cores now; job 1 gets its 20 (3 + 20
    # of 24). Before, job 0 kept asking for 12, had had them, was served first, and left job 1
    # at its share.
    world = world_with_demands(tmp_path, [(0, 4, "VGG", 12, 100), (1, 4, "VGG", 20, 100)])
    cols = world.jobs.writable
    carry_out(world, SynergyTune(), Plan(launch_rows=[0], launch_gpus=[0, 1, 2, 3], launch_counts=[4]), 0.0)
    assert cols["cpus_held"][0] == pytest.approx(12.0)
    plan = Plan(resize_rows=[0], resize_gpus=[0], resize_counts=[1], launch_rows=[1], launch_gpus=[4, 5, 6, 7], launch_counts=[4])
    carry_out(world, SynergyTune(), plan, 300.0)
    assert cols["cpus_held"][0] == pytest.approx(3.0)
    assert cols["cpus_held"][1] == pytest.approx(20.0)


ELASTIC = """
round = 10s;
cluster = "{root}/clusters/synergy-128.toml";
elastic_profile = "ones";
resize_in_place = 1s;
arrivals :: TraceSource(path="{trace}");
arrivals -> AcceptAll -> pool :: JobPool -> Ones(population=16, mutate_rate=0.3, seed=0) -> SynergyTune -> Launch -> report :: JobMetrics;
"""


def test_books_stay_whole_and_per_gpu_demands_hold_through_elastic_resizes(tmp_path):
    # ONES' jobs with a demand of 2 cores and 40 GB a GPU (under the share: always granted),
    # resized as ONES goes. Every round: no negative or leftover allocation, no machine handing
    # out more than it has, and every running job holding 2 cores and 40 GB a GPU it holds.
    trace = pl.read_csv(REPO / "traces" / "samples" / "ones-60.csv").with_columns(
        (pl.col("gpus") * 2.0).alias("cpus"), (pl.col("gpus") * 40.0).alias("memory_gb")
    )
    path = tmp_path / "ones-demand.csv"
    trace.write_csv(path)
    graph = compile_file("g.sched", text=ELASTIC.format(root=REPO, trace=path))
    problems: list[str] = []
    worlds = []

    def check(ctx) -> None:
        world = worlds[0]
        cols = world.jobs.writable
        running = world.running_rows
        cpus, memory, held = cols["cpus_held"], cols["memory_held_gb"], cols["held"]
        idle = np.ones(len(cpus), dtype=bool)
        idle[running] = False
        if (cpus < 0).any() or (memory < 0).any() or np.count_nonzero(cpus[idle]) or np.count_nonzero(memory[idle]):
            problems.append(f"books at {ctx.now}")
        on = (world.holder >= 0).nonzero()[0]
        owner = world.holder[on]
        used = np.bincount(world.cluster.gpu_node[on], weights=cpus[owner] / held[owner], minlength=world.cluster.n_nodes)
        if (used > np.asarray(world.cluster.node_cpus) + 1e-6).any():
            problems.append(f"machine over at {ctx.now}")
        if len(running) and not np.allclose(cpus[running], 2.0 * held[running]):
            problems.append(f"demand per GPU at {ctx.now}")
        if len(running) and not np.allclose(memory[running], 40.0 * held[running]):
            problems.append(f"memory per GPU at {ctx.now}")

    engine = new_engine(graph, None, 1800.0, check, None, False)
    worlds.append(engine.world)
    result = engine.run()
    assert int(result.world.jobs.column("resizes").sum()) > 0  # (the case in question happened)
    assert problems == []
