"""A long queue's order kept from round to round (elements/policies/kept_order.py) is the order a
plain sort gives: with it and without it, every job's times, the counters and the explanation
record agree, also when the reader of the world's progress loses track, when the queue crosses the
length from which the order is kept, and across a fork and a snapshot."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse import Simulation
from roundhouse.elements.policies import base as policy_base
from roundhouse.elements.policies import kept_order as kept_module
from roundhouse.elements.policies.base import merge_places
from roundhouse.elements.policies.fifo import Fifo
from roundhouse.elements.policies.las import Las
from roundhouse.elements.policies.srtf import Srtf
from roundhouse.elements.policies.tiresias import Srsf
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.progress_log import ProgressReader
from roundhouse.runtime.simulate import simulate
from tests.test_event_skipping import COLUMNS

QUEUE = """round = 5min;
cluster = "8x8:V100";
src :: PoissonSource(rate={rate}/h, jobs=400, seed=3);
src -> AcceptAll -> JobPool -> {policy} -> place :: Consolidated -> Launch -> m :: JobMetrics;
"""
GRAPHS = {
    # Four times what 64 GPUs serve: a queue that grows, with preemptions every round.
    "las": dict(rate=8, policy="Las"),
    "las-wall-seconds": dict(rate=8, policy="Las(service=wall_seconds)"),
    "fifo": dict(rate=8, policy="Fifo"),
    "srtf": dict(rate=8, policy="Srtf"),
    "srsf": dict(rate=8, policy="Srsf"),
    # About what 64 GPUs serve: the queue comes and goes (rounds pass and are carried out in bulk).
    "las-light": dict(rate=2, policy="Las"),
}


def _counting(monkeypatch) -> dict[str, int]:
    """Counts the orders mended and sorted afresh."""
    seen = {"mended": 0, "sorted": 0}
    mend = kept_module._mend

    def counted(*args):
        got = mend(*args)
        seen["mended" if got is not None else "sorted"] += 1
        return got

    monkeypatch.setattr(kept_module, "_mend", counted)
    return seen


def _compare(plain, kept) -> None:
    for name in COLUMNS:
        np.testing.assert_array_equal(plain.world.jobs.column(name), kept.world.jobs.column(name), err_msg=name)
    timeless = lambda counters: {el: {k: v for k, v in c.items() if not k.endswith("_ms")} for el, c in counters.items()}  # noqa: E731
    assert timeless(plain.counters) == timeless(kept.counters)
    assert plain.world.explain.frame(plain.world).equals(kept.world.explain.frame(kept.world))


def _queue_run(path, keep: bool):
    """The graph at `path` run with its order kept from round to round (`keep`) or sorted afresh."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(policy_base, "_GUESS_FROM", 8)  # (kept from 8 jobs: every long round of these graphs)
        m.setattr(Las, "keys_move_with_progress", keep)
        m.setattr(Fifo, "keys_move_with_progress", keep)
        m.setattr(Srtf, "keys_move_with_progress", keep)
        m.setattr(Srsf, "keys_move_with_progress", keep)
        return simulate(compile_file(path), explain=True)


@pytest.fixture(scope="module")
def plain_runs(tmp_path_factory):
    """Each graph run with a plain sort, once for the module: only a kept order reads the world's
    progress, so the reader's limit the test varies cannot change it. The tests only read it."""
    made = {}

    def get(shape: str):
        if shape not in made:
            path = tmp_path_factory.mktemp(shape) / "g.sched"
            path.write_text(QUEUE.format(**GRAPHS[shape]))
            made[shape] = _queue_run(path, keep=False)
        return made[shape]

    return get


@pytest.mark.parametrize("shape", sorted(GRAPHS))
@pytest.mark.parametrize("limit", [ProgressReader.LIMIT, 1])
def test_a_kept_order_ranks_as_a_plain_sort(tmp_path, monkeypatch, plain_runs, shape, limit):
    plain = plain_runs(shape)
    path = tmp_path / "g.sched"
    path.write_text(QUEUE.format(**GRAPHS[shape]))
    monkeypatch.setattr(ProgressReader, "LIMIT", limit)  # (1: the reader loses track whenever rounds pass)
    seen = _counting(monkeypatch)
    runs = [plain, _queue_run(path, keep=True)]
    _compare(*runs)
    assert seen["mended"] > 100
    assert runs[0].counters["place"]["preempted"] > 0 or shape in ("fifo", "srtf", "srsf")
    if limit == 1 and shape == "las-light":
        assert seen["sorted"] > 0  # (the reader lost track, and the order was sorted afresh)


def test_a_fork_and_a_snapshot_run_on_with_the_kept_order(tmp_path, monkeypatch):
    monkeypatch.setattr(policy_base, "_GUESS_FROM", 8)
    seen = _counting(monkeypatch)
    text = QUEUE.format(**GRAPHS["las"])
    straight = Simulation(text)
    straight.run()
    sim = Simulation(text).run_until(60 * 3600)
    assert seen["mended"] > 100
    fork = sim.fork()
    loaded = Simulation.load(sim.save(tmp_path / "mid.snap"))
    fork.run()  # the fork first: the original must not notice
    loaded.run()
    sim.run()
    expected = straight.jobs(["job_id", "first_start_s", "finish_s", "preemptions", "service"]).sort("job_id")
    for other in (fork, loaded, sim):
        assert other.jobs(expected.columns).sort("job_id").equals(expected)


@pytest.mark.parametrize("seed", range(40))
def test_merge_places_puts_each_new_entry_where_a_sort_would(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(0, 400)), int(rng.integers(1, 200))
    # Few distinct keys, so that many entries tie; sometimes more than 64 tied groups.
    distinct = int(rng.choice([3, 20, 150]))
    keys = rng.integers(0, distinct, n + m).astype(np.float64)
    second = rng.permutation(n + m)
    kept, other = np.arange(n), np.arange(n, n + m)
    kept = kept[np.lexsort((second[kept], keys[kept]))]
    other = other[np.lexsort((second[other], keys[other]))]
    at = merge_places(keys[kept], second[kept], keys[other], second[other])
    merged = np.insert(kept, at, other)
    np.testing.assert_array_equal(merged, np.lexsort((second, keys)))


@pytest.mark.parametrize("policy", ["Las", "Fifo", "Srtf", "Srsf"])
def test_policies_whose_keys_move_with_progress_keep_their_order(tmp_path, monkeypatch, policy):
    """As declared by the classes themselves (the test above sets the declaration both ways)."""
    monkeypatch.setattr(policy_base, "_GUESS_FROM", 8)
    seen = _counting(monkeypatch)
    path = tmp_path / "g.sched"
    path.write_text(QUEUE.format(rate=8, policy=policy))
    run = simulate(compile_file(path))
    assert seen["mended"] > 100
    assert run.counters["place"]["preempted"] > 0 or policy == "Fifo"
