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
from tests.test_live_backend import FakeAgent, handled, launch_two, live, pump, serve_until  # noqa: F401  (live: the backend fixture)


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


@pytest.mark.parametrize(
    "version", [True, float(protocol.VERSION), str(protocol.VERSION), protocol.VERSION - 1, protocol.VERSION + 1]
)
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
    report = handled(backend)
    a.send("metrics", job=1, attempt=1, rank=0, iteration=300, values={"loss": 0.2})
    serve_until(backend, report, "a's metrics")
    assert att.iteration == 300


@pytest.mark.live
def test_no_report_takes_a_job_past_its_iterations(live, lines):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), journal = live
    launch_two(live, 1000.0)
    pump(backend)
    att = backend.attempts.live[(1, 1)]
    reports = handled(backend, 2)
    a.send("metrics", job=1, attempt=1, rank=0, iteration=10**9, values={"loss": 0.1})
    a.send("heartbeat", running=[{"job": 1, "attempt": 1, "rank": 0, "gpu": 0, "iteration": 10**9}])
    serve_until(backend, reports, "a's metrics and heartbeat")
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
    link.quiet = False
    frame = json.dumps({"v": protocol.VERSION + 1, "type": "welcome", "seq": 1}).encode()
    assert link.receive([frame]) is None and not link.refused  # (welcomed: one bad frame among others)
    link.registered = False  # (the answer to its registration)
    assert link.receive([frame]) is None and link.refused
    v = protocol.VERSION
    assert got.having(f"speaks another version of the protocol: unsupported protocol version {v + 1} (this side speaks {v})")


# --- numbers past any float, huge whole numbers, text that is not text ---------------------------
#
# A frame may hold what JSON allows and Python cannot carry further: an integer of hundreds of
# digits (no float holds it; shown whole it fills a reply past what the reply carries), or a
# lone UTF-16 surrogate (`\ud800`), which no UTF-8 journal, log or reply can hold. Each is a
# refusal with a short reason, and the scheduler carries on.

_BIG = "1" + "0" * 400


class _Sent:
    """A stand-in for the server's socket: what was sent, by frame."""

    def __init__(self):
        self.frames: list[tuple[str, dict]] = []

    def send_multipart(self, parts, flags=0):
        message = json.loads(parts[1])
        self.frames.append((message.pop("type"), {k: v for k, v in message.items() if k not in ("v", "seq")}))


def _bare_server():
    """A Server that is not listening: its handlers and replies, without a socket of its own."""
    from roundhouse.runtime.backends.live.server import Server
    from roundhouse.wire.security import ServerSecurity

    server = Server("tcp://127.0.0.1:1", ServerSecurity(None), None, defaultdict(int), lambda identity: None)
    server.handlers = {t: (lambda *args: None) for t in ("metrics", "lease", "status", "exited", "register", "submit")}
    server._socket = _Sent()
    return server


def _receive(server, text: str) -> list[tuple[str, dict]]:
    server._socket.frames.clear()
    server._receive([zmq.Frame(b"peer-1"), zmq.Frame(text.encode())])
    return server._socket.frames


def test_a_number_past_any_float_is_refused_not_raised():
    frame = (
        '{"v":4,"type":"metrics","seq":2,"job":1,"attempt":1,"rank":0,"iteration":1,"values":{"loss":@}}'.replace("@", _BIG)
    ).encode()
    with pytest.raises(ProtocolError) as err:
        protocol.decode(frame)
    assert err.value.reason.startswith("metrics: values.loss must be a finite number")
    assert "(a number of 401 digits)" in err.value.reason and len(err.value.reason) < 200
    server = _bare_server()
    (reply,) = _receive(server, frame.decode())
    assert reply[0] == "error" and "values.loss must be a finite number" in reply[1]["reason"]
    assert server.counters["bad_messages"] == 1


def test_anything_decoding_raises_is_a_refusal_naming_the_peer(monkeypatch, lines):
    got = lines("roundhouse.scheduler")
    from roundhouse.runtime.backends.live import server as server_module

    def broken(*args, **kwargs):
        raise RecursionError("too deep")

    monkeypatch.setattr(server_module.protocol, "decode", broken)
    server = _bare_server()
    (reply,) = _receive(server, '{"v":4,"type":"status","seq":1}')
    assert reply == ("error", {"reason": "the message could not be read (RecursionError)"})
    assert got.having("refused a message from peer 706565722d: the message could not be read (RecursionError)")


