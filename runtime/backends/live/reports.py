"""What agents report about the attempts they run, matched against what this scheduler expects:
starts, progress (iterations, checkpoints), exits (acknowledged once journaled; an agent resends
an exit until it is), the processes an agent lists when it heartbeats or registers (stale ones
are killed: of an attempt with real ranks on that node, only the stray ranks, `_kill_strays`),
and the attempts a lost node takes with it. Also the progress all that adds up to
at a round boundary, and the lease round trip submitters may ask for. A node speaks only for
the workers it runs, and no worker goes past its job's iterations: other reports are refused,
counted with the bad messages, and logged. So is a heartbeat's listing of a rank its attempt
never had, which is not taken for a stray worker to kill (`_never_had`).

An agent that registers again on a new connection (its old one dropped, or the scheduler
restarted) may not have had every message sent on the old one: the workers this scheduler
expects there that it does not list, and that have not exited, are settled by its next
heartbeat (it sends the exits it holds first, on the same connection): one still neither listed
nor exited never started, or is gone, and its attempt ends as a lost node's does (requeued from
its checkpoint, no retry counted)."""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from roundhouse.runtime.backends.base import Progress
from roundhouse.runtime.backends.live.attempts import Attempt, Attempts, counts
from roundhouse.runtime.backends.live.nodes import Node, Nodes
from roundhouse.runtime.backends.live.server import Server
from roundhouse.wire.protocol import RefusalLog

log = logging.getLogger("roundhouse.scheduler")


