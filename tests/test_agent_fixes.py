"""The agent's parts without a scheduler: emulated nodes end every rank of a revoked attempt at
one iteration, and all answer a shutdown; a work folder is one agent's at a time and leaves
nothing the agent made behind; a lease file that is gone does not stop a revocation; `--address`
past what the protocol carries and `--nodes 1` are taken at start."""

from __future__ import annotations

import pytest

from roundhouse.agents.agent.emulated import EmulatedNodes
from roundhouse.agents.agent.gpus import Gpu
from roundhouse.agents.agent.leases import Revocations
from roundhouse.agents.agent.processes import Worker
from roundhouse.agents.agent.service import Agent
from roundhouse.agents.agent.workfolder import LOCK, make_workfolder
from roundhouse.errors import UsageError
from roundhouse.tools.cli import main
from roundhouse.tools.loopback import free_port
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity

SCHEDULER = "tcp://127.0.0.1:5555"  # (never connected to: the nodes' sends are recorded)


def _nodes(count: int) -> tuple[EmulatedNodes, list[tuple[str, str, dict]]]:
    security = ClientSecurity.choose(None, "emu", True, SCHEDULER)
    nodes = EmulatedNodes(SCHEDULER, "emu", count, [Gpu(0, "V100"), Gpu(1, "V100")], security)
    sent: list[tuple[str, str, dict]] = []
    for node in nodes.nodes:
        node.link.registered = True
        node.link.send = lambda type_, node=node, **body: sent.append((node.name, type_, body)) or True
    return nodes, sent


def _launch(nodes: EmulatedNodes, index: int, ranks: list[tuple[int, int]], started_at: float) -> None:
    node = nodes.nodes[index]
    body = {
        "job": 7,
        "attempt": 2,
        "ranks": [{"rank": r, "gpu": g} for r, g in ranks],
        "iterations": 100_000,
        "iters_per_s": 100.0,
        "checkpoint_dir": "/ck",
        "resume_iteration": 0,
    }
    nodes._launch(node, body)
    for job in node.jobs.values():
        job.started_at = started_at


def _exits(sent) -> dict[int, dict]:
    return {body["rank"]: body for _, type_, body in sent if type_ == "exited"}


def test_a_revocation_of_rank_0_ends_every_rank_on_every_emulated_node_at_one_iteration():
    nodes, sent = _nodes(2)
    # Ranks 0 and 1 on node 0, 2 and 3 on node 1, whose launch came a little later.
    _launch(nodes, 0, [(0, 0), (1, 1)], started_at=1000.0)
    _launch(nodes, 1, [(2, 0), (3, 1)], started_at=1000.5)
    nodes._revoke({"job": 7, "attempt": 2, "kill": False, "rank": 0}, now=1010.0)
    exits = _exits(sent)
    assert sorted(exits) == [0, 1, 2, 3]
    assert {e["outcome"] for e in exits.values()} == {"preempted"}
    # All at the iteration the furthest rank reached, each with that checkpoint.
    assert {e["iteration"] for e in exits.values()} == {1000}
    assert {e["checkpoint"] for e in exits.values()} == {"/ck/emulated-job-7-iteration-1000"}
    assert not any(n.jobs for n in nodes.nodes)


def test_an_emulated_kill_ends_every_rank_where_it_is_and_other_attempts_run_on():
    nodes, sent = _nodes(2)
    _launch(nodes, 0, [(0, 0)], started_at=1000.0)
    _launch(nodes, 1, [(1, 0)], started_at=1000.5)
    nodes._revoke({"job": 7, "attempt": 1, "kill": False, "rank": 0}, now=1010.0)  # another attempt
    assert not _exits(sent)
    nodes._revoke({"job": 7, "attempt": 2, "kill": True}, now=1010.0)
    exits = _exits(sent)
    assert {r: (e["outcome"], e["iteration"]) for r, e in exits.items()} == {0: ("killed", 1000), 1: ("killed", 950)}


def test_every_emulated_node_answers_when_the_scheduler_asks_one_to_shut_down():
    nodes, sent = _nodes(3)
    nodes.nodes[2].link.registered = False  # (not known to the scheduler: says nothing)
    frame = protocol.encode("shutdown", 1, reason="the run ended")
    nodes._on_frame(nodes.nodes[1], [frame])
    assert sorted(name for name, type_, _ in sent if type_ == "stopping") == ["emu-0", "emu-1"]
    assert nodes._stopping == "the scheduler asked: the run ended"
    # Asked again (the scheduler repeats itself until answered), the node answers again.
    nodes._on_frame(nodes.nodes[0], [protocol.encode("shutdown", 1, reason="the run ended")])
    assert sorted(name for name, type_, _ in sent if type_ == "stopping") == ["emu-0", "emu-0", "emu-1"]


