"""Many emulated nodes in one agent process (`roundhouse agent --nodes N --fake-gpus 8:V100
--emulate`), so that one machine can drive a scheduler with a production-sized cluster.

Each node is a node on the wire as a real agent's is: its own DEALER connection (so its own
identity at the scheduler's ROUTER), its own name (`NAME-0` ... `NAME-{N-1}`), registration,
heartbeats, numbered messages and exit reports kept until acknowledged. What it does not have
is job processes: a job "runs" as a timer at the speed the launch carries (the scheduler's
profile for that placement, `iters_per_s`), from its resume iteration to its last, in the unit
the launch counts (`counts`: steps, or for an elastic job samples at samples/s). It is
started at once; a revocation ends it at the iteration it reached, with a checkpoint named
after that iteration (nothing is written); it ends done when its iterations are over.
Progress reaches the scheduler in heartbeats and exit reports (no metrics messages). A resize in
place changes the timer's speed from the iteration reached; ranks past the new size leave
(`resized`) and new ranks start at that iteration.

The scheduler revokes a job through its rank 0 only; every rank of that attempt, on this node or
another of the process (they share it), ends with it at one iteration, as real workers agree on
theirs: so a job must not be spread over nodes of two emulating processes. A revoke naming ranks
(stray workers on the node it is sent to) ends only those ranks of that node. When the scheduler
asks one node to shut down, every node of the process answers, since they all stop; stopped by a
signal instead, each node says `stopping` once its exits are reported, so that the scheduler
takes it offline at once. A node whose key the scheduler no longer admits stops every node of
the process the same way, and the process exits with status 2. A launch is refused as a real agent refuses it (ranks that cannot all
run, a GPU the node lacks, a resume point past its iterations: every rank it names ends failed),
but needs no workload or command, since nothing runs. A launch without a speed (a job known only by its duration) runs at one iteration per second, as the
simulator runs it.
"""

from __future__ import annotations

import heapq
import logging
import resource
import signal
import time
import uuid

import attrs
import zmq

from roundhouse.agents.agent.exits import ExitReports
from roundhouse.agents.agent.gpus import Gpu
from roundhouse.agents.agent.messages import drain
from roundhouse.agents.agent.processes import bad_launch, end_unstarted, ignored_launch, not_text, refuse_launch, shared_gpu
from roundhouse.agents.agent.scheduler_link import SchedulerLink
from roundhouse.errors import UsageError
from roundhouse.wire.protocol import EXIT_DONE, EXIT_PREEMPTED, RefusalLog
from roundhouse.wire.security import ClientSecurity

log = logging.getLogger("roundhouse.agent")
_REFUSALS = RefusalLog(log)  # (revokes of attempts no node here runs: a few a minute)

# What each emulated node holds open: its DEALER socket and its handshake monitor (a pair of
# sockets) in ZeroMQ, and as files their three mailboxes and the TCP connection.
SOCKETS_PER_NODE = 3
FILES_PER_NODE = 4
_SPARE_FILES = 64  # the process's own: Python, logging, the scheduler address probe


