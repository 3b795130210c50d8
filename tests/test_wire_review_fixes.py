"""What a message says is checked, not only its form: the protocol's version is a whole number,
an agent speaks only for its own node's workers, no report goes past its job's iterations,
and what is refused or dropped is logged, a few lines a minute at most."""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict

import attrs
import pytest
import zmq

from roundhouse.agents.agent.job_reports import JobReports
from roundhouse.agents.agent.leases import Revocations
from roundhouse.errors import TraceError
from roundhouse.runtime.backends.live.submissions import Submissions
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable
from roundhouse.wire import protocol
from roundhouse.wire.protocol import ProtocolError, RefusalLog
from tests.test_live_backend import FakeAgent, launch_two, live, pump  # noqa: F401  (live: the backend fixture)


class Lines(logging.Handler):
    """The lines one logger writes (on the logger itself: the CLI's set-up may stop them
    reaching the root logger, where pytest's caplog listens)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def having(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]


@pytest.fixture
def lines():
    def listen(name: str) -> Lines:
        handler = Lines()
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        added.append((logger, handler, logger.level))
        logger.setLevel(logging.DEBUG)
        return handler

    added: list = []
    yield listen
    for logger, handler, level in added:
        logger.removeHandler(handler)
        logger.setLevel(level)


# --- the protocol -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [True, 2.0, "2", 1, 3])
def test_only_the_whole_number_of_this_version_is_the_protocol_s_version(version):
    frame = json.dumps({"v": version, "type": "status", "seq": 1}).encode()
    with pytest.raises(ProtocolError, match="unsupported protocol version"):
        protocol.decode(frame)
    assert protocol.decode(json.dumps({"v": protocol.VERSION, "type": "status", "seq": 1}).encode()) == ("status", 1, {})


def test_a_submitted_command_too_long_for_a_launch_is_refused_naming_the_limit():
    def refused(command) -> str:
        frame = json.dumps(
            {"v": protocol.VERSION, "type": "submit", "seq": 1, "jobs": [{"gpus": 1, "command": command}]}
        ).encode()
        with pytest.raises(ProtocolError) as err:
            protocol.decode(frame)
        return err.value.reason

    assert refused(["a"] * 257) == "submit: jobs[0].command has 257 words, more than the 256 a launch carries"
    assert refused(["a", "b" * 4097]) == "submit: jobs[0].command[1] is longer than 4096 characters"
    assert "must be a number, string, boolean or list of strings" in refused(["a", 1])
    assert protocol.decode(
        json.dumps({"v": protocol.VERSION, "type": "submit", "seq": 1, "jobs": [{"command": ["a"] * 256}]}).encode()
    )


def test_refusals_are_logged_a_few_a_minute_and_those_left_out_are_counted(lines):
    got = lines("roundhouse.test_refusals")
    now = [0.0]
    refusals = RefusalLog(logging.getLogger("roundhouse.test_refusals"), most=3, period_s=60.0, clock=lambda: now[0])
    for i in range(10):
        refusals.warn("flood", "dropped message %d", i)
    refusals.warn("other", "another kind")  # (each kind has its own allowance)
    assert got.lines == ["dropped message 0", "dropped message 1", "dropped message 2", "another kind"]
    now[0] = 61.0
    refusals.warn("flood", "dropped message %d", 10)
    assert got.lines[-1] == "dropped message 10 (and 7 more like it, not logged)"


def test_a_number_past_10_to_the_21_is_shown_as_an_exponent(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    submissions = Submissions(World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100"), journal)
    try:
        with pytest.raises(TraceError) as err:
            submissions.accept([{"model": "LM", "iterations": 1e300, "gpus": 1}], 0.0)
        assert "iterations 1e+300 is more than a live launch carries (9,007,199,254,740,992)" in str(err.value)
        assert len(str(err.value)) < 200
    finally:
        journal.close()


# --- the agent --------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Worker:
    """What the reports socket reads of a worker (agents/agent/processes.py's Worker)."""

    job: int
    attempt: int
    rank: int
    spec: dict
    iteration: int = 0
    checkpoint: str | None = None
    checkpoint_iteration: int | None = None
    final: dict | None = None

    @property
    def key(self):
        return (self.job, self.attempt, self.rank)


def _report(seq: int, job: int = 7, iteration: int = 10, rank: int = 0) -> list[bytes]:
    return [protocol.encode("report", seq, job=job, attempt=1, rank=rank, iteration=iteration, values={"loss": 0.5})]


def _job_reports(worker: _Worker) -> tuple[JobReports, dict]:
    counters: dict = defaultdict(int)
    return JobReports(counters, 0.0, lambda key: worker if key == worker.key else None), counters


def test_the_agent_refuses_a_report_past_the_launch_s_iterations_and_keeps_the_worker_s_own(lines):
    got = lines("roundhouse.agent")
    worker = _Worker(7, 1, 0, {"iterations": 30000})
    reports, counters = _job_reports(worker)
    reports.on_frame(_report(2 * 10**15, iteration=10**9))  # forged: far past the job, numbered high
    assert worker.iteration == 0 and counters["bad_messages"] == 1
    assert got.having("refused report from a local process for job 7 attempt 1 rank 0: iteration 1000000000 is past")
    reports.on_frame(_report(5, iteration=120))  # the worker's own, numbered as it counts
    assert worker.iteration == 120 and counters["bad_messages"] == 1
    exiting = protocol.encode("exiting", 6, job=7, attempt=1, rank=0, outcome="done", iteration=10**9, start_iteration=0)
    reports.on_frame([exiting])
    assert worker.final is None and worker.iteration == 120
    # A job known only by its duration (a launch of 0 iterations) counts its own.
    free = _Worker(7, 1, 0, {"iterations": 0})
    reports, _ = _job_reports(free)
    reports.on_frame(_report(1, iteration=10**9))
    assert free.iteration == 10**9


def test_the_agent_logs_reports_it_drops_a_few_a_minute(lines):
    got = lines("roundhouse.agent")
    worker = _Worker(7, 1, 0, {"iterations": 100})
    reports, counters = _job_reports(worker)
    for seq in range(1, 200):
        reports.on_frame(_report(seq, job=999))
    unknown = got.having("dropped report from a local process for job 999 attempt 1 rank 0: no such worker here")
    assert 1 <= len(unknown) <= 20
    reports.on_frame(_report(50))
    reports.on_frame(_report(40))
    assert got.having("dropped an out-of-order report from job 7 attempt 1 rank 0 (seq 40)")
    assert counters["bad_messages"] == 1


def test_the_agent_logs_a_revoke_of_an_attempt_it_does_not_run(lines):
    got = lines("roundhouse.agent")

    class NoWorkers:
        def all(self):
            return []

    Revocations(NoWorkers(), grace_s=60.0).on_revoke({"job": 77, "attempt": 1, "kill": True})  # type: ignore[arg-type]
    assert got.having("dropped the scheduler's revoke of job 77 attempt 1: not running here")


# --- the scheduler (with stand-in agents on loopback) -----------------------------------------


def _replies(agent: FakeAgent, backend, count: int) -> list[tuple[str, dict]]:
    replies: list = []
    deadline = time.time() + 10
    while len(replies) < count and time.time() < deadline:
        pump(backend, 0.1)
        replies += agent.receive()
    return replies


@pytest.mark.live
def test_a_node_cannot_report_on_a_worker_of_another_node(live, lines):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), journal = live
    launch_two(live, 1000.0)  # job 1 on node a, job 2 on node b
    pump(backend)
    a.receive()
    b.receive()
    b.send("started", job=1, attempt=1, rank=0)
    b.send("metrics", job=1, attempt=1, rank=0, iteration=900, values={"loss": 0.1})
    b.exited(1, 1, 0, "done", 10**6, reason="forged by node b")
    replies = _replies(b, backend, 1)
    assert [t for t, _ in replies] == ["error"] and "job 1 attempt 1 rank 0 does not run on node b" in replies[0][1]["reason"]
    att = backend.attempts.live[(1, 1)]
    assert not att.exits and not att.ended and att.iteration == 0 and not backend.news.metrics
    assert not [t for t, _ in a.receive() if t == "revoke"]  # the real worker runs on
    for what in ("started", "metrics", "exited"):
        assert got.having(f"refused {what} of job 1 attempt 1 rank 0 from node b: that worker does not run there")
    assert journal.db.execute("SELECT COUNT(*) FROM exits").fetchone()[0] == 0
    # Node a's own reports are taken.
    a.send("metrics", job=1, attempt=1, rank=0, iteration=300, values={"loss": 0.2})
    pump(backend)
    assert att.iteration == 300


