"""Stray workers killed across a scheduler's restart. The scheduler journals each stray it kills
(table strays: the worker of a rank that runs on another node), and sends the revoke once the
journal holds it; a scheduler restarted before the stray's exit comes takes its strays back from
the journal, and acknowledges that exit as the one that killed it would, not taking it as the
rank's (before, the strays were kept in memory only, and the restarted scheduler refused the exit:
its rank runs on another node). The journal keeps at most STRAYS_KEPT of them, as memory does.
Stand-in agents on real ZeroMQ sockets (tests/test_live_backend.py), a real journal file."""

from __future__ import annotations

import sqlite3

import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.backends.live import LiveBackend, reports
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.types import Plan
from roundhouse.runtime.world import World
from tests.test_live_backend import add_jobs, handled, live, pump, resumed, round_trip, serve_until  # noqa: F401 (the fixture)
from tests.test_wire_review_fixes import lines  # noqa: F401 (the logger-listening fixture)

# Real agents, schedulers or training processes on this machine (the quick loop is -m "not live").
pytestmark = pytest.mark.live

JOB = {"job_id": 1, "arrival_s": 0.0, "gpus": 2, "model": "LM", "iterations": 100_000.0}
# Job 1's two ranks: rank 0 on node a (GPU 0), rank 1 on node b (GPU 2).
PLANS = [Plan(launch_rows=[0], launch_gpus=[0, 2], launch_counts=[2]), None]


def _strays(journal: Journal) -> list[tuple]:
    journal.commit()
    return journal.db.execute("SELECT node, job_id, attempt, rank FROM strays ORDER BY rowid").fetchall()


def _kill_stray_rank_0_on_b(world, backend, a, b) -> None:
    """Job 1 launched (rank 0 on a, rank 1 on b); then b lists a rank 0 beside its rank 1: a
    stray, which the scheduler kills there alone."""
    for agent in (a, b):
        agent.receive()
    (row,) = add_jobs(world, [JOB])
    assert row == 0
    for plan in PLANS:
        round_trip(world, backend, plan)
        backend.advance()
    a.receive(1, "launch")
    b.receive(1, "launch")
    done = handled(backend)
    b.send("heartbeat", running=[{"job": 1, "attempt": 1, "rank": r, "gpu": g, "iteration": 7} for r, g in ((1, 0), (0, 1))])
    serve_until(backend, done, "b's heartbeat")
    pump(backend)
    assert b.receive(1, "revoke") == [("revoke", {"job": 1, "attempt": 1, "kill": True, "rank": None, "ranks": [0]})]


def _restarted(backend, journal: Journal) -> tuple[World, LiveBackend, Journal]:
    """The scheduler dies (no clean close: its socket is gone, nothing more journaled) and a
    new one resumes its journal's run, replaying its rounds."""
    return resumed(backend, journal, [JOB], PLANS, clean=False)


def test_a_restarted_scheduler_acknowledges_the_exit_of_a_stray_its_predecessor_killed(live, lines):  # noqa: F811
    got = lines("roundhouse.scheduler")
    world, backend, (a, b), journal = live
    _kill_stray_rank_0_on_b(world, backend, a, b)
    assert _strays(journal) == [("b", 1, 1, 0)]
    world, again, journal = _restarted(backend, journal)
    try:
        assert again.reports.strays == {("b", 1, 1, 0): None}
        # The agents register again; b's stray has ended meanwhile, and b resends its exit.
        a.register(running=[{"job": 1, "attempt": 1, "rank": 0, "gpu": 0, "iteration": 9}])
        b.register(running=[{"job": 1, "attempt": 1, "rank": 1, "gpu": 0, "iteration": 9}])
        serve_until(again, lambda: not again.attempts.unconfirmed, "the job to be taken back")
        b.exited(1, 1, 0, "killed", 7, reason="terminated by the agent")
        serve_until(again, lambda: got.having("a stray worker stopped there"), "the stray's exit")
        pump(again)
        answers = [m for m in b.receive(1, "ack") if m[0] in ("ack", "error")]
        assert answers == [("ack", {"job": 1, "attempt": 1, "rank": 0})]
        said = "job 1 attempt 1 rank 0 on b, a stray worker stopped there, exited (killed at iteration 7): acknowledged"
        assert got.having(said), got.lines
        # Not taken as rank 0's: the attempt runs on, its books and the journal's exits untouched.
        att = again.attempts.live[(1, 1)]
        assert not att.exits and not att.ended and not att.kill_sent and not att.revoked
        assert journal.db.execute("SELECT COUNT(*) FROM exits").fetchone() == (0,)
        assert _strays(journal) == [] and again.reports.strays == {}
        assert again.counters["bad_messages"] == 0
    finally:
        again.close()
        journal.close()


