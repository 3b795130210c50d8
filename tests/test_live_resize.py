"""Resizes reaching live agents: the `resize` message (validated), in place where the agents can,
checkpoint and restart otherwise, and a resize of a job with nothing running refused before
anything leaves. Stand-in agents on real ZeroMQ sockets (tests/test_live_backend.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from roundhouse.runtime.types import LR_LINEAR, LR_SQRT, Assignment, Plan, Resize
from roundhouse.runtime.world import PlanError
from roundhouse.wire import protocol
from tests.test_live_backend import add_jobs, live, pump, round_trip  # noqa: F401 (the fixture)


def _frame(**body) -> bytes:
    return json.dumps({"v": protocol.VERSION, "type": "resize", "seq": 1, **body}).encode()


def test_the_resize_message_is_validated():
    body = dict(job=7, attempt=1, generation=1, world_size=2, batch_size=64, master_addr="h", master_port=4000, ranks=[])
    assert protocol.decode(_frame(**body, lr_scale=2.0))[2]["lr_scale"] == 2.0
    assert protocol.decode(protocol.encode("resize", 3, **body))[:2] == ("resize", 3)
    for bad, where in (
        (dict(body, world_size=0), "world_size"),
        (dict(body, lr_scale=-1.0), "lr_scale"),
        (dict(body, ranks=[{"rank": 1}]), "gpu"),
        (dict(body, colour="red"), "colour"),
    ):
        with pytest.raises(protocol.ProtocolError, match=where):
            protocol.decode(_frame(**bad))


@pytest.mark.live
def test_grow_and_shrink_in_place_then_a_restart(live):  # noqa: F811
    world, backend, (a, b), journal = live
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [{"job_id": 5, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 900.0, "batch_size": 20}])
    round_trip(world, backend, Plan.of([Assignment(row, [0])]))
    pump(backend)
    [(t, launched)] = a.receive(1)
    assert t == "launch"
    # Grow onto the second GPU of the same node, global batch 40 (20 per worker): one resize
    # message, to node a.
    round_trip(world, backend, Plan.of(resizes=[Resize(row, [0, 1], 40, LR_LINEAR)]))
    pump(backend)
    [(t, msg)] = a.receive(1)
    assert t == "resize" and msg["world_size"] == 2 and msg["batch_size"] == 20 and msg["generation"] == 1
    assert msg["master_port"] != launched["master_port"]  # a new rendezvous for the new group
    grown_port = msg["master_port"]
    assert msg["ranks"] == [{"rank": 1, "gpu": 1}] and msg["lr_scale"] == 2.0
    assert b.receive() == [] and world.jobs.column("resizes")[row] == 1
    # Shrink back: rank 1 leaves by itself; its exit is acknowledged, the attempt goes on.
    round_trip(world, backend, Plan.of(resizes=[Resize(row, [0], 20, LR_SQRT)]))
    pump(backend)
    [(t, msg)] = a.receive(1)
    assert t == "resize" and msg["world_size"] == 1 and msg["ranks"] == [] and msg["generation"] == 2
    assert msg["batch_size"] == 20 and msg["master_port"] not in (grown_port, launched["master_port"])
    a.send("heartbeat", running=[{"job": 5, "attempt": 1, "rank": 1, "gpu": 1, "iteration": 30}])
    a.exited(5, 1, 1, "resized", 30)
    pump(backend)
    assert [t for t, _ in a.receive(1)] == ["ack"]  # no kill for the leaving rank, just the ack
    assert backend.attempts.current[row].n == 1 and not backend.attempts.current[row].ended
    # Onto node b, where the job has no worker: a checkpoint and restart, as a move.
    round_trip(world, backend, Plan.of(resizes=[Resize(row, [2, 3], 40)]))
    pump(backend)
    assert a.receive(1) == [("revoke", {"job": 5, "attempt": 1, "kill": False, "rank": 0, "ranks": None})]
    a.exited(5, 1, 0, "preempted", 44, checkpoint="/ck/job-5/a1-i44.pt")
    pump(backend)
    [(t, launch)] = b.receive(1)
    assert (
        t == "launch" and launch["attempt"] == 2 and launch["resume_iteration"] == 44 and launch["batch_size"] == 20
    )  # (per worker: 40 over two)
    assert world.jobs.column("preemptions")[row] == 0 and world.jobs.column("resizes")[row] == 3


@pytest.mark.live
def test_a_resize_of_a_job_with_nothing_on_the_agents_is_refused(live):  # noqa: F811
    world, backend, (a, b), journal = live
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [{"job_id": 6, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 900.0}])
    round_trip(world, backend, Plan.of([Assignment(row, [0])]))
    pump(backend)
    a.receive()
    backend.attempts.current[row].revoked = True  # as if its attempt were on its way out
    plan = Plan.of(resizes=[Resize(row, [0, 1])])
    world.check_plan(plan)
    before = len(backend.takeover.plans)
    with pytest.raises(PlanError, match="resizes job 6, which has no attempt running"):
        backend.apply(plan)
    pump(backend)
    assert len(backend.takeover.plans) == before and a.receive() == [] and b.receive() == []
    assert np.array_equal(world.gpus_of(row), [0])


ITERATIONS = 200  # (8 s at 25 a second: the shrink, asked for near step 60, has most of the job left to land in)
ELASTIC_PROFILE = """model,batch_size,gpu_type,gpus,placement,iters_per_s
LM,20,V100,1,consolidated,25
LM,20,V100,2,consolidated,25
LM,40,V100,2,consolidated,25
"""


@pytest.mark.live
@pytest.mark.slow
def test_a_plan_grows_and_shrinks_a_training_job_through_a_real_agent(tmp_path):
    """The scheduler's side and the agent's side together: a plan's resizes reach a real agent
    (two emulated GPUs), whose torch workers (gloo) grow from one to two and shrink back while
    training; every step is done once, and the job finishes."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    from roundhouse.runtime.cluster import Cluster
    from roundhouse.runtime.world import World
    from roundhouse.traces.profiles import ProfileTable
    from tests.livecluster import started_backend, stop

    here = Path(__file__).resolve().parent
    (tmp_path / "profile.csv").write_text(ELASTIC_PROFILE)
    world = World(Cluster.parse("1x2:V100"), ProfileTable.load(tmp_path / "profile.csv"), "V100")
    backend, address, journal = started_backend(tmp_path, world)
    record = tmp_path / "steps.jsonl"
    argv = [sys.executable, "-m", "roundhouse.tools.cli", "agent", "--scheduler", address, "--insecure", "--name", "el"]
    argv += ["--fake-gpus", "2:V100", "--emulate", "--workdir", str(tmp_path / "w")]
    log_path = tmp_path / "agent.log"
    with open(log_path, "wb") as log:
        env = dict(__import__("os").environ, ELASTIC_RECORD=str(record), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        agent = subprocess.Popen(argv, cwd=here.parent, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def rows() -> list[dict]:
        return [json.loads(x) for x in record.read_text().splitlines() if x.strip()] if record.exists() else []

    def until(check, what: str, timeout: float = 90.0) -> None:
        deadline = time.time() + timeout
        while not check():
            assert time.time() < deadline and agent.poll() is None, f"{what}\n{log_path.read_text()}"
            pump(backend, 0.1)

    finished: list[int] = []

    def round_(plan) -> None:
        events = round_trip(world, backend, plan)
        finished.extend(events.finished.tolist())

    try:
        until(lambda: backend.nodes.slots[0] is not None, "the agent registers")
        command = f"{sys.executable} {here / 'elastic_worker.py'}"
        (row,) = add_jobs(
            world,
            [
                {
                    "job_id": 3,
                    "arrival_s": 0.0,
                    "gpus": 1,
                    "model": "LM",
                    "iterations": float(ITERATIONS),
                    "batch_size": 20,
                    "command": command,
                }
            ],
        )
        round_(Plan.of([Assignment(row, [0])]))
        until(lambda: any(r["iteration"] >= 40 for r in rows()), "rank 0 trains")
        round_(Plan.of(resizes=[Resize(row, [0, 1], 40)]))  # two workers of 20
        # Rank 1 trains a few steps; the shrink then has most of the job left to land in.
        until(lambda: any(r["rank"] == 1 and r["iteration"] >= 60 for r in rows()), "rank 1 joins and trains")
        round_(Plan.of(resizes=[Resize(row, [0], 20)]))
        until(lambda: (round_(None) or True) and row in finished, "the job finishes", timeout=120)
    finally:
        stop(agent)
        backend.close()
        journal.close()
    got = rows()
    rank0 = [r["iteration"] for r in got if r["rank"] == 0]
    rank1 = [r["iteration"] for r in got if r["rank"] == 1]
    assert rank0 == list(range(ITERATIONS))  # every step once, in order: none lost in the resizes
    assert rank1 == list(range(rank1[0], rank1[-1] + 1)) and rank1[0] >= 40 and rank1[-1] < ITERATIONS - 1
    worlds = [r["world"] for r in got if r["rank"] == 0]
    assert worlds[0] == 1 and 2 in worlds and worlds[-1] == 1
    assert {r["batch"] for r in got if r["rank"] == 1} == {20}
    assert world.jobs.column("resizes")[row] == 2 and world.jobs.column("preemptions")[row] == 0


@pytest.mark.live
def test_a_resized_exit_from_an_unknown_job_or_rank_is_acknowledged_and_changes_nothing(live):  # noqa: F811
    """Agents say a rank left after a resize with an `exited` ("resized") message; one naming a
    job, an attempt or a rank this scheduler does not run is acknowledged (so the agent stops
    resending it) and leaves the books, the world and the running job as they were."""
    world, backend, (a, b), journal = live
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [{"job_id": 8, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 900.0}])
    round_trip(world, backend, Plan.of([Assignment(row, [0])]))
    pump(backend)
    a.receive()
    att = backend.attempts.current[row]
    holder = world.holder.copy()
    for job, attempt, rank in ((999, 1, 1), (8, 7, 1), (8, 1, 5)):
        a.exited(job, attempt, rank, "resized", 30)
        pump(backend)
        assert a.receive(1) == [("ack", {"job": job, "attempt": attempt, "rank": rank})]
    assert att.exits == {} and not att.ended and backend.attempts.current[row] is att
    assert np.array_equal(world.holder, holder) and world.running_rows.tolist() == [row]
    assert b.receive() == []
