"""The training side of live mode, with real processes (gloo on CPU, 127.0.0.1 only): a resize
that changes the global batch leaves every worker at the same learning rate, a job's
environment that is out of range is said by name, checkpoints reach the disk before they are
named, and the profiler's jobs do not share a rendezvous port."""

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
from roundhouse.agents.client import Job, Lease
from roundhouse.agents.elastic import write_request
from roundhouse.agents.jobenv import JobEnv

pytestmark = pytest.mark.live

# A small data-parallel job that uses the example workloads' learning-rate rules, and records
# each step's learning rate and a checksum of its weights.
WORKER = """
import json, os, torch
from roundhouse.agents.client import Job
from roundhouse.agents.elastic import GradientSync
from roundhouse.agents.workloads.common import SGD, DataParallel, rescaled_lr, starting_lr, synthetic

def blobs(g, n):
    centres = torch.randn(4, 16, generator=g) * 0.5
    labels = torch.randint(0, 4, (n,), generator=g)
    return centres[labels] + torch.randn(n, 16, generator=g), labels

torch.set_num_threads(1)
job = Job.from_env().setup()
torch.manual_seed(job.seed)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
OWN = 0.01
optimizer = SGD(model.parameters(), lr=OWN, momentum=0.9)
sync = GradientSync(model.parameters())
job.track(model=model, optimizer=optimizer, gradient_noise=sync)
job.resume()
optimizer.lr = starting_lr(optimizer.lr, OWN, job.lr_scale)
if job.world_size > 1 and not job.join_generation:
    DataParallel(model)
data = job.elastic_data(synthetic(4096, 5, blobs), 8)
job.on_rescale(lambda change: setattr(optimizer, "lr", rescaled_lr(optimizer.lr, OWN, change)))
record = open(os.environ["RECORD"], "a")
for x, y in job.loader(data):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    sync.average(data.batch_size)
    optimizer.step()
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    row = {"rank": job.rank, "iteration": job.iteration, "world": job.world_size, "lr": optimizer.lr, "checksum": checksum}
    record.write(json.dumps(row) + "\\n")
    record.flush()
job.finish()
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rows(record: Path) -> list[dict]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def test_workers_that_join_a_resize_take_the_learning_rate_the_others_rescaled_to(tmp_path):
    """Growing from 8 samples a step to 16 (a second worker of 8), with no factor from the
    scheduler: the example workloads scale their rate by the square root of the batch's change.
    The worker that joins must train at that rate too, not at the rate rank 0 had before."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    record = tmp_path / "steps.jsonl"
    procs = []

    def start(rank: int, world: int, port: int, join: int = 0) -> Path:
        lease = tmp_path / f"lease-{rank}"
        Lease.create(lease)
        env = dict(os.environ)
        env.update(
            jobenv.variables(
                job_id=1,
                rank=rank,
                world_size=world,
                master_addr="127.0.0.1",
                master_port=port,
                lease=lease,
                iterations=70,
                batch_size=8,
                seed=2,
                threads=1,
                checkpoint_dir=tmp_path / "ckpt",
                pace_iters_per_s=25.0,
                dist_timeout_s=8.0,
                join_generation=join or None,
            )
        )
        env.update(RECORD=str(record), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        log = open(tmp_path / f"log-{rank}.txt", "w")
        procs.append(subprocess.Popen([sys.executable, str(script)], env=env, stdout=log, stderr=subprocess.STDOUT))
        return lease

    def logs() -> str:
        return "\n".join(p.read_text() for p in sorted(tmp_path.glob("log-*.txt")))

    try:
        lease0 = start(0, 1, _port())
        deadline = time.time() + 30
        while not any(r["iteration"] >= 15 for r in _rows(record)):
            assert time.time() < deadline and procs[0].poll() is None, logs()
            time.sleep(0.05)
        port = _port()
        write_request(lease0, generation=1, world_size=2, batch_size=8, master_port=port)
        start(1, 2, port, join=1)
        assert [p.wait(timeout=40) for p in procs] == [0, 0], logs()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    rows = _rows(record)
    rank0 = {r["iteration"]: r for r in rows if r["rank"] == 0}
    rank1 = [r for r in rows if r["rank"] == 1]
    assert len(rank1) >= 20, logs()
    assert rank0[1]["lr"] == pytest.approx(0.01)
    for r in rank1:
        mine = rank0[r["iteration"]]
        assert mine["world"] == 2
        assert r["lr"] == pytest.approx(0.01 * 2**0.5) and mine["lr"] == pytest.approx(0.01 * 2**0.5)
        assert r["checksum"] == pytest.approx(mine["checksum"], rel=1e-9, abs=1e-9)  # the same weights


# --- what a job reads from its environment ---------------------------------------------------


@pytest.mark.parametrize(
    "env, message",
    [
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE='0': expected a whole number of 1 or more"),
        ({"RANK": "3", "WORLD_SIZE": "2"}, "RANK=3 with WORLD_SIZE=2: the rank must be below the world size"),
        ({"MASTER_PORT": "99999"}, "MASTER_PORT='99999': expected a port (1 to 65535)"),
        ({"ROUNDHOUSE_ITERATIONS": "-5"}, "ROUNDHOUSE_ITERATIONS='-5': expected a whole number of 0 or more"),
        ({"ROUNDHOUSE_BATCH_SIZE": "-4"}, "ROUNDHOUSE_BATCH_SIZE='-4': expected a whole number of 0 or more"),
        ({"ROUNDHOUSE_DIST_TIMEOUT": "nan"}, "ROUNDHOUSE_DIST_TIMEOUT='nan': expected a number of seconds above 0"),
        ({"ROUNDHOUSE_REPORT_EVERY": "inf"}, "ROUNDHOUSE_REPORT_EVERY='inf': expected a finite number of seconds >= 0"),
        ({"ROUNDHOUSE_THREADS": "-1"}, "ROUNDHOUSE_THREADS='-1': expected a whole number of 0 or more"),
    ],
)
def test_a_job_variable_out_of_range_is_named(env, message):
    with pytest.raises(ValueError) as err:
        JobEnv.read(env)
    assert str(err.value).startswith(message)


def test_the_agent_s_usual_environment_still_reads():
    env = jobenv.variables(rank=1, world_size=2, master_port=29500, iterations=0, batch_size=0, checkpoint_every_s=0.0)
    e = JobEnv.read(env)
    assert (e.rank, e.world_size, e.iterations, e.batch_size) == (1, 2, 0, 0)


def test_files_the_environment_names_are_checked_with_the_variable_named(tmp_path):
    (tmp_path / "short").write_bytes(b"")
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ValueError, match=r"ROUNDHOUSE_LEASE='.*missing': not a lease file the agent made \(No such file"):
        Job({"ROUNDHOUSE_LEASE": str(tmp_path / "missing")})
    with pytest.raises(ValueError, match="ROUNDHOUSE_LEASE='.*short': not a lease file the agent made"):
        Job({"ROUNDHOUSE_LEASE": str(tmp_path / "short")})
    with pytest.raises(ValueError, match="ROUNDHOUSE_AGENT='nonsense': not an endpoint to report to"):
        Job({"ROUNDHOUSE_AGENT": "nonsense"})
    with pytest.raises(ValueError, match="ROUNDHOUSE_CHECKPOINT_DIR='.*a-file': not a folder"):
        Job({"ROUNDHOUSE_CHECKPOINT_DIR": str(tmp_path / "a-file")})
    for name, reason in (("missing.pt", "No such file"), ("garbage.pt", "invalid load key")):
        job = Job({"ROUNDHOUSE_RESUME": str(tmp_path / name), "ROUNDHOUSE_CHECKPOINT_DIR": str(tmp_path)})
        with pytest.raises(ValueError, match=rf"ROUNDHOUSE_RESUME='.*{name}': cannot read the checkpoint \({reason}"):
            job.resume()


