"""What an agent does with a launch or resize it cannot carry out, from a stand-in scheduler (a
ROUTER on loopback) to a real `roundhouse agent` process: a rank put on a GPU another rank of
the same attempt holds (it would wait for that GPU, and the holder for it in their rendezvous,
for ever), a string holding a NUL (no environment variable or path can), a launch naming no
rank. Each is refused, logged naming the field or GPU, its new ranks reported ended; a rank the
node already runs is not reported ended by a refused repeat of its launch; and the agent keeps
serving. Emulated nodes refuse the same."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zmq

from roundhouse.tools.loopback import free_port
from roundhouse.wire import protocol
from tests.conftest import REPO
from tests.test_agent_review_fixes import _emulated, _launch_body, _workers
from tests.test_wire_review_fixes import lines  # noqa: F401 (the fixture)


class StandIn:
    """A scheduler's socket on loopback, driving one real agent process (stopped by `close`)."""

    def __init__(self, folder: Path):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.sock.bind(self.address)
        self.seq = protocol.Sequence()
        self.log_path = folder / "agent.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed by close())
        args = ["agent", "--scheduler", self.address, "--insecure", "--name", "a", "--fake-gpus", "2:V100"]
        self.agent = subprocess.Popen(
            [sys.executable, "-m", "roundhouse.tools.cli", *args, "--workdir", str(folder / "work"), "--revoke-grace", "3"],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        self.identity = b""
        self.heard: list[tuple[str, dict]] = []

    def hear(self, until, timeout: float = 30.0) -> dict:
        """Take messages (acknowledging exits) until `until(type, body)`; its body."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.sock.poll(100):
                continue
            self.identity, frame = self.sock.recv_multipart()
            type_, _, body = protocol.decode(frame)
            self.heard.append((type_, body))
            if type_ == "exited":
                self.send("ack", job=body["job"], attempt=body["attempt"], rank=body["rank"])
            if until(type_, body):
                return body
        raise AssertionError(f"the agent did not say it within {timeout}s; its log:\n{self.log()}")

    def send(self, type_: str, **fields) -> None:
        self.sock.send_multipart([self.identity, protocol.encode(type_, self.seq.next(), **fields)])

    def running(self) -> list[tuple[int, int, int]]:
        """The workers the agent's next heartbeat lists."""
        self.heard.clear()
        body = self.hear(lambda t, b: t == "heartbeat")
        return sorted((w["job"], w["attempt"], w["rank"]) for w in body["running"])

    def exits(self, job: int) -> list[dict]:
        return [b for t, b in self.heard if t == "exited" and b["job"] == job]

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def logged(self, text: str, timeout: float = 30.0) -> bool:
        """Whether the agent's log says `text` within `timeout` (it writes as it handles each
        message: a heartbeat heard may have left before the message sent just ahead of it)."""
        deadline = time.time() + timeout
        while text not in self.log():
            if time.time() > deadline:
                return False
            time.sleep(0.05)
        return True

    def close(self) -> None:
        if self.agent.poll() is None:
            self.agent.terminate()
            try:
                self.agent.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait()
        self._log.close()
        self.sock.close()
        self.ctx.term()


def _sleeping(job: int, ranks, world_size: int, **spec) -> dict:
    return _launch_body(job, ranks, world_size=world_size, command=["sleep", "60"], **spec)


@pytest.mark.live
def test_an_agent_refuses_ranks_that_would_wait_for_a_gpu_of_their_own_attempt(tmp_path):
    """Before: the rank waited for the GPU for ever (listed in every heartbeat as running), and
    the holder waited for it in the rendezvous, until the job was killed."""
    s = StandIn(tmp_path)
    try:
        s.hear(lambda t, b: t == "register")
        s.send("welcome", node_index=0, heartbeat_s=0.2, session="s")
        s.send("launch", **_sleeping(1, [(0, 0)], 2))
        s.hear(lambda t, b: t == "started" and b["job"] == 1)

        # A second launch of the attempt puts rank 1 on rank 0's GPU.
        s.send("launch", **_sleeping(1, [(1, 0)], 2))
        exit1 = s.hear(lambda t, b: t == "exited" and b["job"] == 1)
        assert (exit1["rank"], exit1["outcome"], exit1["permanent"]) == (1, "failed", True)
        assert exit1["reason"] == "GPU 0 is rank 0's, of the same attempt, which would wait for rank 1"
        # A repeat of the launch naming rank 0 (running) and rank 1 on its GPU: refused, and
        # neither is reported ended again: rank 0 runs (before: reported failed while it ran),
        # rank 1's exit was reported already.
        s.send("launch", **_sleeping(1, [(0, 0), (1, 0)], 2))
        assert s.running() == [(1, 1, 0)]
        assert s.exits(1) == []
        assert s.logged("refused launch of job 1 attempt 1: GPU 0 is given to two ranks"), s.log()

        # A resize that starts rank 1 of job 2 on the GPU its rank 0 keeps.
        s.send("launch", **_sleeping(2, [(0, 1)], 1))
        s.hear(lambda t, b: t == "started" and b["job"] == 2)
        s.send(
            "resize",
            job=2,
            attempt=1,
            generation=1,
            world_size=2,
            batch_size=20,
            master_addr="127.0.0.1",
            master_port=29998,
            ranks=[{"rank": 1, "gpu": 1}],
        )
        exit2 = s.hear(lambda t, b: t == "exited" and b["job"] == 2)
        assert (exit2["rank"], exit2["outcome"]) == (1, "preempted")
        assert exit2["reason"] == "resize refused: GPU 1 is rank 0's, of the same attempt, which would wait for rank 1"
        assert s.running() == [(1, 1, 0), (2, 1, 0)]  # nothing left waiting for a GPU
        assert s.logged("refused resize of job 2 attempt 1: GPU 1 is rank 0's"), s.log()

        # The agent serves on: the jobs are killed and end as usual.
        s.send("revoke", job=1, attempt=1, kill=True)
        s.send("revoke", job=2, attempt=1, kill=True)
        s.hear(lambda t, b: t == "exited" and b["job"] == 2 and b["rank"] == 0)
        assert s.agent.poll() is None
    finally:
        s.close()


@pytest.mark.live
def test_an_agent_refuses_a_launch_holding_a_nul_or_naming_no_rank_naming_the_field(tmp_path):
    """Before: a workload's worker forked, failed setting its environment (a traceback in its
    log) and was reported as an ordinary crash, retried by the scheduler; a launch naming no
    rank was taken in silence."""
    s = StandIn(tmp_path)
    try:
        s.hear(lambda t, b: t == "register")
        s.send("welcome", node_index=0, heartbeat_s=0.2, session="s")
        lm = dict(workload="roundhouse.agents.workloads.lm", model="LM")
        s.send("launch", **_launch_body(3, [(0, 0)], world_size=1, checkpoint_dir="/tmp/a\x00b", **lm))
        s.send("launch", **_launch_body(4, [(0, 1)], world_size=1, command=["sleep", "1\x00"]))
        s.send("launch", **_launch_body(5, [], world_size=1, command=["sleep", "1"]))
        s.hear(lambda t, b: t == "exited" and b["job"] == 4)
        [three], [four] = s.exits(3), s.exits(4)
        assert (three["outcome"], three["permanent"]) == ("failed", True)
        assert three["reason"].startswith("checkpoint_dir holds a NUL character")
        assert (four["outcome"], four["permanent"]) == ("failed", True) and four["reason"].startswith("command[1] holds a NUL")
        s.hear(lambda t, b: t == "heartbeat")
        assert s.logged("refused launch of job 5 attempt 1: it names no rank"), s.log()
        assert not [b for t, b in s.heard if t == "started"]
        assert s.running() == [] and s.agent.poll() is None
    finally:
        s.close()


def test_a_refused_resize_of_a_queued_job_onto_its_own_gpu_changes_nothing(tmp_path):
    """A job whose workers all wait for their GPUs is resized in its new shape; a new rank on a
    GPU of a rank it keeps is refused all the same."""
    workers, exits, _ = _workers(tmp_path)
    workers._gpu_busy[0] = (99, 1, 0)  # (GPU 0 is still another job's: rank 0 of job 7 waits)
    workers.launch(_launch_body(7, [(0, 0)], world_size=1, command=["true"]), stopping=False, known=lambda key: False)
    resize = dict(job=7, attempt=1, generation=1, world_size=2, batch_size=20, master_addr="127.0.0.1", master_port=1)
    assert not workers.resize({**resize, "ranks": [{"rank": 1, "gpu": 0}]}, stopping=False)
    assert [(e["rank"], e["outcome"]) for e in exits.reports] == [(1, "preempted")]
    assert [w.key for w in workers.waiting] == [(7, 1, 0)] and workers.waiting[0].spec["world_size"] == 1


@pytest.mark.parametrize(
    "second, reason",
    [
        ([(1, 0)], "GPU 0 is rank 0's, of the same attempt, which would wait for rank 1"),
    ],
)
def test_emulated_nodes_refuse_a_rank_on_a_gpu_of_its_own_attempt_as_a_real_agent_does(tmp_path, second, reason):
    nodes, sent = _emulated()
    node = nodes.nodes[0]
    nodes._launch(node, _launch_body(7, [(0, 0)], world_size=2, iters_per_s=10.0))
    nodes._launch(node, _launch_body(7, second, world_size=2, iters_per_s=10.0))
    exits = [b for _, t, b in sent if t == "exited"]
    assert [(e["rank"], e["reason"]) for e in exits] == [(1, reason)]
    assert sorted(node.jobs) == [(7, 1, 0)]
    # A resize onto rank 0's GPU: refused the same way.
    resize = dict(job=7, attempt=1, generation=1, world_size=2, batch_size=20, master_addr="127.0.0.1", master_port=1)
    nodes._resize(node, {**resize, "ranks": [{"rank": 1, "gpu": 0}]})
    assert [b["reason"] for _, t, b in sent if t == "exited"][-1] == f"resize refused: {reason}"
    assert sorted(node.jobs) == [(7, 1, 0)]
    workers, real, _ = _workers(tmp_path)
    workers.launch(_launch_body(7, [(0, 0)], world_size=2, command=["sleep", "30"]), stopping=False, known=lambda key: False)
    try:
        workers.launch(_launch_body(7, second, world_size=2, command=["sleep", "30"]), stopping=False, known=lambda key: False)
        assert [(e["rank"], e["reason"]) for e in real.reports] == [(1, reason)]
    finally:
        for w in workers.all():
            workers.terminate(w, hard=True)
        workers.reap(wait=True)


def test_emulated_nodes_log_a_revoke_of_an_attempt_they_do_not_run(lines):  # noqa: F811
    said = lines("roundhouse.agent")
    nodes, _ = _emulated()
    nodes._revoke({"job": 41, "attempt": 2, "kill": False})
    assert said.having("dropped the scheduler's revoke of job 41 attempt 2: not running here (any more)")


@pytest.mark.live
def test_an_agent_does_not_run_again_a_worker_that_ran_and_exited(tmp_path):
    """Before: a launch of an attempt whose worker had exited (its exit acknowledged) started it
    again: a worker of an attempt the scheduler had ended, holding its GPU behind its back."""
    s = StandIn(tmp_path)
    try:
        s.hear(lambda t, b: t == "register")
        s.send("welcome", node_index=0, heartbeat_s=0.2, session="s")
        s.send("launch", **_launch_body(1, [(0, 0)], world_size=1, command=["true"]))
        s.hear(lambda t, b: t == "exited" and b["job"] == 1)  # (acknowledged)
        s.send("launch", **_launch_body(1, [(0, 0)], world_size=1, command=["sleep", "60"]))
        deadline = time.time() + 30
        while "ignored a launch of job 1 attempt 1 rank 0: it ran here already and exited" not in s.log():
            assert time.time() < deadline, s.log()
            s.hear(lambda t, b: t == "heartbeat")
        assert s.running() == []
        assert [t for t, b in s.heard if t == "started"] == [] and s.agent.poll() is None
        assert s.log().count("started job 1 attempt 1 rank 0") == 1
    finally:
        s.close()


def test_emulated_nodes_do_not_run_again_a_rank_that_ran_and_exited(lines):  # noqa: F811
    said = lines("roundhouse.agent")
    nodes, sent = _emulated()
    node = nodes.nodes[0]
    body = _launch_body(7, [(0, 0)], world_size=1, iters_per_s=10.0)
    nodes._launch(node, body)
    nodes._revoke({"job": 7, "attempt": 1, "kill": True})
    node.exits.acknowledged((7, 1, 0))
    nodes._launch(node, body)
    assert not node.jobs and [t for _, t, _ in sent].count("started") == 1
    assert said.having("ignored a launch of job 7 attempt 1 rank 0: it ran here already and exited")
