"""Step 3 of every placer: the selected jobs that do not keep their GPUs (waiting ones, and
moves) packed onto the GPUs left, one job at a time through a placer's own choice or in bulk for
the built-in one. `Placer` takes `pack_selected` in as its method `_pack`."""

from __future__ import annotations

import numpy as np

from roundhouse.elements.placement.packing import (
    _NONE,
    FEW_JOBS_PER_SIZE,
    MAX_ONE_BY_ONE,
    choose_consolidated,
    fewest_nodes,
    fills_in_order,
    pack_best_fit,
    pack_best_fit_one_by_one,
    pack_first_free,
    pack_whole_nodes,
)


def pack_selected(placer, cluster, available, positions, want, on_type, one_node, job_types, launches) -> np.ndarray:
    """Step 3 (`Placer._pack`): the jobs at ranking `positions`, wanting `want` GPUs each, on the
    GPUs marked in `available` (those taken are marked taken), on the GPU type `on_type` each was
    selected on, on one node where `one_node` says so. A placer with its own `choose` places them
    one by one through it; the built-in choice packs them in bulk, per GPU type: jobs that want one
    node largest first (ties in ranking order), each on the node with the fewest available GPUs
    that holds it (best fit), or on whole nodes; then the jobs that may spread on the
    lowest-numbered available GPUs, in ranking order. Records placements in `launches`; returns
    the positions left unplaced."""
    if not len(positions):
        return positions
    if placer._custom_choice():
        for i in positions.tolist():
            types = [0] if job_types is None else [int(on_type[i])]
            got = placer.choose(cluster, available, int(want[i]), types, bool(one_node[i]))
            if got is not None:
                available[got] = False
                launches.add(i, got)
        return positions[~launches.placed[positions]]
    for t in (0,) if job_types is None else sorted(set(on_type[positions].tolist())):
        here = positions if job_types is None else positions[on_type[positions] == t]
        on_one_node = one_node[here]
        together = here[on_one_node]
        sizes = want[together]
        if job_types is None and fills_in_order(cluster, available, sizes):
            order = (-sizes).argsort(kind="stable")  # largest first, ties in ranking order
            ids = available.nonzero()[0][: int(sizes.sum())]
            available[ids] = False
            launches.add_run(together[order], sizes[order], ids)
            sizes = together = _NONE
        # Largest first; ties in ranking order (positions are ascending).
        by_size = sorted(set(sizes.tolist()), reverse=True)
        if (
            cluster.uniform_nodes
            and len(by_size) > 1
            and by_size[0] <= cluster.max_gpus_per_node <= MAX_ONE_BY_ONE
            and len(sizes) <= FEW_JOBS_PER_SIZE * (len(by_size) - 1)
        ):  # (a few jobs of several sizes: one by one costs less than a size at a time)
            order = (-sizes).argsort(kind="stable")
            sizes = sizes[order]
            placed, gpus = pack_best_fit_one_by_one(cluster, available, t, sizes)
            launches.add_run(together[order][placed], sizes[placed], gpus)
            by_size = []
        for size in by_size:
            group = together[sizes == size] if len(together) > 1 else together
            if size <= cluster.max_gpus_per_node and (cluster.uniform_nodes or fewest_nodes(cluster, size, t) == 1):
                taken = pack_best_fit(cluster, available, t, size, len(group))
                launches.add_group(group[: len(taken)], taken)
            else:
                taken = pack_whole_nodes(cluster, available, t, size, len(group))
                launches.add_group(group[: len(taken)], taken)
                for i in group[len(taken) :].tolist():
                    got = choose_consolidated(cluster, available, size, [t])
                    if got is None:
                        break  # GPUs only get fewer: the rest of the group fails too
                    available[got] = False
                    launches.add(i, got)
        spread = here[~on_one_node]
        if placer.spreads_when_stuck():
            stuck = together[~launches.placed[together]]
            spread = np.sort(np.concatenate([spread, stuck]))
        pack_first_free(cluster, available, t, spread, want, launches)
    return positions[~launches.placed[positions]]
