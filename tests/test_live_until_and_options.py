"""Live runs at their time limit, and the live commands' options: the round at `--until` (the
last: the run ends after its tick) launches nothing, in a new run and in a resumed one already
past its limit, and a rerun with a later limit still starts those jobs; `agent --fake-gpus`
with no GPUs and `serve --wait-for-agents` past its bound are refused saying so; the reports
agents send before they register again after a scheduler restart are logged at info, not as
warnings, while an unknown peer's stay warnings."""

from __future__ import annotations

import argparse
import logging
import math
import re
import time

import pytest
import zmq

from roundhouse.runtime.backends.live import LiveBackend, LiveOptions
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.world import World
from roundhouse.tools.cli import main
from roundhouse.traces.profiles import ProfileTable
from roundhouse.wire.security import ServerSecurity
from tests.livecluster import TEST_PROFILE, LiveCluster, free_port
from tests.test_live_backend import FakeAgent, serve_until

GRAPH = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""
# Job 1 arrives at the time limit, 8 s, a round boundary, with a GPU free for it. (Job 0 must
# have trained and checkpointed before then: a loaded machine takes seconds to start its worker.)
LIMIT_S = 8
JOBS = f"job_id,arrival_s,gpus,model,iterations,batch_size\n0,0,1,LM,100000000,10\n1,{LIMIT_S},1,LM,100000000,10\n"


def _launched(log: str) -> list[str]:
    return re.findall(r"launch job (\d+) attempt (\d+)", log)


@pytest.mark.live
def test_the_round_at_the_time_limit_launches_nothing_new_or_resumed(tmp_path):
    cluster = LiveCluster(tmp_path, GRAPH, {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS}, serve_args=("--until", f"{LIMIT_S}s"))
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        assert cluster.wait_exit("scheduler", 60) == 0, cluster.logs()
        first = cluster.log("scheduler")
        # Job 0 ran from round 0; job 1, placed in the round at the limit, was never sent.
        assert _launched(first) == [("0", "1")], cluster.logs()
        assert "at the time limit: 1 launch(es) not sent (job(s) 1)" in first, first
        attempts = cluster.attempts()
        assert attempts[1] == [(1, 0, "preempted", 0, None, None)], attempts
        assert attempts[0][0][2] == "preempted" and attempts[0][0][4] > 0, attempts  # (checkpointed at the limit)
        checkpointed = attempts[0][0][4]

        # Resumed with the same limit, already past it: the round after the takeover launches nothing.
        started = time.monotonic()
        cluster.start_scheduler()
        assert cluster.wait_exit("scheduler", 60) == 0, cluster.logs()
        start_up_s = time.monotonic() - started  # (a run that ends at once: what starting takes now)
        second = cluster.log("scheduler")[len(first) :]
        assert "resuming the journal's run" in second and _launched(second) == [], second
        assert "launch(es) not sent" in second, second

        # Resumed with a later limit (the run's clock is the wall clock since its first start):
        # both jobs start, job 0 from its checkpoint. (The limit counts from now, before the
        # scheduler has started: a loaded machine takes seconds to start it, as it took the last.)
        [(epoch,)] = cluster.query("SELECT value FROM meta WHERE key = 'epoch'")
        later = math.ceil(time.time() - float(epoch) + start_up_s) + 4
        before = len(cluster.log("scheduler"))
        cluster.serve_args[cluster.serve_args.index("--until") + 1] = f"{later}s"
        cluster.start_scheduler()
        assert cluster.wait_exit("scheduler", 60) == 0, cluster.logs()
        third = cluster.log("scheduler")[before:]
        assert sorted(job for job, _ in _launched(third)) == ["0", "1"], third
        attempts = cluster.attempts()
        resumed = [a for a in attempts[0] if a[0] > 2]
        assert resumed and resumed[0][1] == checkpointed, attempts
        assert any(a[0] > 2 and a[3] is not None for a in attempts[1]), attempts  # (it ran this time)
        agent = cluster.log("node-a")
        assert "revoked before it started" not in agent, agent
        # The agent started job 1 once, in the third run, and job 0 twice (round 0, and resumed).
        assert len(re.findall(r"started job 1 attempt", agent)) == 1, agent
        assert len(re.findall(r"started job 0 attempt", agent)) == 2, agent
    finally:
        cluster.close()


@pytest.mark.parametrize("nodes", [(), ("--nodes", "2", "--emulate")])
@pytest.mark.parametrize("count", ["0", "00", "-1"])
def test_agent_with_no_fake_gpus_is_told_the_count_must_be_1_or_more(capsys, nodes, count):
    args = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--fake-gpus", f"{count}:V100"]
    assert main([*args, *nodes]) == 2
    err = capsys.readouterr().err
    assert f"--fake-gpus {count}:V100" in err and "1 or more" in err and "write COUNT:TYPE" not in err, err
    assert "Traceback" not in err


def test_agent_with_a_malformed_fake_gpus_is_still_told_the_form(capsys):
    args = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--fake-gpus", "x:V100"]
    assert main(args) == 2
    assert "write COUNT:TYPE" in capsys.readouterr().err


def _serve(tmp_path, *extra: str) -> list[str]:
    (tmp_path / "g.sched").write_text(GRAPH)
    (tmp_path / "profile.csv").write_text(TEST_PROFILE)
    (tmp_path / "jobs.csv").write_text(JOBS)
    return ["serve", str(tmp_path / "g.sched"), "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure", *extra]


