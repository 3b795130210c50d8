"""Recovering from a dropped connection and from a restart: a launch or revoke that cannot reach
an agent whose connection dropped is held and delivered when it registers again; an attempt a
re-registered agent does not run (its launch lost with the old connection) ends and its job is
requeued, while one whose exit comes after the registration ends by that exit; a job that kept
running while the scheduler was down is booked the GPU time it ran; and nodes whose agents were
told to stop at the end of a run stay offline in the resumed run until they register. Stand-in
agents on real ZeroMQ sockets (tests/test_live_backend.py), and a loopback cluster of real
processes (tests/livecluster.py)."""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import polars as pl
import pytest
import zmq

from roundhouse.agents.submitter import Submitter
from roundhouse.runtime.types import Assignment, Plan
from roundhouse.runtime.world import RUNNING
from roundhouse.wire.security import ClientSecurity
from tests.livecluster import TEST_PROFILE, LiveCluster, free_port
from tests.test_live_backend import FakeAgent, add_jobs, handled, live, pump, received, resumed, round_trip, serve_until  # noqa: F401 (the fixture)

# Real agents, schedulers or training processes on this machine (the quick loop is -m "not live").
pytestmark = pytest.mark.live

JOB = {"job_id": 3, "arrival_s": 0.0, "gpus": 2, "model": "LM", "iterations": 5000.0}


def _drop(backend, agent: FakeAgent) -> None:
    """The agent's connection drops: its socket is gone, and the scheduler's has no route to it."""
    node = backend.nodes.by_name[agent.name]
    identity = node.identity
    agent.sock.close()
    # (ZeroMQ removes the route once it has seen the connection close.)
    serve_until(backend, lambda: not _routable(backend, identity), "the route to go")


def _routable(backend, identity: bytes) -> bool:
    """Whether the scheduler's socket still routes to `identity` (a probe: a frame that decodes as nothing)."""
    try:
        backend.server._socket.send_multipart([identity, b""], zmq.NOBLOCK)
        return True
    except zmq.ZMQError:
        return False


def _reconnect(ctx, backend, name: str) -> FakeAgent:
    """The same agent (its session) back on a new connection, as ZeroMQ reconnects it."""
    agent = FakeAgent(ctx, backend.bind, name)
    return agent


def _attempt(journal, job: int, n: int) -> tuple:
    journal.commit()
    return journal.db.execute(
        "SELECT launched_s, ended_s, outcome, reason FROM attempts WHERE job_id = ? AND attempt = ?", (job, n)
    ).fetchone()


@pytest.fixture
def ctx():
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


def test_a_launch_for_a_dropped_connection_is_held_and_delivered_when_its_agent_registers_again(live, ctx, logs):  # noqa: F811
    world, backend, (a, b), journal = live
    for ag in (a, b):
        ag.receive()
    _drop(backend, a)
    (row,) = add_jobs(world, [JOB])
    round_trip(world, backend, Plan.of([Assignment(row, [0, 1])]))
    said = logs.text
    assert "launch job 3 attempt 1 on a (GPUs 0,1): held for a until its agent registers again" in said
    assert "node a: its connection dropped" in said
    node = backend.nodes.by_name["a"]
    assert node.online and node.identity is None and [t for t, _ in node.outbox] == ["launch"]

    again = _reconnect(ctx, backend, "a")
    try:
        again.register()  # (it lists nothing: the launch never reached it)
        serve_until(backend, lambda: node.identity is not None, "a to register again")
        pump(backend)
        got = again.receive(2)
        assert [t for t, _ in got] == ["welcome", "launch"]
        assert got[1][1]["job"] == 3 and got[1][1]["attempt"] == 1 and len(got[1][1]["ranks"]) == 2
        # It runs the job now: the next heartbeat lists it, and nothing is ended or requeued.
        running = [{"job": 3, "attempt": 1, "rank": r, "gpu": r, "iteration": 10} for r in (0, 1)]
        heartbeat = handled(backend)
        again.send("heartbeat", running=running)
        serve_until(backend, heartbeat, "the heartbeat")
        assert (3, 1) in backend.attempts.live and _attempt(journal, 3, 1)[1] is None
        events = round_trip(world, backend, None)
        assert row not in events.requeued.tolist() and world.jobs.column("status")[row] == RUNNING
    finally:
        again.sock.close()


def _lost_launch(fixture, ctx) -> tuple[int, FakeAgent]:
    """Job 3 launched on node a, whose agent never got the launch (lost with its connection,
    which ZeroMQ had taken for alive); the agent is back on a new connection, registered,
    running nothing."""
    world, backend, (a, b), journal = fixture
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [JOB])
    round_trip(world, backend, Plan.of([Assignment(row, [0, 1])]))
    pump(backend)
    assert [t for t, _ in a.receive(1)] == ["launch"]  # (sent: but this agent is gone with it)
    a.sock.close()
    again = _reconnect(ctx, backend, "a")
    again.register()
    node = backend.nodes.by_name["a"]
    old = node.identity
    serve_until(backend, lambda: node.identity not in (None, old), "a to register again")
    # (The welcome leaves as the registration is handled, which may be at the very end of a pump.)
    assert [t for t, _ in received(backend, again)] == ["welcome"]
    return row, again


