"""Placers on clusters of several GPU types: a job that finds no room on the type step 1 chose
for it takes free GPUs of another type it may run on, and never of a type it did not ask for."""

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.builtin import Consolidated, FirstFree
from roundhouse.elements.placement.tiresias import SkewAwarePlacer
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.types import Events, Ranking
from roundhouse.runtime.world import World
from tests.conftest import launch_at_start


def _world(spec: str, wants: list[int], running: dict[int, list[int]]) -> World:
    """Jobs 0.. wanting `wants` GPUs (known by duration: every type runs them alike), those of
    `running` on the GPUs given."""
    world = World(Cluster.parse(spec), profile=None)
    n = len(wants)
    frame = pl.DataFrame({"job_id": list(range(n)), "arrival_s": [0.0] * n, "gpus": wants, "duration_s": [1e6] * n})
    world.add_jobs(world.prepare(frame, "test")[0])
    launch_at_start(world, running or {})
    return world


def _tick(placer, world: World, order: list[int], gpu_type=None, backfill=True):
    ctx = Round(world, GraphSettings(), 300.0, 1, Events(time=300.0))
    placer.start(ctx)
    rows = np.array([world.jobs.row_of(j) for j in order], dtype=np.int64)
    types = None if gpu_type is None else np.asarray(gpu_type, dtype=np.int64)
    ranking = Ranking(rows, world.jobs.column("gpus")[rows], backfill=backfill, gpu_type=types)
    plan = placer.tick(ctx, ranking)
    world.check_plan(plan)
    ids = world.jobs.column("job_id")
    return {int(ids[a.row]): sorted(int(g) for g in a.gpus) for a in plan.launch}, sorted(int(ids[r]) for r in plan.suspend)


# Two V100 machines (GPUs 0-7) each with 3 GPUs taken, and two idle K80 machines (8-15): step 1
# puts a 2-GPU job on the V100s (2 free), where no machine holds it.
_SPEC = "2x4:V100,2x4:K80"
_RUNNING = {0: [0, 1, 2], 1: [4, 5, 6]}


@pytest.mark.parametrize("placer", [Consolidated, SkewAwarePlacer], ids=lambda p: p.__name__)
@pytest.mark.parametrize("backfill", [True, False])
def test_a_job_its_type_cannot_hold_on_one_node_takes_an_idle_machine_of_another_type(placer, backfill):
    world = _world(_SPEC, [3, 3, 2], _RUNNING)
    launched, suspended = _tick(placer(), world, [0, 1, 2], backfill=backfill)
    assert launched == {2: [8, 9]} and suspended == []  # the first K80 machine; nobody preempted


def test_a_job_that_takes_another_type_preempts_no_one_ranked_below_it():
    # The same with a running 1-GPU job ranked below it, on a K80: free K80 GPUs, not its.
    world = _world(_SPEC, [3, 3, 2, 1], {**_RUNNING, 3: [8]})
    launched, suspended = _tick(Consolidated(), world, [0, 1, 2, 3])
    # Best fit: the K80 machine with the fewest free GPUs that holds it (GPUs 9-11 free, 12-15 free).
    assert launched == {2: [9, 10]} and suspended == []


def test_a_job_asking_for_a_type_waits_rather_than_take_another():
    world = _world(_SPEC, [3, 3, 2], _RUNNING)
    launched, suspended = _tick(Consolidated(), world, [0, 1, 2], gpu_type=[0, 0, 0])
    assert launched == {} and suspended == []


def test_a_spread_job_on_its_chosen_type_is_unchanged():
    # FirstFree spreads: the two free V100s hold it, so it stays on the type step 1 chose.
    world = _world(_SPEC, [3, 3, 2], _RUNNING)
    launched, _ = _tick(FirstFree(), world, [0, 1, 2])
    assert launched == {2: [3, 7]}
