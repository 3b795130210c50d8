"""Jobs submitted while `serve` still waits for its agents (before round 0) never take an id a
trace source of the graph will bring: the sources' ids are known before the scheduler takes its
first submission, so a job without an id is given one past them and a job that asks for one of
them is refused at once, naming the source. The run then starts, and every accepted job is
delivered once, as a replay of the journal agrees. A real scheduler socket on 127.0.0.1."""

from __future__ import annotations

import threading
import time

import pytest

from roundhouse.agents.submitter import SchedulerError, Submitter
from roundhouse.runtime import serve as serving
from roundhouse.runtime.backends.live import LiveOptions
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.journal import Journal
from roundhouse.wire.security import ClientSecurity, ServerSecurity
from tests.livecluster import TEST_PROFILE, free_port

pytestmark = pytest.mark.live

GRAPH = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
trace :: TraceSource(path="jobs.csv");
live :: LiveSource;
trace -> g :: AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
live -> g;
"""
# The trace's jobs arrive after the time limit: they are the trace's, whoever submits first.
JOBS = "job_id,arrival_s,gpus,model,iterations,batch_size\n0,600,1,LM,100,10\n1,600,1,LM,100,10\n5,600,1,LM,100,10\n"
LM = {"model": "LM", "iterations": 10, "gpus": 1}


def _serve_in_a_thread(tmp_path, address: str, wait_s: float, until: float):
    graph = compile_file(str(tmp_path / "g.sched"))
    options = LiveOptions(wait_for_agents_s=wait_s, heartbeat_s=0.3, heartbeat_timeout_s=3.0)
    results: list = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(serving.serve(graph, address, ServerSecurity(None), tmp_path / "j.sqlite", options, until=until))
        except BaseException as err:  # (reported by the test, not lost in the thread)
            errors.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, results, errors


def test_jobs_submitted_before_round_0_take_no_id_a_trace_will_bring(tmp_path):
    (tmp_path / "g.sched").write_text(GRAPH)
    (tmp_path / "profile.csv").write_text(TEST_PROFILE)
    (tmp_path / "jobs.csv").write_text(JOBS)
    address = f"tcp://127.0.0.1:{free_port()}"
    began = time.time()
    # No agent comes: the scheduler waits the whole 4 s for one, taking submissions meanwhile.
    thread, results, errors = _serve_in_a_thread(tmp_path, address, wait_s=4.0, until=2.0)
    try:
        with Submitter(address, ClientSecurity(None), 20.0) as client:
            first = client.submit([LM, LM])
            with pytest.raises(SchedulerError) as refused:
                client.submit([LM, {**LM, "job_id": 5}])
            own = client.submit([{**LM, "job_id": 3}])
        assert time.time() - began < 4.0, "the submissions were answered only after the wait for agents"
    finally:
        thread.join(60)
    assert not thread.is_alive()
    assert not errors, errors  # the run started: no refusal at round 0
    assert first == [6, 7]  # past the trace's 0, 1 and 5
    assert own == [3]  # a free id below them is the job's to ask for
    assert str(refused.value) == (
        "the scheduler refused: job 2: error: job id 5 is one that source 'trace' will bring later (job ids must be unique in a run)"
    )
    result = results[0]
    assert result.stop_reason == "reached the time limit (2s)"
    jobs = result.world.jobs
    assert sorted(jobs.column("job_id").tolist()) == [3, 6, 7]  # each accepted job once, none of the refused one

    journal = Journal(tmp_path / "j.sqlite", read_only=True)
    assert journal.submission_ids() == {3, 6, 7}
    assert journal.pending_submissions() == []  # all delivered (at round 0)
    journal.close()


def test_a_resumed_run_replays_the_early_submissions_to_the_same_jobs(tmp_path):
    (tmp_path / "g.sched").write_text(GRAPH)
    (tmp_path / "profile.csv").write_text(TEST_PROFILE)
    (tmp_path / "jobs.csv").write_text(JOBS)
    address = f"tcp://127.0.0.1:{free_port()}"
    thread, results, errors = _serve_in_a_thread(tmp_path, address, wait_s=2.0, until=1.0)
    try:
        with Submitter(address, ClientSecurity(None), 20.0) as client:
            assert client.submit([LM]) == [6]
    finally:
        thread.join(60)
    assert not errors, errors
    first = sorted(results[0].world.jobs.column("job_id").tolist())
    # The same journal again: the run is replayed (the submission delivered in round 0 once more,
    # no second copy of it), then goes on to its new limit; a new submission takes the next id.
    thread, results, errors = _serve_in_a_thread(tmp_path, address, wait_s=0.0, until=3.0)
    try:
        with Submitter(address, ClientSecurity(None), 20.0) as client:
            assert client.submit([LM]) == [7]
    finally:
        thread.join(60)
    assert not errors, errors
    assert first == [6]
    assert sorted(results[0].world.jobs.column("job_id").tolist()) == [6, 7]
    journal = Journal(tmp_path / "j.sqlite", read_only=True)
    assert journal.submission_ids() == {6, 7} and journal.pending_submissions() == []
    journal.close()
