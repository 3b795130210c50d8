"""Live mode, after a third review: a journal's run (its graph and cluster) is checked before its
nodes are read, and each nodes row is checked; one scheduler at a time holds a journal; a run
stopped before round 0 leaves no journal for the nodes alone; a cell that is not a number is
reported as such; the heartbeat timeout is bounded and --stop-agents does not wait for a dead
agent; an agent that cannot reach its scheduler says so; a wildcard port is logged as bound;
an empty trace file is refused; a command-line job's refusal names it plainly."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
import zmq

from roundhouse.agents import submitter
from roundhouse.agents.agent.scheduler_link import SchedulerLink
from roundhouse.errors import TraceError, UsageError
from roundhouse.runtime.backends.live import LiveOptions
from roundhouse.runtime.backends.live.ending import stop_agents
from roundhouse.runtime.backends.live.nodes import Node, Nodes
from roundhouse.runtime.backends.live.round import Clock, News
from roundhouse.runtime.backends.live.server import Server
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.traces.schema import validate
from roundhouse.wire.security import ClientSecurity, ServerSecurity
from tests.livecluster import free_port

PROJECT = Path(__file__).resolve().parents[1]

ONE_NODE = """
round = 1s;
cluster = "1x2:V100";
src :: LiveSource(jobs=1);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


HELLO = {"node": "a", "address": "127.0.0.1", "session": "s", "gpus": [{"index": 0, "type": "V100"}]}


def _journal_with_nodes(path: Path, rows: list[tuple], meta: dict | None = None) -> None:
    journal = Journal(path)
    if meta is not None:
        journal.begin(meta)
    for i, (name, _) in enumerate(rows):
        journal.set_node(name, i, "127.0.0.1", 0.0)
    journal.commit()
    for name, slot in rows:  # (then damaged, as by hand)
        journal.db.execute("UPDATE nodes SET slot = ? WHERE name = ?", (slot, name))
    journal.close()


# --- the nodes table ---
@pytest.mark.parametrize(
    "slot, message",
    [
        (5, "table nodes, node 'a': slot 5 is not a node of the cluster (0 to 1)"),
        ("x", "table nodes, node 'a': slot 'x' is not a node's index"),
        (-1, "table nodes, node 'a': slot -1 is not a node's index"),
        (1, "table nodes, node 'b': slot 1 is node 'a''s too"),
    ],
)
def test_a_damaged_nodes_row_is_refused_naming_the_table_and_row(tmp_path, slot, message):
    path = tmp_path / "j.sqlite"
    _journal_with_nodes(path, [("a", slot), ("b", 1)], {"graph_digest": "g", "cluster": "c", "round_s": 1.0})
    journal = Journal(path)
    with pytest.raises(UsageError, match="damaged journal") as err:
        journal.nodes(2)
    assert message in str(err.value)
    journal.close()


def test_a_nodes_address_must_be_text(tmp_path):
    path = tmp_path / "j.sqlite"
    _journal_with_nodes(path, [("a", 0)], {"graph_digest": "g", "cluster": "c", "round_s": 1.0})
    db = sqlite3.connect(path)
    db.execute("UPDATE nodes SET address = x'07'")
    db.commit()
    db.close()
    with pytest.raises(UsageError) as err:
        Journal(path).nodes(2)
    assert "damaged journal: table nodes, node 'a': address b'\\x07' is not text" in str(err.value)


