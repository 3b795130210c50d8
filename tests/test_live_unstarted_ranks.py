"""A multi-worker attempt revoked before its rank 0 started (the launch reached the agent while
its fork server was still importing PyTorch, or rank 0's GPU was still busy): the agent ends the
other workers of that attempt too, so none of them starts afterwards and waits in its rendezvous
for a rank 0 that never comes. The agent's pieces are driven directly, so the race is set up
deterministically: the workers' start is held back by a fork server that is never ready, or by
a GPU that another job holds. (The scheduler's side, which ends the other ranks on other nodes,
is in tests/test_live_backend.py.)"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from roundhouse.agents.agent.leases import Revocations
from roundhouse.agents.agent.processes import Workers


class _Exits:
    """What the agent would send the scheduler: every exit report, in order."""

    def __init__(self):
        self.reports: list[dict] = []

    def __call__(self, job, attempt, rank, outcome, iteration, start, checkpoint, checkpoint_iteration, code, reason, permanent):
        self.reports.append(dict(job=job, attempt=attempt, rank=rank, outcome=outcome, code=code, reason=reason))


def _workers(tmp_path, forks_ready: bool) -> tuple[Workers, _Exits, list]:
    for part in ("leases", "logs", "jobs"):
        (tmp_path / part).mkdir(exist_ok=True)
    exits, sent = _Exits(), []
    reports = SimpleNamespace(endpoint=f"ipc://{tmp_path}/reports.sock", drain=lambda: None, wait=lambda ms: None)
    workers = Workers({0, 1}, reports, lambda type_, **body: sent.append((type_, body)), exits, {"launched": 0})
    workers.workdir = tmp_path
    # A fork server still importing PyTorch: workload launches wait for it.
    workers.forks = SimpleNamespace(lost=False, ready=lambda: forks_ready, close=lambda: None)
    return workers, exits, sent


def _launch(job: int, ranks: list[tuple[int, int]], **spec) -> dict:
    body = dict(
        job=job,
        attempt=1,
        world_size=2,
        master_addr="127.0.0.1",
        master_port=29999,
        iterations=100,
        batch_size=10,
        checkpoint_dir="/nonexistent",
        checkpoint_every_s=60.0,
        ranks=[{"rank": r, "gpu": g} for r, g in ranks],
        workload="roundhouse.agents.workloads.lstm",
    )
    body.update(spec)
    return body


def test_revoking_an_unstarted_rank_0_ends_the_other_unstarted_ranks_of_its_attempt(tmp_path):
    workers, exits, sent = _workers(tmp_path, forks_ready=False)
    revocations = Revocations(workers, grace_s=60.0)
    workers.launch(_launch(7, [(0, 0), (1, 1)]), stopping=False, known=lambda key: False)
    assert [w.rank for w in workers.waiting] == [0, 1] and not sent  # both held back

    # Two-phase revocation: the scheduler tells rank 0 only.
    revocations.on_revoke({"job": 7, "attempt": 1, "kill": False, "rank": 0})

    assert [(e["rank"], e["outcome"], e["code"]) for e in exits.reports] == [(0, "preempted", None), (1, "preempted", None)]
    assert exits.reports[0]["reason"] == "revoked before it started"
    assert "rank 0 of its attempt was revoked before it started" in exits.reports[1]["reason"]
    assert not workers.waiting and len(workers) == 0
    # The fork server becomes ready: nothing of that attempt starts any more.
    workers.forks = SimpleNamespace(lost=False, ready=lambda: True, close=lambda: None)
    workers.start_waiting()
    assert not sent and len(workers) == 0


def test_other_attempts_and_a_revocation_of_a_started_rank_0_are_left_alone(tmp_path):
    workers, exits, _ = _workers(tmp_path, forks_ready=False)
    revocations = Revocations(workers, grace_s=60.0)
    workers.launch(_launch(7, [(0, 0)]), stopping=False, known=lambda key: False)
    workers.launch(_launch(8, [(1, 1)]), stopping=False, known=lambda key: False)
    revocations.on_revoke({"job": 7, "attempt": 1, "kill": False, "rank": 0})
    assert [(e["job"], e["rank"]) for e in exits.reports] == [(7, 0)]
    assert [(w.job, w.rank) for w in workers.waiting] == [(8, 1)]


@pytest.mark.live
def test_a_started_rank_of_an_attempt_whose_rank_0_never_started_is_terminated(tmp_path):
    """Rank 0 waits for its GPU (another job holds it) while rank 1 has started: revoking rank
    0 before it started terminates rank 1, which would otherwise wait in its rendezvous for
    rank 0 until the dist timeout, holding its GPU."""
    workers, exits, sent = _workers(tmp_path, forks_ready=True)
    revocations = Revocations(workers, grace_s=60.0)
    workers._gpu_busy[0] = (99, 1, 0)  # GPU 0 still held by a job that is checkpointing
    spec = dict(workload=None, command=["sleep", "60"])
    workers.launch(_launch(7, [(0, 0), (1, 1)], **spec), stopping=False, known=lambda key: False)
    try:
        assert [w.rank for w in workers.waiting] == [0] and [b["rank"] for t, b in sent if t == "started"] == [1]
        revocations.on_revoke({"job": 7, "attempt": 1, "kill": False, "rank": 0})
        deadline = time.time() + 10
        while len(workers) and time.time() < deadline:
            workers.reap()
            time.sleep(0.05)
        assert [(e["rank"], e["outcome"]) for e in exits.reports] == [(0, "preempted"), (1, "killed")]
        assert exits.reports[1]["reason"] == "terminated by the agent"
    finally:
        for w in workers.all():
            workers.terminate(w, hard=True)
        workers.reap(wait=True)


def test_an_agent_stopping_ends_the_attempts_of_its_unstarted_workers_whole(tmp_path):
    workers, exits, _ = _workers(tmp_path, forks_ready=False)
    revocations = Revocations(workers, grace_s=60.0)
    workers.launch(_launch(7, [(0, 0), (1, 1)]), stopping=False, known=lambda key: False)
    revocations.revoke_all("the agent stopped")
    assert [(e["rank"], e["outcome"]) for e in exits.reports] == [(0, "preempted"), (1, "preempted")]
    assert not workers.waiting and len(workers) == 0