class Reports:
    def __init__(self, attempts: Attempts, nodes: Nodes, server: Server):
        self.attempts = attempts
        self.nodes = nodes
        self.server = server
        self.journal = attempts.journal
        self.counters = attempts.counters
        self.refusals = RefusalLog(log)
        self.strays: dict[tuple[str, int, int, int], None] = {}  # (node, job, attempt, rank) killed as strays there

    # --- progress ---
    def progress(self, att: Attempt, iteration: int, checkpoint: str | None, checkpoint_iteration: int | None) -> None:
        books = self.attempts
        if iteration > att.iteration:
            att.iteration = iteration
            if books.current.get(att.row) is att and not att.requeued:
                books.reached[att.row] = iteration
        if checkpoint is not None and checkpoint_iteration is not None:
            if att.checkpoint_iteration is None or checkpoint_iteration > att.checkpoint_iteration:
                att.checkpoint, att.checkpoint_iteration = checkpoint, checkpoint_iteration
                self.journal.note_checkpoint(att.job_id, att.n, checkpoint, checkpoint_iteration)
                best = books.checkpoints.get(att.row)
                if best is None or checkpoint_iteration >= best[1]:
                    books.checkpoints[att.row] = (checkpoint, checkpoint_iteration)

    def since_last_poll(self, t: float, running: np.ndarray) -> Progress:
        """The progress of every running job and every job an attempt moved, up to round time
        `t`: iterations reached, GPU-seconds held, seconds held."""
        books = self.attempts
        jobs = books.world.jobs
        held, has_model, done_before = jobs.column("held"), jobs.column("has_model"), jobs.column("done")
        touched = sorted(set(running.tolist()) | set(books.reached))
        rows = np.asarray(touched, dtype=np.int64)
        done = np.zeros(len(rows))
        service = np.zeros(len(rows))
        run_s = np.zeros(len(rows))
        running_mask = np.zeros(len(rows), dtype=bool)
        if len(rows):
            running_mask[np.searchsorted(rows, running)] = True
        for i, row in enumerate(rows.tolist()):
            if running_mask[i]:
                end = min(books.freed_at.get(row, t), t)
                start = books.until.get(row, t)
                span = max(end - start, 0.0)
                service[i] = held[row] * span
                run_s[i] = span
                books.until[row] = t
                if not has_model[row]:
                    done[i] = span  # a job known only by duration progresses one unit a second
            if has_model[row] and row in books.reached:
                done[i] = books.reached[row] - done_before[row]
        keep = (done != 0) | running_mask
        return Progress(rows[keep], done[keep], service[keep], run_s[keep])

    def polled(self, finished_rows: list[int]) -> None:
        """The poll reported these jobs finished, and every freed job's service: forget them."""
        books = self.attempts
        for row in finished_rows:
            books.reached.pop(row, None)
            books.until.pop(row, None)
        for row in list(books.freed_at):
            books.until.pop(row, None)
        books.freed_at.clear()

    # --- what agents run ---
    def running(self, node: Node, running: list[dict], registering: bool) -> None:
        """Match an agent's processes with the attempts this scheduler expects there: update
        progress, confirm takeovers, kill what nobody should be running; and, at the first
        heartbeat after the agent registered on a new connection, end the attempts of the
        workers it still does not list (`reconnected`)."""
        books = self.attempts
        if not registering and node.unlisted is not None:
            unlisted, node.unlisted = node.unlisted, None
            self._end_unlisted(node, unlisted - {(p["job"], p["attempt"], p["rank"]) for p in running})
        stale: dict[tuple[int, int], list[int]] = {}  # (job, attempt) -> the ranks listed there that should not be
        for proc in running:
            key = (proc["job"], proc["attempt"])
            att = books.live.get(key)
            rank = proc["rank"]
            if att is not None and rank in att.leaving:
                continue  # let go by an in-place shrink, on its way out
            if att is not None and rank >= att.world_size:  # (not a worker to kill: `_never_had`)
                _never_had(self, node, rank, att, "registration" if registering else "heartbeat")
                continue
            if att is None or int(att.slots[rank]) != node.slot or rank in att.exits:
                stale.setdefault(key, []).append(rank)
                continue
            books.unconfirmed.discard(key)
            if self._within(att, node, "heartbeat", proc["iteration"], proc.get("checkpoint_iteration")):
                self.progress(att, proc["iteration"], proc.get("checkpoint"), proc.get("checkpoint_iteration"))
            if registering and att.revoked and rank == 0:
                self.nodes.to_node(node, "revoke", job=att.job_id, attempt=att.n, kill=False, rank=0)
        _kill_strays(self, node, stale)

    def reconnected(self, node: Node, running: list[dict], starting: set[tuple[int, int, int]]) -> None:
        """An agent registered on a new connection, listing `running`, and was sent the held
        launches and resizes that start `starting`: note the workers expected there that are
        in neither, for its next heartbeat to settle (`running`)."""
        listed = {(p["job"], p["attempt"], p["rank"]) for p in running}
        node.unlisted = {key for key in _expected(self.attempts, node) if key not in listed and key not in starting} or None

    def _end_unlisted(self, node: Node, unlisted: set[tuple[int, int, int]]) -> None:
        """The workers a re-registered agent still does not list at its next heartbeat, and
        whose exits have not come: they never started there (a launch lost with the old
        connection) or are gone. Their attempts end as a lost node's do: the job is requeued
        from its checkpoint, its workers elsewhere are killed, no retry is counted."""
        books = self.attempts
        gone: dict[tuple[int, int], list[int]] = {}
        for job, n, rank in sorted(unlisted & _expected(books, node)):
            gone.setdefault((job, n), []).append(rank)
        t = books.clock.now_s()
        for key, ranks in gone.items():
            att = books.live[key]
            log.warning(
                "job %d attempt %d: node %s registered again without rank(s) %s, which have not exited "
                "(a launch lost with its old connection?); requeued from its checkpoint",
                att.job_id,
                att.n,
                node.name,
                ",".join(map(str, ranks)),
            )
            reason = f"node {node.name} registered again without it: lost with the node's old connection"
            att.lose_ranks(ranks, att.iteration, reason=reason)
            books.kill_rest(att)
            books.requeue_now(att, t)
            books.maybe_end(att, t)

    def node_lost(self, node: Node) -> list[int]:
        """The workers on a lost node are gone: their attempts end (the jobs are requeued from
        their checkpoints; their workers elsewhere are killed). Returns the jobs affected."""
        books = self.attempts
        affected = [att for att in books.live.values() if (att.slots == node.slot).any()]
        t = books.clock.now_s()
        for att in affected:
            att.lose_ranks(np.flatnonzero(att.slots == node.slot).tolist(), att.iteration, node.heard or None)
            books.kill_rest(att)
            books.requeue_now(att, t)
            books.maybe_end(att, t)
        return [att.job_id for att in affected]

    # --- messages from agents ---
    def on_started(self, identity, seq, body, frame) -> None:
        node = self._sender(identity, frame, "started")
        att = self.attempts.live.get((body["job"], body["attempt"]))
        if node is not None and att is None:
            _never_launched(self, node, body, "dropped started")
        if node is None or att is None or not self._from_its_node(node, att, body, "started"):
            return
        log.debug("job %d attempt %d rank %d started on %s", body["job"], body["attempt"], body["rank"], node.name)

    def on_metrics(self, identity, seq, body, frame) -> None:
        node = self._sender(identity, frame, "metrics")
        att = self.attempts.live.get((body["job"], body["attempt"]))
        if node is not None and att is None:
            _never_launched(self, node, body, "dropped metrics")
        if node is None or att is None or not self._from_its_node(node, att, body, "metrics"):
            return
        if not self._within(att, node, "metrics", body["iteration"]):
            return
        self.progress(att, body["iteration"], None, None)
        if body["rank"] == 0 and body["values"]:
            metrics = self.attempts.news.metrics
            metrics[att.row] = {**metrics.get(att.row, {}), **body["values"], "iteration": float(body["iteration"])}

    def on_exited(self, identity, seq, body, frame) -> None:
        node = self.nodes.seen(identity)
        if node is None:
            self.nodes.unregistered(
                frame, "answered exited from %s with unknown: not a registered agent", self.server.who(identity)
            )
            self.server.send(identity, "unknown", reason="this scheduler does not know this agent: register")
            return
        books = self.attempts
        key = (body["job"], body["attempt"])
        ack = {"job": body["job"], "attempt": body["attempt"], "rank": body["rank"]}
        att = books.live.get(key)
        if _stray_exit(self, node, att, body):  # (not the attempt's: its rank runs on elsewhere)
            self.server.after_commit(identity, "ack", **ack)
            return
        if att is None or body["rank"] >= att.world_size or body["rank"] in att.exits:
            _never_launched(self, node, body, "acknowledged exited")
            self.server.after_commit(identity, "ack", **ack)  # already known (a resend), or from before this run
            return
        if not self._from_its_node(node, att, body, "exited"):
            reason = f"job {att.job_id} attempt {att.n} rank {body['rank']} does not run on node {node.name}"
            self.server.send(identity, "error", reason=reason, ref=seq)
            return
        body = self._clamped(att, node, body)
        received_s = books.clock.now_s()
        self.journal.add_exit(node.name, received_s, body)  # (first: a write that fails changes nothing here)
        books.unconfirmed.discard(key)
        att.exits[body["rank"]] = body
        att.exit_wall[body["rank"]] = time.time()
        att.last_exit_s = received_s
        self.progress(att, body["iteration"], body.get("checkpoint"), body.get("checkpoint_iteration"))
        level = logging.INFO if body["outcome"] in ("done", "preempted") else logging.WARNING
        log.log(
            level,
            "job %d attempt %d rank %d on %s: %s at iteration %d%s",
            att.job_id,
            att.n,
            body["rank"],
            node.name,
            body["outcome"],
            body["iteration"],
            f" ({body['reason']})" if body["reason"] else "",
        )
        if body["outcome"] in ("failed", "killed") or _ended_unstarted(body):
            # The others would wait for this worker in their rendezvous or collectives, and a
            # worker that never started cannot agree on an exit iteration with them.
            books.kill_rest(att)
        books.maybe_end(att, att.last_exit_s, permanent=body["permanent"])
        self.server.after_commit(identity, "ack", **ack)

    def on_lease(self, identity, seq, body, frame) -> None:
        """A round-trip lease check (what optimistic renewal avoids; kept to measure it)."""
        att = self.attempts.live.get((body["job"], body["attempt"]))
        self.counters["lease_checks"] += 1
        valid = att is not None and not att.revoked
        self.server.send(identity, "lease_reply", job=body["job"], attempt=body["attempt"], valid=valid)

    # --- whether a report is believable ---
    def _sender(self, identity: bytes, frame, type_: str) -> Node | None:
        """The registered node a report came from (now known to be alive); None, logged, if
        the sender never registered: its report is dropped."""
        node = self.nodes.seen(identity)
        if node is None:
            self.nodes.unregistered(frame, "dropped %s from %s: not a registered agent", type_, self.server.who(identity))
        return node

    def _from_its_node(self, node: Node, att: Attempt, body: dict, type_: str) -> bool:
        """Whether the worker a report is about runs on the node that sent it: an agent speaks
        only for its own workers (as `running` checks what heartbeats list)."""
        rank = body["rank"]
        if rank < att.world_size and int(att.slots[rank]) == node.slot:
            return True
        self.counters["bad_messages"] += 1
        self.refusals.warn(
            "other_node",
            "refused %s of job %d attempt %d rank %d from node %s: that worker does not run there",
            type_,
            att.job_id,
            att.n,
            rank,
            node.name,
        )
        return False

    def _unit(self, att: Attempt) -> str:
        return "sample" if counts(self.attempts.world.jobs, att.row) == "samples" else "iteration"

    def _within(self, att: Attempt, node: Node, type_: str, iteration: int, checkpoint_iteration: int | None = None) -> bool:
        """Whether progress reported by a node stays within the job's iterations (a worker stops
        there); progress past them is refused, and logged."""
        most = _iterations(self.attempts, att)
        reached = max(iteration, checkpoint_iteration or 0)
        if most is None or reached <= most:
            return True
        self.counters["bad_messages"] += 1
        self.refusals.warn(
            "past_the_end",
            "refused the progress in %s of job %d attempt %d from node %s: %s %d is past the job's %d %ss",
            type_,
            att.job_id,
            att.n,
            node.name,
            self._unit(att),
            reached,
            most,
            self._unit(att),
        )
        return False

    def _clamped(self, att: Attempt, node: Node, body: dict) -> dict:
        """An exit's iterations, within the job's: the worker has ended either way (its exit is
        taken, and acknowledged, or its agent would resend it forever), but an iteration past
        the job's end is taken as the end, and a checkpoint said to be past it is not used."""
        most = _iterations(self.attempts, att)
        if most is None or max(body["iteration"], body["start_iteration"], body.get("checkpoint_iteration") or 0) <= most:
            return body
        self.counters["bad_messages"] += 1
        self.refusals.warn(
            "past_the_end",
            "job %d attempt %d rank %d on %s reports an exit at %s %d, past the job's %d %ss: taken as %d",
            att.job_id,
            att.n,
            body["rank"],
            node.name,
            self._unit(att),
            body["iteration"],
            most,
            self._unit(att),
            min(body["iteration"], most),
        )
        body = {**body, "iteration": min(body["iteration"], most), "start_iteration": min(body["start_iteration"], most)}
        if (body.get("checkpoint_iteration") or 0) > most:
            body["checkpoint"] = body["checkpoint_iteration"] = None
        return body


