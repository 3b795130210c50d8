"""Placement's steps 4 and 5 for the built-in choice (the per-node counts that follow the tail's
stretch, the backfill that keeps the nodes' counts itself) give what the plain computation gives:
the same placer with its choice taken one job at a time (the shortest tail found by binary search
with `choose`, every backfill attempt through `choose`), on random pools with ties, multi-GPU
jobs, nodes of one or two sizes, and empty, partly full and full clusters."""

from pathlib import Path

import numpy as np
import pytest

from roundhouse.elements.placement import placer as placer_module
from roundhouse.elements.placement.builtin import Consolidated, FirstFree
from roundhouse.elements.placement.packing import _Launches
from roundhouse.elements.placement.preemption import _gpus_in_order, backfill, preempt_below
from roundhouse.runtime import rowsets
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.rowsets import isin_rows
from roundhouse.runtime.simulate import simulate
from tests.test_event_skipping import COLUMNS

ROWS = 400  # job rows are drawn below this


class PlainConsolidated(Consolidated):
    def _custom_choice(self) -> bool:
        return True  # (the same choice, taken through `choose` one job at a time)


class PlainFirstFree(FirstFree):
    def _custom_choice(self) -> bool:
        return True


def _pool(seed: int):
    """A cluster, who holds which GPU, and a ranking over running and waiting jobs."""
    rng = np.random.default_rng(seed)
    cluster = Cluster.parse(str(rng.choice(["6x4:V100", "5x8:V100", "8x2:V100", "3x8:V100", "2x4:V100,2x8:V100"])))
    g = cluster.n_gpus
    n = int(rng.integers(4, 60))
    rows = rng.permutation(ROWS)[:n]
    want = rng.choice([1, 1, 1, 2, 2, 4, 8, 16], n)
    want = np.minimum(want, g)
    holder = np.full(g, -1, dtype=np.int64)
    fill = float(rng.choice([0.0, 0.5, 0.9, 1.0]))
    for k in rng.permutation(n):
        free = (holder < 0).nonzero()[0]
        if rng.random() < fill and len(free) >= want[k]:
            # Scattered or on one node, so that nodes fill unevenly.
            node_free = cluster.per_node(holder < 0)
            fits = (node_free >= want[k]).nonzero()[0]
            if want[k] <= cluster.max_gpus_per_node and len(fits) and rng.random() < 0.7:
                node = int(rng.choice(fits))
                on = free[cluster.gpu_node[free] == node][: want[k]]
            else:
                on = rng.choice(free, want[k], replace=False)
            holder[on] = rows[k]
    is_run = np.isin(rows, holder)
    return rng, cluster, holder, rows, want, is_run


def _same_launches(a: _Launches, b: _Launches) -> None:
    for x, y in zip(a.arrays(), b.arrays()):
        assert np.array_equal(x, y)
    assert np.array_equal(a.placed, b.placed)


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("kind", ["consolidated", "spread", "first_free", "mixed"])
def test_preemption_and_backfill_match_the_plain_choice(seed, kind):
    rowsets.reserve(ROWS)
    rng, cluster, holder, rows, want, is_run = _pool(seed)
    n = len(rows)
    fast, plain = {
        "consolidated": (Consolidated(), PlainConsolidated()),
        "spread": (Consolidated(strict=False), PlainConsolidated(strict=False)),
        "first_free": (FirstFree(), PlainFirstFree()),
        "mixed": (Consolidated(), PlainConsolidated()),
    }[kind]
    one_node = np.full(n, kind != "first_free")
    if kind == "mixed":
        one_node = rng.random(n) < 0.5
    # Step 4: waiting jobs that found no room, and the running jobs kept (all of them).
    kept_pos = is_run.nonzero()[0]
    unplaced = (~is_run & (rng.random(n) < 0.6)).nonzero()[0]
    results = []
    for placer in (fast, plain):
        available = holder < 0
        launches = _Launches(n)
        victims = preempt_below(placer, cluster, holder, available, unplaced, kept_pos, rows, want, None, one_node, launches)
        results.append((victims, available, launches))
    (v1, a1, l1), (v2, a2, l2) = results
    assert np.array_equal(v1, v2) and np.array_equal(a1, a2)
    _same_launches(l1, l2)
    # Step 5 on what is left: waiting jobs not selected, in ranking order.
    selected = np.zeros(n, dtype=bool)
    selected[unplaced] = True
    for available, launches in ((a1, l1), (a2, l2)):
        backfill(fast if launches is l1 else plain, cluster, available, want, selected, is_run, None, one_node, launches)
    assert np.array_equal(a1, a2)
    _same_launches(l1, l2)


