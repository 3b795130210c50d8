"""Elastic jobs on live agents, as a review found them: the batch size each worker is told (per
worker, on a launch as on an in-place resize), a resize the agent refuses (the scheduler must not
wait for ranks that never start), the learning-rate factor reaching the job, ONES' batch within
a job's limit, ONES and Pollux files submitted more than once, launches whose ranks cannot all
run, and an exit past the job's iterations.

Stand-in agents on real ZeroMQ sockets (tests/test_live_backend.py) for the scheduler's side;
the agent's pieces driven directly (as tests/test_live_unstarted_ranks.py does) for its side."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from roundhouse.agents.agent.processes import Workers
from roundhouse.agents.elastic import Rescale, Scaler, read_request, request_path, write_request
from roundhouse.agents.workloads.common import rescaled_lr
from roundhouse.runtime.backends.live.attempts import worker_batch
from roundhouse.runtime.types import LR_LINEAR, Assignment, Plan, Resize
from tests.test_live_backend import add_jobs, handled, live, pump, round_trip, serve_until  # noqa: F401 (the fixture)
from tests.test_live_unstarted_ranks import _launch as launch_body

# --- 1. the batch size each worker is told ----------------------------------------------------


def test_a_global_batch_is_split_over_the_workers_rounded_up():
    assert [worker_batch(b, n) for b, n in ((40, 2), (41, 4), (7, 8), (64, 1))] == [20, 11, 1, 64]
    assert worker_batch(0, 4) == 0  # (0: the workload's own batch, at launch)


@pytest.mark.live
def test_a_job_s_own_batch_goes_to_each_worker_and_a_plan_s_global_batch_is_shared(live):  # noqa: F811
    world, backend, (a, b), _ = live
    for ag in (a, b):
        ag.receive()
    rows = add_jobs(
        world,
        [
            {"job_id": 3, "arrival_s": 0.0, "gpus": 2, "model": "LM", "iterations": 900.0, "batch_size": 40},
            {"job_id": 4, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 900.0, "batch_size": 20},
        ],
    )
    round_trip(world, backend, Plan.of([Assignment(rows[0], [0, 1]), Assignment(rows[1], [2])]))
    pump(backend)
    [(t, launch)] = a.receive(1)
    # Job 3 is not elastic: its own batch size is what each worker trains with, as its trace gives it.
    assert t == "launch" and launch["world_size"] == 2 and launch["batch_size"] == 40
    [(t, launch)] = b.receive(1)
    assert t == "launch" and launch["batch_size"] == 20
    # Job 4 grows by checkpoint and restart (not in place) to global batch 40 on two GPUs.
    round_trip(world, backend, Plan.of(keep=rows[:1], resizes=[Resize(rows[1], [2, 3], 40, LR_LINEAR, False)]))
    pump(backend)
    assert b.receive(1) == [("revoke", {"job": 4, "attempt": 1, "kill": False, "rank": 0, "ranks": None})]
    b.exited(4, 1, 0, "preempted", 50, checkpoint="/ck/job-4/i50.pt")
    pump(backend)
    relaunch = [body for t, body in b.receive(1, "launch") if t == "launch"]
    assert [(m["attempt"], m["world_size"], m["batch_size"]) for m in relaunch] == [(2, 2, 20)]  # before: 40


def _growing(setup):
    """Job 5 (LM, batch 20) launched on GPU 0 of node a, then grown in place onto GPU 1 at global
    batch 40: the world, the backend, node a (its resize message not yet read), the job's row
    and its launch message."""
    world, backend, (a, b), _ = setup
    for ag in (a, b):
        ag.receive()
    (row,) = add_jobs(world, [{"job_id": 5, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 900.0, "batch_size": 20}])
    round_trip(world, backend, Plan.of([Assignment(row, [0])]))
    pump(backend)
    [(_, launch)] = a.receive(1)
    round_trip(world, backend, Plan.of(resizes=[Resize(row, [0, 1], 40)]))
    pump(backend)
    return world, backend, a, row, launch


@pytest.mark.live
def test_an_in_place_resize_and_a_launch_agree_on_the_batch_per_worker(live):  # noqa: F811
    world, backend, a, row, launch = _growing(live)
    [(t, msg)] = a.receive(1)
    assert t == "resize" and (launch["batch_size"], msg["batch_size"]) == (20, 20)
    assert backend.attempts.current[row].worker_batch == 20


# --- 2. a resize the agent refuses --------------------------------------------------------------


@pytest.mark.live
def test_a_job_done_as_it_grew_finishes_though_its_new_rank_never_reports(live):  # noqa: F811
    """Rank 0 finished all its iterations as the resize arrived; the agent refused the resize
    (it runs no worker of the job any more) without a word about rank 1. Before, the attempt
    waited for rank 1 for ever: the job never finished and held both GPUs."""
    world, backend, a, row, _ = _growing(live)
    assert [t for t, _ in a.receive(1)] == ["resize"]
    a.exited(5, 1, 0, "done", 900)
    pump(backend)
    got = a.receive(2)
    assert ("ack", {"job": 5, "attempt": 1, "rank": 0}) in got
    assert _kills(got) == [5]  # rank 1, should it be running
    events = round_trip(world, backend, None)
    assert events.finished.tolist() == [row]
    assert backend.attempts.current[row].ended


@pytest.mark.live
def test_a_new_rank_the_agent_reports_unstarted_ends_the_attempt_from_its_checkpoint(live):  # noqa: F811
    """The agent refused the resize and said so (rank 1 ended without having run): the
    scheduler stops rank 0 and requeues the job, rather than waiting for rank 1."""
    world, backend, a, row, _ = _growing(live)
    a.receive()
    a.exited(5, 1, 1, "preempted", 0, reason="resize refused: the agent is stopping")
    pump(backend)
    assert _kills(a.receive(1, "revoke")) == [5]
    exit_ = handled(backend)
    a.exited(5, 1, 0, "killed", 120)
    serve_until(backend, exit_, "rank 0's exit")
    events = round_trip(world, backend, None)
    assert events.requeued.tolist() == [row] and backend.attempts.current[row].ended


class _Logged(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _kills(got: list[tuple[str, dict]]) -> list[int]:
    return [body["job"] for t, body in got if t == "revoke" and body["kill"]]


class _Exits:
    """What the agent would send the scheduler: every exit report, in order."""

    def __init__(self):
        self.reports: list[dict] = []

    def __call__(self, job, attempt, rank, outcome, iteration, start, checkpoint, checkpoint_iteration, code, reason, permanent):
        self.reports.append(
            dict(job=job, attempt=attempt, rank=rank, outcome=outcome, iteration=iteration, start=start, code=code)
            | dict(reason=reason, permanent=permanent)
        )


def _workers(tmp_path: Path, forks_ready: bool) -> tuple[Workers, _Exits, list]:
    for part in ("leases", "logs", "jobs"):
        (tmp_path / part).mkdir(exist_ok=True)
    exits, sent = _Exits(), []
    reports = SimpleNamespace(
        endpoint=f"ipc://{tmp_path}/reports.sock", drain=lambda: None, wait=lambda ms: time.sleep(ms / 1000)
    )
    workers = Workers({0, 1}, reports, lambda type_, **body: sent.append((type_, body)), exits, {"launched": 0})
    workers.workdir = tmp_path
    # A fork server still importing PyTorch holds workload launches back (they stay queued).
    workers.forks = SimpleNamespace(lost=False, ready=lambda: forks_ready, close=lambda: None)
    return workers, exits, sent


def _launch(job: int, ranks: list[tuple[int, int]], world_size: int = 1, **spec) -> dict:
    return launch_body(job, ranks, world_size=world_size, **spec)


def _resize(job: int, world_size: int, ranks: list[tuple[int, int]], **extra) -> dict:
    body = dict(job=job, attempt=1, generation=1, world_size=world_size, batch_size=5, master_addr="127.0.0.1")
    return body | dict(master_port=30001, ranks=[{"rank": r, "gpu": g} for r, g in ranks]) | extra


def test_an_agent_refusing_a_resize_reports_the_new_ranks_ended_unstarted(tmp_path):
    workers, exits, _ = _workers(tmp_path, forks_ready=False)
    assert not workers.resize(_resize(7, 2, [(1, 1)]), stopping=False)  # it runs no worker of job 7
    [report] = exits.reports
    assert (report["rank"], report["outcome"], report["code"]) == (1, "preempted", None)
    assert report["iteration"] <= report["start"] and not report["permanent"]
    assert "resize refused: this node runs no worker of it" in report["reason"]
    assert len(workers) == 0


def test_a_resize_of_a_job_still_waiting_for_its_gpu_starts_it_in_the_new_shape(tmp_path):
    """Rank 0 waits for its GPU (its previous holder is checkpointing) when the job grows: the
    agent starts the job with two workers instead of refusing (before: refused, and the
    scheduler waited for rank 1 for ever)."""
    workers, exits, _ = _workers(tmp_path, forks_ready=False)
    workers.launch(_launch(7, [(0, 0)], resume="/ck/7.pt", resume_iteration=40), stopping=False, known=lambda key: False)
    assert workers.resize(_resize(7, 2, [(1, 1)]), stopping=False)
    assert not exits.reports and [w.rank for w in workers.waiting] == [0, 1]
    for w in workers.waiting:
        assert (w.spec["world_size"], w.spec["batch_size"], w.spec["master_port"]) == (2, 5, 30001)
        assert w.spec["resume"] == "/ck/7.pt" and w.start_iteration == 40 and not w.spec.get("join_generation")
        assert [r["rank"] for r in w.spec["ranks"]] == [0, 1]
    # It shrinks back before starting: rank 1 leaves without having run.
    assert workers.resize(_resize(7, 1, [], generation=2, master_port=30002), stopping=False)
    assert [(e["rank"], e["outcome"]) for e in exits.reports] == [(1, "resized")]
    assert [(w.rank, w.spec["world_size"]) for w in workers.waiting] == [(0, 1)]


# --- 3. the learning-rate factor ------------------------------------------------------------------


def test_the_learning_rate_factor_goes_through_the_request_and_the_workers_agreement(tmp_path):
    lease = tmp_path / "lease"
    lease.write_bytes(b"\x00")
    write_request(lease, 3, 4, 16, 30005, lr_scale=1.75)
    assert json.loads(request_path(lease).read_text())["lr_scale"] == 1.75
    body = read_request(lease)
    assert body == {"generation": 3, "world_size": 4, "batch_size": 16, "master_port": 30005, "lr_scale": 1.75}
    scaler = Scaler(SimpleNamespace(join_generation=0))
    packed = scaler.pack(body)
    # The all-reduce takes each value's maximum, and the other workers send zeros.
    agreed = [max(x, 0) for x, _ in zip(packed, scaler.pack(None))]
    assert scaler.unpack(agreed) == body
    write_request(lease, 4, 2, 16, 30006)  # none given: the job adapts its rate itself
    assert read_request(lease)["lr_scale"] is None and scaler.unpack(scaler.pack(read_request(lease)))["lr_scale"] is None


def test_a_rescale_carries_the_factor_and_the_example_workloads_use_it():
    from roundhouse.agents.client import Job

    job = Job(env={"ROUNDHOUSE_BATCH_SIZE": "8"})
    change = job.scaler.carry_out({"generation": 1, "world_size": 1, "batch_size": 8, "master_port": 30007, "lr_scale": 0.5})
    assert change.lr_scale == 0.5
    assert rescaled_lr(0.2, 0.05, change) == pytest.approx(0.025)  # the job's own rate times the factor
    own = Rescale(2, 2, 0, 8, "h", 1, previous_world_size=1, previous_batch_size=8)
    assert rescaled_lr(0.2, 0.05, own) == pytest.approx(0.2 * 2**0.5)  # none given: its own rule


@pytest.mark.live
def test_an_agent_writes_the_learning_rate_factor_into_rank_0_s_request(tmp_path):
    workers, exits, _ = _workers(tmp_path, forks_ready=True)
    spec = dict(workload=None, command=["sleep", "30"])
    workers.launch(_launch(7, [(0, 0)], **spec), stopping=False, known=lambda key: False)
    try:
        [w] = workers.all()
        assert w.process is not None
        assert workers.resize(_resize(7, 2, [(1, 1)], lr_scale=2.0, workload=None), stopping=False)
        assert read_request(w.lease_path)["lr_scale"] == 2.0
    finally:
        for w in workers.all():
            workers.terminate(w, hard=True)
        workers.reap(wait=True)


# --- 4. ONES' batch within a job's limit -------------------------------------------------------


class _Active:
    """The parts of a round's Active that Ones._deploy reads."""

    def __init__(self, batch):
        self.rows = np.arange(len(batch))
        self.run_s = np.zeros(len(batch))
        self._batch = np.asarray(batch, dtype=np.float64)

    def __len__(self):
        return len(self.rows)

    def column(self, name):
        return self._batch


