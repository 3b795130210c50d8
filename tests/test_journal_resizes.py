"""An attempt's shapes in the journal: a job resized in place is taken back by a restarted
scheduler as the agents run it (its GPUs, rendezvous port, generation and learning-rate rule),
not as it was launched; a journal written before shapes were kept still reads. Stand-in agents
on real ZeroMQ sockets (tests/test_live_backend.py)."""

from __future__ import annotations

import sqlite3

import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.journal import AttemptRow, Journal, ShapeRow
from roundhouse.runtime.types import LR_LINEAR, LR_SQRT, Assignment, Plan, Resize
from tests.test_live_backend import add_jobs, live, pump, resumed, round_trip, serve_until  # noqa: F401 (the fixture)

JOB = {"job_id": 5, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 900.0, "batch_size": 20}


def _restart(backend, journal, plans: list[Plan], attempt: int = 1):
    """The scheduler stopped and started again on its journal: a new backend (same address)
    replays the rounds with the plans the run carried out, then takes the running jobs back."""
    world, again, journal = resumed(backend, journal, [JOB], plans)
    assert again.attempts.unconfirmed == {(5, attempt)}
    return world, again, journal


def _grown(fixture):
    """Job 5 launched on GPU 0 of node a, then grown in place onto GPU 1 (batch 40, the
    linear rule): the plans carried out and the resize message."""
    world, backend, (a, b), journal = fixture
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [JOB])
    plans = [Plan.of([Assignment(row, [0])]), Plan.of(resizes=[Resize(row, [0, 1], 40, LR_LINEAR)])]
    for plan in plans:
        round_trip(world, backend, plan)
        backend.advance()
    [(t, launch), (t2, grown)] = a.receive(2)
    assert (t, t2) == ("launch", "resize") and grown["generation"] == 1 and grown["lr_scale"] == 2.0
    return row, plans, launch, grown


@pytest.mark.live
def test_a_job_grown_in_place_is_taken_back_as_it_runs_and_resized_on_from_its_generation(live):  # noqa: F811
    _, backend, (a, b), journal = live
    row, plans, launch, grown = _grown(live)
    world, backend, journal = _restart(backend, journal, plans)
    try:
        att = backend.attempts.current[row]
        assert att.gpus.tolist() == [0, 1] and att.generation == 1 and att.master_port == grown["master_port"]
        assert att.batch == 40 and att.lr_rule == LR_LINEAR and att.lr_scale == 2.0
        # Both ranks still run on node a: confirmed, nothing killed.
        running = [{"job": 5, "attempt": 1, "rank": r, "gpu": r, "iteration": 30} for r in (0, 1)]
        a.register(running=running)
        b.register()
        serve_until(backend, lambda: not backend.attempts.unconfirmed, "the job to be taken back")
        pump(backend)
        assert [t for t, _ in a.receive(1)] == ["welcome"]  # (no revoke: the job is not stale)
        assert not att.ended and backend.attempts.live[(5, 1)] is att
        # The next resize follows on: generation 2, a port other than the one in use.
        round_trip(world, backend, Plan.of(resizes=[Resize(row, [0], 20, LR_SQRT)]))
        pump(backend)
        [(t, msg)] = a.receive(1)
        assert t == "resize" and msg["generation"] == 2 and msg["world_size"] == 1
        assert msg["master_port"] != grown["master_port"] and msg["ranks"] == []
    finally:
        backend.close()
        journal.close()


@pytest.mark.live
def test_a_relaunch_s_learning_rate_rule_outlives_a_restart(live):  # noqa: F811
    """A resize by checkpoint and restart launches a new attempt under the resize's rule; a
    restarted scheduler still knows it, and the job's next launch carries its factor."""
    world, backend, (a, b), journal = live
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [JOB])
    plans = [Plan.of([Assignment(row, [0])]), Plan.of(resizes=[Resize(row, [2, 3], 40, LR_SQRT)])]
    for plan in plans:
        round_trip(world, backend, plan)
        backend.advance()
    a.exited(5, 1, 0, "preempted", 44, checkpoint="/ck/job-5/a1-i44.pt")
    pump(backend)
    [(t, relaunch)] = b.receive(1)
    assert t == "launch" and relaunch["attempt"] == 2 and relaunch["lr_scale"] == pytest.approx(2**0.5)
    journal.commit()
    rows = {(s.attempt, s.generation): s for ss in journal.shapes().values() for s in ss}
    assert rows[(2, 0)].lr_rule == LR_SQRT and rows[(2, 0)].batch == 40 and rows[(2, 0)].gpus == [2, 3]
    world, again, journal = _restart(backend, journal, plans, attempt=2)
    try:
        att = again.attempts.current[row]
        assert att.n == 2 and att.lr_rule == LR_SQRT and att.lr_scale == pytest.approx(2**0.5)
        # The job's next launch (a move onto node a) keeps the rule at its batch.
        assert again.attempts.new(row, att.gpus[:1] - 2, 40, 0.0).lr_scale == pytest.approx(2**0.5)
    finally:
        again.close()
        journal.close()


def _old_journal(path) -> None:
    """A journal as Roundhouse wrote it before shapes were kept: no table shapes."""
    journal = Journal(path)
    journal.begin({"graph_digest": "x", "cluster": "c", "round_s": 1.0})
    journal.add_attempt(AttemptRow(3, 1, 0.0, [0, 1], ["node-a", "node-a"], 29500, 0))
    journal.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE shapes")
    db.commit()
    db.close()


def test_a_journal_written_before_shapes_were_kept_still_reads(tmp_path):
    _old_journal(tmp_path / "old.sqlite")
    read_only = Journal(tmp_path / "old.sqlite", read_only=True)
    assert read_only.meta()["schema"] == 1 and read_only.shapes() == {}
    assert [a.gpus for a in read_only.attempts()] == [[0, 1]]
    read_only.db.close()
    resumed = Journal(tmp_path / "old.sqlite")  # resumed: the table is added, nothing else changes
    assert resumed.shapes() == {} and [a.gpus for a in resumed.attempts()] == [[0, 1]]
    resumed.add_shape(ShapeRow(3, 1, 1, 5.0, [0], ["node-a"], 29501, 20, 0.0, LR_LINEAR, 1.0))
    resumed.commit()
    assert [s.master_port for s in resumed.shapes()[(3, 1)]] == [29501]
    resumed.close()


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("UPDATE shapes SET gpus = '[]'", "gpus [] is not a list of GPU ids"),
        ("UPDATE shapes SET gpus = '{bad'", "not JSON"),
        ("UPDATE shapes SET nodes = '[\"node-a\"]'", "is not a node name for each GPU"),
        ("UPDATE shapes SET master_port = 0", "0 is not a port"),
        ("UPDATE shapes SET lr_rule = 9", "9 is not a learning-rate rule or null"),
        ("UPDATE shapes SET lr_scale = -1.0", "-1.0 is not a learning-rate factor"),
        ("UPDATE shapes SET batch = 'big'", "'big' is not a batch size"),
    ],
)
def test_a_damaged_shape_is_refused_naming_where(tmp_path, sql, words):
    journal = Journal(tmp_path / "j.sqlite")
    journal.add_shape(ShapeRow(3, 1, 1, 5.0, [0, 1], ["node-a", "node-a"], 29501, 40, 0.0, LR_LINEAR, 2.0))
    journal.commit()
    journal.db.execute(sql)
    with pytest.raises(UsageError, match="damaged journal: table shapes, job 3 attempt 1 generation 1: ") as err:
        journal.shapes()
    assert words in str(err.value)
    journal.close()
