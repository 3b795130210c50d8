"""Stopping a live run: a stop (Ctrl-C, SIGTERM) cuts the round in progress at that moment, so
the time run and the jobs' GPU time end there, and a rerun that takes the jobs back counts
their time on from there; a second stop while the run stops ends its waits for agents and jobs
(the signal handlers stay the scheduler's until its journal is closed)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import attrs
import polars as pl
import pytest
import zmq

from roundhouse.runtime.backends.live import LiveBackend, LiveOptions
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.types import Plan
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable
from roundhouse.wire.security import ServerSecurity
from tests.livecluster import TEST_PROFILE, LiveCluster, free_port
from tests.test_live_backend import FakeAgent, add_jobs, round_trip, serve_until

pytestmark = pytest.mark.live


@pytest.fixture
def backend(tmp_path):
    """A live backend of one-minute rounds on a 1x2:V100 cluster, its one stand-in agent
    registered and round 0 begun."""
    ctx = zmq.Context()
    world = World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100")
    address = f"tcp://127.0.0.1:{free_port()}"
    journal = Journal(tmp_path / "j.sqlite")
    options = LiveOptions(
        heartbeat_s=0.1,
        heartbeat_timeout_s=60.0,
        wait_for_agents_s=0.0,
        checkpoint_dir=str(tmp_path / "ck"),
        ports=(40000, 40100),
    )
    meta = {"graph_digest": "x", "cluster": "c", "round_s": 60.0}
    live = LiveBackend(world, 60.0, address, ServerSecurity(None), journal, options, meta)
    live.start()
    agent = FakeAgent(ctx, address, "a")
    agent.register()
    serve_until(live, lambda: live.nodes.slots[0] is not None, "a to register")
    yield world, live, agent
    agent.sock.close()
    live.close()
    journal.close()
    ctx.term()


def _later(seconds: float, act) -> threading.Timer:
    timer = threading.Timer(seconds, act)
    timer.start()
    return timer


def test_a_stop_mid_round_cuts_the_round_at_the_stop_not_at_its_end(backend, caplog):
    world, live, _ = backend
    [row] = add_jobs(world, [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 1e9}]).tolist()
    round_trip(world, live, Plan(launch_rows=[row], launch_gpus=[0], launch_counts=[1]))
    _later(0.5, lambda: live.request_stop("stopped by SIGINT"))
    began = time.time()
    with caplog.at_level("INFO", logger="roundhouse.scheduler"):
        live.advance()  # (a one-minute round: the stop ends it)
    assert time.time() - began < 10
    stopped_at = live.clock.now_s()
    # The next round is at the stop, not at the round's end (t=60s), and numbered after round 0.
    assert live.clock.k == 1 and 0.4 < live.now <= stopped_at < 30, live.now
    round_trip(world, live, None)
    assert world.jobs.column("run_s")[row] == pytest.approx(live.now) and live.now < 30
    assert "stopped by SIGINT: stopping now" in caplog.text and "next round boundary" not in caplog.text


def test_a_second_stop_while_stopping_agents_ends_the_wait(backend, caplog):
    # The stand-in agent never answers the scheduler's request to stop, which would be waited
    # for the heartbeat timeout (a minute); asked to stop again, the scheduler waits no more.
    _, live, agent = backend
    live.options = attrs.evolve(live.options, stop_agents=True)
    live.request_stop("stopped by SIGINT")
    _later(0.5, lambda: live.request_stop("stopped by SIGINT"))
    began = time.time()
    with caplog.at_level("INFO", logger="roundhouse.scheduler"):
        live.close()
    assert time.time() - began < 10
    assert any(type_ == "shutdown" for type_, _ in agent.receive(1, "shutdown"))  # (it was asked)
    assert "stopped by SIGINT while stopping: no longer waiting for jobs or agents to stop" in caplog.text
    assert "no answer from a" in caplog.text


GRAPH = """
round = {round};
cluster = "1x2:V100";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""
JOBS = "job_id,arrival_s,gpus,model,iterations,batch_size\n0,0,1,LM,100000000,10\n"