def test_a_whole_number_of_thousands_of_digits_is_shown_shortened_and_answered():
    frame = '{"v":4,"type":"lease","seq":1,"job":1@,"attempt":1}'.replace("@", ("0" * 4200))
    server = _bare_server()
    (reply,) = _receive(server, frame)
    assert reply[0] == "error" and reply[1]["ref"] == 1
    assert (
        reply[1]["reason"]
        == "lease: job must be between 0 and 4611686018427387904, got 10000000000000000000... (a number of 4201 digits)"
    )
    with pytest.raises(ProtocolError) as err:
        protocol.Choice("done").check("a" * 5000, "outcome")
    assert err.value.reason == 'outcome must be one of done, got "' + "a" * 36 + "..."
    # Every reply's reason is cut to what the message carries; one that cannot be sent is logged.
    assert server.send(b"peer-1", "error", reason="x" * 5000)
    reason = server._socket.frames[-1][1]["reason"]
    assert len(reason) == 4000 and reason.endswith("...")
    assert server.send(b"peer-1", "error", reason="lone \ud800 surrogate")
    assert server._socket.frames[-1][1]["reason"] == "lone \\ud800 surrogate"
    assert server.send(b"peer-1", "welcome", node_index=-1, heartbeat_s=1.0, session="s")  # (not raised)
    assert server._socket.frames[-1][0] == "error"  # (nothing more was sent)


_SURROGATE = "bad \\ud800 text"  # (as JSON escapes it: valid JSON, not text)


@pytest.mark.parametrize(
    "body, where",
    [
        (
            (
                '"type":"exited","job":1,"attempt":1,"rank":0,"outcome":"failed","iteration":3,"start_iteration":0,'
                '"permanent":false,"reason":"@"'
            ).replace("@", _SURROGATE),
            "exited: reason",
        ),
        (
            '"type":"register","node":"n","address":"@","gpus":[{"index":0,"type":"V100"}],"running":[],"session":"s"'.replace(
                "@", _SURROGATE
            ),
            "register: address",
        ),
        ('"type":"submit","jobs":[{"gpus":1,"model":"@","iterations":5}]'.replace("@", _SURROGATE), "submit: jobs[0].model"),
        (
            '"type":"submit","jobs":[{"gpus":1,"command":["run","@"],"duration_s":5}]'.replace("@", _SURROGATE),
            "submit: jobs[0].command[1]",
        ),
    ],
    ids=["exit-reason", "register-address", "submit-cell", "submit-command-word"],
)
def test_a_string_that_is_not_text_is_refused_naming_its_field(body, where):
    with pytest.raises(ProtocolError) as err:
        protocol.decode(('{"v":4,"seq":1,' + body + "}").encode())
    assert err.value.reason == f"{where} is not valid text: it holds a lone surrogate (\\ud800) at character 5"
    assert protocol.decode(b'{"v":4,"seq":1,"type":"error","reason":"caf\\u00e9 \\ud83d\\ude00"}')  # (a pair is text)


@pytest.mark.live
def test_an_exit_whose_journal_write_fails_changes_nothing(live, monkeypatch):  # noqa: F811
    world, backend, (a, b), journal = live
    launch_two(live, 1000.0)
    pump(backend)
    a.receive()

    def failing(*args, **kwargs):
        raise UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(journal, "add_exit", failing)
    a.exited(1, 1, 0, "failed", 10, reason="crashed")
    replies = _replies(a, backend, 1)
    assert [t for t, _ in replies] == ["error"] and "internal error while handling exited" in replies[0][1]["reason"]
    att = backend.attempts.live[(1, 1)]
    assert not att.exits and not att.exit_wall and not att.ended  # (the agent resends it: taken then)
    monkeypatch.undo()
    a.exited(1, 1, 0, "failed", 10, reason="crashed")
    assert ("ack", {"job": 1, "attempt": 1, "rank": 0}) in _replies(a, backend, 1)
    assert 0 in att.exits


@pytest.mark.live
def test_a_registration_whose_journal_write_fails_changes_nothing(live, monkeypatch):  # noqa: F811
    world, backend, agents, journal = live
    node = backend.nodes.by_name["a"]
    before = (node.identity, node.address, dict(backend.nodes.by_identity))

    def failing(*args, **kwargs):
        raise UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(journal, "set_node", failing)
    ctx = zmq.Context()
    again = FakeAgent(ctx, backend.bind, "a")  # (node a on a new connection, from a new address)
    try:
        again.send(
            "register",
            node="a",
            address="10.0.0.9",
            session="a",
            gpus=[{"index": i, "type": "V100"} for i in range(2)],
            running=[],
        )
        replies = _replies(again, backend, 1)
        assert [t for t, _ in replies] == ["error"] and "internal error while handling register" in replies[0][1]["reason"]
        assert (node.identity, node.address, dict(backend.nodes.by_identity)) == before
    finally:
        again.sock.close()
        ctx.term()


@pytest.mark.live
def test_a_periodic_duty_that_fails_is_logged_and_counted_and_the_scheduler_carries_on(live, monkeypatch, lines):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), journal = live
    calls = []

    def failing():
        calls.append(1)
        raise UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(backend.nodes, "check", failing)
    before = backend.counters["handler_errors"]
    pump(backend, 0.3)  # (would raise out of serve)
    assert calls and backend.counters["handler_errors"] == before + len(calls)
    assert got.having("error in the scheduler's periodic duties")
    heartbeat = handled(backend)
    a.send("heartbeat", running=[])  # still served
    serve_until(backend, heartbeat, "a's heartbeat")
    assert backend.nodes.by_name["a"].online


