"""Submitting to a live scheduler, and registering with it, without a scheduler running: job ids
at the wire's limit, refusals that name the file's line and only the file's columns, commands
that cannot run, an address checked without a connection, and two agents under one node name."""

from __future__ import annotations

import re
import socket
import types
from collections import defaultdict

import pytest

from roundhouse.agents.submitter import _name_rows
from roundhouse.errors import RoundhouseError, TraceError
from roundhouse.runtime.backends.live import nodes as nodes_module
from roundhouse.runtime.backends.live.nodes import Nodes
from roundhouse.runtime.backends.live.round import Clock, News
from roundhouse.runtime.backends.live.server import Server
from roundhouse.runtime.backends.live.submissions import Submissions
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.world import World
from roundhouse.tools.cli import main
from roundhouse.tools.loopback import free_port
from roundhouse.tools.submit_cmd import trace_jobs
from roundhouse.traces.profiles import ProfileTable
from roundhouse.wire import protocol
from roundhouse.wire.security import ServerSecurity, check_connect_address


def _submissions(path) -> tuple[Submissions, Journal]:
    journal = Journal(path)
    return Submissions(World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100"), journal), journal


LM = {"model": "LM", "iterations": 10, "gpus": 1}


# --- job ids ---------------------------------------------------------------------------------


def test_the_largest_job_id_leaves_free_ids_for_later_jobs_also_after_a_restart(tmp_path):
    submissions, journal = _submissions(tmp_path / "j.sqlite")
    assert submissions.accept([{**LM, "job_id": protocol.JOB.hi}], 0.0) == [protocol.JOB.hi]
    # Ids count on from the largest in use; past the wire's limit, the lowest free ones.
    assert submissions.accept([LM, LM], 0.0) == [0, 1]
    assert submissions.accept([{**LM, "job_id": 3}, LM, LM], 0.0) == [3, 2, 4]
    journal.commit()
    journal.close()
    again, journal = _submissions(tmp_path / "j.sqlite")
    assert again.accept([LM], 0.0) == [5]
    with pytest.raises(TraceError, match=r"^submission:2: error: job id 5 is already in use"):
        again.accept([LM, {**LM, "job_id": 5}], 0.0)
    journal.close()


def test_job_ids_count_on_from_the_largest_in_use(tmp_path):
    submissions, journal = _submissions(tmp_path / "j.sqlite")
    assert submissions.accept([{**LM, "job_id": 100}, LM], 0.0) == [100, 0]
    assert submissions.accept([LM], 0.0) == [101]
    journal.close()


# --- refusals name the job's place, and only the columns given ---------------------------------


def test_a_refusal_found_by_the_scheduler_names_the_file_line(tmp_path):
    submissions, journal = _submissions(tmp_path / "j.sqlite")
    jobs = [{**LM, "job_id": 100}, {"job_id": 101, "model": "Foo", "iterations": 5, "gpus": 1}]
    with pytest.raises(TraceError) as err:
        submissions.accept(jobs, 0.0)
    assert str(err.value).startswith("submission:2: error: job 101: model 'Foo' is not in the profile")
    shown = _name_rows(f"the scheduler refused: {err.value}", ["t.csv:2", "t.csv:3"], 0)
    assert shown.startswith("the scheduler refused: t.csv:3: error: job 101: model 'Foo'"), shown
    # So do the scheduler's own checks of what a launch carries.
    with pytest.raises(TraceError, match=r"^submission:2: error: job 7: iterations 2.5 is not a whole number"):
        submissions.accept([LM, {**LM, "job_id": 7, "iterations": 2.5}], 0.0)
    assert journal.submission_ids() == set()
    journal.close()


def test_errors_list_only_the_columns_given(tmp_path):
    path = tmp_path / "nogpus.csv"
    path.write_text("model,iterations\nResNet-18,10\n")
    with pytest.raises(TraceError) as err:
        trace_jobs(str(path))
    # (neither the job ids given for the check nor the arrivals are listed: the file has neither)
    assert str(err.value) == f"{path}: error: missing column 'gpus'; columns found: 'model', 'iterations'"
    submissions, journal = _submissions(tmp_path / "j.sqlite")
    with pytest.raises(TraceError) as err:
        submissions.accept([{"command": "sleep 1", "iterations": 5, "gpus": 1}], 0.0)
    assert "columns found: 'command', 'gpus', 'iterations';" in str(err.value)
    assert "arrival_s" not in str(err.value) and "job_id" not in str(err.value)
    journal.close()


# --- commands ----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["   ", "''", ["  "], []])
def test_a_blank_command_is_refused_when_submitted(tmp_path, command):
    submissions, journal = _submissions(tmp_path / "j.sqlite")
    with pytest.raises(TraceError, match=r"^submission:2: error: job 1: command .* is blank"):
        submissions.accept([LM, {"command": command, "duration_s": 5, "gpus": 1}], 0.0)
    assert journal.submission_ids() == set()
    journal.close()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--command", "   ", "--duration", "5s"], "--command '   ' is blank: say what to run"),
        (["--command", "''", "--duration", "5s"], "is blank: say what to run"),
        (["--command", "", "--duration", "5s"], "--command '' is blank"),
        (["--command", "echo 'a", "--duration", "5s"], "does not split into words"),
        (["--command", "sleep 1", "--iterations", "5"], "--iterations alone does not say how long a command runs"),
    ],
)
def test_submit_refuses_commands_the_scheduler_would_refuse(capsys, flags, message):
    assert main(["submit", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--timeout", "1s", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


# --- the address, and what `status` counts ------------------------------------------------------


def test_checking_an_address_does_not_connect_to_it():
    """A trial connection without the caller's keys reached the scheduler, which counted it as a
    refused peer."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.5)
        for _ in range(5):
            check_connect_address(f"tcp://127.0.0.1:{listener.getsockname()[1]}")
        with pytest.raises(socket.timeout):
            listener.accept()
    for bad in ("tcp://127.0.0.1:notaport", "tcp://127.0.0.1", "tcp://*:5555", "udp://127.0.0.1:5", "ipc://" + "x" * 120):
        with pytest.raises(RoundhouseError, match=f"cannot connect to {re.escape(bad)}"):
            check_connect_address(bad)
    for good in ("tcp://[::1]:5555", "tcp://sched.example.net:5555", "ipc:///tmp/sched", "inproc://sched"):
        check_connect_address(good)


def test_status_lists_refused_peers_from_the_start(tmp_path):
    counters: defaultdict[str, float] = defaultdict(int)
    Server("tcp://127.0.0.1:5555", ServerSecurity(None), Journal(tmp_path / "j.sqlite"), counters, lambda i: None)
    assert dict(counters) == {"refused_peers": 0, "bad_messages": 0, "handler_errors": 0}


# --- two agents under one node name (the scheduler's registry, on a clock of its own) ----------


class _Sent:
    def __init__(self):
        self.messages: list[tuple[bytes, str, dict]] = []

    def send(self, identity, type_, **fields):
        self.messages.append((identity, type_, fields))

    def forget(self, identity):
        pass

    def to(self, identity) -> list[tuple[str, dict]]:
        return [(t, f) for i, t, f in self.messages if i == identity]


@pytest.fixture
def registry(tmp_path, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(nodes_module, "time", types.SimpleNamespace(time=lambda: now[0]))
    sent = _Sent()
    options = types.SimpleNamespace(heartbeat_s=2.0, heartbeat_timeout_s=10.0)
    news = News()
    nodes = Nodes(
        Cluster.parse("2x2:V100"), sent, Journal(tmp_path / "j.sqlite"), options, defaultdict(int), news, Clock(1.0), "s"
    )

    def register(identity: bytes, session: str, at: float) -> list[str]:
        now[0] = 1000.0 + at
        before = len(sent.to(identity))
        body = {"node": "n", "gpus": [{"type": "V100", "index": i} for i in range(2)], "address": "h", "session": session}
        nodes.on_register(identity, 0, {**body, "running": []}, None)
        return [t for t, _ in sent.to(identity)[before:]]

    def heartbeat(identity: bytes, at: float) -> None:
        now[0] = 1000.0 + at
        nodes.on_heartbeat(identity, 0, {"running": []}, None)

    return types.SimpleNamespace(nodes=nodes, sent=sent, news=news, register=register, heartbeat=heartbeat)


def test_a_second_agent_under_a_running_node_s_name_is_refused(registry):
    assert registry.register(b"a", "first", 0.0) == ["welcome"]
    assert registry.register(b"b", "second", 0.5) == []  # (it may be a restart: it waits)
    registry.heartbeat(b"a", 1.0)
    assert registry.register(b"b", "second", 1.5) == ["error"]
    reason = registry.sent.to(b"b")[-1][1]["reason"]
    assert reason == "node n is already registered by another agent, which is still running: give each agent its own --name"
    # The running agent keeps its node and its jobs: no flip-flop.
    assert registry.news.lost == [] and registry.nodes.name_of(b"a") == "n" and registry.nodes.name_of(b"b") is None
    registry.heartbeat(b"a", 3.0)
    assert registry.sent.to(b"a") == [registry.sent.to(b"a")[0]]  # (the welcome, and no "unknown")


def test_a_restarted_agent_takes_over_once_the_old_one_is_silent(registry):
    assert registry.register(b"a", "first", 0.0) == ["welcome"]
    registry.heartbeat(b"a", 1.0)
    assert registry.register(b"b", "second", 1.2) == []  # heard 0.2 s ago: wait and see
    assert registry.register(b"b", "second", 2.2) == []
    assert registry.register(b"b", "second", 4.1) == ["welcome"]  # silent for 1.5 heartbeat periods
    assert registry.news.lost == ["n"] and registry.nodes.name_of(b"b") == "n"
    # An agent whose predecessor has been silent long enough takes over at once, as always.
    registry.heartbeat(b"b", 5.0)
    assert registry.register(b"c", "third", 9.0) == ["welcome"]
    assert registry.news.lost == ["n", "n"] and registry.nodes.name_of(b"c") == "n"


@pytest.mark.parametrize("flags", [["--insecure"], []])
def test_submit_says_an_address_without_its_transport_is_no_address(capsys, flags):
    """`127.0.0.1:5555` (no tcp://) was taken for an address off this machine by --insecure's check."""
    assert main(["submit", "127.0.0.1:5555", *flags, "--status"]) == 2
    err = capsys.readouterr().err
    assert "cannot connect to 127.0.0.1:5555: not an address a client connects to" in err
    assert "loopback" not in err


def test_a_trace_that_is_missing_or_a_folder_is_not_told_to_name_its_format(tmp_path, capsys):
    for path, said in ((tmp_path / "none.csv", "no such file"), (tmp_path, "is a folder, not a trace file")):
        assert main(["submit", "tcp://127.0.0.1:5555", "--insecure", str(path)]) == 2
        err = capsys.readouterr().err
        assert said in err and "--format" not in err
    (tmp_path / "odd.bin").write_bytes(b"garbage\x00\x01")
    assert main(["submit", "tcp://127.0.0.1:5555", "--insecure", str(tmp_path / "odd.bin")]) == 2
    assert "name it with --format" in capsys.readouterr().err
