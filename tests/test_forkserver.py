"""The fork server: a worker forked from it runs its module as `python -m` would (folder,
environment, arguments, its own session, its log, its exit status), is signalled by its group,
trains with the threads it is given rather than the server's, and dies with the server; a
launch while the server is gone starts a new process instead. Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from roundhouse.agents.agent.forkserver import ForkedWorker, ForkServer
from roundhouse.agents.agent.processes import spawn_worker, start_workload, worker_environment

pytestmark = pytest.mark.live

PROBE = """
import json, os, sys
import torch
print(json.dumps({
    "cwd": os.getcwd(),
    "path0": sys.path[0],
    "argv0": os.path.basename(sys.argv[0]),
    "name": __name__,
    "marker": os.environ.get("PROBE_MARKER"),
    "own_session": os.getsid(0) == os.getpid(),
    "threads": torch.get_num_threads(),
}))
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


@pytest.fixture(scope="module")
def server():
    forks = ForkServer({**worker_environment(), "OMP_NUM_THREADS": "2"})
    assert forks.wait_ready()
    yield forks
    forks.close()


def _probe_env(folder, **more: str) -> dict[str, str]:
    env = worker_environment()
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env["PYTHONPATH"]])
    env.update(PROBE_MARKER="here", OMP_NUM_THREADS="1", **more)
    return env


def test_a_forked_worker_runs_its_module_as_python_m_would(server, tmp_path):
    modules, cwd = tmp_path / "modules", tmp_path / "job"
    modules.mkdir()
    cwd.mkdir()
    (modules / "probe_module.py").write_text(PROBE)
    env = _probe_env(modules)
    # The new process first: it spends seconds importing PyTorch while the forked ones run.
    fresh = spawn_worker([sys.executable, "-m", "probe_module"], env, cwd, tmp_path / "fresh.log")
    forked = server.start("probe_module", env, cwd, tmp_path / "forked.log")
    assert isinstance(forked, ForkedWorker)
    assert forked.wait(timeout=60) == 0
    failing = server.start("probe_module", {**env, "PROBE_EXIT": "3"}, cwd, tmp_path / "failing.log")
    assert failing.wait(timeout=60) == 3
    missing = server.start("no_such_module_here", env, cwd, tmp_path / "missing.log")
    assert missing.wait(timeout=60) == 1
    assert "No module named no_such_module_here" in (tmp_path / "missing.log").read_text()
    assert fresh.wait(timeout=60) == 0
    said = json.loads((tmp_path / "forked.log").read_text())
    assert said == json.loads((tmp_path / "fresh.log").read_text())
    # The server imported torch with two threads; the worker was given one.
    assert said == {
        "cwd": str(cwd),
        "path0": str(cwd),
        "argv0": "probe_module.py",
        "name": "__main__",
        "marker": "here",
        "own_session": True,
        "threads": 1,
    }


def test_forked_workers_are_signalled_by_their_group_and_die_with_the_server(tmp_path):
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(600)\n")
    env = _probe_env(tmp_path)
    forks = ForkServer(worker_environment())
    try:
        assert forks.wait_ready()
        signalled = forks.start("sleeper", env, tmp_path, tmp_path / "a.log")
        os.killpg(signalled.pid, signal.SIGTERM)  # its group exists as soon as it is started
        assert signalled.wait(timeout=10) == -signal.SIGTERM
        orphan = forks.start("sleeper", env, tmp_path, tmp_path / "b.log")
        time.sleep(0.3)
        assert orphan.poll() is None
    finally:
        forks.close()
    assert orphan.poll() == -signal.SIGKILL
    deadline = time.time() + 10
    while time.time() < deadline and _alive(orphan.pid):
        time.sleep(0.05)
    assert not _alive(orphan.pid), "the server's child outlived it"


def test_a_launch_while_the_server_is_gone_starts_a_new_process(tmp_path):
    (tmp_path / "quick.py").write_text("print('ran')\n")
    forks = ForkServer(worker_environment())
    try:
        assert forks.wait_ready()
        os.kill(forks.pid, signal.SIGKILL)
        deadline = time.time() + 10
        while forks.ready() and time.time() < deadline:
            time.sleep(0.05)
        assert forks.lost
        worker = start_workload(forks, "quick", _probe_env(tmp_path), tmp_path, tmp_path / "c.log")
        assert isinstance(worker, subprocess.Popen)
        assert worker.wait(timeout=60) == 0
        assert (tmp_path / "c.log").read_text().strip() == "ran"
    finally:
        forks.close()


def _alive(pid: int) -> bool:
    """Running (a zombie left to an init that does not reap counts as dead)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\tZ" not in next(line for line in f if line.startswith("State:"))
    except (FileNotFoundError, StopIteration):
        return False
