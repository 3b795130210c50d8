"""Agents as a review found them: an agent stopped by a signal tells the scheduler it is leaving
(its node goes offline at once, and no job is launched there again); a launch that names nothing
to run, or whose worker cannot be started, ends failed rather than leaving a phantom worker;
emulated nodes refuse the launches a real agent refuses, and a refused launch ends every rank it
names; key folders and secret keys are their owner's only from the start; a registration with
GPU indices that are not 0..N-1 is logged with the node's name; `profile --gpu-type` takes only
a name an agent can register.

The agent's pieces are driven directly; the scheduler's side with stand-in agents on real
ZeroMQ sockets (tests/test_live_backend.py), and one test runs a real scheduler and agents."""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import zmq
import zmq.auth

from roundhouse.agents.agent.emulated import EmulatedNodes
from roundhouse.agents.agent.gpus import Gpu
from roundhouse.agents.agent.processes import Workers
from roundhouse.agents.agent.service import Agent
from roundhouse.agents.submitter import Submitter
from roundhouse.tools import keys_cmd
from roundhouse.tools.keys_cmd import make_keys
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity
from tests.conftest import fails
from tests.livecluster import LiveCluster
from tests.test_live_backend import FakeAgent, handled, live, pump, serve_until  # noqa: F401 (the fixture)

SCHEDULER = "tcp://127.0.0.1:5555"  # (never connected to: sends are recorded)


# --- the agent's pieces ----------------------------------------------------------------------


class _Exits:
    """The exits a `Workers` reports, in order."""

    def __init__(self):
        self.reports: list[dict] = []

    def __call__(self, job, attempt, rank, outcome, iteration, start, checkpoint, checkpoint_iteration, code, reason, permanent):
        self.reports.append(dict(job=job, attempt=attempt, rank=rank, outcome=outcome, reason=reason, permanent=permanent))


def _workers(tmp_path: Path) -> tuple[Workers, _Exits, list]:
    for part in ("leases", "logs", "jobs"):
        (tmp_path / part).mkdir(exist_ok=True)
    exits, sent = _Exits(), []
    reports = SimpleNamespace(endpoint=f"ipc://{tmp_path}/reports.sock", drain=lambda: None, wait=lambda ms: None)
    workers = Workers({0, 1}, reports, lambda type_, **body: sent.append((type_, body)), exits, {"launched": 0})
    workers.workdir = tmp_path
    return workers, exits, sent


def _launch_body(job: int, ranks: list[tuple[int, int]], world_size: int = 2, **spec) -> dict:
    body = dict(
        job=job,
        attempt=1,
        ranks=[{"rank": r, "gpu": g} for r, g in ranks],
        world_size=world_size,
        master_addr="127.0.0.1",
        master_port=29999,
        iterations=100,
        batch_size=10,
        checkpoint_dir="/nonexistent",
        checkpoint_every_s=60.0,
    )
    return body | spec


@pytest.mark.parametrize(
    "spec, reason",
    [
        (dict(command=[]), "its command names no program"),
        (dict(command=[""]), "its command names no program"),
        (dict(), "it names neither a workload nor a command"),
    ],
)
def test_a_launch_with_nothing_to_run_ends_every_rank_failed_and_leaves_no_worker(tmp_path, spec, reason):
    workers, exits, sent = _workers(tmp_path)
    workers.launch(_launch_body(7, [(0, 0), (1, 1)], **spec), stopping=False, known=lambda key: False)
    assert [(e["rank"], e["outcome"], e["permanent"]) for e in exits.reports] == [(0, "failed", True), (1, "failed", True)]
    assert {e["reason"] for e in exits.reports} == {reason}
    # Before: a worker with no process stayed listed as running, and no exit was ever sent.
    assert len(workers) == 0 and not workers.waiting and workers.running() == []
    assert not [t for t, _ in sent if t == "started"]


def test_an_empty_command_is_a_bad_launch_message():
    frame = json.dumps(
        {"v": protocol.VERSION, "type": "launch", "seq": 1, **_launch_body(7, [(0, 0)], world_size=1, command=[])}
    ).encode()
    with pytest.raises(protocol.ProtocolError, match="launch: command must not be empty"):
        protocol.decode(frame)
    with pytest.raises(protocol.ProtocolError, match="command must not be empty"):
        protocol.encode("launch", 1, **_launch_body(7, [(0, 0)], world_size=1, command=[]))


def test_a_worker_whose_folder_cannot_be_made_ends_failed_and_is_not_left_behind(tmp_path):
    workers, exits, _ = _workers(tmp_path)
    (tmp_path / "jobs").rmdir()
    (tmp_path / "jobs").write_text("not a folder")  # its job folder cannot be made
    workers.launch(_launch_body(7, [(0, 0)], world_size=1, command=["true"]), stopping=False, known=lambda key: False)
    [report] = exits.reports
    assert (report["outcome"], report["permanent"]) == ("failed", True) and "cannot start ['true']" in report["reason"]
    assert len(workers) == 0 and workers.running() == []