@pytest.mark.live
def test_no_report_takes_a_job_past_its_iterations(live, lines):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), journal = live
    launch_two(live, 1000.0)
    pump(backend)
    att = backend.attempts.live[(1, 1)]
    a.send("metrics", job=1, attempt=1, rank=0, iteration=10**9, values={"loss": 0.1})
    a.send("heartbeat", running=[{"job": 1, "attempt": 1, "rank": 0, "gpu": 0, "iteration": 10**9}])
    pump(backend)
    assert att.iteration == 0 and not backend.news.metrics
    assert got.having("refused the progress in metrics of job 1 attempt 1 from node a: iteration 1000000000 is past")
    assert got.having("refused the progress in heartbeat of job 1 attempt 1 from node a")
    a.exited(1, 1, 0, "preempted", 10**9, checkpoint="/forged/ckpt")
    replies = _replies(a, backend, 1)
    assert ("ack", {"job": 1, "attempt": 1, "rank": 0}) in replies  # (taken: else it would be resent forever)
    iteration, checkpoint = journal.db.execute("SELECT iteration, checkpoint FROM exits WHERE job_id = 1").fetchone()
    assert (iteration, checkpoint) == (1000, None)
    assert att.checkpoint is None
    assert got.having("job 1 attempt 1 rank 0 on a reports an exit at iteration 1000000000, past the job's 1000 iterations")


