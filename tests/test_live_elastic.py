"""Elastic jobs for real: torch worker processes (gloo, CPU) grow and shrink while training,
and a worker lost during a resize leads to a restart from a checkpoint with nothing lost."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roundhouse.agents import jobenv
from roundhouse.agents.agent.processes import spawn_worker
from roundhouse.agents.client import Lease
from roundhouse.agents.elastic import write_request
from roundhouse.wire import protocol
from tests.livecluster import stop

pytestmark = [pytest.mark.live, pytest.mark.slow]
HERE = Path(__file__).resolve().parent
ITERATIONS = 160


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Elastic:
    """One job's workers, started and resized the way the agent does it."""

    def __init__(
        self,
        tmp: Path,
        attempt: int = 1,
        resume: str | None = None,
        resume_iteration: int | None = None,
        dist_timeout_s: float = 8.0,
        pace: float = 25.0,
    ):
        self.tmp, self.attempt, self.dist_timeout_s, self.pace = tmp, attempt, dist_timeout_s, pace
        self.record = tmp / "steps.jsonl"
        self.procs: dict[int, object] = {}
        self.resume, self.resume_iteration = resume, resume_iteration

    def start(self, rank: int, world: int, port: int, batch: int, join: int = 0):
        lease = self.tmp / f"lease-{self.attempt}-{rank}"
        Lease.create(lease)
        env = dict(os.environ)
        env.update(
            jobenv.variables(
                job_id=1,
                attempt=self.attempt,
                rank=rank,
                world_size=world,
                master_addr="127.0.0.1",
                master_port=port,
                lease=lease,
                iterations=ITERATIONS,
                batch_size=batch,
                seed=2,
                threads=1,
                checkpoint_dir=self.tmp / "ckpt",
                pace_iters_per_s=self.pace,
                dist_timeout_s=self.dist_timeout_s,
                join_generation=join or None,
                resume=self.resume if not join else None,
                resume_iteration=self.resume_iteration if not join else None,
            )
        )
        env.update(ELASTIC_RECORD=str(self.record), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        argv = [sys.executable, str(HERE / "elastic_worker.py")]
        self.procs[rank] = spawn_worker(argv, env, self.tmp, self.tmp / f"log-{self.attempt}-{rank}.txt")
        return lease

    def rows(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def wait_for(self, rank: int, iteration: int, timeout: float = 60.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(r["rank"] == rank and r["iteration"] >= iteration for r in self.rows()):
                return
            assert all(p.poll() is None for p in self.procs.values()), self.logs()
            time.sleep(0.05)
        raise AssertionError(f"rank {rank} did not reach iteration {iteration}\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.tmp.glob("log-*.txt")))

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_job_grows_from_one_to_two_workers_and_shrinks_back_while_training(tmp_path):
    job = Elastic(tmp_path)
    try:
        lease0 = job.start(0, 1, _port(), 16)
        job.wait_for(0, 40)
        grow_port = _port()
        write_request(lease0, generation=1, world_size=2, batch_size=8, master_port=grow_port)
        job.start(1, 2, grow_port, 8, join=1)
        job.wait_for(1, 100)
        write_request(lease0, generation=2, world_size=1, batch_size=16, master_port=_port())
        assert job.procs[1].wait(timeout=30) == 0  # it left the job
        assert job.procs[0].wait(timeout=60) == 0, job.logs()
    finally:
        job.stop()
    _check_grow_and_shrink(job.rows())


def _check_grow_and_shrink(rows: list[dict]) -> None:
    rank0 = [r for r in rows if r["rank"] == 0]
    rank1 = [r for r in rows if r["rank"] == 1]
    # Every step done exactly once, in order: no gap, no repeat.
    assert [r["iteration"] for r in rank0] == list(range(ITERATIONS))
    steps1 = [r["iteration"] for r in rank1]
    assert steps1 == list(range(steps1[0], steps1[-1] + 1)) and len(steps1) >= 50
    # Two workers in lock-step while both ran, with the same weights after every step.
    by_step = {r["iteration"]: r for r in rank0}
    for r in rank1:
        assert by_step[r["iteration"]]["world"] == 2 and r["world"] == 2
        assert by_step[r["iteration"]]["checksum"] == pytest.approx(r["checksum"], rel=1e-9, abs=1e-9)
    worlds = [r["world"] for r in rank0]
    assert worlds[0] == 1 and worlds[-1] == 1 and 2 in worlds
    # The gradient noise scale is measured while two replicas run.
    assert any(r.get("grad_noise_scale", 0) > 0 for r in rank1)
    # The loss keeps decreasing: before the resize, with two workers, after shrinking back.
    grow, shrink = steps1[0], steps1[-1] + 1
    segments = [rank0[:15], rank0[grow - 15 : grow], rank0[shrink - 15 : shrink], rank0[-15:]]
    means = [sum(r["loss"] for r in s) / len(s) for s in segments]
    assert means == sorted(means, reverse=True), means


def test_a_worker_killed_during_a_resize_leads_to_a_restart_from_a_checkpoint_with_nothing_lost(tmp_path):
    # Rank 0 waits out its collectives' timeout for the killed worker: a short one, as no
    # worker is ever to join it.
    job = Elastic(tmp_path, dist_timeout_s=3.0)
    try:
        lease0 = job.start(0, 1, _port(), 16)
        job.wait_for(0, 40)
        grow_port = _port()
        write_request(lease0, generation=1, world_size=2, batch_size=8, master_port=grow_port)
        joiner = job.start(1, 2, grow_port, 8, join=1)
        job.procs[1].kill()  # dies before it has joined: rank 0 waits in the rendezvous, in vain
        assert job.procs[0].wait(timeout=60) == 3, job.logs()  # preempted, after checkpointing
        assert joiner
    finally:
        job.stop()
    checkpoints = sorted((tmp_path / "ckpt").glob("a1-i*.pt"))
    assert len(checkpoints) == 1, checkpoints
    reached = int(checkpoints[0].stem.split("-i")[1])
    done = [r["iteration"] for r in job.rows() if r["rank"] == 0]
    assert done == list(range(reached))  # the checkpoint holds every step done
    assert "resize to 2 workers failed" in job.logs()

    # The scheduler relaunches the job from that checkpoint (here: on one worker, which no
    # resize waits for: at twice the pace).
    again = Elastic(tmp_path, attempt=2, resume=str(checkpoints[0]), resume_iteration=reached, pace=50.0)
    try:
        again.start(0, 1, _port(), 16)
        assert again.procs[0].wait(timeout=60) == 0, again.logs()
    finally:
        again.stop()
    rank0 = [r for r in again.rows() if r["rank"] == 0]
    assert [r["iteration"] for r in rank0] == list(range(ITERATIONS))  # nothing lost, nothing repeated
    losses = [r["loss"] for r in rank0]
    assert sum(losses[-15:]) < sum(losses[reached - 15 : reached]) < sum(losses[:15])


def test_an_agent_carries_out_resize_messages(tmp_path):
    """A real agent (two fake GPUs) told by a scheduler's socket to grow a running job onto
    its second GPU and shrink it back; a resize of a job it does not run is refused."""
    import zmq

    port = _port()
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(f"tcp://127.0.0.1:{port}")
    record = tmp_path / "steps.jsonl"
    log_path = tmp_path / "agent.log"
    argv = [sys.executable, "-m", "roundhouse.tools.cli", "agent", "--scheduler", f"tcp://127.0.0.1:{port}"]
    argv += ["--insecure", "--name", "el", "--fake-gpus", "2:V100", "--emulate", "--workdir", str(tmp_path / "w")]
    env = dict(os.environ, ELASTIC_RECORD=str(record))
    with open(log_path, "wb") as log:
        agent = subprocess.Popen(argv, cwd=HERE.parent, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    seq = protocol.Sequence()
    seq.n = 10**12
    exits: list[dict] = []

    def receive(want: str, timeout: float = 60.0, **match):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if router.poll(100):
                identity, frame = router.recv_multipart()
                type_, _, body = protocol.decode(frame)
                if type_ == "exited":
                    exits.append(body)
                    router.send_multipart(
                        [
                            identity,
                            protocol.encode("ack", seq.next(), job=body["job"], attempt=body["attempt"], rank=body["rank"]),
                        ]
                    )
                if type_ == want and all(body.get(k) == v for k, v in match.items()):
                    return identity, body
        raise AssertionError(f"no {want} {match} from the agent\n{log_path.read_text()}")

    def rows() -> list[dict]:
        return [json.loads(x) for x in record.read_text().splitlines() if x.strip()] if record.exists() else []

    def reach(rank: int, iteration: int) -> None:
        deadline = time.time() + 60
        while not any(r["rank"] == rank and r["iteration"] >= iteration for r in rows()):
            assert time.time() < deadline and agent.poll() is None, log_path.read_text()
            receive("heartbeat", timeout=5)

    try:
        identity, _ = receive("register")
        router.send_multipart([identity, protocol.encode("welcome", seq.next(), node_index=0, heartbeat_s=0.2, session="t")])
        launch = dict(
            job=3,
            attempt=1,
            ranks=[{"rank": 0, "gpu": 0}],
            world_size=1,
            master_addr="127.0.0.1",
            master_port=_port(),
            iterations=ITERATIONS,
            batch_size=16,
            checkpoint_dir=str(tmp_path / "ckpt"),
            checkpoint_every_s=0,
            command=[sys.executable, str(HERE / "elastic_worker.py")],
            iters_per_s=25.0,
        )
        router.send_multipart([identity, protocol.encode("launch", seq.next(), **launch)])
        reach(0, 40)
        common = dict(attempt=1, master_addr="127.0.0.1", iters_per_s=25.0)
        unknown = dict(
            common, job=999, generation=1, world_size=2, batch_size=8, master_port=_port(), ranks=[{"rank": 1, "gpu": 1}]
        )
        router.send_multipart([identity, protocol.encode("resize", seq.next(), **unknown)])
        grow = dict(common, job=3, generation=1, world_size=2, batch_size=8, master_port=_port(), ranks=[{"rank": 1, "gpu": 1}])
        router.send_multipart([identity, protocol.encode("resize", seq.next(), **grow)])
        receive("started", job=3, rank=1)
        reach(1, 100)
        shrink = dict(common, job=3, generation=2, world_size=1, batch_size=16, master_port=_port(), ranks=[])
        router.send_multipart([identity, protocol.encode("resize", seq.next(), **shrink)])
        receive("exited", job=3, rank=0, timeout=90)
        assert agent.poll() is None
    finally:
        stop(agent)
        router.close()
        ctx.term()
    outcomes = {(e["rank"], e["outcome"]) for e in exits if e["job"] == 3}
    assert outcomes == {(1, "resized"), (0, "done")}, exits
    text = log_path.read_text()
    assert "refused resize of job 999 attempt 1: this node runs no worker of it" in text
    _check_grow_and_shrink(rows())