def test_an_attempt_a_re_registered_agent_does_not_run_is_ended_and_its_job_requeued(live, ctx):  # noqa: F811
    world, backend, _, journal = live
    row, again = _lost_launch(live, ctx)
    try:
        assert (3, 1) in backend.attempts.live  # (its exit may still come: not ended at the registration)
        heartbeat = handled(backend)
        again.send("heartbeat", running=[])
        serve_until(backend, heartbeat, "the heartbeat")
        assert (3, 1) not in backend.attempts.live
        launched, ended, outcome, reason = _attempt(journal, 3, 1)
        assert ended is not None and outcome == "killed" and "registered again without it" in reason
        events = round_trip(world, backend, None)
        assert events.requeued.tolist() == [row] and world.jobs.column("status")[row] != RUNNING
        assert backend.attempts.retries[row] == 0  # (no try counted: it never ran)
    finally:
        again.sock.close()


def test_a_revoke_of_an_attempt_whose_launch_was_lost_ends_it(live, ctx):  # noqa: F811
    """Suspended while its launch was lost: the agent drops the revoke (it runs no such job);
    the attempt still ends, with its time, rather than staying open in the journal."""
    world, backend, _, journal = live
    row, again = _lost_launch(live, ctx)
    try:
        round_trip(world, backend, Plan(suspend=[row]))
        pump(backend)
        assert [t for t, _ in again.receive(1)] == ["revoke"]
        heartbeat = handled(backend)
        again.send("heartbeat", running=[])
        serve_until(backend, heartbeat, "the heartbeat")
        launched, ended, outcome, _ = _attempt(journal, 3, 1)
        assert ended is not None and ended >= launched and outcome == "killed"
        assert not backend.attempts.live
    finally:
        again.sock.close()


def test_an_exit_sent_after_registering_again_ends_the_attempt_by_it(live, ctx):  # noqa: F811
    """A job that finished while its agent's connection was down: the agent registers (listing
    it no more), then sends the exit it holds, then heartbeats. The job is done, not requeued."""
    world, backend, (a, b), journal = live
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [{**JOB, "gpus": 1, "iterations": 300.0}])
    round_trip(world, backend, Plan.of([Assignment(row, [0])]))
    pump(backend)
    assert [t for t, _ in a.receive(1)] == ["launch"]
    _drop(backend, a)
    again = _reconnect(ctx, backend, "a")
    try:
        again.register()
        serve_until(backend, lambda: backend.nodes.by_name["a"].identity is not None, "a to register again")
        sent = handled(backend, 2)
        again.exited(3, 1, 0, "done", 300)
        again.send("heartbeat", running=[])
        serve_until(backend, sent, "the exit and the heartbeat")
        assert _attempt(journal, 3, 1)[2] == "done"
        events = round_trip(world, backend, None)
        assert events.finished.tolist() == [row] and not len(events.requeued)
    finally:
        again.sock.close()


def test_a_job_that_ran_through_a_scheduler_restart_is_booked_the_time_it_ran(live, tmp_path):  # noqa: F811
    """The scheduler dies (no clean close) with a job running; the job runs on; a restarted
    scheduler takes it back. Its GPU time (run_s, service) is its attempt's whole span, the
    time the scheduler was down included, not booked as queueing."""
    world, backend, (a, b), journal = live
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [{**JOB, "gpus": 1, "iterations": 900.0}])
    plans = [Plan.of([Assignment(row, [0])]), None, None]
    for plan in plans:
        round_trip(world, backend, plan)
        backend.advance()
    # Killed: nothing more journaled, the socket gone. The job trains on meanwhile.
    world, again, journal = resumed(backend, journal, [{**JOB, "gpus": 1, "iterations": 900.0}], plans, False, 1.5)
    try:
        a.register(running=[{"job": 3, "attempt": 1, "rank": 0, "gpu": 0, "iteration": 400}])
        b.register()
        serve_until(again, lambda: not again.attempts.unconfirmed, "the job to be taken back")
        for _ in range(2):
            round_trip(world, again, None)
            again.advance()
        a.exited(3, 1, 0, "done", 900)
        serve_until(again, lambda: (3, 1) not in again.attempts.live, "the job's exit")
        again.advance()  # (to the boundary after the exit, where the poll reports it)
        events = round_trip(world, again, None)
        assert events.finished.tolist() == [row]
        launched, ended, outcome, _ = _attempt(journal, 3, 1)
        assert outcome == "done" and ended - launched > 1.5  # (the outage is within the attempt)
        jobs = world.jobs
        assert jobs.column("run_s")[row] == pytest.approx(ended - launched, abs=1e-6)
        assert jobs.column("service")[row] == pytest.approx(ended - launched, abs=1e-6)  # (one GPU)
    finally:
        again.close()
        journal.close()