def test_ones_plans_no_batch_past_a_job_s_limit():
    """Job 1's batch per GPU (128) is past its limit (64): ONES gives it one GPU, and before,
    a batch of 128 there, which the world refuses, ending the run. Job 0 grows within its
    limit, and job 2 (no limit) keeps its batch per GPU."""
    from roundhouse.elements.policies.ones import Ones

    o = Ones(gate_epochs=0.0)
    o.counters.update(deployed=0, held_back=0)
    o._limit, o._seen = np.full(3, 4), np.ones(3, dtype=bool)
    o._epoch_mark, o._scaled_at = np.zeros(3), np.zeros(3)
    columns = {"max_batch_size": np.array([64.0, 64.0, np.nan]), "local_batch": np.array([16.0, 128.0, 8.0])}
    ctx = SimpleNamespace(
        jobs=SimpleNamespace(has_column=lambda name: name in columns, column=columns.__getitem__), explaining=False
    )
    active = _Active([16, 128, 8])
    current, best = np.array([0, -1, -1, -1, -1]), np.array([0, 0, 1, 2, 2])
    plan = o._deploy(ctx, active, best, current, np.ones(3), np.array([1, 0, 0]), o._limit.copy())
    assert dict(zip(plan.launch_rows.tolist(), plan.launch_batch.tolist())) == {1: 64, 2: 16}
    assert plan.resize_batch.tolist() == [32]


