"""How many CPU threads an agent with fake GPUs gives each worker: the cores it may run on (not
the machine's) divided among its GPUs, at least one, or what `--threads-per-gpu` says; and it
says so in its first lines. Real agent processes, on a loopback port nobody answers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from roundhouse.tools.loopback import free_port
from tests.conftest import REPO

pytestmark = pytest.mark.live


def _start(folder, gpus: str, cores: set[int], *extra: str) -> subprocess.Popen:
    """Start an agent on `cores`, its work folder `folder`."""
    args = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--name", "a", "--fake-gpus", gpus]
    return subprocess.Popen(
        [sys.executable, "-m", "roundhouse.tools.cli", *args, "--workdir", str(folder), *extra],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
    )


def _threads_said(agent: subprocess.Popen) -> str:
    """Read an agent's log until it says how many threads, then stop it."""
    try:
        assert agent.stderr is not None
        for line in agent.stderr:
            if "CPU thread(s)" in line:
                return line.split("trains with ")[1].split(" CPU")[0]
        raise AssertionError("the agent never said how many threads its workers get")
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=30)


def test_a_worker_gets_the_cores_the_agent_may_use_divided_among_its_gpus(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    # (GPUs, cores allowed, more arguments) -> threads each worker gets.
    cases = [(("1:V100", {cores[0]}), "1")]  # one core allowed, whatever the machine has
    if len(cores) >= 2:
        cases += [(("1:V100", set(cores[:2])), "2"), (("2:V100", set(cores[:2])), "1")]
    cases += [(("4:V100", {cores[-1]}), "1")]  # at least one
    cases += [(("1:V100", {cores[-1]}, "--threads-per-gpu", "3"), "3")]
    # The agents start side by side (each spends its time importing, the one-core ones on
    # different cores where there are two), each in its own work folder.
    agents = [_start(tmp_path / str(i), *args) for i, (args, _) in enumerate(cases)]
    try:
        for agent, (args, threads) in zip(agents, cases):
            assert _threads_said(agent) == threads, args
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