@pytest.mark.parametrize("seed", range(20))
def test_backfill_on_random_free_gpus(seed):
    # Free GPUs scattered at random (no preemption first), from an empty to a full cluster.
    rowsets.reserve(ROWS)
    rng, cluster, holder, rows, want, is_run = _pool(seed + 100)
    n = len(rows)
    selected = rng.random(n) < 0.3
    one_node = rng.random(n) < 0.7
    free = (rng.random(cluster.n_gpus) < rng.random()) & (holder < 0)
    for fast, plain in ((Consolidated(), PlainConsolidated()), (Consolidated(strict=False), PlainConsolidated(strict=False))):
        got = []
        for placer in (fast, plain):
            available, launches = free.copy(), _Launches(n)
            backfill(placer, cluster, available, want, selected, is_run, None, one_node, launches)
            got.append((available, launches))
        assert np.array_equal(got[0][0], got[1][0])
        _same_launches(got[0][1], got[1][1])


@pytest.mark.parametrize("seed", range(10))
def test_gpus_in_order_groups_each_jobs_gpus_in_the_given_order(seed):
    rowsets.reserve(ROWS)
    rng, cluster, holder, rows, want, is_run = _pool(seed)
    tail = rng.permutation(rows[is_run])
    ids, owner = _gpus_in_order(holder, tail)
    expected = [(gpu, k) for k, row in enumerate(tail.tolist()) for gpu in (holder == row).nonzero()[0].tolist()]
    assert list(zip(ids.tolist(), owner.tolist())) == expected


LONG_QUEUE = """round = {round};
cluster = "{cluster}";
src :: PoissonSource(rate={rate}/h, jobs={jobs}, seed=3{models});
src -> AcceptAll -> JobPool -> {ranking} -> place :: Consolidated -> Launch -> m :: JobMetrics;
"""
GRAPHS = {
    # Four times what 64 GPUs serve: a queue that grows, with preemptions every round.
    "las": dict(round="5min", cluster="8x8:V100", rate=8, jobs=400, models="", ranking="Las"),
    # A ranking that names a GPU type per job (Gavel's mechanism) on three types.
    "gavel": dict(
        round="6min",
        cluster=str(Path(__file__).resolve().parents[1] / "clusters" / "gavel-simulated.toml"),
        rate=40,
        jobs=200,
        models=", gpus=single, models=blox",
        ranking="MaxMinFairness -> GavelRounds",
    ),
}


@pytest.mark.parametrize("shape", sorted(GRAPHS))
def test_keeps_read_at_the_running_jobs_places_are_those_read_for_every_ranked_job(tmp_path, monkeypatch, shape):
    # A long ranking's keeps are read only where running jobs are ranked: with that read for every
    # ranking, and with it for none, every job's times, the counters and the explanations agree.
    path = tmp_path / "g.sched"
    path.write_text(LONG_QUEUE.format(**GRAPHS[shape]))
    runs, used = [], []
    for sparse in (False, True):
        with monkeypatch.context() as m:
            if sparse:

                def everywhere(ctx, rows):
                    used.append(len(rows))
                    return isin_rows(rows, ctx.running_rows).nonzero()[0]

                m.setattr(placer_module, "_running_places", everywhere)
            else:
                m.setattr(placer_module, "_FEW_RUN_FROM", 1 << 62)
            runs.append(simulate(compile_file(path), explain=True, until=200 * 3600.0))
    plain, sparse_run = runs
    assert used and max(used) > 0
    for name in COLUMNS:
        np.testing.assert_array_equal(plain.world.jobs.column(name), sparse_run.world.jobs.column(name), err_msg=name)
    timeless = lambda counters: {el: {k: v for k, v in c.items() if not k.endswith("_ms")} for el, c in counters.items()}  # noqa: E731
    assert timeless(plain.counters) == timeless(sparse_run.counters)
    assert plain.counters["place"]["preempted"] > 0
    assert plain.world.explain.frame(plain.world).equals(sparse_run.world.explain.frame(sparse_run.world))


@pytest.mark.parametrize("seed", range(30))
def test_wants_fit_adds_what_every_ranked_job_wants(seed):
    # The head of the ranking is added first; the answer is the sum over every ranked job's
    # wanted GPUs (none for a job wanting none) against the cluster's GPUs.
    rng = np.random.default_rng(seed)
    gpus = int(rng.integers(1, 40))
    want = rng.choice([-1, 0, 0, 1, 2, 4, 8], int(rng.integers(0, 3 * gpus)))
    assert placer_module._wants_fit(want, gpus) == (int(np.maximum(want, 0).sum()) <= gpus)
