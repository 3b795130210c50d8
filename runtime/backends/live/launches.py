"""Launching an attempt on live agents: one `launch` message per node, with the job's ranks
there, its workload or command, its batch, checkpoint and resume point; held for a node whose
agent is not connected, lost for a node that is gone. An attempt whose previous one is still
checkpointing waits for it to exit (`start_or_defer`); a job the wire cannot carry, or that has
no workload, fails for good before anything is sent (`cannot_run`).

Attempts binds these functions as its methods (runtime/backends/live/attempts.py)."""

from __future__ import annotations

import logging
import math
import shlex
from typing import TYPE_CHECKING

from roundhouse.runtime.backends.live.nodes import GONE, HELD, Nodes
from roundhouse.runtime.journal import AttemptRow
from roundhouse.traces.profiles import canonical_model
from roundhouse.wire import protocol
from roundhouse.wire.workloads import WORKLOADS, workload_module

if TYPE_CHECKING:
    from roundhouse.runtime.backends.live.attempts import Attempt, Attempts

log = logging.getLogger("roundhouse.scheduler")


def start_or_defer(books: Attempts, att: Attempt) -> None:
    """Send the attempt's launch, or leave it to wait for its previous attempt to checkpoint and exit."""
    prev = att.waits_for
    if prev is not None and not prev.ended:
        log.info("job %d attempt %d waits for attempt %d to checkpoint and exit", att.job_id, att.n, prev.n)
        return
    send_launch(books, att)


def send_launch(books: Attempts, att: Attempt) -> None:
    """Send the attempt's launch to each node it runs on (its ranks there); held for a node
    whose agent is not connected. A job that cannot run fails for good (`cannot_run`)."""
    row = att.row
    if att.waits_for is not None:
        # Launched after its predecessor exited: from the checkpoint that one left.
        att.waits_for = None
        books.resume_point(att)
        books.journal.add_attempt(attempt_row(att, books.nodes))
        books.journal.commit()
    has_model = bool(books._column("has_model")[row])
    if has_model:
        books.reached[row] = att.start_iteration
    model = books._column("model")[row]
    # (Asked first: a missing column's error spells out the closest names, a millisecond a launch.)
    command = books._column("command")[row] if books.world.jobs.has_column("command") else None
    command = command if isinstance(command, str) and command.strip() else None
    workload = workload_for(model) if command is None else None
    if command is None and workload is None:
        cannot_run(books, att, nothing_to_run(model))
        return
    rank0 = books.nodes.slots[int(att.slots[0])]
    # (A job the wire cannot carry, or whose command does not split into words, fails alone:
    # it must not stop the scheduler, nor a restart that replays the journal holding it.)
    try:
        words = shlex.split(command) if command else None
    except ValueError as err:
        cannot_run(books, att, f"its command {command!r} does not split into words ({str(err).lower()})")
        return
    common = dict(
        job=att.job_id,
        attempt=att.n,
        world_size=att.world_size,
        master_addr=rank0.address if rank0 is not None else "127.0.0.1",
        master_port=att.master_port,
        # (A job known only by its duration has that many units of work, one a second: an
        # emulated node runs its timer that long; a real command ignores it and exits when done.)
        iterations=int(math.ceil(books._column("work")[row])),
        batch_size=att.worker_batch,
        checkpoint_dir=f"{books.checkpoint_root}/job-{att.job_id}",
        checkpoint_every_s=float(books.options.checkpoint_every_s),
        workload=workload,
        command=words,
        model=model if isinstance(model, str) else None,
        resume=att.resume,
        resume_iteration=att.start_iteration if att.resume else None,
        seed=int(att.job_id % 2**31),
        iters_per_s=att.iters_per_s or None,
        # (Steps go unmarked, as before the field existed.)
        counts="samples" if att.elastic else None,
        lr_scale=att.lr_scale,
    )
    try:
        protocol.encode("launch", 0, ranks=[{"rank": 0, "gpu": 0}], **common)
    except protocol.ProtocolError as err:
        cannot_run(books, att, f"its launch message cannot carry it ({err.reason})")
        return
    att.sent = True
    cluster = books.world.cluster
    held = []
    for slot in sorted({int(s) for s in att.slots}):
        ranks = [
            {"rank": r, "gpu": int(cluster.gpu_local[g])} for r, g in enumerate(att.gpus.tolist()) if int(att.slots[r]) == slot
        ]
        books.counters["launch_messages"] += 1
        how = books.nodes.to_slot(slot, "launch", ranks=ranks, **common)
        if how == GONE:
            att.lose_ranks([r["rank"] for r in ranks], att.start_iteration)
        elif how == HELD:
            held.append(books.nodes.name_at(slot))
    books.counters["launches"] += 1
    _log_launch(att, books.nodes, held)
    if len(att.exits) == att.world_size:  # every node it was meant for is gone
        books.requeue_now(att, books.clock.now_s())
        books.maybe_end(att, books.clock.now_s())


def workload_for(model: object) -> str | None:
    """The example workload's module that trains `model` (any accepted spelling), or None."""
    return workload_module(canonical_model(model) or model) if isinstance(model, str) else None


def nothing_to_run(model: object) -> str:
    """Why a job without a command cannot run live: its model has no example workload."""
    named = f"model {model!r} has no example workload" if isinstance(model, str) else "it names no model"
    return f"{named} ({', '.join(WORKLOADS)}) and it gives no command: give the job a 'command'"


def cannot_run(books: Attempts, att: Attempt, reason: str) -> None:
    """The attempt fails for good before it is sent: every rank exits with `reason`."""
    log.warning("job %d cannot run: %s", att.job_id, reason)
    for rank in range(att.world_size):
        att.exits[rank] = {"outcome": "failed", "iteration": att.start_iteration, "reason": reason}
    att.sent = True
    books.maybe_end(att, books.clock.now_s(), permanent=True)


def attempt_row(att: Attempt, nodes: Nodes) -> AttemptRow:
    """The attempt as the journal's table attempts keeps it (as launched)."""
    names = [nodes.name_at(int(s)) or "?" for s in att.slots]
    return AttemptRow(
        att.job_id, att.n, att.launched_s, att.gpus.tolist(), names, att.master_port, att.start_iteration, att.resume
    )


def _log_launch(att: Attempt, nodes: Nodes, held: list[str | None]) -> None:
    """Say where an attempt was launched, and for which nodes its launch is held (not sent:
    their agents are not connected; it is delivered when they register again)."""
    where = ", ".join(sorted({name for s in att.slots if (name := nodes.name_at(int(s))) is not None}))
    log.info(
        "launch job %d attempt %d on %s (GPUs %s)%s%s",
        att.job_id,
        att.n,
        where,
        ",".join(map(str, att.gpus.tolist())),
        f" from its checkpoint at iteration {att.start_iteration}" if att.resume else "",
        f": held for {', '.join(map(str, held))} until its agent registers again (not connected)" if held else "",
    )
