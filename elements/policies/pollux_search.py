"""Pollux's cluster-wide allocation search (Qiao et al., OSDI 2021, §4.2, PolluxSched) over
arrays. No element here: elements/policies/pollux.py wires these to the round.

A candidate allocation is a (J, K) array of how many GPUs each of the round's J jobs gets on
each of the K machines; a population is (P, J, K) of int8 (a machine has at most 127 GPUs). The model is that of Pollux's public
simulator (petuum/adaptdl branch osdi21-artifact, `simulator/pollux.py`, Apache-2.0), written
here again over numpy arrays:

- **speedup** of job j on r GPUs over k machines: its goodput there at its goodput-best batch
  size over its goodput at a fair share (ceil(C / J) GPUs on ceil(K / C) machines, one where
  there are more GPUs than machines, as Pollux's simulator takes it), then scaled by
  machines / GPUs (so that a machine's worth of GPUs is worth 1);
- **restart penalty**: a job whose allocation changes has its speedup multiplied by
  max(age - restarts x delay, 0) / (age + delay) (delay 30 s, the simulator's);
- **fitness**: the generalised (power) mean of the jobs' speedups (+0.001) with exponent p
  (-1 by default, a harmonic mean: more negative is fairer; 0 the geometric mean of the
  speedups + 0.001, the limit of the others as p goes to 0);
- **crossover**: single-point over jobs (children take one parent's rows before the point,
  the other's after it), parents by binary tournament on fitness;
- **mutation**: each job reset to its current allocation with chance 0.1; each job picked
  with chance 0.1 has each of its entries zeroed with chance 0.1; then each entry on a machine
  with room grows to a random count up to the machine's size with chance
  p1 + p2 - p1 x p2, where p1 = 1 / J and p2 = 1 / (the jobs on that machine) if the job is
  on it, else 0 (both normalised over jobs, as the simulator's `_mutation` has them);
- **repair** (in job order, earlier jobs first): at most one distributed job per machine
  (interference avoidance: a later one loses its GPUs there), at most `max_replicas` GPUs and
  16 machines per job (machines in random order), no machine past its GPUs;
- **selection**: the best `population` of parents and children by fitness (elitist).

Pollux's simulator runs NSGA-II on two objectives (this fitness and the cluster's utility,
which only its autoscaler uses) and picks the best by fitness; with a fixed cluster we keep
the single objective, so selection is plain truncation rather than non-dominated sorting.
"""

from __future__ import annotations

import numpy as np

RESTART_DELAY_S = 30.0  # Pollux's simulator: the delay its restart penalty assumes
MAX_NODES = 16  # Pollux's repair: at most this many machines per job


def _ones(n: int) -> np.ndarray:
    ones = _ONES.get(n)
    if ones is None:
        ones = _ONES[n] = np.ones(n)
        ones.flags.writeable = False
    return ones


_ONES: dict[int, np.ndarray] = {}  # vectors of ones by length, for the sums below


def _sums(a: np.ndarray) -> np.ndarray:
    """Sums over the last axis as float64, by a matrix product: exact for these small
    integers and several times faster than an integer reduction over a short axis."""
    return a.astype(np.float64) @ _ones(a.shape[-1])


def _taken(states: np.ndarray) -> np.ndarray:
    """(P, K) GPUs taken on each machine in each candidate of a (P, J, K) population, as
    `_sums` takes them (over the jobs' axis); of a single job, a view of its row (the same
    counts, in the population's own type)."""
    if states.shape[1] == 1:
        return states[:, 0]
    return _ones(states.shape[1]) @ states.astype(np.float64)


