"""ONES' online evolutionary search (Bian et al., SC'21, §3.2) over arrays, and its per-job batch
limit R (the paper's rule, §3.3.2, and the artifact's). No element here: elements/policies/ones.py
wires these to the round.

A candidate schedule is a genome with one gene per GPU: the index of the job on it (0..n-1, the
jobs of this round) or EMPTY. A population is a (K, C) int array. A job's local batch follows
from its GPU count (the artifact's encoding): global batch = local batch x GPUs.

ONES takes every job to be elastic. A `whole` job (one that cannot change its GPU count: the
element's jobs the elastic profile does not know) runs on exactly its `allowed` GPUs or none:
a candidate that would give it fewer gives it none.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

EMPTY = -1


def job_counts(pop: np.ndarray, n: int) -> np.ndarray:
    """(K, n): GPUs each candidate gives each job."""
    k = len(pop)
    filled = pop >= 0
    flat = (np.arange(k)[:, None] * n + pop)[filled]
    return np.bincount(flat, minlength=k * n).reshape(k, n)


def occurrence(pop: np.ndarray) -> np.ndarray:
    """(K, C): for each gene, how many genes of the same job lie left of it in its candidate."""
    k, c = pop.shape
    key = (np.arange(k)[:, None] * (pop.max(initial=0) + 2) + pop + 1) * c + np.arange(c)
    order = np.argsort(key, axis=None, kind="stable")
    group = (key.ravel() // c)[order]
    start = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
    rank = np.arange(k * c) - np.repeat(start, np.diff(np.r_[start, k * c]))
    out = np.empty(k * c, dtype=np.int64)
    out[order] = rank
    return out.reshape(k, c)


def score(pop: np.ndarray, processed: np.ndarray, factor: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """Eq. 8, lower is better: sum over running jobs of Y_processed * c / X(c) * (1/rho - 1).
    `factor` is 1/rho - 1 per job (0 for a job without a prediction); `speed` is (n, C+1)
    samples/s at each GPU count."""
    n = len(processed)
    c = job_counts(pop, n)
    x = speed[np.arange(n)[None, :], c]
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(c > 0, processed * c / x * factor, 0.0)
    return np.nan_to_num(term, nan=0.0, posinf=1e30).sum(axis=1)


def trim(pop: np.ndarray, allowed: np.ndarray, whole: np.ndarray | None = None) -> np.ndarray:
    """Genes of a job past its `allowed` count (per job; 0 drops the job) become EMPTY,
    keeping its leftmost ones; so do all the genes of a `whole` job given fewer than that."""
    out = pop.copy()
    filled = out >= 0
    over = filled & (occurrence(out) >= allowed[np.where(filled, out, 0)])
    out[over] = EMPTY
    if whole is not None and whole.any():
        short = whole[None, :] & (job_counts(out, len(allowed)) < allowed[None, :])
        filled = out >= 0
        out[filled & short[np.arange(len(out))[:, None], np.where(filled, out, 0)]] = EMPTY
    return out


def refresh(pop: np.ndarray, allowed: np.ndarray, whole: np.ndarray | None = None) -> np.ndarray:
    """Refresh (§3.2.2 step 1): free the GPUs of jobs that are gone (allowed 0) and trim each
    job to what it may hold now (its batch limit)."""
    return trim(pop, allowed, whole)


def crossover(
    pop: np.ndarray, rng: np.random.Generator, pairs: int, swap: float, allowed: np.ndarray, whole: np.ndarray | None = None
) -> np.ndarray:
    """Uniform crossover (Fig. 8): `pairs` random parent pairs; per GPU, with probability
    `swap` child 1 takes parent 2's gene and child 2 parent 1's. Genes a job cannot hold
    (past its allowed count, or short of it for a `whole` job) are dropped. Returns 2 x pairs
    children."""
    k = len(pop)
    first, second = rng.integers(0, k, pairs), rng.integers(0, k, pairs)
    mask = rng.random((pairs, pop.shape[1])) < swap
    a, b = pop[first], pop[second]
    children = np.concatenate([np.where(mask, b, a), np.where(mask, a, b)])
    return trim(children, allowed, whole)


def mutate(pop: np.ndarray, rng: np.random.Generator, rate: float, immune: np.ndarray) -> np.ndarray:
    """Uniform mutation (Fig. 9): in each candidate, each job not `immune` is preempted with
    probability `rate` (its GPUs freed, to be refilled by fill)."""
    n = len(immune)
    drop = (rng.random((len(pop), n)) < rate) & ~immune[None, :]
    out = pop.copy()
    filled = out >= 0
    hit = filled & drop[np.arange(len(pop))[:, None], np.where(filled, out, 0)]
    out[hit] = EMPTY
    return out


def fill(pop: np.ndarray, order: np.ndarray, target: np.ndarray, whole: np.ndarray | None = None) -> np.ndarray:
    """Give free GPUs to jobs in `order`, each up to `target` GPUs (per job), first come first
    served along the order; the same for every candidate, done for all at once. A `whole` job
    gets all it wants or nothing (then the jobs after it may take the GPUs)."""
    if not len(order):
        return pop
    out = pop.copy()
    n = len(target)
    have = job_counts(out, n)[:, order]
    want = np.maximum(target[order][None, :] - have, 0)
    free = (out < 0).sum(axis=1)
    grant = _grants(want, free, None if whole is None else whole[order])
    jobs = np.repeat(np.broadcast_to(order, grant.shape).ravel(), grant.ravel())
    total = grant.sum(axis=1)
    ek, ep = np.nonzero(out < 0)
    starts = np.r_[0, np.cumsum(free)[:-1]]
    rank = np.arange(len(ek)) - starts[ek]
    take = rank < total[ek]
    out[ek[take], ep[take]] = jobs
    return out


def _grants(want: np.ndarray, free: np.ndarray, whole: np.ndarray | None) -> np.ndarray:
    """(K, m): GPUs each of m jobs in order gets from each candidate's `free` ones, up to
    `want`. A `whole` job that does not fit is skipped, and with it every later whole job
    wanting more than was left for it (what is left only shrinks along the order), so each
    pass leaves less room: at most a few passes, each over whole arrays."""
    while True:
        room = free[:, None] - (np.cumsum(want, axis=1) - want)
        if whole is None:
            break
        short = whole[None, :] & (want > 0) & (want > room)
        rows = np.flatnonzero(short.any(axis=1))
        if not len(rows):
            break
        first = short[rows].argmax(axis=1)
        left = room[rows, first]
        later = np.arange(want.shape[1])[None, :] >= first[:, None]
        want = want.copy()
        want[rows] = np.where(whole[None, :] & later & (want[rows] > left[:, None]), 0, want[rows])
    return np.clip(room, 0, want)


def reorder(pop: np.ndarray, n: int) -> np.ndarray:
    """Reorder (Fig. 10): each job's GPUs packed next to each other, the jobs with more GPUs
    first (ties: in the order they first appear), free GPUs last. Packed largest first, blocks
    whose sizes are powers of two (as R's doublings make them) start at a multiple of their
    size, so on machines of a power-of-two GPUs, numbered in order, a job spans as few machines
    as it can."""
    k, c = pop.shape
    filled = pop >= 0
    first = np.full((k, n + 1), c, dtype=np.int64)
    kk = np.broadcast_to(np.arange(k)[:, None], pop.shape)
    pos = np.broadcast_to(np.arange(c)[None, :], pop.shape)
    np.minimum.at(first, (kk[filled], pop[filled]), pos[filled])
    job = np.where(filled, pop, n)
    size = np.c_[job_counts(pop, n), np.zeros(k, dtype=np.int64)][kk, job]
    key = np.where(filled, ((c - size) * (c + 1) + first[kk, job]) * c + pos, (c + 1) * (c + 1) * c + pos)
    return np.take_along_axis(pop, np.argsort(key, axis=1, kind="stable"), axis=1)


def place(counts: np.ndarray, current: np.ndarray, rank: np.ndarray, node: np.ndarray) -> np.ndarray:
    """The genome that gives each job j `counts[j]` GPUs, placed for locality against `current`
    (the genome in force; `rank`: each of its GPUs' rank in the job holding it, 0 to size - 1;
    `node`: each GPU's machine). A running job keeps its first `counts[j]` ranks (all its GPUs
    when it keeps its size or grows; a shrinking job a subset, its first ranks, which an
    in-place shrink keeps). A growing job first takes free GPUs on the machines it runs on, if
    they hold all it adds (an in-place grow). The rest, largest demand first, go where they span
    the fewest machines (machines with the most free GPUs first: a job started on one GPU then
    has room to grow in place): waiting jobs, and growing jobs that must reach another machine,
    adding its GPUs to theirs unless moving the whole job would span fewer machines (a grow onto
    another machine is a restart either way). Within a machine the GPUs idle in `current` come
    first, so a launch can start while the epoch gate holds the rest of a schedule back."""
    c, n = len(current), len(counts)
    running = current >= 0
    holder = np.where(running, current, n)
    held = np.bincount(current[running], minlength=n)
    out = np.where(running & (rank < np.r_[counts, 0][holder]), current, EMPTY)
    need = counts - np.bincount(out[out >= 0], minlength=n)
    # Free GPUs are taken machine by machine, within one idle ones first, then in id order.
    n_nodes = int(node.max()) + 1 if c else 0
    within = np.lexsort((np.arange(c), running, node))
    todo = []
    for j in np.flatnonzero((held > 0) & (need > 0)).tolist():
        local = (out < 0) & np.isin(node, node[current == j])
        if local.sum() >= need[j]:
            out[_take(local, need[j], node, within, n_nodes)] = j
        else:
            todo.append(j)
    todo += np.flatnonzero((held == 0) & (need > 0)).tolist()
    for j in sorted(todo, key=lambda j: (-need[j], j)):
        free = out < 0
        if not held[j]:
            out[_take(free, need[j], node, within, n_nodes)] = j
            continue
        mine = out == j
        extend = _take(free, need[j], node, within, n_nodes, prefer=np.unique(node[mine]))
        moved = _take(free | mine, counts[j], node, within, n_nodes)
        if len(np.unique(node[moved])) < len(np.unique(np.r_[node[mine], node[extend]])):
            out[mine] = EMPTY
            out[moved] = j
        else:
            out[extend] = j
    return out


def _take(
    free: np.ndarray, want: int, node: np.ndarray, within: np.ndarray, n_nodes: int, prefer: np.ndarray | None = None
) -> np.ndarray:
    """`want` of the `free` GPUs, on as few machines as hold them: the machines in `prefer`
    first, then the others, each lot by most free GPUs (ties: the lower machine); within a
    machine in the order `within` lists GPUs."""
    spare = np.bincount(node[free], minlength=n_nodes)
    first = np.zeros(n_nodes, dtype=bool)
    if prefer is not None:
        first[prefer] = True
    order = np.lexsort((np.arange(n_nodes), -spare, ~first))
    position = np.empty(n_nodes, dtype=np.int64)
    position[order] = np.arange(n_nodes)
    gpus = within[free[within]]
    gpus = gpus[np.argsort(position[node[gpus]], kind="stable")]
    return gpus[:want]


def select(pop: np.ndarray, scores: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """Elitist selection: the `keep` candidates with the lowest scores (ties: the earlier)."""
    best = np.argsort(scores, kind="stable")[:keep]
    return pop[best], scores[best]


def scale_down(limit: np.ndarray, processed_s: np.ndarray, sigma: float, rounding: str = "ceil") -> np.ndarray:
    """The paper's rule against convoys (§3.3.2): R' = ceil(2R / ceil(sigma T + 1)), T the
    job's processed time. `rounding="floor"` takes the inner ceiling as a floor (double until
    1/sigma, hold until 2/sigma, then shrink), the other reading of the printed formula."""
    inner = sigma * np.asarray(processed_s, dtype=np.float64) + 1.0
    inner = np.ceil(inner) if rounding == "ceil" else np.floor(inner)
    return np.maximum(np.ceil(2.0 * limit / inner), 1).astype(np.int64)


def scale_up(limit: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """The artifact's scale-up (its Monitor.scale_up): R doubles, to at most `cap` GPUs (the
    cluster, and four times what the job asked for)."""
    return np.minimum(2 * np.asarray(limit), cap).astype(np.int64)


def shrink(size: int, run_s: float, median_s: float) -> int:
    """The artifact's scale-down (its Monitor.scale_down, scale_down_factor 1) of a job on `size`
    GPUs that has run `run_s` seconds, past the median `median_s` of the jobs started:
    max(int(2 size / (run_s / median_s + 1)), 1) rounded up to even, never more than `size`
    (rounding a 1-GPU job up to 2 would grow it)."""
    new = max(int(2 * size / (run_s / median_s + 1)), 1)
    return min(new + new % 2, size)


# The artifact's num_epochs_before_next_scaling: epochs a job trains between changes of its R.
SCALE_EPOCHS = 2.0


def artifact_limits(
    limit: np.ndarray,
    since: np.ndarray,
    running: np.ndarray,
    held: np.ndarray,
    run_s: np.ndarray,
    cap: np.ndarray,
    n_gpus: int,
    median: Callable[[], float] | None,
) -> np.ndarray:
    """The artifact's R rules for one round (its ONESScheduler._schedule): a running job that has
    trained SCALE_EPOCHS epochs `since` its last change is eligible; one running at its limit
    doubles it (scale_up, up to `cap`); then the single largest eligible job, if it holds at
    least `n_gpus` // 2 GPUs and has run longer than the median run time of the jobs started
    (`median()`, asked only then; None: nothing scales down), shrinks (shrink), if that takes
    GPUs from it (else its R stays as it is)."""
    out = np.asarray(limit, dtype=np.int64).copy()
    eligible = running & (since >= SCALE_EPOCHS)
    up = eligible & (held >= out)
    out[up] = scale_up(out[up], cap[up])
    if median is None or not eligible.any():
        return out
    j = int(np.argmax(np.where(eligible, held, -1)))  # (ties: the earliest job, as the artifact)
    if held[j] > 0 and held[j] >= n_gpus // 2:
        m = median()
        if m > 0 and run_s[j] > m:
            smaller = shrink(int(held[j]), float(run_s[j]), m)
            # Only a scale-down that takes GPUs away sets R: one that leaves the job at its size
            # (a 1-GPU job, which holds half a cluster of 2 or 3 GPUs; a size rounded back up to
            # even) would undo this round's doubling, so the job could never grow. The
            # artifact's scale-down only asks for GPUs back; its limit stays as doubled.
            if smaller < held[j]:
                out[j] = smaller
    return out


def resume_limit(limit: np.ndarray, rejected: np.ndarray) -> np.ndarray:
    """Resume (§3.3.2): a waiting job left out of the deployed schedule halves its limit."""
    return np.where(rejected, np.maximum(limit // 2, 1), limit)


def generation(
    pop: np.ndarray,
    rng: np.random.Generator,
    *,
    allowed: np.ndarray,
    new_order: np.ndarray,
    fill_order: np.ndarray,
    immune: np.ndarray,
    processed: np.ndarray,
    factor: np.ndarray,
    speed: np.ndarray,
    keep: int,
    swap: float = 0.5,
    mutate_rate: float = 0.3,
    evolve: bool = True,
    whole: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One generation: refresh, crossover (keep/2 pairs), mutation (one mutant per candidate),
    fill (jobs in `new_order` one GPU each, a `whole` job all its `allowed`; then those in
    `fill_order` up to `allowed`), reorder, and elitist selection of `keep` by score (which
    counts GPUs, not where they are: `place` puts the deployed schedule's jobs on GPUs).
    Returns the population and its scores, best first."""
    n = len(allowed)
    pop = refresh(pop, allowed, whole)
    if evolve:
        children = crossover(pop, rng, max(keep // 2, 1), swap, allowed, whole)
        pop = np.vstack([pop, children, mutate(pop, rng, mutate_rate, immune)])
    first = np.ones(n, dtype=np.int64) if whole is None else np.where(whole, allowed, 1)
    pop = fill(pop, new_order, first, whole)
    pop = fill(pop, fill_order, allowed, whole)
    pop = reorder(pop, n)
    return select(pop, score(pop, processed, factor, speed), keep)