def test_a_worker_that_fails_to_start_for_any_reason_ends_failed(tmp_path, monkeypatch):
    workers, exits, _ = _workers(tmp_path)

    def broken(*args):
        raise RuntimeError("no environment today")

    monkeypatch.setattr(workers, "_environment", broken)
    workers.launch(_launch_body(7, [(0, 0)], world_size=1, command=["true"]), stopping=False, known=lambda key: False)
    [report] = exits.reports
    assert report["outcome"] == "failed" and "no environment today" in report["reason"]
    assert len(workers) == 0 and not any((tmp_path / "leases").iterdir())  # its lease file went with it


def test_a_launch_onto_a_gpu_the_node_lacks_ends_every_rank_it_names(tmp_path):
    workers, exits, _ = _workers(tmp_path)
    workers.launch(_launch_body(7, [(0, 5), (1, 1)], command=["true"]), stopping=False, known=lambda key: False)
    assert [(e["rank"], e["outcome"]) for e in exits.reports] == [(0, "failed"), (1, "failed")]  # before: rank 0 only
    assert {e["reason"] for e in exits.reports} == {"this node has no GPU 5"}
    assert len(workers) == 0


def _emulated() -> tuple[EmulatedNodes, list[tuple[str, str, dict]]]:
    security = ClientSecurity.choose(None, "emu", True, SCHEDULER)
    nodes = EmulatedNodes(SCHEDULER, "emu", 1, [Gpu(0, "V100"), Gpu(1, "V100")], security)
    sent: list[tuple[str, str, dict]] = []
    for node in nodes.nodes:
        node.link.registered = True
        node.link.send = lambda type_, node=node, **body: sent.append((node.name, type_, body)) or True
    return nodes, sent


@pytest.mark.parametrize(
    "ranks, world_size, spec, reason",
    [
        ([(0, 0), (0, 1)], 2, {}, "rank 0 is given twice"),
        ([(5, 1)], 2, {}, "rank 5 is not below the world size 2"),
        ([(0, 0), (1, 0)], 2, {}, "GPU 0 is given to two ranks"),
        ([(0, 0), (1, 7)], 2, {}, "this node has no GPU 7"),
        ([(0, 0)], 1, dict(resume="/ck/x", resume_iteration=500), "it resumes at iteration 500, past its 100 iterations"),
    ],
)
def test_emulated_nodes_refuse_what_a_real_agent_refuses_ending_every_rank(tmp_path, ranks, world_size, spec, reason):
    nodes, sent = _emulated()
    body = _launch_body(7, ranks, world_size=world_size, iters_per_s=10.0, **spec)
    nodes._launch(nodes.nodes[0], body)
    exits = [b for _, t, b in sent if t == "exited"]
    assert sorted(e["rank"] for e in exits) == sorted({r for r, _ in ranks})
    assert {(e["outcome"], e["permanent"], e["reason"]) for e in exits} == {("failed", True, reason)}
    assert not nodes.nodes[0].jobs and not [t for _, t, _ in sent if t == "started"]
    # A real agent refuses it the same way.
    workers, real, _ = _workers(tmp_path)
    workers.launch({**body, "command": ["true"]}, stopping=False, known=lambda key: False)
    assert {(e["rank"], e["reason"]) for e in real.reports} == {(e["rank"], reason) for e in exits}


def _agent() -> tuple[Agent, list[str]]:
    agent = Agent(SCHEDULER, "a", [Gpu(0, "V100")], ClientSecurity.choose(None, "a", True, SCHEDULER))
    sent: list[str] = []
    agent.link.registered = True
    agent.link.send = lambda type_, **body: sent.append(type_) or True
    return agent, sent


def test_an_agent_stopped_by_a_signal_says_it_is_stopping_and_one_asked_answers_once():
    agent, sent = _agent()
    agent._on_signal(signal.SIGTERM, None)
    agent._say_leaving()
    assert sent == ["stopping"]  # before: nothing; the scheduler waited for the heartbeat timeout
    agent, sent = _agent()
    agent._on_shutdown({"reason": "the run ended"})
    agent._say_leaving()
    assert sent == ["stopping"]  # the answer only


def test_emulated_nodes_stopped_by_a_signal_each_say_they_are_stopping(monkeypatch):
    nodes, sent = _emulated()
    monkeypatch.setattr("roundhouse.agents.agent.emulated.check_node_budget", lambda count: None)

    def open_and_stop(context, real=nodes.nodes[0].link.open):
        got = real(context)
        nodes.stop("signal SIGTERM")  # as if the signal came at once
        return got

    monkeypatch.setattr(nodes.nodes[0].link, "open", open_and_stop)
    assert nodes.run() == 0
    assert [t for _, t, _ in sent if t != "heartbeat"] == ["stopping"] and sent[-1][1] == "stopping"  # the last word


# --- keys and profile ----------------------------------------------------------------------------


