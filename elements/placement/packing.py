"""The shared packing machinery: GPUs for one job (`choose_*`), GPUs for many jobs of one size
at once (`pack_*`), and the round's assignments as they are made (`_Launches`)."""

from __future__ import annotations

from bisect import insort

import numpy as np

_NEVER = np.iinfo(np.int64).max
_NONE = np.zeros(0, dtype=np.int64)


_CONSTANTS: dict[tuple, np.ndarray] = {}


def _constant(n: int, value) -> np.ndarray:
    """A read-only array of n copies of `value` (False, True or the integer 0): a view of a
    shared buffer, so that a round does not allocate one."""
    key = (type(value), value)  # False and 0 are equal keys otherwise
    buffer = _CONSTANTS.get(key)
    if buffer is None or len(buffer) < n:
        buffer = _CONSTANTS[key] = np.full(max(2 * n, 1024), value)
        buffer.setflags(write=False)
    return buffer[:n]


def next_true(test, start: int, stop: int) -> int:
    """The first index in [start, stop) where `test(a, b)` (a boolean array for indices a to b)
    is true, or -1: tested in windows that grow fourfold from 64, so that finding the next
    candidate in a long ranking costs about the distance to it, not the length of what is left."""
    width = 64
    while start < stop:
        end = min(start + width, stop)
        hit = test(start, end)
        j = int(hit.argmax())
        if hit[j]:
            return start + j
        start, width = end, 4 * width
    return -1


class _Launches:
    """The round's assignments as arrays: ranking positions, GPU counts, GPU ids."""

    def __init__(self, n: int):
        self.placed = np.zeros(n, dtype=bool)
        self._positions: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        self._gpus: list[np.ndarray] = []

    def add_group(self, positions: np.ndarray, gpus: np.ndarray) -> None:
        """Jobs at `positions`, job k on the GPUs in row k of `gpus` (all the same count)."""
        if len(positions):
            self.placed[positions] = True
            self._positions.append(positions)
            self._counts.append(np.zeros(len(positions), dtype=np.int64) + gpus.shape[1])
            self._gpus.append(gpus.ravel())

    def add_run(self, positions: np.ndarray, counts: np.ndarray, gpus: np.ndarray) -> None:
        """Jobs at `positions` with these GPU counts, their GPUs one after another in `gpus`."""
        if len(positions):
            self.placed[positions] = True
            self._positions.append(positions)
            self._counts.append(counts)
            self._gpus.append(gpus)

    def add(self, position: int, gpus: np.ndarray) -> None:
        self.add_run(np.array([position], dtype=np.int64), np.array([len(gpus)], dtype=np.int64), gpus)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if len(self._positions) <= 1:  # none, or one run (whole free nodes filled in order)
            return (self._positions[0], self._counts[0], self._gpus[0]) if self._positions else (_NONE, _NONE, _NONE)
        return np.concatenate(self._positions), np.concatenate(self._counts), np.concatenate(self._gpus)


def _of_type(cluster, mask: np.ndarray, t: int) -> np.ndarray:
    return mask if len(cluster.gpu_types) == 1 else mask & cluster.type_mask[t]


def fills_in_order(cluster, available: np.ndarray, sizes: np.ndarray) -> bool:
    """Whether best fit, largest first, would place jobs of these sizes (one GPU type, one node
    each, or whole nodes) on the available GPUs one after another in id order: true when the
    nodes are uniform with a power-of-two GPU count, each node is fully available or not at
    all, every size is a power of two, and all fit. Then each job either fills whole nodes or
    goes to the node being filled, whose room left is a multiple of its size (every earlier
    size was a multiple of it) and is the fewest of any node. LAS rotating the whole cluster
    every round makes this the common case."""
    per = cluster.max_gpus_per_node
    if not len(sizes) or not cluster.uniform_nodes or per & (per - 1):
        return False
    free = np.count_nonzero(available)
    if free % per:  # the cheapest sign of a partly available node, first
        return False
    return bool(
        np.count_nonzero(cluster.per_node(available) == per) * per == free
        and not np.count_nonzero(sizes & (sizes - 1))
        and int(sizes.sum()) <= free
    )


