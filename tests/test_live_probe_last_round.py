"""The last round of a live run, as a new user meets it: a stop (SIGTERM, Ctrl-C) with
`--stop-agents` sends no launch, since the agents are told at once to stop and would checkpoint
the job as soon as it started (without `--stop-agents` the jobs keep running, and a rerun takes
them back: that round still launches); and a job stopped at the end of a run before it wrote a
checkpoint is said to resume where its attempt started, not "at iteration None"; one whose
agent checkpointed it while another agent had yet to answer the request to stop is said
checkpointed as its agent stopped, as one that ended later is. The backend
alone with stand-in agents on real ZeroMQ sockets (tests/test_live_backend.py)."""

from __future__ import annotations

import logging
import threading
import time

import attrs
import pytest

from roundhouse.runtime.types import Assignment, Plan
from tests.livecluster import wait_until
from tests.test_live_backend import add_jobs, live, pump, received, round_trip  # noqa: F401 (the fixture)

pytestmark = pytest.mark.live

JOB = {"job_id": 5, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 900.0, "batch_size": 20}


@pytest.mark.parametrize("stop_agents", [True, False])
def test_a_stop_with_stop_agents_launches_nothing_in_its_last_round(live, caplog, stop_agents):  # noqa: F811
    world, backend, (a, b), journal = live
    for ag in (a, b):
        ag.receive()
    backend.options = attrs.evolve(backend.options, stop_agents=stop_agents)
    (row,) = add_jobs(world, [JOB])
    backend.request_stop("stopped by SIGTERM")  # (the engine ticks the round cut at the stop, its last)
    with caplog.at_level(logging.INFO, logger="roundhouse.scheduler"):
        round_trip(world, backend, Plan.of([Assignment(row, [0])]))
        pump(backend)
    # (served until a message comes: a launch sent near the end of `pump` may still be on its
    # way; none may come for a second when none is sent)
    got = received(backend, a, timeout=1.0 if stop_agents else 10.0)
    [(outcome, reason)] = journal.db.execute("SELECT outcome, reason FROM attempts WHERE job_id = 5").fetchall() or [(None, None)]
    if stop_agents:
        assert got == [], got
        said = "stopped by SIGTERM and its agents are told to stop: 1 launch(es) not sent (job(s) 5); a rerun starts them"
        assert said in caplog.text, caplog.text
        assert (outcome, reason) == ("preempted", "not launched: the run was stopped by SIGTERM and its agents are told to stop")
        assert backend.attempts.current[row].ended
    else:
        assert [t for t, _ in got] == ["launch"], got  # (it keeps running after the stop; a rerun takes it back)
        assert "not sent" not in caplog.text and outcome is None


def test_a_job_stopped_before_its_first_checkpoint_is_not_said_to_be_at_iteration_none(live, caplog):  # noqa: F811
    world, backend, (a, b), _ = live
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [JOB])
    round_trip(world, backend, Plan.of([Assignment(row, [0])]))
    pump(backend)
    assert [t for t, _ in a.receive(1)] == ["launch"]

    def agent() -> None:  # revoked before its worker started: it ends with no checkpoint
        deadline = time.time() + 20
        while time.time() < deadline:
            if any(t == "revoke" for t, _ in a.receive()):
                a.exited(5, 1, 0, "preempted", 0, reason="revoked before it started")
                return
            time.sleep(0.02)

    answering = threading.Thread(target=agent)
    answering.start()
    with caplog.at_level(logging.INFO, logger="roundhouse.scheduler"):
        backend.checkpoint_running()
    answering.join()
    assert "1 attempt(s) stopped (job 5 with no checkpoint of its own (it resumes at iteration 0))" in caplog.text, caplog.text
    assert "None" not in caplog.text, caplog.text


def test_a_job_checkpointed_before_every_agent_answered_is_said_kept(live, caplog):  # noqa: F811
    # Agent a answers the request to stop and checkpoints its job at once; b answers only
    # after that exit is in (on a loaded machine it may). The job was running when the agents
    # were asked: the log says where it checkpointed, though it ended before the wait for jobs.
    world, backend, (a, b), _ = live
    backend.options = attrs.evolve(backend.options, stop_agents=True)
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [JOB])
    round_trip(world, backend, Plan.of([Assignment(row, [0])]))
    pump(backend)
    assert [t for t, _ in a.receive(1)] == ["launch"]
    attempt = backend.attempts.current[row]

    def agents() -> None:  # (each socket used by this thread alone from here on)
        a.receive(1, "shutdown")
        a.send("stopping")
        a.exited(5, 1, 0, "preempted", 77, checkpoint="/ck/job-5/a1-i77.pt")
        try:
            wait_until(lambda: attempt.ended, 10, "a's exit", every=0.02)
        finally:  # (b answers regardless: unanswered, the scheduler would wait out the heartbeat timeout)
            b.receive(1, "shutdown")
            b.send("stopping")

    answering = threading.Thread(target=agents)
    answering.start()
    with caplog.at_level(logging.INFO, logger="roundhouse.scheduler"):
        backend.stop_agents()
    answering.join(10)
    assert attempt.ended and "every one answered: a, b" in caplog.text, caplog.text
    assert "1 job(s) checkpointed as their agents stopped (job 5 at iteration 77)" in caplog.text, caplog.text