def test_a_work_folder_is_one_live_agent_s_at_a_time(tmp_path):
    shared = tmp_path / "shared"
    first = make_workfolder(shared, "a")
    with pytest.raises(UsageError, match=f"--workdir {shared}: another agent is using this work folder"):
        make_workfolder(shared, "b")
    assert (shared / "leases").is_dir()  # the refused agent removed nothing of the first's
    first.leave(keep=False, name="a")
    assert not shared.exists()
    again = make_workfolder(shared, "b")  # free again
    again.leave(keep=True, name="b")
    assert (shared / "logs").is_dir() and not (shared / LOCK).exists()


def test_a_new_work_folder_goes_with_the_parents_the_agent_made_for_it(tmp_path, monkeypatch):
    (tmp_path / "theirs").mkdir()
    folder = make_workfolder(tmp_path / "theirs" / "x" / "y", "a")
    folder.leave(keep=False, name="a")
    assert [p.name for p in tmp_path.iterdir()] == ["theirs"] and not any((tmp_path / "theirs").iterdir())
    # As `roundhouse agent --workdir` gives it (the agent itself not connecting).
    monkeypatch.setattr(Agent, "_serve", lambda self: 0)
    args = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--fake-gpus", "1:V100"]
    assert main([*args, "--name", "a", "--workdir", str(tmp_path / "new" / "deeper")]) == 0
    assert not (tmp_path / "new").exists()


def test_a_parent_made_for_a_work_folder_stays_while_others_use_it(tmp_path):
    """Another agent's folder beside ours (or a serve's checkpoints) is never the first one's to remove."""
    first = make_workfolder(tmp_path / "shared" / "a", "a")
    second = make_workfolder(tmp_path / "shared" / "b", "b")
    (tmp_path / "shared" / "notes.txt").write_text("mine")
    first.leave(keep=False, name="a")
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == ["b", "notes.txt"]
    assert (tmp_path / "shared" / "b" / LOCK).exists() and (tmp_path / "shared" / "b" / "leases").is_dir()
    second.leave(keep=False, name="b")  # (it did not make the parent: it leaves it as it found it)
    assert [p.name for p in (tmp_path / "shared").iterdir()] == ["notes.txt"]


class _Workers:
    def __init__(self):
        self.terminated: list[Worker] = []

    def terminate(self, w: Worker, hard: bool) -> None:
        self.terminated.append(w)


def test_a_revocation_whose_lease_file_is_gone_terminates_the_worker(tmp_path):
    workers = _Workers()
    w = Worker(3, 1, 0, 0, tmp_path / "leases" / "3-1-0", tmp_path / "log")
    w.process = object()  # (running: only its lease is looked at)
    Revocations(workers, grace_s=60.0).revoke(w)  # type: ignore[arg-type]
    assert workers.terminated == [w] and w.revoked_at is not None


def _agent_fails(capsys, extra: list[str], message: str) -> None:
    args = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--name", "emu", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_an_address_longer_than_the_protocol_carries_is_refused_at_start(capsys, monkeypatch):
    monkeypatch.setattr(Agent, "run", lambda self: pytest.fail("the agent started"))
    monkeypatch.setattr(EmulatedNodes, "run", lambda self: pytest.fail("the nodes started"))
    long = "a" * 256
    message = "--address is longer than 255 characters"
    _agent_fails(capsys, ["--fake-gpus", "1:V100", "--address", long], message)
    _agent_fails(capsys, ["--fake-gpus", "1:V100", "--emulate", "--nodes", "2", "--address", long], message)
    _agent_fails(capsys, ["--fake-gpus", "1:V100", "--address", " "], "--address: empty")
    _agent_fails(capsys, ["--fake-gpus", "1:V100", "--workdir", ""], "--workdir: the folder name is empty")


def test_nodes_1_emulates_one_node_named_name_0(monkeypatch):
    started: list[list[str]] = []
    monkeypatch.setattr(Agent, "run", lambda self: pytest.fail("a plain agent started"))
    monkeypatch.setattr(EmulatedNodes, "run", lambda self: started.append([n.name for n in self.nodes]) or 0)
    args = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--name", "emu"]
    assert main([*args, "--fake-gpus", "2:V100", "--emulate", "--nodes", "1"]) == 0
    assert started == [["emu-0"]]


def test_an_agent_without_a_work_folder_makes_a_temporary_one_and_removes_it():
    folder = make_workfolder(None, "a")
    assert folder.path.name.startswith("rh-a-") and (folder.path / LOCK).exists() and (folder.path / "leases").is_dir()
    folder.leave(keep=False, name="a")
    assert not folder.path.exists()