def pack_best_fit(cluster, available: np.ndarray, t: int, size: int, count: int) -> np.ndarray:
    """Place up to `count` jobs of `size` GPUs (at most a node's worth) of type t, each on the
    node with the fewest available GPUs that holds it, one after another. Since a node that
    just received a job stays the best fit while it can hold another, this is: nodes in
    ascending order of available GPUs, each filled while it can hold a job. Marks the GPUs
    taken; returns them, one row per job placed (the first jobs, in order)."""
    mask = _of_type(cluster, available, t)
    counts = cluster.per_node(mask)
    if count == 1:  # one job: straight to the best-fit node (what every branch below would pick)
        got = _best_fit_on_one_node(cluster, mask, counts, size)
        taken = np.zeros((0, size), dtype=np.int64) if got is None else got[None, :]
    elif cluster.uniform_nodes and size == cluster.max_gpus_per_node:  # whole nodes, in order
        nodes = (counts == size).nonzero()[0][:count]
        taken = cluster.node_first_gpu[nodes][:, None] + np.arange(size)
    elif cluster.uniform_nodes:
        # The nodes that hold one, fewest available GPUs first (ties by number), only as many as
        # the jobs need: taken count by count, from `size` up, so that the cost follows those
        # nodes and the few counts they have, not a sort of every node.
        picked, need = [], count
        for c in range(size, cluster.max_gpus_per_node + 1):
            here = (counts == c).nonzero()[0]
            if len(here):
                here = here[: -(-need // (c // size))]
                picked.append(here)
                need -= len(here) * (c // size)
                if need <= 0:
                    break
        if not picked:
            return np.zeros((0, size), dtype=np.int64)
        nodes = np.concatenate(picked) if len(picked) > 1 else picked[0]
        grid = cluster.node_first_gpu[nodes][:, None] + np.arange(cluster.max_gpus_per_node)
        free = mask[grid]
        if size > 1:  # each node's first (jobs it takes) x size available GPUs, in id order
            free &= free.cumsum(axis=1) <= (counts[nodes] // size * size)[:, None]
        taken = grid[free].reshape(-1, size)[:count]
    elif size == 1:
        ids = mask.nonzero()[0]
        taken = ids[counts[cluster.gpu_node[ids]].argsort(kind="stable")[:count]][:, None]
    else:
        ids = mask.nonzero()[0]  # grouped by node, ascending
        slots = counts // size
        order = counts.astype(np.int16).argsort(kind="stable")
        per_node = slots[order]
        node_of_job = order.repeat(per_node)[:count]
        # k-th job on its node: its place in the run of that node's slots.
        nth = (np.arange(int(per_node.sum())) - (per_node.cumsum() - per_node).repeat(per_node))[:count]
        node_start = cluster.gpu_node[ids].searchsorted(node_of_job)
        taken = ids[(node_start + nth * size)[:, None] + np.arange(size)]
    available[taken.ravel()] = False
    return taken


# `Placer._pack` places jobs one by one (`pack_best_fit_one_by_one`) when they are at most this
# many per GPU count beyond the first, else a GPU count at a time in array operations
# (`pack_best_fit`): a job costs about a fourteenth of a GPU count there, and a round's arrivals
# are a dozen jobs of three or four counts where a long queue's launches are hundreds of a few
# (measured on 32 and 800 nodes).
FEW_JOBS_PER_SIZE = 12
# `Placer._pack_newcomers` packs up to this many jobs that each want one node job by job
# (`pack_few_best_fit`), more with `Placer._pack`: a round's arrivals are a dozen jobs, a burst or
# a long queue hundreds.
FEW_JOBS = 64
# The most GPUs a node may have for packing job by job (each node's count is a byte).
MAX_ONE_BY_ONE = 255


def pack_best_fit_one_by_one(cluster, available: np.ndarray, t: int, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Jobs of these sizes (largest first, each at most a node's worth) on GPUs of type t of
    uniform nodes, as `pack_best_fit` places them one size after another, but job by job: each
    on the node with the fewest available GPUs that holds it (ties by number), taking its first
    available GPUs in id order (`_best_fit_one_by_one`). Marks the GPUs taken; returns which jobs
    were placed and their GPUs, one placed job after another."""
    mask = _of_type(cluster, available, t)
    placed, gpus = _best_fit_one_by_one(cluster, mask, sizes.tolist(), False)
    available[gpus] = False
    return np.array(placed, dtype=bool), gpus


def pack_few_best_fit(cluster, available: np.ndarray, sizes: list[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """A few jobs that each want one node, of these sizes (in ranking order, each from 1 to a
    node's worth), on the available GPUs of uniform nodes of one GPU type, as step 3 packs them:
    largest first, ties in ranking order, each on the node with the fewest available GPUs that
    holds it (ties by number), taking its first available GPUs in id order. Returns the order in
    which they are placed (positions in `sizes`) and their GPUs, one job after another, and marks
    the GPUs taken; None, with nothing marked, as soon as one finds no room. `pack_best_fit` and
    `pack_best_fit_one_by_one` place such jobs on the same GPUs, in the same order."""
    order = sorted(range(len(sizes)), key=sizes.__getitem__, reverse=True)  # (stable: ties keep ranking order)
    placed, gpus = _best_fit_one_by_one(cluster, available, [sizes[i] for i in order], True)
    if placed is None:
        return None
    available[gpus] = False
    return np.array(order, dtype=np.int64), gpus


# With 1, 2, 4 or 8 GPUs on every node, one node's flags in a per-GPU bool mask are the bytes of
# one word (as `Cluster.per_node` counts them).
_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_BYTES = [bytes([c]) for c in range(256)]
# By k, for a node's flags: the first k GPUs they mark, and the flags without them.
_FIRST: list[dict[bytes, tuple[tuple[int, ...], bytes]]] = [{} for _ in range(256)]


def _first_marked(flags: bytes, k: int) -> tuple[tuple[int, ...], bytes]:
    """`_FIRST[k][flags]`, worked out and kept (a few dozen patterns in a run)."""
    first = tuple([i for i, flag in enumerate(flags) if flag][:k])
    left = bytearray(flags)
    for i in first:
        left[i] = 0
    got = _FIRST[k][flags] = (first, bytes(left))
    return got


def _best_fit_one_by_one(cluster, mask: np.ndarray, sizes: list[int], stop: bool) -> tuple[list[bool] | None, np.ndarray]:
    """Best fit, job by job, for jobs of these sizes (in the order given, each at most a node's
    worth) on the GPUs marked in `mask`, on uniform nodes of at most `MAX_ONE_BY_ONE` GPUs: each
    goes to the first node, by number, of the smallest count of marked GPUs from its size up, and
    takes that node's first marked GPUs not taken yet, in id order; the node then has its size
    fewer. Returns which jobs were placed and their GPUs, one placed job after another (with
    `stop`: None as soon as one finds no room).

    The nodes' counts are a byte each, searched for the next node of a count (a node's first
    count, until a job takes from it) as jobs need one, and a node's marked GPUs are the bytes of
    the mask: a call costs a few array operations and the nodes its jobs look at, not a pass per
    count or a sort of every node."""
    per = cluster.max_gpus_per_node
    if per > MAX_ONE_BY_ONE:
        raise ValueError(f"packing job by job takes nodes of at most {MAX_ONE_BY_ONE} GPUs, not {per}")
    word = _WORDS.get(per) if cluster.uniform_nodes and mask.flags.c_contiguous else None
    counts = np.bitwise_count(mask.view(word)) if word is not None else cluster.per_node(mask).astype(np.uint8)
    table, flags = counts.tobytes(), mask.tobytes()
    # By count: the first node with it at the start that no job took from (-1: none; None: not
    # looked for yet), and the nodes jobs took from that have it now, by number.
    head: list[int | None] = [None] * (per + 1)
    moved: list[list[int] | None] = [None] * (per + 1)
    now: dict[int, bytes] = {}  # node jobs took from -> its flags left
    placed: list[bool] = []
    gpus: list[int] = []
    for size in sizes:
        c = size
        while c <= per:
            first = head[c]
            if first is None:
                first = head[c] = table.find(_BYTES[c])
            others = moved[c]
            if others and (first < 0 or others[0] < first):
                node = others.pop(0)
                break
            if first >= 0:
                node = first
                head[c] = table.find(_BYTES[c], first + 1)  # (past it only nodes no job took from: they go in order)
                break
            c += 1
        else:  # no node holds it
            if stop:
                return None, _NONE
            placed.append(False)
            continue
        if c > size:
            below = moved[c - size]
            if below is None:
                moved[c - size] = [node]
            else:
                insort(below, node)
        placed.append(True)
        start = node * per  # (uniform nodes: numbered one after another)
        marked = now.get(node)
        if marked is None:
            marked = flags[start : start + per]
        got = _FIRST[size].get(marked) or _first_marked(marked, size)
        if size == 1:  # (most jobs)
            gpus.append(start + got[0][0])
        else:
            gpus.extend(map(start.__add__, got[0]))
        now[node] = got[1]
    return placed, np.array(gpus, dtype=np.int64) if gpus else _NONE


def pack_whole_nodes(cluster, available: np.ndarray, t: int, size: int, count: int) -> np.ndarray:
    """Jobs spanning several whole nodes (size a multiple of a uniform node size): each takes
    the lowest-numbered fully available nodes, as `choose_consolidated` would one by one (the
    fullest nodes first, ties by number). Places as many as whole nodes allow; marks the GPUs."""
    per = cluster.max_gpus_per_node
    if not cluster.uniform_nodes or size % per:
        return np.zeros((0, size), dtype=np.int64)
    counts = cluster.per_node(_of_type(cluster, available, t))
    whole = (counts == per).nonzero()[0]
    jobs = min(count, len(whole) // (size // per))
    nodes = whole[: jobs * (size // per)]
    taken = (cluster.node_first_gpu[nodes][:, None] + np.arange(per)).reshape(jobs, size)
    available[taken.ravel()] = False
    return taken


def pack_first_free(cluster, available: np.ndarray, t: int, positions: np.ndarray, want: np.ndarray, launches) -> None:
    """Jobs at `positions`, in that order, each on the lowest-numbered available GPUs of type t.
    The ones that fit take consecutive runs of the available ids; marks the GPUs taken."""
    if not len(positions):
        return
    ids = _of_type(cluster, available, t).nonzero()[0]
    sizes = want[positions]
    ends = sizes.cumsum()
    fit = int(ends.searchsorted(len(ids), side="right"))  # the first `fit` jobs fit
    if fit:
        taken = ids[: int(ends[fit - 1])]
        available[taken] = False
        launches.add_run(positions[:fit], sizes[:fit], taken)
    for i in positions[fit:].tolist():  # smaller jobs after the first that did not fit
        got = choose_first_free(cluster, available, int(want[i]), [t])
        if got is not None:
            available[got] = False
            launches.add(i, got)


def choose_first_free(cluster, available: np.ndarray, want: int, types: list[int]) -> np.ndarray | None:
    """The lowest-numbered available GPUs of the first type (in preference order) with enough."""
    for t in types:
        ids = _of_type(cluster, available, t).nonzero()[0]
        if len(ids) >= want:
            return ids[:want]
    return None


def _best_fit_on_one_node(cluster, mask: np.ndarray, counts: np.ndarray, want: int) -> np.ndarray | None:
    """The first `want` GPUs marked in `mask` on the node with the fewest marked GPUs that
    still has `want` (`counts`: marked GPUs per node); None if no node has."""
    node = int((counts - want).view(np.uint64).argmin())  # least slack; as unsigned, a negative one is huge
    if counts[node] < want:
        return None
    return first_on_node(cluster, mask, node, want)


def first_on_node(cluster, mask: np.ndarray, node: int, want: int) -> np.ndarray:
    """The first `want` GPUs marked in `mask` on `node` (read from the node's own range: a
    node's GPUs are numbered one after another)."""
    start = int(cluster.node_first_gpu[node])
    return start + mask[start : start + int(cluster.node_gpus[node])].nonzero()[0][:want]


def fewest_nodes(cluster, want: int, t: int) -> int:
    """The fewest nodes of GPU type t a job of `want` GPUs spans: its largest nodes of that type
    first (`Cluster.nodes_needed` on a cluster of one type, or of nodes of one size); more than
    there are when they all hold fewer GPUs between them."""
    if cluster.uniform_nodes or len(cluster.gpu_types) == 1:
        return int(cluster.nodes_needed(want))
    sizes = cluster.node_gpus[cluster.node_type == t]
    return int(np.sort(sizes)[::-1].cumsum().searchsorted(want)) + 1


def choose_consolidated(cluster, available: np.ndarray, want: int, types: list[int], spread: bool = False) -> np.ndarray | None:
    """GPUs on as few nodes as possible: one node when the job fits in one (best fit: the node
    with the fewest available GPUs that still fits), else the fewest nodes a job of its size
    spans (`fewest_nodes`), those with the most available GPUs first. None when no such
    nodes have room: a job spread over more nodes than it needs is not consolidated (YARN-CS's
    16-GPU job waits for four whole free 4-GPU servers, as Tiresias describes it). With
    `spread`, a job takes as many nodes as it must, most available first, when no node (or no
    set of the fewest nodes) has room."""
    for t in types:
        mask = _of_type(cluster, available, t)
        counts = cluster.per_node(mask)
        needed = fewest_nodes(cluster, want, t)
        if needed == 1:
            got = _best_fit_on_one_node(cluster, mask, counts, want)
            if got is not None:
                return got
            if not spread:
                continue
        order = (-counts).argsort(kind="stable")
        cumulative = counts[order].cumsum()
        if spread:
            needed = len(cumulative)
        if len(cumulative) < needed or cumulative[needed - 1] < want:
            continue
        picked = order[: int(cumulative.searchsorted(want)) + 1]
        firsts, sizes = cluster.node_first_gpu[picked], cluster.node_gpus[picked]
        return np.concatenate([f + mask[f : f + s].nonzero()[0] for f, s in zip(firsts, sizes)])[:want]
    return None