GRAPH = """
round = 1s;
cluster = "2x2:V100";
profile = "profile.csv";
src :: LiveSource(jobs=1);
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics;
"""


@pytest.mark.slow
def test_nodes_whose_agents_stopped_at_the_end_of_a_run_stay_offline_when_it_resumes(tmp_path):
    """`serve --stop-agents` stopped by SIGTERM: its agents stop. A rerun of `serve` launches
    nothing on their nodes until they register again (none is presumed up, then lost)."""
    cluster = LiveCluster(tmp_path, GRAPH, {"profile.csv": TEST_PROFILE}, serve_args=("--stop-agents",))
    try:
        cluster.start_scheduler()
        cluster.start_agent("a")
        cluster.start_agent("b")
        # (Round 0 may wait for the agents' registration up to --wait-for-agents, 20 s; a job
        # starts once its agent's fork server has imported PyTorch, seconds on a loaded machine.)
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 60, "the scheduler to start")
        with Submitter(cluster.address, ClientSecurity(None)) as client:
            assert client.submit([{"model": "LM", "iterations": 250, "gpus": 1, "batch_size": 10}]) == [0]
        cluster.wait_for(lambda: "rank 0/1" in cluster.log("a") + cluster.log("b"), 60, "the job to start")
        time.sleep(0.5)
        cluster.kill("scheduler", signal.SIGTERM)
        assert cluster.wait_exit("a", 60) == 0 and cluster.wait_exit("b", 60) == 0
        assert {r[0] for r in cluster.query("SELECT name FROM stopped_nodes")} == {"a", "b"}

        cluster.start_scheduler()  # (a second log: the first run's is read from its start)
        cluster.wait_for(lambda: "offline until it registers" in cluster.log("scheduler"), 60, "the resumed run")
        time.sleep(3.5)  # (longer than the heartbeat timeout: a node presumed up would be lost by now)
        log = cluster.log("scheduler")
        assert "lost (no heartbeat" not in log and log.count("launch job 0") == 1, log
        cluster.start_agent("a")
        cluster.start_agent("b")
        # (New agents: the job waits for a fork server to import PyTorch again.)
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        attempts = cluster.attempts()[0]
        assert [(r[0], r[2]) for r in attempts] == [(1, "preempted"), (2, "done")], attempts
        table = pl.read_csv(cluster.folder / "out" / "jobs.csv")
        assert table["status"].to_list() == ["finished"]
    finally:
        cluster.close()


class Forwarder:
    """A TCP forwarder on 127.0.0.1 (an agent's connection runs through it) that can be cut:
    `stop` closes its port and every connection through it, `start` opens it again."""

    def __init__(self, target_port: int):
        self.port = free_port()
        self.target_port = target_port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: asyncio.base_events.Server | None = None
        self.transports: list[asyncio.BaseTransport] = []

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=10)

    async def _pipe(self, reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader, writer) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self.transports += [writer.transport, up_writer.transport]
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, reuse_address=True)

    async def _stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for transport in self.transports:
            transport.abort()
        self.transports = []

    def start(self) -> None:
        self._run(self._start())

    def stop(self) -> None:
        self._run(self._stop())

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


BLIP = """
round = 1s;
cluster = "2x2:V100";
profile = "profile.csv";
src :: LiveSource(jobs=2);
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics;
"""


@pytest.mark.slow
def test_jobs_launched_while_an_agent_s_connection_is_down_run_when_it_comes_back(tmp_path):
    """Agent a's connection runs through a forwarder, cut while two jobs are launched (one on
    each node) and restored well within the heartbeat timeout: the launch for a is held, a
    registers again, gets it, and both jobs finish."""
    cluster = LiveCluster(tmp_path, BLIP, {"profile.csv": TEST_PROFILE}, timeout="10s")
    forwarder = Forwarder(cluster.port)
    try:
        forwarder.start()
        cluster.start_scheduler()
        direct, cluster.address = cluster.address, f"tcp://127.0.0.1:{forwarder.port}"
        cluster.start_agent("a")
        cluster.address = direct
        cluster.wait_for(lambda: "node a registered" in cluster.log("scheduler"), 60, "a to register")
        cluster.start_agent("b")
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 60, "the scheduler to start")
        forwarder.stop()
        with Submitter(cluster.address, ClientSecurity(None)) as client:
            jobs = [{"model": "LM", "iterations": 300, "gpus": 2, "batch_size": 10} for _ in range(2)]
            assert client.submit(jobs) == [0, 1]
        cluster.wait_for(lambda: cluster.log("scheduler").count("launch job") >= 2, 10, "the two launches")
        time.sleep(1.0)
        forwarder.start()
        # (The jobs start once the agents' fork servers have imported PyTorch: seconds on a
        # loaded machine.)
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        log = cluster.log("scheduler")
        assert "held for a until its agent registers again" in log and "node a lost" not in log, log
        table = pl.read_csv(cluster.folder / "out" / "jobs.csv")
        assert table["status"].to_list() == ["finished"] * 2
    finally:
        cluster.close()
        forwarder.close()
