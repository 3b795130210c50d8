"""Pollux's search, made faster, gives what the straightforward version gave: the same
populations, fitness and random draws. The references below are the search's mutation, repair
and fitness as they were written before (one broadcast chance per entry, no single-job path,
`mean` over jobs), on random populations: one job and several, machines past Pollux's 16,
allocations above a machine's size (a current allocation on GPUs since taken offline)."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.elements.policies import pollux_search as s


def _sums(a):
    return a.astype(np.float64).sum(axis=-1)


def _taken(states):
    return states.astype(np.float64).sum(axis=1)


def mutate_reference(states, rng, base, capacity):
    p, j, k = states.shape
    f32 = np.float32
    reset = rng.random((p, j), dtype=f32) < 0.1
    out = np.where(reset[..., None], base, states)
    picked = rng.random((p, j), dtype=f32) < 0.1
    n_picked = np.count_nonzero(picked)
    if n_picked:
        out[picked] *= rng.random((n_picked, k), dtype=f32) >= 0.1
    room = _taken(out) < capacity
    prob1 = (room / max(j, 1)).astype(f32)
    on = (out > 0) & room[:, None, :]
    chance = np.repeat(prob1[:, None, :], j, axis=1)
    where = np.flatnonzero(on)
    p1 = chance.reshape(-1)[where]
    machine = (where // (j * k)) * k + where % k
    p2 = f32(1) / _taken(on).reshape(-1)[machine].astype(f32)
    chance.reshape(-1)[where] = p1 + p2 - p1 * p2
    grow = np.flatnonzero(rng.random(out.shape, dtype=f32) < chance)
    flat = out.reshape(-1)
    now, top = flat[grow], capacity[grow % k]
    flat[grow] = now + np.floor(rng.random(len(now)) * (top - now + 1)).astype(out.dtype)
    return out


def repair_reference(states, rng, max_replicas, capacity, interference=True):
    out = states.copy()
    n_jobs, k = out.shape[1:]
    if interference and n_jobs > 1:
        on = out > 0
        there = on & (_sums(on) > 1)[..., None]
        first = there.argmax(axis=1)[:, None, :]
        out *= ~there | (np.arange(n_jobs)[None, :, None] <= first)
    over = _sums(out) > max_replicas[None, :]
    if k > s.MAX_NODES:
        over |= _sums(out != 0) > s.MAX_NODES
    if over.any():
        rows = out[over]
        shuffle = np.argsort(rng.random(rows.shape), axis=-1)
        at = (shuffle + (np.arange(len(rows)) * k)[:, None]).ravel()
        taken = np.minimum(np.cumsum(rows.reshape(-1)[at].reshape(rows.shape), axis=-1), max_replicas[np.nonzero(over)[1], None])
        r = taken.copy()
        r[:, 1:] -= taken[:, :-1]
        if k > s.MAX_NODES:
            r[np.cumsum(r > 0, axis=-1) > s.MAX_NODES] = 0
        rows.reshape(-1)[at] = r.reshape(-1)
        out[over] = rows
    past = _taken(out) > capacity
    if past.any():
        full = past.any(axis=-1)
        taken = np.minimum(np.cumsum(out[full], axis=1), capacity)
        taken[:, 1:] -= taken[:, :-1].copy()
        out[full] = taken
    return out


def fitness_reference(states, table, base, factor, scale, p):
    k, r = (states != 0).sum(axis=-1), states.sum(axis=-1)
    speedup = table[np.arange(states.shape[1])[None, :], k, r] * scale
    moved = (states != base[None]).any(axis=-1)
    return s.power_mean(np.where(moved, speedup * factor[None, :], speedup), p)


def case(seed: int):
    """A random population: jobs, machines, sizes, and a current allocation that may sit on
    more GPUs than a machine now has."""
    g = np.random.default_rng(seed)
    jobs = int(g.choice([1, 1, 2, 3, 5, 8, 13]))
    machines = int(g.choice([1, 4, 16, 20]))
    size = int(g.integers(1, 9))
    capacity = g.integers(0, size + 1, machines)
    states = (g.random((int(g.integers(1, 41)), jobs, machines)) * (size + 1) * g.random()).astype(np.int8)
    base = (g.random((jobs, machines)) * (size + 2) * g.random()).astype(np.int8)
    limit = g.integers(1, size * machines + 2, jobs)
    return states, base, capacity, limit


@pytest.mark.parametrize("seed", range(60))
def test_mutation_and_repair_draw_and_give_what_the_straightforward_ones_did(seed):
    states, base, capacity, limit = case(seed)
    fast, slow = np.random.default_rng(seed), np.random.default_rng(seed)
    mutated = s.mutate(states, fast, base, capacity)
    expected = mutate_reference(states, slow, base, capacity)
    assert mutated.dtype == expected.dtype and np.array_equal(mutated, expected)
    assert fast.bit_generator.state == slow.bit_generator.state
    for interference in (True, False):
        repaired = s.repair(mutated, fast, limit, capacity, interference)
        assert np.array_equal(repaired, repair_reference(expected, slow, limit, capacity, interference))
        assert fast.bit_generator.state == slow.bit_generator.state


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("p", [-1.0, 0.0, 0.5])
def test_fitness_is_the_power_mean_of_the_looked_up_speedups_to_the_bit(seed, p):
    states, base, capacity, _ = case(seed)
    g = np.random.default_rng(seed + 1000)
    jobs, machines = base.shape
    table = g.random((jobs, machines + 1, 128 * machines + 1)) * 3
    factor = g.random(jobs)
    got = s.scorer(table, base, factor, 0.25, p)(states)
    assert got.tobytes() == fitness_reference(states, table, base, factor, 0.25, p).tobytes()


def test_a_lone_job_grows_on_every_machine_with_room_and_draws_the_same():
    """With one job every growth chance is 1 where a machine has room: the faster path skips
    the comparison but not the draws."""
    states = np.zeros((50, 1, 6), dtype=np.int8)
    capacity = np.array([0, 1, 2, 3, 4, 4])
    fast, slow = np.random.default_rng(7), np.random.default_rng(7)
    out = s.mutate(states, fast, states[0], capacity)
    assert np.array_equal(out, mutate_reference(states, slow, states[0], capacity))
    assert fast.bit_generator.state == slow.bit_generator.state
    assert (out[:, 0, 0] == 0).all() and (out[:, 0, 1:] <= capacity[1:]).all() and out[:, 0, 1:].any(axis=0).all()
