"""A plan's resizes, carried out on live agents.

A resize is done in place when the plan asks for it and the agents can: the job keeps ranks
0..k-1 on the GPUs they hold, ranks past the new size leave by themselves, and new ranks start
on nodes that already run a worker of the job (they get their state from rank 0). One `resize`
message goes to rank 0's node (which tells the job at its next step boundary) and one to each
other node that starts new ranks, with a new rendezvous port and the batch size per worker (the
plan's global batch over the new world size, rounded up: `Attempt.worker_batch`, which launches
send too), as the agents expect (docs/live.md). Any other resize (asked by checkpoint and restart, new ranks on
a node the job is not on, GPUs reshuffled) is a checkpoint and restart: the attempt is revoked and
a new one launched on the new GPUs once it has checkpointed, as a move is.

An in-place resize's new shape (GPUs, port, generation, batch, learning-rate rule) is journaled
and committed before its messages leave: a restarted scheduler takes the job back as it runs
(runtime/backends/live/takeover.py).

Before anything is sent, every resize is checked against the books: a job with no attempt
running on agents cannot be resized, and the plan is refused naming it (nothing leaves).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs
import numpy as np

from roundhouse.runtime import resizing
from roundhouse.runtime.backends.live.attempts import learning_rate_factor, shape_row
from roundhouse.runtime.plans import PlanError
from roundhouse.runtime.types import LR_LINEAR, Plan

if TYPE_CHECKING:
    from roundhouse.runtime.backends.live.attempts import Attempt, Attempts
    from roundhouse.runtime.backends.live.nodes import Nodes

log = logging.getLogger("roundhouse.scheduler")


@attrs.frozen
class LiveResize:
    """One resize as the live backend will carry it out."""

    att: Attempt
    gpus: np.ndarray  # the new GPUs, rank order (kept ranks first)
    batch: int
    rate: float  # (samples/s for an elastic job, whose iterations count samples)
    lr_rule: int
    lr_scale: float | None
    in_place: bool


def plan_resizes(books: Attempts, plan: Plan) -> list[LiveResize]:
    """The plan's resizes against the books; PlanError (nothing sent) for a job that has no
    attempt running on agents."""
    if not len(plan.resize_rows):
        return []
    rates = resizing.rates(books.world, plan)[1]
    out: list[LiveResize] = []
    ids = books.world.jobs.column("job_id")
    base = resizing.lr_base(books.world.jobs, plan.resize_rows)  # (the batch each job's own learning rate is for)
    n = len(plan.resize_rows)
    batch = plan.resize_batch if plan.resize_batch is not None else np.zeros(n, np.int64)
    rule = plan.resize_lr if plan.resize_lr is not None else np.full(n, LR_LINEAR)
    in_place = plan.resize_in_place if plan.resize_in_place is not None else np.ones(n, bool)
    for i, (row, start, count) in enumerate(zip(plan.resize_rows.tolist(), plan.resize_starts, plan.resize_counts)):
        att = books.current.get(row)
        if att is None or att.ended or att.revoked or not att.sent:
            raise PlanError(f"plan resizes job {int(ids[row])}, which has no attempt running on the agents to resize")
        new = plan.resize_gpus[start : start + count]
        b = int(batch[i]) or att.global_batch_size  # (a plan's batch is global; 0 keeps the job's)
        scale = learning_rate_factor(int(rule[i]), b, float(base[i]))
        ordered, can = resizing.in_place_order(att.gpus, new, books.world.cluster.gpu_node)
        out.append(LiveResize(att, ordered, b, float(rates[i]), int(rule[i]), scale, bool(in_place[i]) and can))
    return out


def restarted_rows(resized: list[LiveResize]) -> np.ndarray:
    """The rows of jobs resized by checkpoint and restart (their attempts are revoked)."""
    return np.array([r.att.row for r in resized if not r.in_place], dtype=np.int64)


def relaunches(books: Attempts, resized: list[LiveResize]) -> list[Attempt]:
    """New attempts on the new GPUs for the resizes done by checkpoint and restart."""
    return [books.new(r.att.row, r.gpus, r.batch, r.rate, r.lr_rule) for r in resized if not r.in_place]


def carry_out(books: Attempts, nodes: Nodes, resized: list[LiveResize]) -> None:
    """Send the in-place resizes and update the attempts' books (after the round is journaled).
    Each new shape is journaled, and committed, before any resize message leaves: a restarted
    scheduler takes the job back as the agents run it (its GPUs, port and generation)."""
    in_place = [r for r in resized if r.in_place]
    if not in_place:
        return
    old_sizes = [_reshape(books, r) for r in in_place]
    books.journal.commit()
    for resize, old_n in zip(in_place, old_sizes):
        _send(books, nodes, resize, old_n)


def _reshape(books: Attempts, resize: LiveResize) -> int:
    """The attempt's books in its new shape, journaled; returns its old world size."""
    att, cluster = resize.att, books.world.cluster
    old_n = att.world_size
    att.generation += 1
    att.gpus = resize.gpus
    att.slots = cluster.gpu_node[resize.gpus]
    att.batch, att.global_batch = resize.batch, True
    att.iters_per_s = resize.rate if att.iters_per_s else 0.0
    att.lr_rule, att.lr_scale = resize.lr_rule, resize.lr_scale  # (a later relaunch keeps the rule)
    # A new rendezvous for the re-formed group (the old one's store still holds its port).
    books.ports_used.discard(att.master_port)
    att.master_port = books._pick_port()
    books.ports_used.add(att.master_port)
    regroup(att, old_n, len(resize.gpus))
    books.journal.add_shape(shape_row(att, books.nodes, books.clock.now))
    return old_n


def regroup(att: Attempt, old_n: int, new_n: int) -> None:
    """Which ranks leave and which join when the attempt goes from `old_n` workers to `new_n`."""
    for rank in range(new_n, old_n):  # leaving ranks exit by themselves (`resized`)
        att.exits.pop(rank, None)
        att.leaving.add(rank)
    att.leaving -= set(range(new_n))  # a rank number given out again is a new worker
    att.joiners = (att.joiners & set(range(new_n))) | set(range(old_n, new_n))


def _send(books: Attempts, nodes: Nodes, resize: LiveResize, old_n: int) -> None:
    att, cluster = resize.att, books.world.cluster
    rank0 = nodes.slots[int(att.slots[0])]
    common = dict(
        job=att.job_id,
        attempt=att.n,
        generation=att.generation,
        world_size=att.world_size,
        batch_size=max(1, att.worker_batch),  # (a resize must name one: 0 is the job's own only at launch)
        master_addr=rank0.address if rank0 is not None else "127.0.0.1",
        master_port=att.master_port,
    )
    if att.iters_per_s:
        common["iters_per_s"] = att.iters_per_s
    if resize.lr_scale is not None:
        common["lr_scale"] = resize.lr_scale
    new_ranks: dict[int, list[dict]] = {}
    for rank in range(old_n, att.world_size):
        gpu = int(att.gpus[rank])
        new_ranks.setdefault(int(att.slots[rank]), []).append({"rank": rank, "gpu": int(cluster.gpu_local[gpu])})
    for slot in sorted({int(att.slots[0]), *new_ranks}):
        books.counters["resize_messages"] += 1
        nodes.to_slot(slot, "resize", ranks=new_ranks.get(slot, []), **common)
    books.counters["resizes"] += 1
    log.info(
        "resize job %d attempt %d in place: %d -> %d workers, batch %d (GPUs %s)",
        att.job_id,
        att.n,
        old_n,
        att.world_size,
        att.batch,
        ",".join(map(str, att.gpus.tolist())),
    )