# --- 5. a ONES or Pollux file submitted twice ---------------------------------------------------


def test_files_without_job_ids_are_submitted_without_the_reader_s_numbers(tmp_path):
    from roundhouse.tools.submit_cmd import trace_jobs

    ones_file = tmp_path / "o.csv"
    ones_file.write_text(
        "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n"
        "0,bert,mrpc,200,5,16,5e-6,2e-5,0.8,2\n1,bert,sst2,100,5,32,2.5e-6,2e-5,0.9,4\n"
    )
    jobs, where = trace_jobs(str(ones_file))
    assert len(jobs) == 2 and not any("job_id" in job for job in jobs)
    assert where == [f"{ones_file}: job 1", f"{ones_file}: job 2"]
    pollux_file = tmp_path / "p.csv"
    pollux_file.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,2,256\nbert-1,5,bert,1,12\n")
    pollux, _ = trace_jobs(str(pollux_file))
    assert len(pollux) == 2 and not any("job_id" in job for job in pollux)
    tiresias = tmp_path / "t.csv"
    tiresias.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n17,1,0,100,ResNet-18,60,0\n")
    [job], _ = trace_jobs(str(tiresias))
    assert job["job_id"] == 17  # a file that gives ids keeps them


# --- 6. launches whose ranks cannot all run; an exit past the job's iterations -----------------