def test_key_folders_and_secret_keys_are_their_owner_s_only_from_the_start(tmp_path, monkeypatch):
    seen: dict[str, int] = {}
    create = zmq.auth.create_certificates

    def watched(folder, name, metadata=None):
        got = create(folder, name, metadata=metadata)
        seen[name] = stat.S_IMODE(os.stat(Path(folder) / f"{name}.key_secret").st_mode)  # as written, before any chmod
        return got

    monkeypatch.setattr(keys_cmd.zmq.auth, "create_certificates", watched)
    mask = os.umask(0o022)
    try:
        make_keys(tmp_path / "keys", ["node1"], ["alice"])
    finally:
        os.umask(mask)
    assert seen == {"scheduler": 0o600, "node1": 0o600, "alice": 0o600}
    folder = tmp_path / "keys"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE((folder / "authorized").stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "node1.key").stat().st_mode) == 0o644  # a public key stays readable
    assert stat.S_IMODE((folder / "node1.key_secret").stat().st_mode) == 0o600


def test_profile_refuses_a_gpu_type_no_agent_can_register(capsys, tmp_path):
    err = fails(capsys, "profile", "--gpu-type", "V 100", "--out", tmp_path / "p.csv")
    assert "--gpu-type 'V 100': a GPU type must be a plain name" in err
    assert not (tmp_path / "p.csv").exists()


# --- the scheduler's side -----------------------------------------------------------------------


@pytest.mark.live
def test_a_registration_with_gpus_not_0_to_n_is_refused_and_logged_with_the_node(live, caplog):  # noqa: F811
    world, backend, agents, _ = live
    ctx = zmq.Context()
    odd = FakeAgent(ctx, backend.bind, "odd")
    try:
        with caplog.at_level(logging.WARNING, logger="roundhouse.scheduler"):
            odd.send(
                "register",
                node="odd",
                address="127.0.0.1",
                session="odd",
                gpus=[{"index": 0, "type": "V100"}, {"index": 0, "type": "V100"}],
                running=[],
            )
            pump(backend)
        [(kind, body)] = odd.receive(1)
        assert kind == "error" and "node odd registers GPUs 0, 0" in body["reason"]
        assert "refused registration: node odd registers GPUs 0, 0" in caplog.text
    finally:
        odd.sock.close()
        ctx.term()


@pytest.mark.live
def test_an_agent_leaving_unasked_takes_its_node_offline_at_once(live):  # noqa: F811
    world, backend, (a, b), _ = live
    nodes = backend.nodes
    assert nodes.count_online() == 2
    said = handled(backend)
    b.send("stopping")  # after its exits, as an agent stopped by a signal says it
    serve_until(backend, said, "b's stopping")
    # Before: still online, and launched onto, until the heartbeat timeout (60 s here).
    assert not nodes.by_name["b"].online and nodes.count_online() == 1
    assert not nodes.online[2:].any() and nodes.online[:2].all()
    assert not nodes.to_slot(1, "revoke", job=1, attempt=1, kill=True)  # nothing more is sent there
    assert "b" in backend.news.lost
    # One asked to shut down only answers: it stays until the run ends.
    nodes.ask_to_stop("the run ended", set())
    said = handled(backend)
    a.send("stopping")
    serve_until(backend, said, "a's stopping")
    assert nodes.by_name["a"].online and nodes.by_name["a"].stopping
    # An agent back under the leaving node's name registers as usual.
    b.register()
    serve_until(backend, lambda: nodes.by_name["b"].online, "b to register again")
    assert nodes.by_name["b"].online and not nodes.by_name["b"].stopping


GRAPH = """
round = 1s;
cluster = "2x2:V100";
src :: LiveSource;
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


@pytest.mark.live
def test_a_job_on_an_agent_stopped_by_sigterm_runs_again_on_the_other_node_at_once(tmp_path):
    """A real scheduler and two agents, a heartbeat timeout of a minute: the job's agent gets
    SIGTERM; its node is offline within seconds and the job's next attempt starts on the other."""
    cluster = LiveCluster(tmp_path, GRAPH, timeout="60s")
    try:
        cluster.start_scheduler()
        for name in ("a", "b"):
            cluster.start_agent(name, "2:V100", extra=("--insecure", "--revoke-grace", "1s"), emulate=False)
        with Submitter(cluster.address, ClientSecurity(None), timeout_s=30) as client:
            cluster.wait_for(lambda: client.status()["nodes_online"] == 2, 30, "both agents")
            client.submit([{"command": "sleep 600", "duration_s": 600, "gpus": 1}])
            cluster.wait_for(lambda: "started job 0" in cluster.log("a") + cluster.log("b"), 30, "job 0 to start")
            victim, other = ("a", "b") if "started job 0" in cluster.log("a") else ("b", "a")
            cluster.kill(victim, signal.SIGTERM)
            stopped = time.time()
            cluster.wait_for(lambda: client.status()["nodes_online"] == 1, 15, "the stopped agent's node to go offline")
            assert time.time() - stopped < 15  # (the heartbeat timeout is 60 s)
            cluster.wait_for(lambda: "started job 0 attempt 2" in cluster.log(other), 30, "job 0 on the other node")
        scheduler = cluster.log("scheduler")
        assert f"node {victim} lost (its agent stopped)" in scheduler
        assert "could not send launch" not in scheduler
    finally:
        cluster.close()