def _expected(books: Attempts, node: Node) -> set[tuple[int, int, int]]:
    """The workers (job, attempt, rank) this scheduler expects to run on a node: of the
    attempts sent, the ranks placed there that have not exited and are not on their way out."""
    return {
        (att.job_id, att.n, rank)
        for att in books.live.values()
        if att.sent
        for rank in np.flatnonzero(att.slots == node.slot).tolist()
        if rank not in att.exits and rank not in att.leaving
    }


# How many stray workers killed (and not heard of since) the scheduler remembers, to take their
# exits (`_stray_exit`); the oldest are forgotten past it. The journal keeps them too (table
# strays), so that a restarted scheduler takes their exits as well (`strays_taken_over`).
STRAYS_KEPT = 10_000


def _kill_strays(reports: Reports, node: Node, stale: dict[tuple[int, int], list[int]]) -> None:
    """Kill the workers a node lists that this scheduler does not have there (`stale`: of each
    attempt, the ranks listed): of an attempt that has ended, or ranks that have exited or run
    on another node (one left behind by an in-place shrink, whose number a grow then gave to
    another node). When the attempt still has real ranks on the node, the revoke names the stray
    ranks (`ranks`), and only those are killed: the real ones run on, their leases standing.
    Otherwise the revoke is of the whole attempt there. A stray's exit is acknowledged and not
    taken as its rank's (`_stray_exit`), by this scheduler or, the kill journaled, one restarted."""
    books = reports.attempts
    for (job, n), ranks in sorted(stale.items()):
        att = books.live.get((job, n))
        real = _real_ranks(att, node) if att is not None else []
        # Those of ranks that run on another node, whose exits would be refused (one of a rank
        # that exited here is a resend, or one of an ended attempt: acknowledged as such).
        kept = [(job, n, r) for r in ranks if att is not None and int(att.slots[r]) != node.slot]
        if kept:
            reports.journal.strays_killed(node.name, kept, books.clock.now_s())
            reports.strays.update(dict.fromkeys((node.name, *worker) for worker in kept))
        _forget_oldest_strays(reports)
        revoke = {"job": job, "attempt": n, "kill": True}
        if not real:
            log.warning(
                "node %s runs job %d attempt %d, which this scheduler does not expect there: killing it", node.name, job, n
            )
            _revoke_strays(reports, node, bool(kept), revoke)
            continue
        log.warning(
            "node %s runs job %d attempt %d rank(s) %s, which this scheduler does not have there: killing them "
            "(the attempt's rank(s) %s there run on)",
            node.name,
            job,
            n,
            ",".join(map(str, sorted(ranks))),
            ",".join(map(str, real)),
        )
        _revoke_strays(reports, node, bool(kept), {**revoke, "ranks": sorted(ranks)})


