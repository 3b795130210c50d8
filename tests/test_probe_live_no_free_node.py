"""An agent whose GPUs fit no free node of the cluster is told which it is: every node of its
shape is taken (naming by whom), or the cluster has no node of that shape at all (the agent's
GPUs, or the cluster `serve` was given, disagree). Real scheduler and agents on loopback; every
process stops by itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.livecluster import TEST_PROFILE, free_port, stop, wait_until

GRAPH = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
LiveSource -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""
CLI = [sys.executable, "-m", "roundhouse.tools.cli"]


def _agent(address: str, name: str, gpus: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "agent", "--scheduler", address, "--insecure", "--name", name, "--fake-gpus", gpus, "--emulate", "--nodes", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.live
def test_an_agent_that_fits_no_free_node_is_told_whether_the_nodes_are_taken_or_missing(tmp_path):
    (tmp_path / "g.sched").write_text(GRAPH)
    (tmp_path / "profile.csv").write_text(TEST_PROFILE)
    address = f"tcp://127.0.0.1:{free_port()}"
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        scheduler = subprocess.Popen(
            [*CLI, "serve", str(tmp_path / "g.sched"), "--bind", address, "--insecure"]
            + ["--checkpoints", str(tmp_path / "ck"), "--wait-for-agents", "0s", "--until", "40s"],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    first = subprocess.Popen(
        [*CLI, "agent", "--scheduler", address, "--insecure", "--name", "a", "--fake-gpus", "2:V100", "--emulate"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: "node a registered" in log_path.read_text(), 30, "agent a to register", log_path.read_text)
        taken = _agent(address, "b", "2:V100")
        assert taken.returncode == 2, taken.stderr
        assert "has no free node with 2 V100 GPU(s) for node b-0: every such node is taken (by a)" in taken.stderr, taken.stderr
        missing = _agent(address, "c", "4:V100")
        assert missing.returncode == 2, missing.stderr
        assert "for node c-0: none of its nodes has 4 V100 GPU(s); start the agent with the GPUs of one" in missing.stderr, (
            missing.stderr
        )
        assert "Traceback" not in taken.stderr + missing.stderr
    finally:
        stop(first, timeout=20)
        stop(scheduler, timeout=20)
    assert "Traceback" not in log_path.read_text()
