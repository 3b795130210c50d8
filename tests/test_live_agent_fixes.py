"""Agents as processes: what a command job starts dies with its worker and with a SIGKILLed
agent; a second agent refuses a work folder a live agent uses; a 2-GPU job on emulated nodes,
revoked through its rank 0, ends on both ranks at one iteration. Real schedulers and agents on
127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from roundhouse.agents.submitter import Submitter
from roundhouse.tools.loopback import free_port
from roundhouse.wire.security import ClientSecurity
from tests.livecluster import TEST_PROFILE, LiveCluster, stop, wait_until

pytestmark = [pytest.mark.live]


def _sleepers(seconds: str) -> list[int]:
    """The living processes running `sleep SECONDS` (a zombie counts as dead)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes() != f"sleep\0{seconds}\0".encode():
                continue
            state = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if "\tZ" not in state:
            found.append(int(entry.name))
    return found


def _marker(n: int) -> str:
    """A `sleep` duration no other process on the machine runs."""
    return f"{7000 + n}.{os.getpid()}"


def _kill_all(seconds: str) -> None:
    for pid in _sleepers(seconds):  # (a failed test leaves nothing behind)
        os.kill(pid, signal.SIGKILL)


STAND_IN = """
import sys, time
from pathlib import Path
from roundhouse.agents.agent.guardian import Guardian
from roundhouse.agents.agent.processes import spawn_worker, worker_environment

folder = Path(sys.argv[1])
guardian = Guardian()
worker = spawn_worker(["sh", "-c", f"sleep {sys.argv[2]}; true"], worker_environment(), folder, folder / "w.log")
guardian.watch(worker.pid)
print(worker.pid, flush=True)
time.sleep(600)
"""


def test_what_a_worker_started_dies_when_its_agent_is_killed(tmp_path):
    """An agent's stand-in, as it starts a command job's worker, SIGKILLed."""
    marker = _marker(1)
    agent = subprocess.Popen([sys.executable, "-c", STAND_IN, str(tmp_path), marker], stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None
        worker = int(agent.stdout.readline())
        wait_until(lambda: _sleepers(marker), 10, "the worker's child")
        assert os.getpgid(_sleepers(marker)[0]) == worker  # in the worker's group, not its own
        agent.kill()
        agent.wait(timeout=10)
        wait_until(lambda: not _sleepers(marker), 10, "the worker's child to die with the agent")
    finally:
        stop(agent)
        _kill_all(marker)


GRAPH = """
round = 1s;
cluster = "1x2:V100";
src :: LiveSource;
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


@pytest.mark.slow
def test_a_command_job_s_processes_go_with_its_worker_and_with_a_killed_agent(tmp_path):
    left, running = _marker(2), _marker(3)
    cluster = LiveCluster(tmp_path, GRAPH)
    try:
        cluster.start_scheduler()
        cluster.start_agent("a", "2:V100", emulate=False)
        with Submitter(cluster.address, ClientSecurity(None), timeout_s=30) as client:
            cluster.wait_for(lambda: client.status()["gpus_online"] == 2, 30, "the agent")
            client.submit(
                [
                    {"command": f"sh -c 'sleep {left} & exit 0'", "duration_s": 60, "gpus": 1},
                    {"command": f"sh -c 'sleep {running}; true'", "duration_s": 600, "gpus": 1},
                ]
            )
        cluster.wait_for(lambda: cluster.query("SELECT outcome FROM exits WHERE job_id = 0") == [("done",)], 30, "job 0")
        cluster.wait_for(lambda: _sleepers(running), 30, "job 1's child")
        # Job 0's worker exited leaving a child behind: it went with it. (The agent kills the
        # worker's group as it reports the exit; the child, woken by SIGKILL, may take a moment
        # to die on a loaded machine.)
        wait_until(lambda: not _sleepers(left), 10, "job 0's child to die with its worker")
        cluster.kill("a", signal.SIGKILL)
        wait_until(lambda: not _sleepers(running), 10, "job 1's child to die with the agent")
    finally:
        cluster.close()
        _kill_all(left)
        _kill_all(running)


def test_a_second_agent_refuses_a_work_folder_a_live_agent_uses(tmp_path):
    shared = tmp_path / "new" / "shared"
    args = [sys.executable, "-m", "roundhouse.tools.cli", "agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}"]
    args += ["--insecure", "--fake-gpus", "1:V100", "--emulate", "--workdir", str(shared)]
    with open(tmp_path / "a.log", "wb") as out:
        first = subprocess.Popen([*args, "--name", "a"], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "work folder" in (tmp_path / "a.log").read_text(), 30, "the first agent")
        # (The reports socket is a file only where the folder's path is short enough for one.)
        before = sorted(path.name for path in shared.iterdir())
        second = subprocess.run([*args, "--name", "b"], capture_output=True, text=True, timeout=30)
        assert second.returncode == 2, second.stderr
        assert f"--workdir {shared}: another agent is using this work folder" in second.stderr
        assert "Traceback" not in second.stderr
        assert first.poll() is None and sorted(path.name for path in shared.iterdir()) == before
        assert {"agent.lock", "leases", "logs", "jobs"} <= set(before)
    finally:
        stop(first)
    assert first.returncode == 0
    assert not (tmp_path / "new").exists()  # the first agent made it, parent included


LAS = """
round = 1s;
cluster = "2x2:V100";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;
"""
# A 2-GPU job alone at first; three 1-GPU jobs, arriving later with no service, preempt it.
LAS_JOBS = "job_id,arrival_s,gpus,model,iterations,batch_size\n0,0,2,ResNet-18,3000,16\n" + "".join(
    f"{i},2,1,LM,1500,10\n" for i in (1, 2, 3)
)


@pytest.mark.slow
def test_a_revoked_two_gpu_job_on_emulated_nodes_ends_on_both_ranks(tmp_path):
    cluster = LiveCluster(tmp_path, LAS, {"profile.csv": TEST_PROFILE, "jobs.csv": LAS_JOBS})
    try:
        cluster.start_scheduler()
        cluster.start_agent("emu", "2:V100", nodes=2)
        first = "SELECT rank, outcome, iteration, checkpoint_iteration FROM exits WHERE job_id = 0 AND attempt = 1"
        cluster.wait_for(lambda: len(cluster.query(first)) == 2, 60, "both ranks of job 0's first attempt")
        (r0, outcome0, it0, ck0), (r1, outcome1, it1, ck1) = sorted(cluster.query(first))
        assert (r0, r1) == (0, 1)
        assert outcome0 == outcome1 == "preempted"
        assert it0 == it1 == ck0 == ck1 and 0 < it0 < 3000
    finally:
        cluster.close()