@pytest.mark.live
def test_messages_from_a_peer_that_never_registered_are_logged(live, lines):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, agents, _ = live
    launch_two(live, 1000.0)
    ctx = zmq.Context()
    peer = FakeAgent(ctx, backend.bind, "zz")
    try:
        peer.send("started", job=1, attempt=1, rank=0)
        peer.send("metrics", job=1, attempt=1, rank=0, iteration=5, values={})
        peer.send("stopping")
        peer.exited(1, 1, 0, "done", 5)
        peer.send("heartbeat", running=[])
        replies = _replies(peer, backend, 2)
        assert [t for t, _ in replies] == ["unknown", "unknown"]
        for what in ("dropped started", "dropped metrics", "dropped stopping", "answered exited", "answered heartbeat"):
            assert [line for line in got.having(what) if "from peer " in line and "not a registered agent" in line], what
        assert not backend.attempts.live[(1, 1)].exits
    finally:
        peer.sock.close()
        ctx.term()


@pytest.mark.live
def test_a_flood_of_bad_frames_writes_a_few_lines_and_the_scheduler_keeps_serving(live, lines):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, agents, _ = live
    ctx = zmq.Context()
    peer = FakeAgent(ctx, backend.bind, "flood")
    try:
        for i in range(60):
            peer.sock.send(b"not json %d" % i)
        replies = _replies(peer, backend, 60)
        assert len(replies) == 60 and {t for t, _ in replies} == {"error"}  # each is still answered
        refused = got.having("refused a message from")
        assert 1 <= len(refused) <= 20, len(refused)  # logged a few times a minute, not sixty
        assert backend.server.counters["bad_messages"] >= 60
    finally:
        peer.sock.close()
        ctx.term()


def test_an_agent_stops_when_the_scheduler_speaks_another_version(lines):
    """An agent of one release and a scheduler of another cannot read each other: the agent says
    so and stops rather than wait for a welcome it could never read."""
    from roundhouse.agents.agent.scheduler_link import SchedulerLink

    got = lines("roundhouse.agent")
    link = SchedulerLink.__new__(SchedulerLink)  # (only what receiving needs: no sockets)
    link.scheduler, link.counters, link.refused, link.registered = "tcp://127.0.0.1:1", defaultdict(int), False, True
    frame = json.dumps({"v": protocol.VERSION + 1, "type": "welcome", "seq": 1}).encode()
    assert link.receive([frame]) is None and not link.refused  # (welcomed: one bad frame among others)
    link.registered = False  # (the answer to its registration)
    assert link.receive([frame]) is None and link.refused
    assert got.having("speaks another version of the protocol: unsupported protocol version 3 (this side speaks 2)")
