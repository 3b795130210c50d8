"""The shortcuts that make a ticked round cheaper give what the plain computation gives: one job
packed straight onto its best-fit node, a ranking that fits whole selected without the selection
pass, events merged from the ones that say something, the plan check's errors in their order, and
a renewing placer's answer kept for its running set."""

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.builtin import Consolidated
from roundhouse.elements.placement.packing import pack_best_fit
from roundhouse.elements.placement.selection import _select
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.types import Events, Plan, Ranking
from roundhouse.runtime.world import PlanError, World


@pytest.mark.parametrize("spec", ["6x4:V100", "3x8:V100", "2x4:V100,2x2:K80", "5x3:V100"])
def test_one_job_goes_where_the_first_of_several_would(spec):
    cluster = Cluster.parse(spec)
    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(300):
        available = rng.random(cluster.n_gpus) < rng.random()
        t = int(rng.integers(len(cluster.gpu_types)))
        size = int(rng.integers(1, cluster.max_gpus_per_node + 1))
        one, many = available.copy(), available.copy()
        alone = pack_best_fit(cluster, one, t, size, 1)
        first = pack_best_fit(cluster, many, t, size, int(rng.integers(2, 6)))[:1]  # (the batch path)
        assert alone.shape == first.shape and alone.dtype == first.dtype
        assert np.array_equal(alone, first)
        assert np.array_equal(one, available & ~np.isin(np.arange(cluster.n_gpus), alone.ravel()))
        compared += len(alone)
    assert compared > 100  # (most draws place the job)


def test_a_ranking_that_fits_whole_is_selected_whole():
    cluster = Cluster.parse("4x4:V100")
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(1, 40))  # (more jobs than GPUs too, most of them asking for none)
        want = rng.integers(0, 5, n) * (rng.random(n) < (0.9 if n < 12 else 0.2))
        if want.sum() > cluster.n_gpus:
            continue
        ranking = Ranking(rng.permutation(50)[:n], want, backfill=bool(rng.integers(2)))
        keeps = rng.random(n) < 0.5
        selected, on_type = _select(cluster, ranking, None, keeps, None)
        assert np.array_equal(selected, want > 0)  # the placer's shortcut when all fit
        assert not on_type.any()


def test_merging_events_ignores_the_quiet_ones_and_keeps_order():
    quiet = Events(time=3.0)
    done = Events(time=5.0, finished=[4, 2], finished_at=[4.5, 4.9])
    launched = Events(time=5.0, launched=[7], launched_gpus=[1, 2], launched_counts=[2], suspended=[3])
    later = Events(time=5.0, finished=[8], finished_at=[5.0], suspended=[6])
    merged = Events.merge([quiet, done, launched, later])
    assert merged.time == 5.0
    assert merged.finished.tolist() == [4, 2, 8] and merged.finished_at.tolist() == [4.5, 4.9, 5.0]
    assert merged.suspended.tolist() == [3, 6]
    assert merged.launched.tolist() == [7] and merged.launched_counts.tolist() == [2]
    assert merged.launched_gpus.tolist() == [1, 2]
    assert not merged.launched.flags.writeable
    assert Events.merge([quiet, done]) is done  # (one says something: it is the merge)


def _world(n_jobs: int = 6, running: int = 0):
    """2 nodes of 4 GPUs, jobs of one GPU each; the first `running` of them on GPUs 0, 1, ..."""
    world = World(Cluster.parse("2x4:V100"), profile=None)
    frame = pl.DataFrame(
        {"job_id": list(range(n_jobs)), "arrival_s": [0.0] * n_jobs, "gpus": [1] * n_jobs, "duration_s": [1e6] * n_jobs}
    )
    batch, _ = world.prepare(frame, "test")
    world.add_jobs(batch)
    if running:
        plan = Plan(launch_rows=np.arange(running), launch_gpus=np.arange(running), launch_counts=np.ones(running, np.int64))
        world.check_plan(plan)
        world.apply_plan(plan, 0.0)
    return world


@pytest.mark.parametrize(
    "plan, message",
    [
        (Plan(launch_rows=[1, 9], launch_gpus=[0, 1], launch_counts=[1, 1]), "row that does not exist"),
        (Plan(launch_rows=[-1, 2], launch_gpus=[0, 1], launch_counts=[1, 1]), "row that does not exist"),
        (Plan(launch_rows=[2, 2], launch_gpus=[9, 1], launch_counts=[1, 1]), "twice"),
        (Plan(launch_rows=[1, 2], launch_gpus=[0, 8], launch_counts=[1, 1]), "GPU 8, which does not exist"),
        (Plan(launch_rows=[1], launch_gpus=[-3], launch_counts=[1]), "GPU -3, which does not exist"),
        (Plan(launch_rows=[1, 2], launch_gpus=[3, 3], launch_counts=[1, 1]), "on GPU 3"),
    ],
)
def test_the_plan_check_still_names_the_first_fault(plan, message):
    world = _world()
    with pytest.raises(PlanError, match=message):
        world.check_plan(plan)


def test_a_renewing_placer_answers_again_once_the_running_jobs_change():
    world = _world(n_jobs=4)
    placer = Consolidated()
    ctx = Round(world, GraphSettings(), 0.0, 0, Events(time=0.0))
    placer.start(ctx)
    ranking = Ranking(np.arange(3), np.ones(3, np.int64))
    plan = placer.tick(ctx, ranking)
    world.check_plan(plan)
    world.apply_plan(plan, 0.0)
    assert placer.quiet_until(ctx) == float("inf") and placer.completions_wait(ctx)  # every ranked job runs
    assert placer.completions_wait(ctx)  # (asked again: the same answer)
    world.check_plan(Plan(keep=np.arange(2), suspend=[2]))
    world.apply_plan(Plan(keep=np.arange(2), suspend=[2]), 0.0)  # job 2 stops: the ranking no longer runs whole
    assert placer.quiet_until(ctx) is None and not placer.completions_wait(ctx)
    assert placer.renews_all(ctx, ranking) is False