def test_a_node_taking_a_lost_node_s_place_replaces_its_row(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    journal.set_node("a", 0, "h1", 0.0)
    journal.set_node("c", 0, "h3", 5.0)  # (a was lost; c took node 0)
    journal.set_node("b", 1, "h2", 0.0)
    journal.commit()
    assert journal.nodes(2) == {"c": (0, "h3"), "b": (1, "h2")}
    journal.close()


@pytest.mark.live
def test_serve_refuses_a_journal_of_a_larger_cluster_as_another_run(tmp_path, monkeypatch, capsys):
    from roundhouse.tools.cli import main

    (tmp_path / "g.sched").write_text(ONE_NODE)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "j.sqlite"
    _journal_with_nodes(path, [("a", 0), ("b", 1)], {"graph_digest": "other", "cluster": "2x2:V100", "round_s": 1.0})
    bind = f"tcp://127.0.0.1:{free_port()}"
    args = ["serve", "g.sched", "--bind", bind, "--insecure", "--journal", str(path), "--wait-for-agents", "0s", "--until", "0s"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "this journal belongs to another run" in err and "Traceback" not in err, err


@pytest.mark.live
def test_serve_refuses_a_run_that_never_began_on_a_larger_cluster(tmp_path, monkeypatch, capsys):
    from roundhouse.tools.cli import main

    (tmp_path / "g.sched").write_text(ONE_NODE)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "j.sqlite"
    _journal_with_nodes(path, [("a", 0), ("b", 1)])  # (no meta: agents registered, then it was stopped)
    journal = Journal(path)
    journal.add_submission(0, {"model": "LM"}, 0.0)  # (a journal kept for it)
    journal.close()
    bind = f"tcp://127.0.0.1:{free_port()}"
    args = ["serve", "g.sched", "--bind", bind, "--insecure", "--journal", str(path), "--wait-for-agents", "0s", "--until", "0s"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "this journal belongs to another run (its table nodes puts b at node 1; this cluster has 1)" in err, err


# --- one scheduler per journal ---
def test_a_second_lock_on_a_journal_is_refused_naming_the_holder(tmp_path):
    first, second = Journal(tmp_path / "j.sqlite"), Journal(tmp_path / "j.sqlite")
    first.lock()
    with pytest.raises(UsageError, match=rf"journal .*j.sqlite is in use by another scheduler \(pid {os.getpid()}\)"):
        second.lock()
    first.close()
    assert not (tmp_path / "j.sqlite.lock").exists()  # (released and removed on close)
    second.lock()
    second.close()


def test_a_lock_left_by_a_killed_scheduler_blocks_no_one(tmp_path):
    path = tmp_path / "j.sqlite"
    code = f"from roundhouse.runtime.journal import Journal; j = Journal({str(path)!r}); j.lock(); print('locked', flush=True); import time; time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        with pytest.raises(UsageError, match=f"pid {child.pid}"):
            Journal(path).lock()
    finally:
        child.kill()
        child.wait()
    assert (tmp_path / "j.sqlite.lock").exists()  # (left behind by the killed process)
    journal = Journal(path)
    journal.lock()
    journal.close()


@pytest.mark.live
def test_serve_refuses_a_journal_another_scheduler_holds_and_releases_its_own(tmp_path, monkeypatch, capsys):
    from roundhouse.tools.cli import main

    shutil_graph = (PROJECT / "graphs" / "live-loopback.sched").read_text()
    (tmp_path / "g.sched").write_text(shutil_graph)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "j.sqlite"
    args = ["serve", "g.sched", "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--journal", str(path)]
    args += ["--wait-for-agents", "0s", "--until", "0s"]
    holder = Journal(path)
    holder.lock()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"is in use by another scheduler (pid {os.getpid()})" in err and "Traceback" not in err, err
    holder.close()
    assert main(args) == 0, capsys.readouterr().err
    assert not (tmp_path / "j.sqlite.lock").exists()
    after = Journal(path)
    after.lock()  # (serve released it)
    after.close()


# --- an empty journal ---
def test_a_journal_with_only_nodes_of_a_run_that_never_began_holds_nothing(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    journal.set_node("a", 0, "127.0.0.1", 0.0)
    journal.commit()
    assert journal.holds_nothing()
    journal.add_submission(0, {"model": "LM"}, 0.0)
    assert not journal.holds_nothing()
    journal.close()


# --- traces ---
def test_a_cell_that_is_not_a_number_is_reported_before_what_follows_from_it():
    frame = pl.DataFrame(
        {"job_id": ["1", "2"], "arrival_s": ["0", "0"], "model": ["LM", "LM"], "iterations": ["100", "ten"], "gpus": ["1", "1"]}
    )
    with pytest.raises(TraceError) as err:
        validate(frame, "t.csv", [2, 3])
    assert str(err.value) == "t.csv:3: error: column 'iterations': 'ten' is not a number"


# --- the heartbeat timeout, and stopping a dead agent ---
@pytest.mark.live
def test_the_heartbeat_timeout_is_at_most_an_hour(tmp_path, monkeypatch, capsys):
    from roundhouse.tools.cli import main

    monkeypatch.chdir(tmp_path)
    graph = str(PROJECT / "graphs" / "live-loopback.sched")
    bind = f"tcp://127.0.0.1:{free_port()}"
    args = [
        "serve",
        graph,
        "--bind",
        bind,
        "--insecure",
        "--heartbeat-timeout",
        "1e300",
        "--wait-for-agents",
        "0s",
        "--until",
        "0s",
    ]
    assert main(args) == 2
    assert "--heartbeat-timeout 1e300: must be at most 1h" in capsys.readouterr().err


@pytest.mark.live
def test_stop_agents_does_not_wait_for_an_agent_whose_connection_is_gone(tmp_path, logs):
    journal = Journal(tmp_path / "j.sqlite")
    server = Server(f"tcp://127.0.0.1:{free_port()}", ServerSecurity(None), journal, defaultdict(int), lambda i: None)
    server.start()
    try:
        options = LiveOptions(heartbeat_timeout_s=20.0)
        cluster = Cluster.parse("1x2:V100")
        nodes = Nodes(cluster, server, journal, options, defaultdict(int), News(), Clock(1.0), "s")
        nodes.slots[0] = node = Node("a", 0, "127.0.0.1", identity=b"\x00gone", online=True)
        nodes.by_name["a"] = node
        started = time.time()
        stop_agents(nodes, server, options.heartbeat_timeout_s, SimpleNamespace(live={}), 90.0)
        assert time.time() - started < 5
        assert "no answer from a (its connection is gone)" in logs.text
    finally:
        server.close()
        journal.close()


# --- an agent that cannot reach its scheduler ---
@pytest.mark.live
def test_an_agent_not_registered_says_so_and_keeps_trying(logs):
    address = f"tcp://127.0.0.1:{free_port()}"
    link = SchedulerLink(address, ClientSecurity(None), HELLO, defaultdict(int))
    context = zmq.Context()
    link.open(context)
    try:
        link.warn_every_s = 0.0
        link.trying_since -= 31
        assert not link.keep_alive(time.time(), lambda: [])
        assert f"not registered with the scheduler at {address} after 31 s; still trying" in logs.text
    finally:
        link.close()
        context.term()


@pytest.mark.live
def test_an_agent_says_once_that_it_lost_contact_with_its_scheduler(logs):
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    link = SchedulerLink(f"tcp://127.0.0.1:{port}", ClientSecurity(None), HELLO, defaultdict(int))
    link.open(context)
    try:
        deadline = time.time() + 10
        while not link.connected and time.time() < deadline:
            link.monitor.poll(100)
            link.watch_handshakes()
        assert link.connected
        router.close(linger=0)
        deadline = time.time() + 10
        while link.connected and time.time() < deadline:
            link.monitor.poll(100)
            link.watch_handshakes()
        time.sleep(0.3)
        link.watch_handshakes()
        assert logs.text.count(f"lost contact with the scheduler at tcp://127.0.0.1:{port}; reconnecting") == 1, logs.text
    finally:
        router.close(linger=0)
        link.close()
        context.term()


# --- a wildcard port ---
@pytest.mark.live
def test_a_wildcard_port_is_logged_as_bound(tmp_path, logs):
    journal = Journal(tmp_path / "j.sqlite")
    server = Server("tcp://127.0.0.1:*", ServerSecurity(None), journal, defaultdict(int), lambda i: None)
    server.start()
    try:
        host, port = server.endpoint.rsplit(":", 1)
        assert host == "tcp://127.0.0.1" and 0 < int(port) < 65536
        assert f"scheduler listening on {server.endpoint} (INSECURE)" in logs.text
    finally:
        server.close()
        journal.close()


# --- submitting ---
def test_a_trace_file_with_no_jobs_is_refused(tmp_path, capsys):
    from roundhouse.tools.cli import main

    trace = tmp_path / "header-only.csv"
    trace.write_text("job_id,model,iterations,gpus\n")
    assert main(["submit", "tcp://127.0.0.1:1", "--insecure", "--timeout", "1s", str(trace)]) == 2
    assert f"{trace}: error: holds no jobs" in capsys.readouterr().err


def test_a_refused_command_line_job_is_named_plainly_without_a_provisional_id():
    text = "the scheduler refused: submission:1: error: job 6: model 'NoSuch' is not in the profile"
    assert submitter._name_rows(text, submitter.plain_names(1), 0, [{"model": "NoSuch"}]) == (
        "the scheduler refused: the job: error: model 'NoSuch' is not in the profile"
    )
    # (a job that gave its id is named by it)
    assert submitter._name_rows(text, submitter.plain_names(2), 0, [{"model": "NoSuch", "job_id": 6}, {}]) == (
        "the scheduler refused: job 1 of 2: error: job 6: model 'NoSuch' is not in the profile"
    )