def _open_files_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def check_node_budget(count: int) -> None:
    """Refuse, before any socket exists, more emulated nodes than this process can open files or
    ZeroMQ sockets for; raise the soft open-file limit as far as the nodes need (up to the hard
    limit), as an unprivileged process may."""
    need = count * FILES_PER_NODE + _SPARE_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and need > soft:
        if hard != resource.RLIM_INFINITY and need > hard:
            most = max(0, (hard - _SPARE_FILES) // FILES_PER_NODE)
            raise UsageError(
                f"--nodes {count}: {count} emulated nodes need about {need:,} open files, and this process may open "
                f"at most {hard:,} (ulimit -Hn): emulate at most {most:,} nodes per process, or raise the limit"
            )
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        except (ValueError, OSError) as err:
            raise UsageError(
                f"--nodes {count}: {count} emulated nodes need about {need:,} open files, and this process may open "
                f"{soft:,} (ulimit -n), which it could not raise ({err})"
            ) from None
    with zmq.Context() as context:
        most_sockets = context.get(zmq.SOCKET_LIMIT)
    if count * SOCKETS_PER_NODE + 64 > most_sockets:
        raise UsageError(
            f"--nodes {count}: ZeroMQ opens at most {most_sockets:,} sockets in a process, "
            f"{SOCKETS_PER_NODE} a node: emulate at most {(most_sockets - 64) // SOCKETS_PER_NODE:,} nodes per process"
        )


@attrs.define(eq=False)
class _Job:
    """One rank of a launch, running as a timer."""

    node: int
    job: int
    attempt: int
    rank: int
    gpu: int
    start_iteration: int
    iterations: int
    iters_per_s: float
    started_at: float
    checkpoint_dir: str

    def iteration(self, now: float) -> int:
        return min(self.iterations, self.start_iteration + int((now - self.started_at) * self.iters_per_s))

    @property
    def ends_at(self) -> float:
        return self.started_at + max(0, self.iterations - self.start_iteration) / self.iters_per_s

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.job, self.attempt, self.rank)


class _Node:
    """One emulated node: its link to the scheduler, its exit reports, its running ranks."""

    def __init__(self, index: int, name: str, scheduler: str, security: ClientSecurity, gpus: list[Gpu], address: str):
        self.index = index
        self.name = name
        self.counters: dict[str, int] = {"bad_messages": 0, "launched": 0, "exits": 0}
        self.gpus = {g.index for g in gpus}
        hello = dict(
            node=name, address=address, session=uuid.uuid4().hex[:16], gpus=[{"index": g.index, "type": g.type} for g in gpus]
        )
        self.link = SchedulerLink(scheduler, security, hello, self.counters)
        self.link.quiet = index > 0  # (all go to one scheduler: the first node says how reaching it goes)
        self.exits = ExitReports(self.link, self.counters)
        self.jobs: dict[tuple[int, int, int], _Job] = {}

    def running(self, now: float) -> list[dict]:
        return [
            {"job": j.job, "attempt": j.attempt, "rank": j.rank, "gpu": j.gpu, "iteration": j.iteration(now)}
            for j in self.jobs.values()
        ]


