"""The ranking's sort guessed from the last round's order: the same order as a full stable sort,
whatever the guess (ties by the rows' order, jobs that left or joined, NaN keys)."""

import numpy as np
import pytest

from roundhouse.elements.policies import base
from roundhouse.elements.policies.base import stable_order


@pytest.fixture(autouse=True)
def _always_guess(monkeypatch):
    monkeypatch.setattr(base, "_GUESS_FROM", 0)  # (small pools are sorted plainly)


def _cases(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(600, 3000))
    rows = np.sort(rng.choice(10 * n, n, replace=False))
    rng.shuffle(rows[n // 2 :])  # admission order need not be row order
    keys = rng.integers(0, 50, n).astype(np.float64) * 300.0  # many exact ties
    last = rows[keys.argsort(kind="stable")], np.sort(keys, kind="stable")
    moved = rng.choice(n, n // 20, replace=False)
    keys[moved] += 300.0 * rng.integers(0, 3, len(moved))  # some land on others' keys
    left = rng.random(n) < 0.05
    joined = rng.choice(np.setdiff1d(np.arange(10 * n), rows), 30, replace=False)
    keep = ~left
    return np.concatenate([rows[keep], joined]), np.concatenate([keys[keep], np.zeros(30)]), last, 10 * n


@pytest.mark.parametrize("seed", range(20))
def test_same_order_as_a_full_stable_sort(seed):
    rows, keys, last, table = _cases(seed)
    expected = keys.argsort(kind="stable")
    assert np.array_equal(stable_order(keys, rows, last, table), expected)
    # A guess that is no guess at all (reversed) gives the same order too.
    assert np.array_equal(stable_order(keys, rows, (last[0][::-1].copy(), last[1][::-1].copy()), table), expected)


def test_nan_keys_and_a_stale_guess():
    rows, keys, last, table = _cases(99)
    keys[::7] = np.nan
    keys[3::11] = np.inf
    assert np.array_equal(stable_order(keys, rows, last, table), keys.argsort(kind="stable"))
    stale = (np.array([1, 2, 3]), np.zeros(3))
    assert np.array_equal(stable_order(keys, rows, stale, table), keys.argsort(kind="stable"))


@pytest.mark.parametrize("seed", range(5))
def test_keys_that_move_without_ties(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    rows = rng.permutation(5 * n)[:n]
    keys = np.where(rng.random(n) < 0.5, 0.0, rng.random(n) * 1e5)  # waiting jobs tie at 0
    last = rows[keys.argsort(kind="stable")], np.sort(keys, kind="stable")
    running = rng.choice(n, 100, replace=False)
    keys[running] += rng.random(100) * 1e4
    assert np.array_equal(stable_order(keys, rows, last, 5 * n), keys.argsort(kind="stable"))


def test_a_pool_that_changes_its_order():
    rows, keys, last, table = _cases(5)
    rng = np.random.default_rng(5)
    keys = keys[: len(rows)]
    shuffled = rng.permutation(len(rows))  # the same jobs, in another order
    got = stable_order(keys[shuffled], rows[shuffled], last, table)
    assert np.array_equal(got, keys[shuffled].argsort(kind="stable"))


def test_an_empty_pool():
    rows, keys, last, table = _cases(7)
    empty = np.zeros(0, dtype=np.int64)
    assert len(stable_order(np.zeros(0), empty, last, table)) == 0
    assert np.array_equal(stable_order(keys, rows, (empty, np.zeros(0)), table), keys.argsort(kind="stable"))


@pytest.mark.parametrize("distinct", [1, 3, 40, 200, 2000])
def test_moved_jobs_tied_with_few_or_many_runs(distinct):
    # Moved jobs landing on one, a few or many runs of equal keys (the merge places them run by
    # run when the runs are few, and over the whole kept order when they are many).
    rng = np.random.default_rng(distinct)
    n = 6000
    rows = rng.permutation(3 * n)[:n]
    keys = rng.integers(0, distinct, n).astype(np.float64)
    last = rows[keys.argsort(kind="stable")], np.sort(keys, kind="stable")
    moved = rng.choice(n, 500, replace=False)
    keys[moved] = rng.integers(0, distinct + 1, len(moved))  # mostly onto existing runs
    joined = rng.choice(np.setdiff1d(np.arange(3 * n), rows), 40, replace=False)
    rows = np.concatenate([rows, joined])
    keys = np.concatenate([keys, rng.integers(0, distinct, 40).astype(np.float64)])
    assert np.array_equal(stable_order(keys, rows, last, 3 * n), keys.argsort(kind="stable"))
