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


def _threads_said(tmp_path, gpus: str, cores: set[int], *extra: str) -> str:
    """Start an agent on `cores`, read its log until it says how many threads, stop it."""
    args = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--name", "a", "--fake-gpus", gpus]
    agent = subprocess.Popen(
        [sys.executable, "-m", "roundhouse.tools.cli", *args, "--workdir", str(tmp_path), *extra],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
    )
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
    assert _threads_said(tmp_path, "1:V100", {cores[0]}) == "1"  # one core allowed, whatever the machine has
    if len(cores) >= 2:
        assert _threads_said(tmp_path, "1:V100", set(cores[:2])) == "2"
        assert _threads_said(tmp_path, "2:V100", set(cores[:2])) == "1"
    assert _threads_said(tmp_path, "4:V100", {cores[0]}) == "1"  # at least one
    assert _threads_said(tmp_path, "1:V100", {cores[0]}, "--threads-per-gpu", "3") == "3"