class EmulatedNodes:
    """`count` emulated nodes served from one thread. See the module's docstring."""

    def __init__(
        self,
        scheduler: str,
        name: str,
        count: int,
        gpus: list[Gpu],
        security: ClientSecurity,
        address: str = "127.0.0.1",
    ):
        # Each node connects with its own key pair, NAME-i, whatever name `security` has (the
        # scheduler admits a node only under a key named after it); `agent_command` checked them.
        self.nodes = [_Node(i, f"{name}-{i}", scheduler, security.named(f"{name}-{i}"), gpus, address) for i in range(count)]
        self._ends: list[tuple[float, int, tuple[int, int, int]]] = []  # (time, node, key): a heap of completions
        self._stopping: str | None = None
        self._asked = False  # the scheduler asked these nodes to shut down (and they answered)

    def run(self) -> int:
        check_node_budget(len(self.nodes))
        context = zmq.Context()
        context.set(zmq.MAX_SOCKETS, len(self.nodes) * SOCKETS_PER_NODE + 64)
        poller = zmq.Poller()
        by_socket = {}
        opened = 0
        try:
            for node in self.nodes:
                dealer, monitor = node.link.open(context)
                opened += 1
                poller.register(dealer, zmq.POLLIN)
                poller.register(monitor, zmq.POLLIN)
                by_socket[dealer] = (node, False)
                by_socket[monitor] = (node, True)
        except zmq.ZMQError as err:
            for node in self.nodes[:opened]:
                node.link.close()
            context.destroy(linger=0)
            raise UsageError(
                f"--nodes {len(self.nodes)}: could not open the connection of node {opened} ({err.strerror}); "
                f"this process may open {_open_files_limit()} files (ulimit -n): emulate fewer nodes per process"
            ) from None
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        gpus = len(self.nodes[0].gpus)
        log.info(
            "emulating %d node(s) of %d GPU(s) (%s ...), scheduler %s",
            len(self.nodes),
            gpus,
            self.nodes[0].name,
            self.nodes[0].link.scheduler,
        )
        status = 0
        try:
            while True:
                timeout = 50
                if self._ends:
                    timeout = max(0, min(timeout, int((self._ends[0][0] - time.time()) * 1000) + 1))
                for sock, _ in poller.poll(timeout=timeout):
                    node, is_monitor = by_socket[sock]
                    if is_monitor:
                        node.link.watch_handshakes()
                    else:
                        drain(sock, lambda frames, node=node: self._on_frame(node, frames))
                if any(n.link.refused for n in self.nodes):
                    status = 2
                    break
                if any(n.link.cut_off is not None for n in self.nodes):  # (a node's key no longer admitted: all stop)
                    status = 2
                    self.stop("a node's key is no longer admitted by the scheduler")
                now = time.time()
                self._finish_due(now)
                for node in self.nodes:
                    if node.link.keep_alive(now, lambda node=node: node.running(time.time())):
                        node.exits.flush()
                if self._stopping and not any(n.jobs for n in self.nodes):
                    break
            # On the way out: resend what is due, then wait briefly (all nodes at once) for the acknowledgements.
            for node in self.nodes:
                node.exits.flush()
            deadline = time.time() + 2.0
            while time.time() < deadline and any(
                n.exits.unacked and n.link.registered and n.link.cut_off is None for n in self.nodes
            ):
                for sock, _ in poller.poll(timeout=100):
                    node, is_monitor = by_socket[sock]
                    if not is_monitor:
                        drain(sock, lambda frames, node=node: self._on_frame(node, frames))
            if self._stopping and not self._asked:  # (leaving unasked: each node says so, after its exits)
                for node in self.nodes:
                    if node.link.registered:
                        node.link.send("stopping")
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for node in self.nodes:
                node.link.close()
            context.term()
        log.info("emulated nodes stopped%s", f" ({self._stopping})" if self._stopping else "")
        return status

    def _on_signal(self, signum, frame) -> None:
        self.stop(f"signal {signal.Signals(signum).name}")

    def stop(self, why: str) -> None:
        """Every running rank ends preempted at the iteration it reached; then out."""
        if self._stopping:
            return
        self._stopping = why
        now = time.time()
        for attempt in sorted({(j.job, j.attempt) for n in self.nodes for j in n.jobs.values()}):
            self._revoke({"job": attempt[0], "attempt": attempt[1], "kill": False}, now)

    # --- the scheduler's messages ---
    def _on_frame(self, node: _Node, frames) -> None:
        got = node.link.receive(frames)
        if got is None:
            return
        type_, body = got
        if type_ == "welcome":
            first = not node.link.registered
            if not node.link.welcome(body):
                return
            if first or node.exits.unacked:
                node.exits.flush(force=True)
            if first and all(n.link.registered for n in self.nodes):  # (said again after the scheduler restarts)
                log.info("all %d emulated node(s) registered with the scheduler at %s", len(self.nodes), node.link.scheduler)
        elif type_ == "unknown":
            if node.link.registered or time.time() - node.link.last_register > 1.0:
                node.link.registered = False
                node.link.register(node.running(time.time()))
        elif type_ == "error":
            if not node.link.registered:
                log.error("the scheduler refused to register node %s: %s", node.name, body["reason"])
                node.link.refused = True
            else:
                log.warning("the scheduler says to %s: %s", node.name, body["reason"])
        elif type_ == "key_refused":
            node.link.key_refused(body["key"], body["cause"])
        elif type_ == "shutdown":
            self._asked = True
            node.link.send("stopping")  # (the scheduler may ask again: each time answered)
            if not self._stopping:
                # The scheduler asks every node, and waits for each to answer; but this process
                # may end before the others' requests arrive: every node says so now.
                for other in self.nodes:
                    if other is not node and other.link.registered:
                        other.link.send("stopping")
            self.stop(f"the scheduler asked: {body['reason']}")
        elif type_ == "ack":
            node.exits.acknowledged((body["job"], body["attempt"], body["rank"]))
        elif type_ == "launch":
            self._launch(node, body)
        elif type_ == "revoke":
            self._revoke(body, node=node)
        elif type_ == "resize":
            self._resize(node, body)

    def _launch(self, node: _Node, body: dict) -> None:
        reason = bad_launch(body, node.gpus) or shared_gpu(body, node.jobs.values())
        if reason:

            def here(rank: int) -> bool:  # (a repeated launch's rank: its own exit report ends it)
                key = (body["job"], body["attempt"], rank)
                return key in node.jobs or node.exits.ran(key)

            refuse_launch(body, reason, lambda rank: end_unstarted(node.exits.report, body, rank, "failed", reason, True), here)
            return
        start = body.get("resume_iteration") or 0
        now = time.time()
        for r in body["ranks"]:
            key = (body["job"], body["attempt"], r["rank"])
            if key in node.jobs or node.exits.ran(key):
                if key not in node.jobs:
                    ignored_launch(*key)
                continue  # a repeated launch
            if self._stopping:
                end_unstarted(node.exits.report, body, r["rank"], "preempted", "the agent is stopping", False)
                continue
            rate = float(body.get("iters_per_s") or 0.0) or 1.0
            job = _Job(node.index, *key, r["gpu"], start, int(body["iterations"]), rate, now, body["checkpoint_dir"])
            node.jobs[key] = job
            node.counters["launched"] += 1
            node.link.send("started", job=key[0], attempt=key[1], rank=key[2])
            heapq.heappush(self._ends, (job.ends_at, node.index, key))

    def _revoke(self, body: dict, now: float | None = None, node: _Node | None = None) -> None:
        """A revocation (sent to rank 0's node only, whichever rank it names) ends every rank of
        the attempt, on every node here, at one iteration: the furthest any of them reached, as
        real workers agree on their exit iteration. A kill ends them at once, where each is. One
        that names ranks (`ranks`: stray workers on `node`, the node it came to) ends only those
        ranks there, as a real agent does; the attempt's other ranks run on."""
        now = time.time() if now is None else now
        attempt = (body["job"], body["attempt"])
        named = body.get("ranks")
        on = self.nodes if named is None or node is None else [node]
        ranks = [
            (n, j)
            for n in on
            for j in list(n.jobs.values())
            if (j.job, j.attempt) == attempt and (named is None or j.rank in named)
        ]
        if not ranks:
            # (stopping revokes only what runs; an attempt that ended here crossed the revoke)
            if not self._stopping and not any(n.exits.attempt_ran(*attempt) for n in on):
                which = "" if named is None else f" rank(s) {','.join(map(str, sorted(named)))}"
                _REFUSALS.warn(
                    "unknown_attempt",
                    "dropped the scheduler's revoke of job %d attempt %d%s: not running here (any more)",
                    *attempt,
                    which,
                )
            return
        reached = None if body["kill"] else max(j.iteration(now) for _, j in ranks)
        for node, job in ranks:
            self._end(node, job, "killed" if body["kill"] else "preempted", now, reached)

    def _resize(self, node: _Node, body: dict) -> None:
        """A resize in place (sent to rank 0's node and to each node given new ranks): the
        attempt goes on from the iteration it reached at its new speed, ranks past the new size
        leave (`resized`), and this node's new ranks join. Refused, as a real agent refuses it,
        for an attempt no emulated node runs, a GPU this node lacks or a rank that is not new;
        then nothing changes, and the new ranks given here end without having run (preempted,
        no exit status), as a real agent reports them: the scheduler stops the attempt and
        takes the job back from its checkpoint rather than waiting for ranks that never start."""
        now = time.time()
        attempt = (body["job"], body["attempt"])
        ranks = [(n, j) for n in self.nodes for j in n.jobs.values() if (j.job, j.attempt) == attempt]
        why = self._resize_refusal(node, body, bool(ranks))
        if why:
            log.warning("refused resize of job %d attempt %d: %s", *attempt, why)
            at = max((j.iteration(now) for _, j in ranks), default=0)
            for rank in sorted({r["rank"] for r in body["ranks"]}):
                if rank < body["world_size"] and not any((*attempt, rank) in n.jobs for n in self.nodes):
                    node.exits.report(
                        *attempt, rank, "preempted", at, at, None, None, None, f"resize refused: {why}", permanent=False
                    )
            return
        reached = max(j.iteration(now) for _, j in ranks)
        rate = float(body.get("iters_per_s") or 0.0) or ranks[0][1].iters_per_s
        for owner, job in ranks:
            if job.rank >= body["world_size"]:
                self._end(owner, job, "resized", now)
            else:  # (a stale completion in the heap is skipped by _finish_due)
                job.start_iteration, job.started_at, job.iters_per_s = reached, now, rate
                heapq.heappush(self._ends, (job.ends_at, owner.index, job.key))
        for r in body["ranks"]:
            key = (*attempt, r["rank"])
            if key not in node.jobs:
                job = _Job(node.index, *key, r["gpu"], reached, ranks[0][1].iterations, rate, now, ranks[0][1].checkpoint_dir)
                node.jobs[key] = job
                node.link.send("started", job=key[0], attempt=key[1], rank=key[2])
                heapq.heappush(self._ends, (job.ends_at, node.index, key))

    def _resize_refusal(self, node: _Node, body: dict, runs: bool) -> str:
        """Why this node cannot carry out its part of a resize ("" if it can)."""
        if self._stopping:
            return "the agent is stopping"
        if not runs:
            return "this node runs no worker of it"
        if bad := not_text(body, ("master_addr",)):
            return bad
        seen: set[int] = set()
        for r in body["ranks"]:
            if r["gpu"] not in node.gpus:
                return f"this node has no GPU {r['gpu']}"
            key = (body["job"], body["attempt"], r["rank"])
            if r["rank"] == 0 or r["rank"] >= body["world_size"] or r["rank"] in seen or any(key in n.jobs for n in self.nodes):
                return f"rank {r['rank']} is not a new rank of a job of {body['world_size']} workers"
            seen.add(r["rank"])
        return shared_gpu(body, (j for j in node.jobs.values() if j.rank < body["world_size"]))

    # --- running ---
    def _finish_due(self, now: float) -> None:
        while self._ends and self._ends[0][0] <= now:
            _, index, key = heapq.heappop(self._ends)
            node = self.nodes[index]
            job = node.jobs.get(key)
            if job is not None and job.ends_at <= now:
                self._end(node, job, "done", now)

    def _end(self, node: _Node, job: _Job, outcome: str, now: float, iteration: int | None = None) -> None:
        """End one rank, at `iteration` (default: the one it reached)."""
        del node.jobs[job.key]
        iteration = job.iteration(now) if iteration is None else iteration
        checkpoint = None
        if outcome == "preempted":
            checkpoint = f"{job.checkpoint_dir}/emulated-job-{job.job}-iteration-{iteration}"
        node.exits.report(
            job.job,
            job.attempt,
            job.rank,
            outcome,
            iteration,
            job.start_iteration,
            checkpoint,
            iteration if checkpoint else None,
            {"done": EXIT_DONE, "resized": EXIT_DONE, "preempted": EXIT_PREEMPTED}.get(outcome),
            {"killed": "terminated by the agent", "resized": "left the job in a resize"}.get(outcome, ""),
            permanent=False,
        )