def test_a_stray_s_exit_heard_before_the_restart_is_not_taken_again(live):  # noqa: F811
    """Heard and acknowledged, a stray leaves the journal: the same exit resent to a restarted
    scheduler is one it killed no stray for, and is refused as before."""
    world, backend, (a, b), journal = live
    _kill_stray_rank_0_on_b(world, backend, a, b)
    b.exited(1, 1, 0, "killed", 7, reason="terminated by the agent")
    pump(backend)
    assert b.receive(1) == [("ack", {"job": 1, "attempt": 1, "rank": 0})]
    assert _strays(journal) == []
    world, again, journal = _restarted(backend, journal)
    try:
        assert again.reports.strays == {}
        a.register(running=[{"job": 1, "attempt": 1, "rank": 0, "gpu": 0, "iteration": 9}])
        b.register(running=[{"job": 1, "attempt": 1, "rank": 1, "gpu": 0, "iteration": 9}])
        serve_until(again, lambda: not again.attempts.unconfirmed, "the job to be taken back")
        done = handled(again)
        b.exited(1, 1, 0, "killed", 7, reason="terminated by the agent")
        serve_until(again, done, "b's exit")
        pump(again)
        [(kind, body)] = [m for m in b.receive(1, "error") if m[0] in ("ack", "error")]
        assert kind == "error" and "rank 0 does not run on node b" in body["reason"], (kind, body)
    finally:
        again.close()
        journal.close()


def test_the_journal_keeps_no_more_strays_than_the_scheduler_does(live, monkeypatch):  # noqa: F811
    """Past STRAYS_KEPT (here 1), the oldest stray is forgotten in the journal too, and a
    restarted scheduler takes back only what is kept, of the nodes it knows."""
    monkeypatch.setattr(reports, "STRAYS_KEPT", 1)
    world, backend, (a, b), journal = live
    _kill_stray_rank_0_on_b(world, backend, a, b)
    done = handled(backend)
    a.send("heartbeat", running=[{"job": 1, "attempt": 1, "rank": r, "gpu": r, "iteration": 7} for r in (0, 1)])
    serve_until(backend, done, "a's heartbeat")
    pump(backend)
    assert a.receive(1, "revoke")[-1] == ("revoke", {"job": 1, "attempt": 1, "kill": True, "rank": None, "ranks": [1]})
    assert _strays(journal) == [("a", 1, 1, 1)] and list(backend.reports.strays) == [("a", 1, 1, 1)]
    # A row of a node this run never knew (as one left by a node another took the place of) is dropped.
    journal.db.execute("INSERT INTO strays VALUES ('gone', 1, 1, 0, 0.0)")
    world, again, journal = _restarted(backend, journal)
    try:
        assert again.reports.strays == {("a", 1, 1, 1): None}
        assert _strays(journal) == [("a", 1, 1, 1)]
    finally:
        again.close()
        journal.close()


def test_a_damaged_row_of_table_strays_is_refused_naming_it(live):  # noqa: F811
    world, backend, (a, b), journal = live
    _kill_stray_rank_0_on_b(world, backend, a, b)
    path = journal.path
    backend.server.close()
    journal.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE strays SET rank = 'x'")
    journal = Journal(path)
    try:
        with pytest.raises(UsageError) as err:
            journal.strays()
        said = (
            f"{path}: damaged journal: table strays, node 'b' job 1 attempt 1 rank 'x': rank 'x' is not a whole number, 0 or more"
        )
        assert str(err.value) == said
    finally:
        journal.close()