def _revoke_strays(reports: Reports, node: Node, journaled: bool, revoke: dict) -> None:
    """Send the revoke that kills stray workers; once the journal holds their kill (`journaled`),
    after it commits, as an exit's ack is: a scheduler restarted before that kills them again
    when the agent lists them, and one restarted after takes their exits."""
    if journaled and node.online and node.identity is not None:
        reports.server.after_commit(node.identity, "revoke", **revoke)
    else:
        reports.nodes.to_node(node, "revoke", **revoke)


def _forget_oldest_strays(reports: Reports) -> None:
    """Keep at most STRAYS_KEPT strays killed, here and in the journal: the oldest go first."""
    while len(reports.strays) > STRAYS_KEPT:
        oldest = next(iter(reports.strays))
        del reports.strays[oldest]
        reports.journal.stray_heard(*oldest)


def strays_taken_over(reports: Reports) -> None:
    """After a restart: the strays killed by the scheduler before it, as the journal keeps them,
    of the nodes this run knows (those of a node another took the place of are dropped, as are
    the oldest past STRAYS_KEPT), so that their exits are acknowledged as they would have been."""
    reports.strays.clear()
    for node, job, n, rank in reports.journal.strays():
        if node in reports.nodes.by_name:
            reports.strays[(node, job, n, rank)] = None
        else:
            reports.journal.stray_heard(node, job, n, rank)
    _forget_oldest_strays(reports)