@pytest.mark.parametrize(
    ("ranks", "world_size", "reason"),
    [
        ([(3, 0)], 1, "rank 3 is not below the world size 1"),
        ([(0, 0), (0, 1)], 2, "rank 0 is given twice"),
        ([(0, 0), (1, 0)], 2, "GPU 0 is given to two ranks"),
    ],
)
def test_a_launch_whose_ranks_cannot_all_run_is_refused(tmp_path, monkeypatch, ranks, world_size, reason):
    workers, exits, _ = _workers(tmp_path, forks_ready=False)
    logged = _Logged()
    # (The agent's logger may not pass records on to pytest's: a run's logging setup stops it.)
    monkeypatch.setattr(logging.getLogger("roundhouse.agent"), "handlers", [logged])
    workers.launch(_launch(8, ranks, world_size=world_size), stopping=False, known=lambda key: False)
    assert len(workers) == 0 and exits.reports
    assert {(e["outcome"], e["reason"], e["permanent"]) for e in exits.reports} == {("failed", reason, True)}
    assert sorted(e["rank"] for e in exits.reports) == sorted({r for r, _ in ranks})
    assert f"refused launch of job 8 attempt 1: {reason}" in logged.lines


@pytest.mark.live
def test_an_exit_is_reported_at_most_at_the_launch_s_iterations(tmp_path):
    workers, exits, _ = _workers(tmp_path, forks_ready=True)
    workers.launch(_launch(9, [(0, 0)], workload=None, command=["true"]), stopping=False, known=lambda key: False)
    [w] = workers.all()
    w.iteration = 10**9  # as a report past the end would have left it
    workers.reap(wait=True)
    [report] = exits.reports
    assert report["iteration"] == 100