def test_a_second_ctrl_c_while_serve_stops_exits_cleanly(tmp_path, monkeypatch, capsys):
    # In this process, so that the signals are serve's own: the second Ctrl-C comes while serve
    # asks its agents to stop (a wait of up to the heartbeat timeout). It is the scheduler's to
    # handle (not a KeyboardInterrupt inside whatever message handler runs), ends the wait, and
    # the journal is closed whole: a rerun resumes it.
    from roundhouse.runtime.backends.live import backend as backend_module
    from roundhouse.tools.cli import main

    (tmp_path / "g.sched").write_text(GRAPH.format(round="1s"))
    (tmp_path / "profile.csv").write_text(TEST_PROFILE)
    (tmp_path / "jobs.csv").write_text(JOBS)
    monkeypatch.chdir(tmp_path)
    asked: list[bool] = []
    real = backend_module.stop_agents

    def stop_agents(nodes, server, timeout_s, attempts, wait_s, interrupted=lambda: False):
        os.kill(os.getpid(), signal.SIGINT)  # (the second Ctrl-C, as the scheduler waits)
        time.sleep(0.05)  # (Python runs the handler between two instructions)
        asked.append(interrupted())
        return real(nodes, server, timeout_s, attempts, wait_s, interrupted)

    monkeypatch.setattr(backend_module, "stop_agents", stop_agents)
    serve = ["serve", "g.sched", "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--journal", "j.sqlite"]
    serve += ["--checkpoints", "ck", "--wait-for-agents", "0s", "--until", "0s", "--stop-agents"]
    assert main(serve) == 0
    err = capsys.readouterr().err
    assert asked == [True], err
    assert "stopped by SIGINT while stopping" in err and "interrupted" not in err.splitlines()[-1], err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # (put back once it is done)
    # (The run's facts name its cluster by its nodes' fingerprint too.)
    journal = Journal(tmp_path / "j.sqlite", read_only=True)
    assert journal.meta()["cluster_fingerprint"] == Cluster.parse("1x2:V100").fingerprint()
    journal.close()
    monkeypatch.setattr(backend_module, "stop_agents", real)
    assert main([*serve[:-3], "--until", "1s"]) == 0  # (the journal resumes)
    assert "resuming the journal's run" in capsys.readouterr().err


def test_a_stopped_run_counts_time_to_the_stop_and_a_rerun_on_from_there(tmp_path):
    # Rounds of 2 s; Ctrl-C early in round 0: the run ran that long, not 2 s, and so did
    # its job. The rerun takes the job back (it kept running on its node) and ends at its time
    # limit, 3 s: the job has run all along, 3 s, and held its GPU as long.
    cluster = LiveCluster(tmp_path, GRAPH.format(round="2s"), {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS})
    out = cluster.folder / "out"
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        cluster.wait_for(lambda: "launch job 0 attempt 1" in cluster.log("scheduler"), 30, "the launch")
        cluster.kill("scheduler", signal.SIGINT)
        assert cluster.processes["scheduler"].returncode == 0, cluster.logs()
        [(k0, t0), (k1, t1)] = cluster.query("SELECT k, now FROM rounds ORDER BY k")
        assert (k0, t0, k1) == (0, 0.0, 1) and 0 < t1 < 2.0, (t1, cluster.log("scheduler"))
        run = json.loads((out / "run.json").read_text())
        jobs = pl.read_csv(out / "jobs.csv")
        assert run["end_s"] == pytest.approx(t1) and run["busy_gpu_s"] == pytest.approx(t1), run
        assert jobs["run_s"].to_list() == [pytest.approx(t1)], jobs
        assert "stopping now" in cluster.log("scheduler")
        cluster.serve_args += ["--until", "3s"]
        cluster.start_scheduler()
        assert cluster.wait_exit("scheduler", timeout=60) == 0, cluster.logs()
        run = json.loads((out / "run.json").read_text())
        jobs = pl.read_csv(out / "jobs.csv")
        assert run["end_s"] == 3.0 and run["stop_reason"] == "reached the time limit (3s)", run
        assert jobs["run_s"].to_list() == [pytest.approx(3.0)] and run["busy_gpu_s"] == pytest.approx(3.0), (jobs, run)
        rounds = cluster.query("SELECT k, now FROM rounds ORDER BY k")
        assert rounds[:2] == [(0, 0.0), (1, t1)] and rounds[-1][1] == 3.0, (rounds, cluster.log("scheduler"))
    finally:
        cluster.close()


@pytest.mark.parametrize("started", [False, True])
def test_a_stop_names_a_round_in_progress_only_once_the_run_began(backend, caplog, started):
    """While the scheduler waits for its agents, before round 0, no round is in progress."""
    _, live, _ = backend
    live.started = started  # (False: as while it waits for agents)
    with caplog.at_level("INFO", logger="roundhouse.scheduler"):
        live.request_stop("stopped by SIGINT")
    assert "stopped by SIGINT: stopping now" in caplog.text
    assert ("the round in progress ends here" in caplog.text) == started