@pytest.mark.live
def test_a_refused_submission_is_logged_naming_its_sender_and_reason(live, lines):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, agents, _ = live
    ctx = zmq.Context()
    user = FakeAgent(ctx, backend.bind, "user")
    try:
        user.send("submit", jobs=[{"model": "Teleporter", "iterations": 5, "gpus": 1}])
        assert [t for t, _ in _replies(user, backend, 1)] == ["error"]
        (line,) = got.having("refused a submission:")
        assert "not in the profile" in line and line.endswith(")") and "(from peer " in line
    finally:
        user.sock.close()
        ctx.term()


# --- a canonical trace submitted without job ids ------------------------------------------------


def test_a_submitted_canonical_trace_may_leave_out_job_ids(tmp_path):
    from roundhouse.tools.submit_cmd import trace_jobs

    without = tmp_path / "without.csv"
    without.write_text("gpus,model,iterations\n1,LM,7\n2,LM,8\n")
    jobs, where = trace_jobs(str(without))
    assert [("job_id" in j, j["gpus"], j["iterations"]) for j in jobs] == [(False, 1, 7), (False, 2, 8)]
    assert where == [f"{without}:2", f"{without}:3"]
    some = tmp_path / "some.csv"
    some.write_text("job_id,gpus,model,iterations\n,1,LM,7\n0,1,LM,8\n1,1,LM,9\n")
    jobs, _ = trace_jobs(str(some))
    assert [j.get("job_id") for j in jobs] == [None, 0, 1]  # (the ids standing in are not sent)
    # Checked as a trace still, named by line; a given id used twice is still refused.
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,gpus,model,iterations\n,1,LM,nan\n")
    with pytest.raises(TraceError, match=r"bad.csv:2: .*iterations"):
        trace_jobs(str(bad))
    twice = tmp_path / "twice.csv"
    twice.write_text("job_id,gpus,model,iterations\n,1,LM,7\n5,1,LM,7\n5,1,LM,7\n")
    with pytest.raises(TraceError, match=r"twice.csv:4: .*job id 5 is used twice"):
        trace_jobs(str(twice))
    # The scheduler gives the jobs without one the next free ids.
    journal = Journal(tmp_path / "j.sqlite")
    try:
        submissions = Submissions(World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100"), journal)
        assert submissions.accept(trace_jobs(str(some))[0], 0.0) == [2, 0, 1]
    finally:
        journal.close()


@pytest.mark.live
def test_a_running_scheduler_survives_huge_numbers_and_strings_that_are_not_text(tmp_path):
    from roundhouse.agents.submitter import Submitter
    from roundhouse.wire.security import ClientSecurity
    from tests.livecluster import LiveCluster

    graph = """
    round = 1s;
    cluster = "1x2:V100";
    src :: LiveSource;
    src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
    """
    cluster = LiveCluster(tmp_path, graph, serve_args=("--wait-for-agents", "0s", "--until", "120s"))
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    templates = [
        '{"v":4,"type":"metrics","seq":2,"job":1,"attempt":1,"rank":0,"iteration":1,"values":{"loss":@BIG}}',
        '{"v":4,"type":"lease","seq":3,"job":1@ZEROS,"attempt":1}',
        '{"v":4,"type":"register","seq":4,"node":"n","address":"@TEXT","gpus":[{"index":0,"type":"V100"},'
        '{"index":1,"type":"V100"}],"running":[],"session":"s"}',
        '{"v":4,"type":"submit","seq":5,"jobs":[{"gpus":1,"model":"LM","iterations":5,"note":"@TEXT"}]}',
        '{"v":4,"type":"exited","seq":6,"job":1,"attempt":1,"rank":0,"outcome":"failed","iteration":3,'
        '"start_iteration":0,"permanent":false,"reason":"@TEXT"}',
    ]
    bad = [t.replace("@BIG", _BIG).replace("@ZEROS", "0" * 4200).replace("@TEXT", _SURROGATE) for t in templates]
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        sock.connect(cluster.address)
        replies = []
        for frame in bad:
            sock.send(frame.encode())
            assert sock.poll(10_000), cluster.logs()
            replies.append(protocol.decode(sock.recv()))
        assert [t for t, _, _ in replies] == ["error"] * len(bad)
        reasons = [body["reason"] for _, _, body in replies]
        assert "values.loss must be a finite number" in reasons[0] and "(a number of 4201 digits)" in reasons[1]
        for reason, where in zip(reasons[2:], ("address", "jobs[0].note", "reason")):
            assert f"{where} is not valid text" in reason
        assert cluster.processes["scheduler"].poll() is None, cluster.logs()
        with Submitter(cluster.address, ClientSecurity(None)) as client:
            status = client.status()
            assert status["bad_messages"] >= len(bad) and status["handler_errors"] == 0 and status["nodes_online"] == 0
        log = cluster.log("scheduler")
        assert "Traceback" not in log and "Logging error" not in log, log
        assert log.count("refused a message from peer ") == len(bad)
    finally:
        sock.close()
        ctx.term()
        cluster.close()
