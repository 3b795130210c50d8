"""Elastic jobs live count samples: a launch says what its iterations count (`counts`), the job
trains about its work in samples (not that many steps of a global batch each) and reports how
many samples it has trained, the scheduler's books take them as the job's work; a launch carries
the learning-rate factor of the batch it runs with; an emulated node that refuses a resize says
which new ranks it will not start, as a real agent does.

Stand-in agents on real ZeroMQ sockets (tests/test_live_backend.py) for the scheduler's side, an
emulated node's pieces driven directly (as tests/test_agent_fixes.py does), the client library
driven in this process, and one real run: a scheduler, an agent and two worker processes."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.agents.agent.emulated import EmulatedNodes
from roundhouse.agents.agent.gpus import Gpu
from roundhouse.agents.client import Job, LeaseLoader
from roundhouse.agents.jobenv import JobEnv
from roundhouse.agents.workloads.common import starting_lr
from roundhouse.runtime.types import LR_LINEAR, LR_SQRT, Assignment, Plan, Resize
from roundhouse.wire import protocol
from roundhouse.wire.security import ClientSecurity
from tests.livecluster import LiveCluster
from tests.test_live_backend import add_jobs, handled, live, pump, round_trip, serve_until  # noqa: F401 (the fixture)

REPO = Path(__file__).resolve().parents[1]

# --- 1. an emulated node refusing a resize says so -------------------------------------------

SCHEDULER = "tcp://127.0.0.1:5555"  # (never connected to: the nodes' sends are recorded)


def _nodes(count: int = 1):
    security = ClientSecurity.choose(None, "emu", True, SCHEDULER)
    nodes = EmulatedNodes(SCHEDULER, "emu", count, [Gpu(0, "V100"), Gpu(1, "V100")], security)
    sent: list[tuple[str, dict]] = []
    for node in nodes.nodes:
        node.link.registered = True
        node.link.send = lambda type_, **body: sent.append((type_, body)) or True
    return nodes, sent


def _resize(ranks: list[tuple[int, int]], world_size: int = 2) -> dict:
    return {
        "job": 7,
        "attempt": 2,
        "generation": 1,
        "world_size": world_size,
        "batch_size": 8,
        "master_addr": "127.0.0.1",
        "master_port": 30000,
        "ranks": [{"rank": r, "gpu": g} for r, g in ranks],
    }


def _exits(sent) -> dict[int, dict]:
    return {body["rank"]: body for type_, body in sent if type_ == "exited"}


@pytest.mark.parametrize(
    "launched, ranks, reason",
    [
        (True, [(1, 5)], "resize refused: this node has no GPU 5"),
        (False, [(1, 1)], "resize refused: this node runs no worker of it"),
        (True, [(0, 1)], "resize refused: rank 0 is not a new rank of a job of 2 workers"),
    ],
)
def test_an_emulated_node_refusing_a_resize_reports_its_new_ranks_ended_unstarted(launched, ranks, reason):
    nodes, sent = _nodes()
    node = nodes.nodes[0]
    if launched:
        body = {"job": 7, "attempt": 2, "ranks": [{"rank": 0, "gpu": 0}], "iterations": 10**6, "checkpoint_dir": "/ck"}
        nodes._launch(node, {**body, "iters_per_s": 100.0, "resume_iteration": 0})
        node.jobs[(7, 2, 0)].started_at -= 2.0  # two seconds in: 200 iterations done
    nodes._resize(node, _resize(ranks))
    exits = _exits(sent)
    new = [r for r, _ in ranks if r != 0]
    assert sorted(exits) == new  # before: nothing, and the scheduler waited for them for ever
    for rank in new:
        e = exits[rank]
        assert (e["outcome"], e["reason"], e.get("exit_code")) == ("preempted", reason, None)
        assert e["iteration"] == e["start_iteration"] == (200 if launched else 0)
    assert ((7, 2, 0) in node.jobs) == launched and (7, 2, 1) not in node.jobs  # nothing else changed


# --- 2. what a launch counts ---------------------------------------------------------------------


def _launch_body(**extra) -> dict:
    body = dict(
        job=1,
        attempt=1,
        ranks=[{"rank": 0, "gpu": 0}],
        world_size=1,
        master_addr="127.0.0.1",
        master_port=29500,
        iterations=500,
        batch_size=64,
        checkpoint_dir="/ck",
        checkpoint_every_s=0.0,
    )
    return {**body, **extra}


def test_a_launch_says_what_its_iterations_count_and_refuses_anything_else():
    _, _, body = protocol.decode(protocol.encode("launch", 1, **_launch_body(counts="samples", lr_scale=2.0)))
    assert (body["counts"], body["lr_scale"]) == ("samples", 2.0)
    assert protocol.decode(protocol.encode("launch", 1, **_launch_body()))[2]["counts"] is None  # (steps)
    frame = json.dumps({"v": protocol.VERSION, "type": "launch", "seq": 1, **_launch_body(counts="epochs")}).encode()
    with pytest.raises(protocol.ProtocolError, match="counts must be one of steps, samples"):
        protocol.decode(frame)
    frame = json.dumps({"v": protocol.VERSION, "type": "launch", "seq": 1, **_launch_body(lr_scale=-1.0)}).encode()
    with pytest.raises(protocol.ProtocolError, match="lr_scale"):
        protocol.decode(frame)
    with pytest.raises(ValueError, match="ROUNDHOUSE_COUNTS='epochs': expected steps or samples"):
        JobEnv.read({"ROUNDHOUSE_COUNTS": "epochs"})
    with pytest.raises(ValueError, match="ROUNDHOUSE_LR_SCALE"):
        JobEnv.read({"ROUNDHOUSE_LR_SCALE": "-2"})


def _elastic(live):  # noqa: F811
    world, backend, (a, b), _ = live
    from roundhouse.traces import pollux

    world.throughput.elastic = pollux.profile()  # as a graph's elastic_profile = "pollux" gives it
    for ag in (a, b):
        ag.receive()
    rows = add_jobs(
        world,
        [
            {
                "job_id": 3,
                "arrival_s": 0.0,
                "gpus": 2,
                "model": "cifar10",
                "batch_size": 128,
                "epochs": 0.01,
                "command": "python train.py",
            },
            {"job_id": 4, "arrival_s": 0.0, "gpus": 1, "model": "ResNet-18", "batch_size": 16, "iterations": 100.0},
        ],
    )
    return world, backend, a, b, rows


@pytest.mark.live
def test_an_elastic_job_is_launched_and_counted_in_samples_and_others_in_steps(live):  # noqa: F811
    world, backend, a, b, rows = _elastic(live)
    work = float(world.jobs.column("work")[rows[0]])
    assert 500 < work < 501  # 1% of an epoch of 50,000 samples
    round_trip(world, backend, Plan.of([Assignment(rows[0], [0, 1]), Assignment(rows[1], [2])]))
    pump(backend)
    [(_, elastic)] = a.receive(1)
    [(_, steps)] = b.receive(1)
    rate = backend.attempts.current[rows[0]].iters_per_s
    assert (elastic["counts"], elastic["iterations"], elastic["batch_size"]) == ("samples", math.ceil(work), 64)
    assert elastic["iters_per_s"] == pytest.approx(rate) and rate > 0  # samples/s, the goodput
    assert (steps["counts"], steps["iterations"]) == (None, 100)  # steps, unmarked as before
    # The workers report samples trained; the books take them as the job's work.
    exits = handled(backend, 2)
    a.exited(3, 1, 0, "done", math.ceil(work))
    a.exited(3, 1, 1, "done", math.ceil(work))
    serve_until(backend, exits, "the two exits")
    events = round_trip(world, backend, None)
    assert events.finished.tolist() == [rows[0]]
    assert float(world.jobs.column("done")[rows[0]]) >= work


@pytest.mark.live
def test_a_restart_launch_carries_the_learning_rate_factor_of_its_batch(live):  # noqa: F811
    world, backend, a, b, rows = _elastic(live)
    job = rows[0]
    round_trip(world, backend, Plan.of([Assignment(job, [0])]))
    pump(backend)
    [(_, first)] = a.receive(1)
    assert first["lr_scale"] is None  # its own batch, never resized: its own learning rate
    # Grown to global batch 512 by checkpoint and restart (onto the other node: not in place).
    round_trip(world, backend, Plan.of(resizes=[Resize(job, [2, 3], 512, LR_SQRT, False)]))
    pump(backend)
    a.receive()
    a.exited(3, 1, 0, "preempted", 100, checkpoint="/ck/job-3/a1-i100.pt")
    pump(backend)
    [(_, relaunch)] = [m for m in b.receive(1, "launch") if m[0] == "launch"]
    assert (relaunch["attempt"], relaunch["batch_size"]) == (2, 256)
    assert relaunch["lr_scale"] == pytest.approx(2.0)  # sqrt(512 / 128); before: no such field
    assert backend.attempts.current[job].lr_scale == pytest.approx(2.0)
    # Resized in place (linear rule) and then moved: the move keeps the rule for its batch.
    round_trip(world, backend, Plan.of(resizes=[Resize(job, [2], 256, LR_LINEAR)]))
    pump(backend)
    assert [m["lr_scale"] for t, m in b.receive(1, "resize") if t == "resize"] == [2.0]
    round_trip(world, backend, Plan.of([Assignment(job, [0])], suspend=np.array([job])))
    pump(backend)
    b.receive()
    b.exited(3, 2, 0, "preempted", 200, checkpoint="/ck/job-3/a2-i200.pt")
    pump(backend)
    [(_, moved)] = [m for m in a.receive(1, "launch") if m[0] == "launch"]
    assert (moved["attempt"], moved["batch_size"], moved["lr_scale"]) == (3, 128, 1.0)  # its own batch again


def test_the_example_workloads_start_at_the_factor_of_their_own_learning_rate():
    assert starting_lr(0.3, 0.05, 2.0) == pytest.approx(0.1)  # whatever the checkpoint held
    assert starting_lr(0.3, 0.05, None) == 0.3
    job = Job({"ROUNDHOUSE_LR_SCALE": "1.5", "ROUNDHOUSE_COUNTS": "samples"})
    assert (job.lr_scale, job.counts) == (1.5, "samples")
    assert Job({}).lr_scale is None and Job({}).counts == "steps"


# --- 3. what the job trains ----------------------------------------------------------------------


class _Batches:
    """Elastic data as the loader sees it: a global batch of batch_size x world_size a step."""

    elastic = True

    def __init__(self, batch_size: int, world_size: int):
        self.batch_size, self.world_size = batch_size, world_size

    def __iter__(self):
        while True:
            yield "batch"


def _run(job: Job, data) -> int:
    steps = 0
    for _ in LeaseLoader(job, data):
        steps += 1
    return steps


def test_a_job_counting_samples_stops_once_it_has_trained_its_work():
    job = Job({"ROUNDHOUSE_ITERATIONS": "100", "ROUNDHOUSE_COUNTS": "samples"})
    assert len(LeaseLoader(job, _Batches(16, 1))) == 7
    assert _run(job, _Batches(16, 1)) == 7  # 112 samples: the first step boundary past 100
    assert (job.iteration, job.samples, job.progress, job.outcome) == (7, 112, 100, "done")
    steps = Job({"ROUNDHOUSE_ITERATIONS": "100"})
    assert _run(steps, _Batches(16, 1)) == 100 and steps.progress == 100  # steps: as before


@pytest.mark.live
@pytest.mark.slow
def test_a_real_elastic_job_on_two_workers_trains_its_work_in_samples(tmp_path, monkeypatch):
    """Two worker processes of tests/elastic_worker.py (gloo, CPU) at global batch 128 for
    cifar10's 1% of an epoch (500.1 samples): 4 steps, 512 samples. Before, the launch asked
    for 501 steps, 64,128 samples."""
    graph = """
    round = 1s;
    cluster = "1x2:V100";
    elastic_profile = "pollux";
    src :: TraceSource(path="jobs.csv");
    src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
    """
    jobs = f"job_id,arrival_s,gpus,model,batch_size,epochs,command\n0,0,2,cifar10,128,0.01,{sys.executable} {REPO / 'tests' / 'elastic_worker.py'}\n"
    record = tmp_path / "steps.jsonl"
    monkeypatch.setenv("ELASTIC_RECORD", str(record))  # (the agent's environment reaches its workers)
    cluster = LiveCluster(tmp_path, graph, {"jobs.csv": jobs}, serve_args=("--stop-agents", "--checkpoint-every", "0"))
    try:
        cluster.start_scheduler()
        cluster.start_agent("node", "2:V100", emulate=False)
        assert cluster.wait_exit("scheduler", timeout=120) == 0, cluster.logs()
        out = pl.read_csv(tmp_path / "out" / "jobs.csv")
        assert out["status"].to_list() == ["finished"], f"{out}\n{cluster.logs()}"
        # Each worker reported the samples trained, at the job's work: 501, not steps.
        exits = cluster.exits()
        assert [(e[2], e[4], e[5]) for e in exits] == [(0, "done", 501), (1, "done", 501)], exits
    finally:
        cluster.close()
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    for rank in (0, 1):
        mine = [r for r in rows if r["rank"] == rank]
        # (Each row is written during its step: the steps and samples done before it.)
        assert [(r["iteration"], r["samples"], r["world"], r["batch"]) for r in mine] == [
            (i, 128 * i, 2, 64) for i in range(4)
        ], rows  # 512 samples in all: about the work (500.1 samples), not 501 x 128