NONSENSE = [
    ({"ROUNDHOUSE_BATCH_SIZE": "-4"}, "ROUNDHOUSE_BATCH_SIZE='-4': expected"),
    ({"ROUNDHOUSE_LEASE": "/nonexistent/lease"}, "ROUNDHOUSE_LEASE='/nonexistent/lease': not a lease file"),
    ({"ROUNDHOUSE_RESUME": "/nonexistent/a1-i5.pt"}, "ROUNDHOUSE_RESUME='/nonexistent/a1-i5.pt': cannot read"),
    ({"ROUNDHOUSE_BATCH_SIZE": "100000"}, "ROUNDHOUSE_BATCH_SIZE=100000: a dataset of"),
]


@pytest.fixture(scope="module")
def told_nonsense(tmp_path_factory):
    """The example workload run once with each of NONSENSE's environments, all side by side
    (each process spends its time importing PyTorch): index -> (exit status, stderr)."""
    processes = []
    for i, (env, _) in enumerate(NONSENSE):
        folder = tmp_path_factory.mktemp(f"nonsense{i}")
        full = dict(os.environ, ROUNDHOUSE_ITERATIONS="2", ROUNDHOUSE_CHECKPOINT_DIR=str(folder), OMP_NUM_THREADS="1")
        full.update(env)
        run = [sys.executable, "-m", "roundhouse.agents.workloads.recommend"]
        err = open(folder / "stderr.txt", "w+")
        processes.append((subprocess.Popen(run, env=full, stdout=subprocess.DEVNULL, stderr=err, text=True), err))
    done = {}
    try:
        for i, (process, err) in enumerate(processes):
            status = process.wait(timeout=120)
            err.seek(0)
            done[i] = (status, err.read())
    finally:
        for process, err in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
            err.close()
    return done


