"""The live backend alone, driven round by round, with protocol-speaking stand-ins for agents
(real ZeroMQ sockets on loopback; no processes)."""

from __future__ import annotations

import json
import time

import attrs
import numpy as np
import polars as pl
import pytest
import zmq

from roundhouse.runtime.backends.live import LiveBackend, LiveOptions
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.types import Plan
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable
from roundhouse.wire import protocol
from roundhouse.wire.security import ServerSecurity
from tests.livecluster import free_port, wait_until

# Real agents, schedulers or training processes on this machine (the quick loop is -m "not live").
pytestmark = pytest.mark.live


class FakeAgent:
    """Speaks the agent's side of the protocol, by hand."""

    def __init__(self, ctx, address: str, name: str, gpus: int = 2, kind: str = "V100"):
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)
        self.name, self.gpus, self.kind = name, gpus, kind
        self.seq = protocol.Sequence()
        self.inbox: list[tuple[str, dict]] = []

    def send(self, type_: str, **body) -> None:
        self.sock.send(protocol.encode(type_, self.seq.next(), **body))

    def register(self, running=()) -> None:
        self.send(
            "register",
            node=self.name,
            address="127.0.0.1",
            session=self.name,
            gpus=[{"index": i, "type": self.kind} for i in range(self.gpus)],
            running=list(running),
        )

    def receive(self, expect: int = 0, kind: str | None = None, timeout: float = 10.0) -> list[tuple[str, dict]]:
        """What has come since the last call. Given `expect`, first waits (up to `timeout` s)
        until that many messages (of type `kind`, if given) are among them: what the scheduler
        sent reaches this socket through ZeroMQ's I/O threads, which a loaded machine runs late."""
        deadline = time.monotonic() + timeout
        while True:
            while self.sock.poll(0):
                type_, _, body = protocol.decode(self.sock.recv())
                self.inbox.append((type_, body))
            if sum(kind in (None, t) for t, _ in self.inbox) >= expect or time.monotonic() > deadline:
                break
            self.sock.poll(50)
        got, self.inbox = self.inbox, []
        return got

    def exited(self, job, attempt, rank, outcome, iteration, checkpoint=None, permanent=False, reason=""):
        self.send(
            "exited",
            job=job,
            attempt=attempt,
            rank=rank,
            outcome=outcome,
            iteration=iteration,
            start_iteration=0,
            permanent=permanent,
            reason=reason,
            checkpoint=checkpoint,
            checkpoint_iteration=iteration if checkpoint else None,
        )


def serve_until(backend, check, what: str, timeout: float = 10.0) -> None:
    """Serve `backend` until `check()` holds, for at most `timeout` s (an AssertionError naming
    `what` if it never does): what a stand-in agent sends reaches the scheduler through ZeroMQ's
    I/O threads, which a loaded machine runs late, so a fixed time of serving may end first."""
    wait_until(lambda: check() or pump(backend, 0.05), timeout, what, every=0)  # (pump: None, so asked again)


def handled(backend, n: int = 1):
    """A check for `serve_until`, made before the messages are sent: the backend has handled
    `n` more messages than when it was made."""
    before = backend.counters["messages_in"]
    return lambda: backend.counters["messages_in"] >= before + n


def register_in_order(backend, agents) -> None:
    """Register the stand-in agents one at a time: registrations sent together may arrive in
    either order, and the tests rely on agents[i] being node i (GPUs 2i and 2i+1)."""
    for i, a in enumerate(agents):
        a.register()
        serve_until(backend, lambda: backend.nodes.slots[i] is not None, f"{a.name} to register")  # noqa: B023
        assert backend.nodes.slots[i].name == a.name
    pump(backend)


@pytest.fixture
def live(tmp_path):
    ctx = zmq.Context()
    world = World(Cluster.parse("2x2:V100"), ProfileTable.load(), "V100")
    address = f"tcp://127.0.0.1:{free_port()}"
    journal = Journal(tmp_path / "j.sqlite")
    # A long heartbeat timeout: the stand-in agents heartbeat only when a test says so.
    options = LiveOptions(
        heartbeat_s=0.1,
        heartbeat_timeout_s=60.0,
        max_retries=1,
        wait_for_agents_s=0.0,
        checkpoint_dir=str(tmp_path / "ck"),
        ports=(40000, 40100),
    )
    backend = LiveBackend(
        world, 0.2, address, ServerSecurity(None), journal, options, {"graph_digest": "x", "cluster": "c", "round_s": 0.2}
    )
    backend.start()
    agents = [FakeAgent(ctx, address, "a"), FakeAgent(ctx, address, "b")]
    register_in_order(backend, agents)
    yield world, backend, agents, journal
    for a in agents:
        a.sock.close()
    backend.close()
    journal.close()
    ctx.term()


