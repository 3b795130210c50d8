"""The client library: lease checks, exact resume from a checkpoint, periodic checkpoints, reports."""

from __future__ import annotations

import time

import pytest
import torch
import zmq

from roundhouse.agents.client import Job, Lease, LeaseLoader, ResumableSampler
from roundhouse.wire import protocol

# Real agents, schedulers or training processes on this machine (the quick loop is -m "not live").
pytestmark = pytest.mark.live

# One thread, as the agents give each worker: several would only contend on this small machine.
torch.set_num_threads(1)


def _env(tmp_path, **more) -> dict[str, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    lease = tmp_path / "lease"
    Lease.create(lease)
    env = {
        "ROUNDHOUSE_JOB_ID": "4",
        "ROUNDHOUSE_ATTEMPT": "1",
        "ROUNDHOUSE_ITERATIONS": "20",
        "ROUNDHOUSE_BATCH_SIZE": "8",
        "ROUNDHOUSE_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "ROUNDHOUSE_LEASE": str(lease),
        "ROUNDHOUSE_SEED": "3",
    }
    env.update(more)
    return env


def _train(job: Job, revoke_at: int | None = None):
    """The example CNN workload's loop, in this process, optionally revoking the lease."""
    from torch.utils.data import DataLoader

    from roundhouse.agents.workloads import cnn
    from roundhouse.agents.workloads.common import SGD, synthetic

    torch.manual_seed(job.seed)
    model = cnn.SmallResNet(1)
    optimizer = SGD(model.parameters(), lr=0.05, momentum=0.9)
    job.track(model=model, optimizer=optimizer)
    job.resume()
    dataset = synthetic(64, 7, cnn.images)  # 8 batches an epoch: the runs below cross epochs
    data = DataLoader(dataset, batch_size=8, sampler=ResumableSampler(len(dataset), 8, seed=job.seed), drop_last=True)
    seen = []
    for x, y in job.loader(data):
        seen.append(float(x.sum()))
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        job.report(loss=loss.item())
        if revoke_at is not None and job.iteration + 1 == revoke_at:
            Lease.revoke(job.lease.path)  # the agent's side of a revocation
    return model, seen


def test_lease_is_a_local_byte_the_agent_sets(tmp_path):
    path = tmp_path / "lease"
    Lease.create(path)
    lease = Lease(path)
    assert not lease.revoked()
    started = time.perf_counter()
    for _ in range(10000):
        lease.revoked()
    assert (time.perf_counter() - started) / 10000 < 5e-5  # no round trip: well under 50 us
    Lease.revoke(path)
    assert lease.revoked()
    assert not Lease(None).revoked()  # standalone: never revoked


def test_a_preempted_job_resumes_exactly_where_it_stopped(tmp_path):
    whole, seen_whole = _train(Job(_env(tmp_path / "a")))
    first = Job(_env(tmp_path / "b"))
    _, seen_first = _train(first, revoke_at=11)
    assert first.outcome == "preempted" and first.iteration == 11 and first.checkpoint_iteration == 11
    assert first.checkpoint_path.endswith("a1-i11.pt")
    resumed = Job(
        _env(tmp_path / "b", ROUNDHOUSE_ATTEMPT="2", ROUNDHOUSE_RESUME=first.checkpoint_path, ROUNDHOUSE_RESUME_ITERATION="11")
    )
    model, seen_rest = _train(resumed)
    assert resumed.start_iteration == 11 and resumed.iteration == 20 and resumed.outcome == "done"
    # The same batches in the same order, none lost or repeated, and the same weights at the end.
    assert seen_first + seen_rest == seen_whole
    for a, b in zip(whole.state_dict().values(), model.state_dict().values()):
        assert torch.equal(a, b)


def test_a_checkpoint_of_another_iteration_is_refused(tmp_path):
    first = Job(_env(tmp_path))
    _train(first, revoke_at=5)
    wrong = Job(_env(tmp_path, ROUNDHOUSE_ATTEMPT="2", ROUNDHOUSE_RESUME=first.checkpoint_path, ROUNDHOUSE_RESUME_ITERATION="9"))
    with pytest.raises(RuntimeError, match="holds iteration 5, not 9"):
        _train(wrong)


def test_reports_and_periodic_checkpoints_reach_the_agent_socket(tmp_path):
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    endpoint = f"ipc://{tmp_path}/reports.sock"
    pull.bind(endpoint)
    try:
        job = Job(_env(tmp_path, ROUNDHOUSE_AGENT=endpoint, ROUNDHOUSE_REPORT_EVERY="0", ROUNDHOUSE_CHECKPOINT_EVERY="0.000001"))
        _train(job)
        got = []
        # (sent from the job's ZeroMQ thread, which a loaded machine may run late: read until
        # the last iteration's report, then what follows it)
        last = lambda: any(t == "report" and b["iteration"] == 20 for t, _, b in got)  # noqa: E731
        deadline = time.monotonic() + 30
        while pull.poll(500) or (not last() and time.monotonic() < deadline):
            while pull.poll(0):
                got.append(protocol.decode(pull.recv(), {"report", "checkpointed"}))
        reports = [b for t, _, b in got if t == "report"]
        checkpoints = [b for t, _, b in got if t == "checkpointed"]
        assert reports and {"loss", "iter_time_s", "iters_per_s"} <= set(reports[-1]["values"])
        assert reports[-1]["iteration"] == 20 and all(r["job"] == 4 for r in reports)
        assert checkpoints and checkpoints[-1]["iteration"] <= 20
        assert (tmp_path / "ckpt" / f"a1-i{checkpoints[-1]['iteration']}.pt").is_file()
        seqs = [s for _, s, _ in got]
        assert seqs == sorted(seqs)
    finally:
        pull.close()
        ctx.term()


def test_the_loader_cycles_epochs_of_plain_iterables(tmp_path):
    job = Job(_env(tmp_path, ROUNDHOUSE_ITERATIONS="7"))
    job.iteration = 2  # as after a resume: the loader skips what was already seen
    assert list(LeaseLoader(job, [10, 11, 12])) == [12, 10, 11, 12, 10]
    assert job.outcome == "done"


def test_an_emulated_gpu_holds_the_profile_speed_without_bursts(tmp_path):
    # 30 iterations at 100/s take 0.3 s however fast the loop is; a stall is not made up.
    job = Job(_env(tmp_path, ROUNDHOUSE_ITERATIONS="30", ROUNDHOUSE_PACE="100"))
    started = time.perf_counter()
    stamps = []
    for _i in LeaseLoader(job, range(10)):
        stamps.append(time.perf_counter())
        if job.iteration == 9:
            time.sleep(0.2)  # a slow stretch: the next iterations still come 10 ms apart
    assert job.outcome == "done" and job.iteration == 30
    assert time.perf_counter() - started >= 0.3 + 0.2 - 0.01
    gaps = [b - a for a, b in zip(stamps[11:], stamps[12:])]
    assert min(gaps) >= 0.0095, gaps
    free = Job(_env(tmp_path / "free", ROUNDHOUSE_ITERATIONS="30"))
    started = time.perf_counter()
    assert len(list(LeaseLoader(free, range(10)))) == 30
    # No pace: as fast as it goes, well under the 0.3 s that 100 iterations/s would take (a
    # millisecond, unless this process waits its turn for a core on a loaded machine).
    assert time.perf_counter() - started < 0.2