def _real_ranks(att: Attempt, node: Node) -> list[int]:
    """The ranks of a sent attempt this scheduler has on a node: placed there, neither exited
    nor on their way out."""
    if not att.sent:
        return []
    return [r for r in np.flatnonzero(att.slots == node.slot).tolist() if r not in att.exits and r not in att.leaving]


def _stray_exit(reports: Reports, node: Node, att: Attempt | None, body: dict) -> bool:
    """Whether an exit is a stray worker's that this scheduler killed on the node (its rank runs
    on another node): acknowledged, logged, and not taken as the rank's (its attempt, the
    journal and the rank's lease are left as they are). An exit this scheduler killed no
    stray for, of a rank that runs on another node, is refused (`Reports._from_its_node`)."""
    job, n, rank = body["job"], body["attempt"], body["rank"]
    key = (node.name, job, n, rank)
    if key not in reports.strays:
        return False
    del reports.strays[key]
    reports.journal.stray_heard(*key)  # (committed before the exit's ack goes: `Server.after_commit`)
    if att is None or rank >= att.world_size or int(att.slots[rank]) == node.slot:
        return False  # (the attempt ended, or gave the rank back to this node: the exit is taken as usual)
    log.info(
        "job %d attempt %d rank %d on %s, a stray worker stopped there, exited (%s at iteration %d): acknowledged, "
        "not taken as the attempt's rank %d, which runs on node %s",
        job,
        n,
        rank,
        node.name,
        body["outcome"],
        body["iteration"],
        rank,
        _node_name(reports, int(att.slots[rank])),
    )
    return True