def pump(backend, seconds: float = 0.25) -> None:
    backend.serve(time.time() + seconds)


def received(backend, agent: FakeAgent, timeout: float = 10.0) -> list[tuple[str, dict]]:
    """What `agent` has received, serving `backend` until something has come (or `timeout` s
    have passed): a reply sent near the end of a short `pump` may still be on its way."""
    deadline = time.time() + timeout
    while not agent.inbox and not agent.sock.poll(0) and time.time() < deadline:
        pump(backend, 0.05)
    return agent.receive()


def add_jobs(world, rows: list[dict]):
    frame = pl.DataFrame(rows)
    batch, _ = world.prepare(frame, "test")
    return world.add_jobs(batch)


def launch_two(live, first_iterations: float):
    """Jobs 1 (of `first_iterations`) and 2 (of 100), one GPU each, launched on nodes a and b."""
    world, backend, agents, _ = live
    for ag in agents:
        ag.receive()
    rows = add_jobs(
        world,
        [
            {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": first_iterations},
            {"job_id": 2, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 100.0},
        ],
    )
    round_trip(world, backend, Plan(launch_rows=rows, launch_gpus=[0, 2], launch_counts=[1, 1]))
    return rows


def round_trip(world, backend, plan: Plan):
    """One round as the engine runs it: poll and fold, then apply the plan."""
    events, progress = backend.poll()
    world.apply_progress(progress.rows, progress.done, progress.service, progress.run_s)
    failed = np.isin(events.finished, events.failed)
    world.apply_failed(events.finished[failed], events.finished_at[failed])
    world.apply_finished(events.finished[~failed], events.finished_at[~failed])
    world.apply_requeued(events.requeued)
    if events.online is not None:
        world.set_online(events.online)
    if plan is not None:
        world.check_plan(plan)
        backend.apply(plan)
        world.apply_plan(plan, backend.now)
    return events


def resumed(backend, journal, jobs: list[dict], plans: list[Plan | None], clean: bool = True, down_s: float = 0.0):
    """The scheduler stopped (`clean`: closed; else it dies, its socket gone and nothing more
    journaled) and a new one resumes its journal's run on a 2x2 cluster with `jobs`, replaying
    its rounds with the plans the run carried out, after `down_s` seconds down (the agents' jobs
    train on meanwhile). Returns the new world, backend and journal; the new backend is closed if
    its replay fails."""
    address, options, meta = backend.bind, backend.options, backend._meta
    if clean:
        backend.close()
    else:
        backend.server.close()
    journal.close()
    time.sleep(down_s)
    world = World(Cluster.parse("2x2:V100"), ProfileTable.load(), "V100")
    add_jobs(world, jobs)
    journal = Journal(journal.path)
    again = LiveBackend(world, 0.2, address, ServerSecurity(None), journal, options, meta)
    try:
        again.start()
        for plan in plans:
            assert again.replaying
            round_trip(world, again, plan)
            again.advance()
        assert not again.replaying
    except BaseException:
        again.close()
        journal.close()
        raise
    return world, again, journal


def test_agents_fill_the_cluster_s_nodes_by_shape(live, tmp_path):
    world, backend, (a, b), _ = live
    assert [t for t, _ in a.receive(1)] == ["welcome"] and [t for t, _ in b.receive(1)] == ["welcome"]
    ctx = zmq.Context()
    big = FakeAgent(ctx, backend.bind, "big", gpus=4)
    big.register()
    pump(backend)
    [(kind, body)] = big.receive(1)
    assert kind == "error" and "no free node with 4 V100" in body["reason"]
    big.sock.close()
    ctx.term()
    events = round_trip(world, backend, None)
    assert events.online.all() and set(events.nodes_joined) == {"a", "b"}


def test_launch_revoke_and_relaunch_from_the_checkpoint(live):
    world, backend, agents, journal = live
    for ag in agents:
        ag.receive()
    (row,) = add_jobs(world, [{"job_id": 7, "arrival_s": 0.0, "gpus": 2, "model": "LM", "iterations": 500.0}])
    # GPUs 1 and 2: one on each node, so the job spans both agents.
    round_trip(world, backend, Plan(launch_rows=[row], launch_gpus=[1, 2], launch_counts=[2]))
    pump(backend)
    got = {ag.name: ag.receive(1) for ag in agents}
    (ta, la), (tb, lb) = got["a"][0], got["b"][0]
    assert ta == tb == "launch" and la["world_size"] == 2 and la["master_port"] == lb["master_port"]
    assert la["ranks"] == [{"rank": 0, "gpu": 1}] and lb["ranks"] == [{"rank": 1, "gpu": 0}]
    assert la["workload"] == "roundhouse.agents.workloads.lstm" and la["iterations"] == 500 and la.get("resume") is None

    # Progress arrives with a heartbeat; the round's poll turns it into done iterations.
    heartbeat = handled(backend)
    agents[0].send("heartbeat", running=[{"job": 7, "attempt": 1, "rank": 0, "gpu": 1, "iteration": 40}])
    serve_until(backend, heartbeat, "the heartbeat")
    backend.clock.now += 0.2
    round_trip(world, backend, None)
    assert world.jobs.column("done")[row] == 40

    # Suspending: only rank 0's agent hears of it.
    round_trip(world, backend, Plan(suspend=[row]))
    pump(backend)
    assert agents[0].receive(1) == [("revoke", {"job": 7, "attempt": 1, "kill": False, "rank": 0, "ranks": None})]
    assert agents[1].receive() == []
    for rank, ag in enumerate(agents):
        ag.exited(7, 1, rank, "preempted", 52, checkpoint="/ck/job-7/a1-i52.pt")
    pump(backend)
    assert [t for t, _ in agents[0].receive(1)] == ["ack"] and [t for t, _ in agents[1].receive(1)] == ["ack"]
    round_trip(world, backend, None)
    assert world.jobs.column("done")[row] == 52

    # Relaunched on node b alone, from the checkpoint.
    round_trip(world, backend, Plan(launch_rows=[row], launch_gpus=[2, 3], launch_counts=[2]))
    pump(backend)
    [(t, launch)] = agents[1].receive(1)
    assert t == "launch" and launch["attempt"] == 2 and launch["resume"] == "/ck/job-7/a1-i52.pt"
    assert launch["resume_iteration"] == 52 and [r["rank"] for r in launch["ranks"]] == [0, 1]
    exits = handled(backend, 2)
    for rank in (0, 1):
        agents[1].exited(7, 2, rank, "done", 500)
    serve_until(backend, exits, "the two exits")
    events = round_trip(world, backend, None)
    assert events.finished.tolist() == [row] and 0 <= events.finished_at[0] <= backend.now
    rows = journal.attempts(7)
    assert [(r.attempt, r.outcome, r.start_iteration, r.end_iteration) for r in rows] == [
        (1, "preempted", 0, 52),
        (2, "done", 52, 500),
    ]


def test_crashes_are_retried_then_fail_and_lost_nodes_requeue(live):
    world, backend, agents, _ = live
    r0, r1 = launch_two(live, 100.0)
    exit_ = handled(backend)
    agents[0].exited(1, 1, 0, "failed", 10, reason="exit status 1")
    serve_until(backend, exit_, "the first crash")
    events = round_trip(world, backend, Plan(launch_rows=[r0], launch_gpus=[0], launch_counts=[1], keep=[r1]))
    assert events.requeued.tolist() == [r0]
    exit_ = handled(backend)
    agents[0].exited(1, 2, 0, "failed", 3, reason="exit status 1")
    serve_until(backend, exit_, "the second crash")
    events = round_trip(world, backend, None)
    assert events.failed.tolist() == [r0] and events.finished.tolist() == [r0]
    assert world.jobs.column("failed")[r0] and world.unfinished == 1

    # Node b falls silent: its GPUs go offline and its job waits again.
    backend.options = attrs.evolve(backend.options, heartbeat_timeout_s=0.5)
    deadline = time.time() + 3
    while time.time() < deadline and backend.nodes.slots[1].online:
        agents[0].send("heartbeat", running=[])
        pump(backend, 0.1)
    events = round_trip(world, backend, None)
    assert events.requeued.tolist() == [r1] and events.nodes_lost == ("b",)
    assert events.online.tolist() == [True, True, False, False]
    assert world.jobs.column("status")[r1] == 0 and world.jobs.column("interruptions")[r1] == 1


def test_a_job_whose_numbers_a_launch_cannot_carry_fails_alone(live):
    # (A trace's row, not a submission: submissions are refused before they are journaled.)
    # Its id is an int64 past the wire's 2^62 (its iterations could not be: a trace's job may not
    # take more than a century, far fewer than the wire's 2^53 iterations).
    world, backend, agents, _ = live
    for ag in agents:
        ag.receive()
    big, small = add_jobs(
        world,
        [
            {"job_id": 2**62 + 1, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 100.0},
            {"job_id": 2, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 100.0},
        ],
    )
    round_trip(world, backend, Plan(launch_rows=[big, small], launch_gpus=[0, 2], launch_counts=[1, 1]))
    pump(backend)
    events = round_trip(world, backend, None)
    assert events.failed.tolist() == [big] and world.jobs.column("failed")[big]
    assert [t for t, _ in agents[1].receive(1, "launch")].count("launch") == 1  # the other job went out


def test_the_scheduler_s_own_stall_does_not_lose_its_agents(live):
    """Heartbeats are judged only over the time the scheduler listened: after it was away (a
    round that overran, a stalled disk) longer than the heartbeat timeout, its agents are still
    up; an agent that then stays silent while it listens is lost as before."""
    world, backend, agents, _ = live
    backend.options = attrs.evolve(backend.options, heartbeat_timeout_s=0.5)
    heartbeats = handled(backend, 2)
    for a in agents:
        a.send("heartbeat", running=[])
    serve_until(backend, heartbeats, "the heartbeats")
    time.sleep(1.0)  # the scheduler away: nothing served, nothing checked
    pump(backend, 0.1)
    assert [n.online for n in backend.nodes.slots] == [True, True] and backend.counters["nodes_lost"] == 0
    deadline = time.time() + 3
    while time.time() < deadline and backend.nodes.slots[1].online:
        agents[0].send("heartbeat", running=[])
        pump(backend, 0.1)
    assert [n.online for n in backend.nodes.slots] == [True, False] and backend.counters["nodes_lost"] == 1


def test_lease_checks_and_bad_submissions_are_answered(live):
    world, backend, agents, _ = live
    (row,) = add_jobs(world, [{"job_id": 3, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 100.0}])
    round_trip(world, backend, Plan(launch_rows=[row], launch_gpus=[0], launch_counts=[1]))
    ctx = zmq.Context()
    user = FakeAgent(ctx, backend.bind, "user")
    user.send("lease", job=3, attempt=1)
    user.send("lease", job=3, attempt=9)
    user.send("submit", jobs=[{"model": "Teleporter", "iterations": 5, "gpus": 1}])
    user.send("submit", jobs=[{"job_id": 3, "model": "LM", "iterations": 5, "gpus": 1}])
    user.send("submit", jobs=[{"model": "LM", "iterations": 5, "gpus": 9}])
    user.send("submit", jobs=[{"model": "LM", "iterations": 5, "gpus": 1}])
    # Numbers a launch message could not carry are refused at submission, not at launch.
    user.send("submit", jobs=[{"model": "LM", "iterations": 10**20, "gpus": 1}])
    user.send("submit", jobs=[{"job_id": 2**62 + 1, "model": "LM", "iterations": 5, "gpus": 1}])
    # What a launch would change is refused too: a part of an iteration, a command not of words.
    user.send("submit", jobs=[{"model": "LM", "iterations": 5.5, "gpus": 1}])
    user.send("submit", jobs=[{"command": True, "duration_s": 60, "gpus": 1}])
    replies: list = []
    deadline = time.time() + 10  # (replies may still be on their way when one serve ends)
    while len(replies) < 10 and time.time() < deadline:
        pump(backend, 0.1)
        replies += user.receive()
    assert replies[0] == ("lease_reply", {"job": 3, "attempt": 1, "valid": True})
    assert replies[1] == ("lease_reply", {"job": 3, "attempt": 9, "valid": False})
    reasons = [b["reason"] for t, b in replies if t == "error"]  # (answered at once; `accepted` once journaled)
    assert "not in the profile" in reasons[0] and "already in use" in reasons[1] and "9 GPU" in reasons[2]
    assert "iterations 100,000,000,000,000,000,000 is more than a live launch carries" in reasons[3]
    assert "job_id 4,611,686,018,427,387,905 is more than a live launch carries" in reasons[4]
    assert "iterations 5.5 is not a whole number" in reasons[5]
    assert "command True: must be text or a list of words" in reasons[6]
    assert [b for t, b in replies if t == "accepted"] == [{"job_ids": [4]}]
    # A message numbered past what an error reply can refer to is refused, and answered.
    user.sock.send(json.dumps({"v": protocol.VERSION, "type": "status", "seq": 2**62 + 5}).encode())
    pump(backend)
    assert "bad 'seq'" in user.receive(1)[0][1]["reason"]
    events = round_trip(world, backend, None)
    assert events.submitted["job_id"].to_list() == [4] and events.submitted["model"].to_list() == ["LM"]
    user.sock.close()
    ctx.term()


def test_a_moved_job_relaunches_only_after_its_old_attempt_checkpointed(live):
    world, backend, agents, journal = live
    for ag in agents:
        ag.receive()
    (row,) = add_jobs(world, [{"job_id": 9, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 300.0}])
    round_trip(world, backend, Plan(launch_rows=[row], launch_gpus=[0], launch_counts=[1]))
    pump(backend)
    assert [t for t, _ in agents[0].receive(1)] == ["launch"]
    # One round suspends it and launches it on node b: a move.
    round_trip(world, backend, Plan(launch_rows=[row], launch_gpus=[2], launch_counts=[1], suspend=[row]))
    pump(backend)
    assert agents[0].receive(1) == [("revoke", {"job": 9, "attempt": 1, "kill": False, "rank": 0, "ranks": None})]
    assert agents[1].receive() == []  # not before the old attempt has checkpointed
    agents[0].exited(9, 1, 0, "preempted", 77, checkpoint="/ck/job-9/a1-i77.pt")
    pump(backend)
    [(t, launch)] = agents[1].receive(1)
    assert t == "launch" and launch["attempt"] == 2 and launch["resume_iteration"] == 77
    assert [(r.attempt, r.outcome, r.start_iteration) for r in journal.attempts(9)] == [(1, "preempted", 0), (2, None, 77)]


def test_a_plan_that_shares_gpus_is_refused_before_anything_leaves(live):
    """Live agents run one job per GPU: a space-sharing plan is refused with a reason, and
    nothing is journaled or sent."""
    from roundhouse.runtime.world import PlanError

    world, backend, agents, journal = live
    for ag in agents:
        ag.receive()
    rows = add_jobs(world, [{"job_id": i, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 100.0} for i in (1, 2)])
    plan = Plan(launch_rows=rows, launch_gpus=[0, 0], launch_counts=[1, 1], launch_partner=rows[::-1])
    world.check_plan(plan)
    plans_before = len(backend.takeover.plans)
    with pytest.raises(PlanError, match="space sharing is simulated only"):
        backend.apply(plan)
    pump(backend)
    assert len(backend.takeover.plans) == plans_before and all(ag.receive() == [] for ag in agents)


def test_with_keys_an_agent_registers_only_under_its_own_keys_name(live):
    world, backend, agents, _ = live
    nodes = backend.nodes
    sent = []
    real_send = nodes.server.send
    nodes.server.send = lambda identity, type_, **body: sent.append((identity, type_, body))

    class Frame:  # (what ZeroMQ gives a CURVE-authenticated message: the key's name)
        def __init__(self, key):
            self.key = key

        def get(self, name):
            return self.key if name == "User-Id" else None

    body = {
        "node": "b",
        "address": "127.0.0.1",
        "session": "new",
        "gpus": [{"index": i, "type": "V100"} for i in range(2)],
        "running": [],
    }
    try:
        before = nodes.by_name["b"].session
        nodes.on_register(b"alice", 1, body, Frame("alice"))
        assert sent and sent[-1][1] == "error" and "node b registers with the key of alice" in sent[-1][2]["reason"]
        assert nodes.by_name["b"].session == before and b"alice" not in nodes.by_identity  # nothing changed
    finally:
        nodes.server.send = real_send


def _launch_across(live, job_id: int, iterations: float = 500.0) -> int:
    """A 2-GPU job on GPUs 1 and 2: rank 0 on node a, rank 1 on node b."""
    world, backend, agents, _ = live
    for ag in agents:
        ag.receive()
    (row,) = add_jobs(world, [{"job_id": job_id, "arrival_s": 0.0, "gpus": 2, "model": "LM", "iterations": iterations}])
    round_trip(world, backend, Plan(launch_rows=[row], launch_gpus=[1, 2], launch_counts=[2]))
    pump(backend)
    assert [t for t, _ in agents[0].receive(1)] == ["launch"] and [t for t, _ in agents[1].receive(1)] == ["launch"]
    return row


def _lose_node_b(live) -> None:
    """Node b falls silent (its agent died) while node a keeps heartbeating."""
    _, backend, agents, _ = live
    backend.options = attrs.evolve(backend.options, heartbeat_timeout_s=0.5)
    deadline = time.time() + 5
    while time.time() < deadline and backend.nodes.slots[1].online:
        agents[0].send("heartbeat", running=[])
        pump(backend, 0.1)
    assert not backend.nodes.slots[1].online


def test_a_rank_ended_before_it_started_ends_its_attempt_on_every_node(live):
    """The revocation reaches rank 0 while it still waits to start (its agent's fork server is
    importing PyTorch): it ends at once, and its peers elsewhere are killed, since they would
    wait in their rendezvous for it. Without that, the relaunch waited for them for good."""
    world, backend, agents, journal = live
    row = _launch_across(live, 5)
    # Suspended and moved in one round: the relaunch waits for this attempt to exit.
    round_trip(world, backend, Plan(launch_rows=[row], launch_gpus=[0, 1], launch_counts=[2], suspend=[row]))
    pump(backend)
    assert agents[0].receive(1) == [("revoke", {"job": 5, "attempt": 1, "kill": False, "rank": 0, "ranks": None})]
    assert agents[1].receive() == []
    agents[0].exited(5, 1, 0, "preempted", 0, reason="revoked before it started")
    pump(backend)
    [(kind, kill)] = agents[1].receive(1)
    assert kind == "revoke" and kill["kill"] and (kill["job"], kill["attempt"]) == (5, 1)
    assert [t for t, _ in agents[0].receive(1)] == ["ack"]
    agents[1].exited(5, 1, 1, "killed", 0, reason="terminated by the agent")
    pump(backend)
    launches = [b for t, b in agents[0].receive() if t == "launch"]
    assert [(b["attempt"], [r["rank"] for r in b["ranks"]]) for b in launches] == [(2, [0, 1])]
    assert [(r.attempt, r.outcome) for r in journal.attempts(5)] == [(1, "killed"), (2, None)]
    assert backend.attempts.retries[row] == 0


def test_a_peer_s_failure_after_its_node_was_lost_requeues_the_job_without_a_retry(live):
    """Node b's agent dies; rank 0 on node a fails at once (its collective broke), before the
    heartbeat timeout declares b lost. That is a node loss: the job is requeued from its
    checkpoint and no retry is counted, even with --retries 0."""
    world, backend, agents, journal = live
    backend.options = attrs.evolve(backend.options, max_retries=0)
    row = _launch_across(live, 6)
    heartbeat = handled(backend)
    agents[1].send("heartbeat", running=[{"job": 6, "attempt": 1, "rank": 1, "gpu": 0, "iteration": 10}])
    serve_until(backend, heartbeat, "b's heartbeat")  # (b is heard before the failure)
    pump(backend, 0.1)
    # Node b dies here (it sends nothing more); its peer's collective breaks.
    exit_ = handled(backend)
    agents[0].exited(6, 1, 0, "failed", 10, reason="exit status 1; ... Connection closed by peer")
    serve_until(backend, exit_, "the failure")  # (before b is lost)
    _lose_node_b(live)
    events = round_trip(world, backend, None)
    assert events.requeued.tolist() == [row] and events.failed.tolist() == []
    assert not world.jobs.column("failed")[row] and world.jobs.column("status")[row] == 0
    assert backend.attempts.retries[row] == 0
    assert [(r.attempt, r.outcome) for r in journal.attempts(6)] == [(1, "killed")]


def test_a_job_s_own_failure_still_counts_when_a_node_is_lost_afterwards(live):
    """Rank 0 fails while node b is up (b is heard from well after the failure); b is lost
    only later: the failure is the job's own and counts as a try."""
    world, backend, agents, journal = live
    row = _launch_across(live, 8)
    agents[0].exited(8, 1, 0, "failed", 10, reason="exit status 1; ZeroDivisionError")
    pump(backend, 0.1)
    assert [t for t, _ in received(backend, agents[1])] == ["revoke"]  # the kill of rank 1
    time.sleep(0.3)  # (more than a heartbeat period)
    heartbeat = handled(backend)
    agents[1].send("heartbeat", running=[{"job": 8, "attempt": 1, "rank": 1, "gpu": 0, "iteration": 10}])
    serve_until(backend, heartbeat, "b's heartbeat")  # (b is heard after the failure)
    _lose_node_b(live)
    events = round_trip(world, backend, None)
    assert events.requeued.tolist() == [row] and backend.attempts.retries[row] == 1
    assert [(r.attempt, r.outcome) for r in journal.attempts(8)] == [(1, "failed")]


def test_a_failure_with_no_node_lost_counts_as_a_try(live):
    world, backend, agents, journal = live
    row = _launch_across(live, 9)
    agents[0].exited(9, 1, 0, "failed", 10, reason="exit status 1; ZeroDivisionError")
    pump(backend, 0.1)
    assert [t for t, _ in received(backend, agents[1])] == ["revoke"]
    exit_ = handled(backend)
    agents[1].exited(9, 1, 1, "killed", 10, reason="terminated by the agent")
    serve_until(backend, exit_, "rank 1's exit")
    events = round_trip(world, backend, None)
    assert events.requeued.tolist() == [row] and backend.attempts.retries[row] == 1
    assert [(r.attempt, r.outcome) for r in journal.attempts(9)] == [(1, "failed")]


def test_a_command_that_does_not_split_into_words_is_refused_or_fails_alone(live):
    """Refused at submission, naming the job; a job that holds one all the same (a trace's
    row, a journal from before the check) fails as "cannot run" at its launch, and the
    scheduler carries on."""
    world, backend, agents, _ = live
    ctx = zmq.Context()
    user = FakeAgent(ctx, backend.bind, "user")
    user.send("submit", jobs=[{"command": "echo 'oops", "duration_s": 5, "gpus": 1}])
    user.send("submit", jobs=[{"command": "echo" + " x" * 300, "duration_s": 5, "gpus": 1}])
    replies: list = []
    deadline = time.time() + 10
    while len(replies) < 2 and time.time() < deadline:
        pump(backend, 0.1)
        replies += user.receive()
    reasons = [b["reason"] for t, b in replies if t == "error"]
    assert len(reasons) == 2, replies
    assert 'job 0: command "echo \'oops": no closing quotation' in reasons[0]
    assert "job 0: command has more than 256 entries" in reasons[1]
    user.sock.close()
    ctx.term()

    for ag in agents:
        ag.receive()
    rows = add_jobs(
        world,
        [
            {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "command": "echo 'oops", "duration_s": 5.0},
            {"job_id": 2, "arrival_s": 0.0, "gpus": 1, "command": "sleep 5", "duration_s": 5.0},
        ],
    )
    round_trip(world, backend, Plan(launch_rows=rows, launch_gpus=[0, 2], launch_counts=[1, 1]))
    pump(backend)
    events = round_trip(world, backend, None)
    assert events.failed.tolist() == [rows[0]] and world.jobs.column("failed")[rows[0]]
    [(kind, launch)] = agents[1].receive(1)
    assert kind == "launch" and launch["command"] == ["sleep", "5"]  # the other job went out


def test_a_registration_the_welcome_cannot_answer_changes_nothing(live):
    """A heartbeat period the welcome cannot carry (`serve` refuses one at start; the backend
    may be given one directly): the registration is refused with a reason, and the node is not
    counted online, named or journaled."""
    world, backend, agents, journal = live
    nodes = backend.nodes
    nodes.lose(nodes.by_name["b"], "a test")
    pump(backend)
    backend.options = attrs.evolve(backend.options, heartbeat_s=7200.0, heartbeat_timeout_s=10800.0)
    ctx = zmq.Context()
    c = FakeAgent(ctx, backend.bind, "c")
    c.register()
    replies: list = []
    deadline = time.time() + 5
    while not replies and time.time() < deadline:
        pump(backend, 0.1)
        replies += c.receive()
    assert [t for t, _ in replies] == ["error"] and "cannot welcome node c: heartbeat_s" in replies[0][1]["reason"]
    assert "c" not in nodes.by_name and nodes.slots[1].name == "b" and not nodes.slots[1].online
    assert nodes.online.tolist() == [True, True, False, False] and "c" not in journal.nodes()
    assert backend.counters["handler_errors"] == 0
    c.sock.close()
    ctx.term()