@pytest.mark.parametrize("case", range(len(NONSENSE)), ids=[f"env{i}-{m}" for i, (_, m) in enumerate(NONSENSE)])
def test_an_example_workload_told_nonsense_says_so_in_one_line(told_nonsense, case):
    status, stderr = told_nonsense[case]
    message = NONSENSE[case][1]
    assert status == 2, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith(f"roundhouse workload: {message}")


# --- checkpoints -------------------------------------------------------------------------------


def test_a_checkpoint_is_on_disk_before_it_is_named_and_a_failed_one_leaves_nothing(tmp_path, monkeypatch):
    import torch

    job = Job({"ROUNDHOUSE_CHECKPOINT_DIR": str(tmp_path / "ckpt"), "ROUNDHOUSE_ITERATIONS": "10"})
    job.track(model=torch.nn.Linear(2, 2))
    job.iteration = 3
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a))), real_replace(a, b)))
    path = job.save_checkpoint()
    assert path.endswith("a1-i3.pt") and torch.load(path, weights_only=False)["iteration"] == 3
    replaced = [i for i, e in enumerate(events) if e[0] == "replace"]
    synced = [i for i, e in enumerate(events) if e == ("fsync", events[replaced[0]][1])]
    assert synced and synced[0] < replaced[0]  # the file's bytes are durable before it gets its name

    def disk_full(state, f):
        f.write(b"half a checkpoint")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    job.iteration = 4
    with pytest.raises(OSError, match=r"ROUNDHOUSE_CHECKPOINT_DIR='.*ckpt': cannot write checkpoint a1-i4.pt \(No space"):
        job.save_checkpoint()
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["a1-i3.pt"]  # no half file, no leftover
    assert job.checkpoint_path == path  # the last good one is still the one the job names


# --- the profiler --------------------------------------------------------------------------------


def test_jobs_profiled_side_by_side_do_not_share_a_rendezvous_port(monkeypatch):
    """Two copies of a two-worker job at once: each needs its own rendezvous port. Ports drawn
    at random can coincide (made certain here), and one drawn port may be taken already."""
    import random

    from roundhouse.agents import profiler
    from roundhouse.agents.ports import first_outgoing_port

    monkeypatch.setattr(random, "randint", lambda a, b: 41234)
    ports = []
    spawn = profiler._Runner._spawn

    def recording(self, job, attempt, model, batch, gpus, iterations, port, resume):
        ports.append(port)
        return spawn(self, job, attempt, model, batch, gpus, iterations, port, resume)

    monkeypatch.setattr(profiler._Runner, "_spawn", recording)
    result = profiler.profile(["Recommendation"], {"Recommendation": [8]}, gpus=[2], seconds=1, concurrent=2, log=lambda _: None)
    assert len(result.measurements) == 1 and result.measurements[0].iters_per_s > 0
    assert len(ports) == 3 and len(set(ports)) == 3  # the two copies, and the relaunch from a checkpoint
    # Below the range the system gives outgoing connections, so none takes a port before its job listens.
    assert all(10000 <= port < first_outgoing_port() for port in ports)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_sizes": {"LM": [0]}}, "LM: batch size 0; give 1 or more"),
        ({"gpus": [0]}, "0 GPU(s); give 1 or more"),
        ({"concurrent": 0}, "concurrent 0: must be at least 1"),
        ({"seconds": float("nan")}, "seconds nan: must be a finite time above 0"),
    ],
)
def test_the_profiler_refuses_what_it_cannot_measure_before_starting_anything(kwargs, message):
    from roundhouse.agents.profiler import profile
    from roundhouse.errors import UsageError

    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        profile(["LM"], **kwargs)
