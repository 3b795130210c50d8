"""The world's pieces (runtime/world.py and the modules it binds): World calls each piece's
functions as its own methods, with nothing in between, and a copy or a snapshot of a world
carries every array it writes as its own."""

from __future__ import annotations

import copy

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime import launch_rates, plan_books, world_copies, world_events
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.types import Plan
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable

# World's methods and the functions they are: the engine calls these every round, so a
# wrapper between the two would be a call more each time.
BOUND = {
    "add_jobs": world_events.add_jobs,
    "apply_progress": world_events.apply_progress,
    "apply_finished": world_events.apply_finished,
    "apply_failed": world_events.apply_failed,
    "apply_requeued": world_events.apply_requeued,
    "set_online": world_events.set_online,
    "apply_metrics": world_events.apply_metrics,
    "check_plan": plan_books.check_plan,
    "apply_plan": plan_books.apply_plan,
    "complete": plan_books.complete,
    "launch_rates": launch_rates.launch_rates,
    "_plain": launch_rates.plain,
    "_rates": launch_rates.rates,
    "__deepcopy__": world_copies.deep_copy,
    "__getstate__": world_copies.get_state,
    "__setstate__": world_copies.set_state,
}

JOBS = [
    dict(job_id=0, arrival_s=0.0, gpus=1, model="A3C", iterations=1e6),
    dict(job_id=1, arrival_s=0.0, gpus=1, model="CycleGAN", iterations=1e6),
    dict(job_id=2, arrival_s=0.0, gpus=1, model="A3C", iterations=1e6),
]


@pytest.mark.parametrize("name", sorted(BOUND))
def test_world_calls_its_pieces_functions_as_its_own_methods(name):
    assert World.__dict__[name] is BOUND[name]
    world = World(Cluster.parse("1x1:V100"), ProfileTable.load())
    method = getattr(world, name)
    assert method.__func__ is BOUND[name] and method.__self__ is world


def _paired_world() -> World:
    """A world two rounds in: jobs 0 and 1 sharing GPU 0, job 2 alone on GPU 1."""
    world = World(Cluster.parse("2x1:V100"), ProfileTable.load())
    batch, _ = world.prepare(pl.DataFrame(JOBS), "test")
    world.add_jobs(batch)
    sim = Simulator(world, 360.0)
    plan = Plan(launch_rows=[0, 1, 2], launch_gpus=[0, 0, 1], launch_counts=[1, 1, 1], launch_partner=[1, 0, -1])
    world.check_plan(plan)
    sim.apply(plan)
    world.apply_plan(plan, sim.now)
    sim.advance()
    _, progress = sim.poll()
    world.apply_progress(progress.rows, progress.done, progress.service, progress.run_s)
    return world


def _arrays(world: World) -> dict[str, np.ndarray]:
    return {name: value for name, value in vars(world).items() if isinstance(value, np.ndarray)}


def test_every_array_a_world_holds_is_copied_or_remade():
    # A field that is an array and in neither list would be shared between a world and its
    # forks, which would then write each other's books.
    world = _paired_world()
    assert world.co_holder is not None and world.shared_gpu_s > 0
    held = set(_arrays(world))
    assert held == set(world_copies.COPIED) | {"holder_face", "online_face", "co_holder_face"}
    assert held - set(world_copies.COPIED) <= set(world_copies.REMADE)


def _loaded(world: World) -> World:
    """A world made from a copy of its state, as a snapshot file's loading makes one (the
    cluster, profile and throughput model, which a snapshot writes apart, shared)."""
    shared = (world.cluster, world.profile, world.throughput)
    state = copy.deepcopy(world.__getstate__(), {id(obj): obj for obj in shared})
    twin = object.__new__(World)
    twin.__setstate__(state)
    return twin


@pytest.mark.parametrize("how", ["fork", "load"])
def test_a_copy_writes_its_own_books(how):
    world = _paired_world()
    before = {name: value.copy() for name, value in _arrays(world).items()}
    service = world.jobs.column("service").copy()
    assert not set(world.__getstate__()) & set(world_copies.REMADE)
    twin = copy.deepcopy(world) if how == "fork" else _loaded(world)
    assert type(twin) is World
    for name in world_copies.COPIED:
        assert np.array_equal(getattr(twin, name), getattr(world, name))
        assert not np.shares_memory(getattr(twin, name), getattr(world, name)), name
    # The faces are the copy's own, read-only, and follow its arrays.
    for face, array in (("holder_face", "holder"), ("online_face", "online"), ("co_holder_face", "co_holder")):
        assert np.shares_memory(getattr(twin, face), getattr(twin, array)) and not getattr(twin, face).flags.writeable
    assert not twin.running_rows.flags.writeable
    assert twin._cols["service"] is twin.jobs.writable["service"] and twin._check.world is twin
    assert twin.shared_gpu_s == world.shared_gpu_s and twin.busy_gpu_s == world.busy_gpu_s

    # The copy suspends job 0: job 1 keeps GPU 0 to itself in the copy only.
    plan = Plan(keep=[1, 2], suspend=[0])
    twin.check_plan(plan)
    twin.apply_plan(plan, 360.0)
    assert twin.holder.tolist() == [1, 2] and twin.co_holder.tolist() == [-1, -1]
    assert twin.running_rows.tolist() == [1, 2]
    for name, value in before.items():
        assert np.array_equal(getattr(world, name), value), name
    assert np.array_equal(world.jobs.column("service"), service)
    assert world.jobs.column("partner").tolist() == [1, 0, -1]
