"""The shortcuts that make a ticked round cheaper give what the plain computation gives: one job
packed straight onto its best-fit node, a ranking that fits whole selected without the selection
pass, events merged from the ones that say something, the plan check's errors in their order, a
renewing placer's answer kept for its running set, a ranking by key put in order only where it is
read, and a placer that places only the newcomers when every job fits."""

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.builtin import Consolidated, FirstFree
from roundhouse.elements.placement.packing import pack_best_fit
from roundhouse.elements.placement.selection import _select
from roundhouse.elements.placement.tiresias import SkewAwarePlacer
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


@pytest.mark.parametrize("spec", ["6x4:V100", "3x8:V100", "100x8:V100", "2x4:V100,2x2:K80", "5x3:V100"])
def test_packing_many_jobs_of_a_size_is_best_fit_one_after_another(spec):
    cluster = Cluster.parse(spec)
    rng = np.random.default_rng(5)
    for _ in range(200):
        available = rng.random(cluster.n_gpus) < rng.random()
        t = int(rng.integers(len(cluster.gpu_types)))
        size = int(rng.integers(1, cluster.max_gpus_per_node + 1))
        count = int(rng.integers(2, 30))
        many, one = available.copy(), available.copy()
        together = pack_best_fit(cluster, many, t, size, count)
        singly = [pack_best_fit(cluster, one, t, size, 1) for _ in range(count)]
        assert np.array_equal(together, np.concatenate(singly))
        assert np.array_equal(many, one)


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
        (Plan(launch_rows=[1, 9], launch_gpus=[0, 1], launch_counts=[1, 1]), "row 9, which is not a row of the job table"),
        (Plan(launch_rows=[-1, 2], launch_gpus=[0, 1], launch_counts=[1, 1]), "row -1, which is not a row of the job table"),
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


def test_a_ranking_by_key_is_the_stable_sort_of_its_keys():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(0, 30))
        rows = rng.permutation(100)[:n]
        gpus = rng.integers(1, 5, n)
        keys = rng.integers(0, 4, n).astype(float)  # (many ties)
        ranking = Ranking.by_key(rows, gpus, keys)
        assert ranking.ordered == (n == 0) or not ranking.ordered
        subset = np.sort(rng.permutation(n)[: int(rng.integers(0, n + 1))])
        order = keys.argsort(kind="stable")
        # Part of the order, found without the whole: the whole order restricted to the part.
        assert np.array_equal(ranking.order_of(subset), order[np.isin(order, subset)])
        assert np.array_equal(ranking.any_order()[0], rows)
        assert np.array_equal(ranking.rows, rows[order]) and np.array_equal(ranking.gpus, gpus[order])
        assert ranking.ordered and len(ranking) == n
        assert not ranking.rows.flags.writeable
    with pytest.raises(ValueError, match="keys has 2 entries for 3 jobs"):
        Ranking.by_key(np.arange(3), np.ones(3, np.int64), np.zeros(2))


def _busy_world(rng, cluster: str):
    """Jobs of 1, 2, 4 or 8 GPUs; some running where Consolidated put them, the rest waiting."""
    world = World(Cluster.parse(cluster), profile=None)
    n = int(rng.integers(4, 40))
    gpus = rng.choice([1, 1, 1, 2, 4, 8], n)
    frame = pl.DataFrame({"job_id": list(range(n)), "arrival_s": [0.0] * n, "gpus": gpus.tolist(), "duration_s": [1e6] * n})
    batch, _ = world.prepare(frame, "test")
    world.add_jobs(batch)
    first = rng.permutation(n)[: int(rng.integers(0, n))]
    placer = Consolidated()
    ctx = Round(world, GraphSettings(), 0.0, 0, Events(time=0.0))
    placer.start(ctx)
    plan = placer.tick(ctx, Ranking(first, gpus[first]))
    world.check_plan(plan)
    world.apply_plan(plan, 0.0)
    return world, gpus


@pytest.mark.parametrize(
    "placer_class, strict", [(Consolidated, True), (Consolidated, False), (FirstFree, None), (SkewAwarePlacer, None)]
)
@pytest.mark.parametrize("cluster", ["4x8:V100", "6x4:V100"])
def test_placing_only_the_newcomers_gives_the_whole_ranking_s_plan(placer_class, strict, cluster):
    rng = np.random.default_rng(13)
    fast = 0
    for _ in range(150):
        world, gpus = _busy_world(rng, cluster)
        ctx = Round(world, GraphSettings(), 300.0, 1, Events(time=300.0))
        running = world.running_rows
        waiting = np.setdiff1d(np.arange(len(gpus)), running)
        pool = np.sort(np.concatenate([running, waiting[: int(rng.integers(0, len(waiting) + 1))]]))
        keys = rng.integers(0, 3, len(pool)).astype(float)
        by_key = Ranking.by_key(pool, gpus[pool], keys)
        order = keys.argsort(kind="stable")
        in_order = Ranking(pool[order], gpus[pool][order])
        plans = []
        for ranking in (by_key, in_order):
            placer = placer_class() if strict is None else placer_class(strict=strict)
            placer.start(ctx)
            plan = placer.tick(ctx, ranking)
            plans.append((plan, dict(placer.counters)))
        fast += not by_key.ordered  # (placed from the newcomers' order alone)
        (a, ca), (b, cb) = plans
        for name in ("launch_rows", "launch_gpus", "launch_counts", "keep", "suspend"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert ca == cb
    assert fast > 20