@pytest.mark.parametrize("wait", ["inf", "Infinity", "1e30", "2d", "86401s"])
def test_serve_bounds_the_wait_for_agents_as_its_other_waits(tmp_path, monkeypatch, capsys, wait):
    monkeypatch.chdir(tmp_path)
    assert main(_serve(tmp_path, "--wait-for-agents", wait)) == 2
    err = capsys.readouterr().err
    assert f"--wait-for-agents {wait}: must be at most 1d" in err and "Traceback" not in err, err
    assert not (tmp_path / "checkpoints").exists()  # (refused before anything was made)


def test_serve_takes_a_wait_for_agents_within_its_bound(tmp_path):
    from roundhouse.tools.live_run import live_options
    from roundhouse.tools.serve_cmd import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    for text, expected in (("0s", 0.0), ("1d", 86400.0), ("90s", 90.0)):
        args = parser.parse_args(_serve(tmp_path, "--wait-for-agents", text))
        assert live_options(args).wait_for_agents_s == expected


class _Frame:
    """What ZeroMQ gives a CURVE-authenticated message: its key's name (User-Id)."""

    def __init__(self, key: str | None):
        self.key = key

    def get(self, name):
        return self.key if name == "User-Id" else None


@pytest.fixture
def scheduler(tmp_path):
    """Makes live backends on a 1x2:V100 cluster, on one journal, each started (and all closed at the end)."""
    made: list[tuple[LiveBackend, Journal]] = []

    def make(heartbeat_timeout_s: float) -> LiveBackend:
        for backend, journal in made:  # (one scheduler at a time on a journal: the earlier one stops)
            backend.close()
            journal.close()
        made.clear()
        world = World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100")
        options = LiveOptions(
            heartbeat_s=0.05,
            heartbeat_timeout_s=heartbeat_timeout_s,
            wait_for_agents_s=0.0,
            checkpoint_dir=str(tmp_path / "ck"),
            ports=(40000, 40100),
        )
        meta = {"graph_digest": "x", "cluster": "c", "round_s": 60.0}
        journal = Journal(tmp_path / "j.sqlite")
        backend = LiveBackend(world, 60.0, f"tcp://127.0.0.1:{free_port()}", ServerSecurity(None), journal, options, meta)
        made.append((backend, journal))
        backend.start()
        return backend

    yield make
    for backend, journal in made:
        backend.close()
        journal.close()


METRICS = {"job": 0, "attempt": 1, "rank": 0, "iteration": 5, "values": {}}
EXITED = {
    "job": 0,
    "attempt": 1,
    "rank": 0,
    "outcome": "preempted",
    "iteration": 5,
    "start_iteration": 0,
    "permanent": False,
    "reason": "",
    "checkpoint": None,
    "checkpoint_iteration": None,
}


def _dropped(backend: LiveBackend, frame: _Frame | None, caplog) -> list[int]:
    """The levels of the lines logged about an agent's reports from a peer not registered."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="roundhouse.scheduler"):
        backend.reports.on_metrics(b"peer", 1, METRICS, frame)
        backend.reports.on_started(b"peer", 2, {**METRICS, "pid": 1}, frame)
        backend.reports.on_exited(b"peer", 3, EXITED, frame)
        backend.nodes.on_heartbeat(b"peer", 4, {"running": []}, frame)
        backend.nodes.on_stopping(b"peer", 5, {}, frame)
    lines = [r for r in caplog.records if "not a registered agent" in r.getMessage()]
    assert len(lines) == 5, [r.getMessage() for r in caplog.records]
    return sorted({r.levelno for r in lines})


@pytest.mark.live
def test_reports_of_unregistered_peers_are_info_just_after_start_and_warnings_later(scheduler, caplog):
    backend = scheduler(heartbeat_timeout_s=0.5)
    assert _dropped(backend, None, caplog) == [logging.INFO]  # (agents of the last run have not registered again yet)
    assert "expected after a restart" in caplog.text
    time.sleep(0.6)
    assert _dropped(backend, None, caplog) == [logging.WARNING]
    assert "expected" not in caplog.text


@pytest.mark.live
def test_after_a_restart_a_known_agent_s_reports_are_info_an_unknown_one_s_warnings(scheduler, caplog):
    backend = scheduler(heartbeat_timeout_s=60.0)
    ctx = zmq.Context()
    agent = FakeAgent(ctx, backend.bind, "a")
    try:
        agent.register()
        serve_until(backend, lambda: backend.nodes.slots[0] is not None, "a to register")
    finally:
        agent.sock.close()
        ctx.term()
    backend = scheduler(heartbeat_timeout_s=0.2)  # (restarted: the journal's run resumes, knowing node a)
    time.sleep(0.3)
    assert _dropped(backend, _Frame("agent:a"), caplog) == [logging.INFO]
    assert _dropped(backend, _Frame("agent:b"), caplog) == [logging.WARNING]
    assert _dropped(backend, _Frame("submitter:a"), caplog) == [logging.WARNING]  # (not an agent's key)
    assert _dropped(backend, None, caplog) == [logging.WARNING]  # (without keys, a peer is known only by its connection)