def _node_name(reports: Reports, slot: int) -> str:
    node = reports.nodes.slots[slot]
    return node.name if node is not None else f"{slot} (not registered)"


def _iterations(books: Attempts, att: Attempt) -> int | None:
    """The iterations the attempt's launch asked for (as attempts.py's launch counts them, in
    its unit: samples for an elastic job, whose workers report samples trained, else steps);
    None for a job known only by its duration, whose workers count their own."""
    jobs = books.world.jobs
    if not jobs.column("has_model")[att.row]:
        return None
    return int(math.ceil(jobs.column("work")[att.row]))


def _ended_unstarted(body: dict) -> bool:
    """An exit of a worker that never ran: preempted, with no process to give an exit status
    (its agent ended it while it waited for its GPU), at the iteration it would have started
    from."""
    return body["outcome"] == "preempted" and body.get("exit_code") is None and body["iteration"] <= body["start_iteration"]


def _never_launched(reports: Reports, node: Node, body: dict, what: str) -> None:
    """Log a report (`what`: how it was dealt with) about a worker this scheduler never launched:
    of a job it does not have, an attempt not yet made, or a rank its attempt never had. A report
    of a worker that has ended (an exit resent until acknowledged, a report that crossed the
    end on the wire) is part of the protocol, and passes unsaid."""
    books = reports.attempts
    job, n, rank = body["job"], body["attempt"], body["rank"]
    row = books.world.jobs.row_of(job)
    latest = books.current.get(row) if row is not None else None
    att = books.live.get((job, n))
    if row is None:
        why = f"job {job} is not one of this scheduler's jobs"
    elif latest is None or n > latest.n:
        why = f"job {job} has had {latest.n if latest else 0} attempt(s), not {n}"
    elif att is not None and rank >= att.world_size and rank not in att.leaving:
        why = f"job {job} attempt {n} has {att.world_size} rank(s), not rank {rank}"
    else:
        return
    reports.counters["bad_messages"] += 1
    reports.refusals.warn(
        "never_launched", "%s of job %d attempt %d rank %d from node %s: %s", what, job, n, rank, node.name, why
    )


def _never_had(reports: Reports, node: Node, rank: int, att: Attempt, type_: str) -> None:
    """A worker listed by a node's heartbeat (or registration) of a rank its attempt does not
    have, and did not let go in an in-place shrink: a rank it never had, a confused or rogue
    peer's word, logged and otherwise ignored. It is no worker the scheduler ever had to kill
    (a stray of a rank the attempt has runs on another node, or has exited: `_kill_strays`)."""
    reports.counters["bad_messages"] += 1
    reports.refusals.warn(
        "never_launched",
        "ignored job %d attempt %d rank %d in the %s of %s (node %s): job %d attempt %d has %d rank(s), not rank %d",
        att.job_id,
        att.n,
        rank,
        type_,
        reports.server.who(node.identity) if node.identity is not None else "its agent",
        node.name,
        att.job_id,
        att.n,
        att.world_size,
        rank,
    )