def counts(states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(machines, GPUs) of each job in each candidate: two (P, J) arrays."""
    return _sums(states != 0).astype(np.int64), _sums(states).astype(np.int64)


def speedups(states: np.ndarray, table: np.ndarray) -> np.ndarray:
    """(P, J) speedups; `table[j, k, r]` is job j's speedup on r GPUs over k machines."""
    k, r = counts(states)
    j = np.arange(states.shape[1])[None, :]
    return table[j, k, r]


def restart_factor(age: np.ndarray, restarts: np.ndarray, delay: float = RESTART_DELAY_S) -> np.ndarray:
    """The factor a job's speedup takes when its allocation changes (module docstring)."""
    return np.maximum(age - restarts * delay, 0.0) / (age + delay)


def power_mean(values: np.ndarray, p: float) -> np.ndarray:
    """Generalised mean over the last axis of values + 0.001; p = 0: the geometric mean of
    values + 0.001, the limit of the others as p goes to 0."""
    if p == 0:
        return np.exp(np.log(values + 1e-3).mean(axis=-1))
    return (((values + 1e-3) ** p).mean(axis=-1)) ** (1.0 / p)


def scorer(table: np.ndarray, base: np.ndarray, factor: np.ndarray, scale: float, p: float):
    """The fitness function of one round (see `fitness`): each table entry's term of the power
    mean, unmoved and moved, is computed once here, so that a generation only looks them up.
    The terms are the same element-wise operations as `power_mean` on the looked-up values."""
    n, size = table.shape[0], table[0].size
    s = table * scale
    both = np.stack([s, s * factor[:, None, None]])  # (unmoved, moved) x (J, K + 1, C + 1)
    terms = (np.log(both + 1e-3) if p == 0 else (both + 1e-3) ** p).ravel()
    offset = np.arange(n) * size
    stride = table.shape[2]
    ones = _ones(base.shape[-1])

    def evaluate(states: np.ndarray) -> np.ndarray:
        if n == 0:
            return np.zeros(len(states))
        # Each job's machines and GPUs as one index of its term: machines x stride + GPUs.
        at = (((states != 0).astype(np.float64) @ ones) * stride + states.astype(np.float64) @ ones).astype(np.int64)
        moved = (states != base).astype(np.float64) @ ones > 0
        v = terms.take(at + offset + moved * (n * size))
        mean = np.add.reduce(v, axis=-1) / n  # what `mean` does, without its checks
        return np.exp(mean) if p == 0 else mean ** (1.0 / p)

    return evaluate


def fitness(states: np.ndarray, table: np.ndarray, base: np.ndarray, factor: np.ndarray, scale: float, p: float) -> np.ndarray:
    """(P,) fitness of each candidate, larger is better: the power mean of the jobs' scaled
    speedups, penalised where their allocation differs from `base` (the current one). A
    search evaluates many populations against one table: build `scorer` once for it."""
    return scorer(table, base, factor, scale, p)(states)


def tournament(score: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """`n` indices, each the better of two drawn at random (ties: the first drawn)."""
    a, b = rng.integers(0, len(score), (2, n))  # the same draws as two calls of n each
    return np.where(score[b] > score[a], b, a)


def crossover(first: np.ndarray, second: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Single-point crossover over jobs of parent pairs (first[i], second[i]): two children per
    pair, the first with `first`'s rows before the point and `second`'s from it, the second the
    other way round."""
    pairs, n_jobs = first.shape[:2]
    if n_jobs <= 1:  # every point is 0, which numpy gives without a draw: the parents swap
        return np.concatenate([second, first])
    point = rng.integers(0, n_jobs, size=(pairs, 1, 1))
    before = np.arange(n_jobs)[None, :, None] < point
    return np.concatenate([np.where(before, first, second), np.where(before, second, first)])


def mutate(states: np.ndarray, rng: np.random.Generator, base: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Pollux's three mutations (module docstring); `capacity` is each machine's GPUs. Random
    draws: resets (P, J), picks (P, J), zeroing (one per entry of a picked job), growth (P, J,
    K), new counts (one per grown entry)."""
    p, j, k = states.shape
    f32 = np.float32
    reset = rng.random((p, j), dtype=f32) < 0.1
    out = states.astype(np.result_type(states, base))  # a fresh array, as `flat` below needs
    np.copyto(out, base, where=reset[..., None])
    picked = np.flatnonzero(rng.random((p, j), dtype=f32) < 0.1)
    if len(picked):
        out.reshape(p * j, k)[picked] *= rng.random((len(picked), k), dtype=f32) >= 0.1
    room = _taken(out) < capacity  # machines with a GPU free
    # Growth's chance is prob1 + prob2 - prob1 * prob2, both normalised over the jobs' axis as
    # Pollux's `_mutation` does it on its (P, J, K) states (`mask.sum(axis=1)`): prob1 is
    # 1 / J on a machine with room (every job fits on it: one GPU a replica) and 0 on a full
    # one; prob2 is 1 / (the jobs on that machine) where the job is on a machine with room,
    # and 0 elsewhere (the chance is prob1 there, exactly).
    if j == 1:  # a lone job's chance is 1 where there is room (1 / 1 + 1 - 1), 0 elsewhere
        rng.random(out.shape, dtype=f32)  # every draw is below 1: drawn only to keep the stream
        grow = np.flatnonzero(room)
    else:
        p1 = f32(1 / max(j, 1))
        on = (out > 0) & room[:, None, :]
        p2 = f32(1) / np.maximum(_taken(on), 1).astype(f32)  # (P, K); where no job is on, unused
        chance = np.where(on, (p1 + p2 - p1 * p2)[:, None, :], (room * p1)[:, None, :])
        grow = np.flatnonzero(rng.random(out.shape, dtype=f32) < chance)
    flat = out.reshape(-1)  # a view: `out` is a fresh contiguous array
    now, top = flat[grow], capacity[grow % k]
    # Growth happens only on machines with room, so top - now + 1 > 0: truncation is the floor.
    flat[grow] = now + (rng.random(len(now)) * (top - now + 1)).astype(out.dtype)
    return out


def repair(
    states: np.ndarray, rng: np.random.Generator, max_replicas: np.ndarray, capacity: np.ndarray, interference: bool = True
) -> np.ndarray:
    """Make every candidate feasible (module docstring); jobs earlier in the array win.
    `interference` off leaves out interference avoidance (an ablation). Only the jobs and
    candidates that break a rule are touched (the rest are feasible already)."""
    out = states.copy()
    n_jobs, k = out.shape[1:]
    if interference and n_jobs > 1:  # on each machine only the first distributed job keeps its GPUs
        on = out > 0
        there = on & (_sums(on) > 1)[..., None]
        first = there.argmax(axis=1)[:, None, :]  # (P, 1, K): the first such job on each machine
        np.multiply(out, ~there | (np.arange(n_jobs)[None, :, None] <= first), out=out)
    # At most max_replicas GPUs and MAX_NODES machines per job, machines taken in random order.
    over = _sums(out) > max_replicas[None, :]
    if k > MAX_NODES:
        over |= _sums(out != 0) > MAX_NODES
    where = np.flatnonzero(over)  # (candidate, job) pairs, flat
    if len(where):
        grid = out.reshape(-1, k)  # a view: `out` is a fresh contiguous array
        rows = grid[where]
        shuffle = np.argsort(rng.random(rows.shape), axis=-1)
        at = (shuffle + (np.arange(len(rows)) * k)[:, None]).ravel()
        flat = rows.reshape(-1)
        r = np.minimum(np.cumsum(flat[at].reshape(rows.shape), axis=-1, dtype=np.int16), max_replicas[where % n_jobs, None])
        r[:, 1:] -= r[:, :-1].copy()
        if k > MAX_NODES:
            r[np.cumsum(r > 0, axis=-1) > MAX_NODES] = 0
        flat[at] = r.reshape(-1)
        grid[where] = rows
    # Machines' sizes: jobs in order take what is left.
    past = _taken(out) > capacity
    if past.any():  # running totals over jobs, jobs first: (J, candidates, K)
        full = past.any(axis=-1)
        rows = out[full].transpose(1, 0, 2)
        if n_jobs <= 32:  # a product with a triangle of ones (exact) beats cumsum while J is small
            taken = (np.tri(n_jobs) @ rows.reshape(n_jobs, -1).astype(np.float64)).reshape(rows.shape)
        else:
            taken = np.cumsum(rows, axis=0, dtype=np.int16)
        np.minimum(taken, capacity, out=taken, casting="unsafe")
        taken[1:] -= taken[:-1].copy()
        out[full] = taken.transpose(1, 0, 2)
    return out


def generation(
    pop: np.ndarray,
    score: np.ndarray,
    rng: np.random.Generator,
    *,
    base: np.ndarray,
    capacity: np.ndarray,
    max_replicas: np.ndarray,
    evaluate,
    keep: int,
    interference: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """One generation: `keep` children (tournament, crossover, mutation, repair), then the best
    `keep` of parents and children. Returns the population and its fitness, best first."""
    pairs = max(keep // 2, 1)
    parents = tournament(score, rng, 2 * pairs)
    children = crossover(pop[parents[:pairs]], pop[parents[pairs:]], rng)
    children = repair(mutate(children, rng, base, capacity), rng, max_replicas, capacity, interference)
    merged = np.concatenate([pop, children])
    scores = np.concatenate([score, evaluate(children)])
    best = np.argsort(-scores, kind="stable")[:keep]
    return merged[best], scores[best]


def search(
    start: np.ndarray,
    rng: np.random.Generator,
    *,
    base: np.ndarray,
    capacity: np.ndarray,
    max_replicas: np.ndarray,
    evaluate,
    keep: int,
    generations: int,
    interference: bool = True,
    patience: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A whole search: the `start` candidates repaired, then `generations` generations, or
    fewer: with `patience`, it stops once the best fitness has not grown for that many.
    Returns the population and its fitness, best first."""
    pop = repair(start, rng, max_replicas, capacity, interference)
    score = evaluate(pop)
    best, still = float(score.max()), 0
    for _ in range(generations):
        if patience is not None and still >= patience:
            break
        pop, score = generation(
            pop,
            score,
            rng,
            base=base,
            capacity=capacity,
            max_replicas=max_replicas,
            evaluate=evaluate,
            keep=keep,
            interference=interference,
        )
        still = 0 if score[0] > best else still + 1
        best = max(best, float(score[0]))
    return pop, score
