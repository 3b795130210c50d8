"""An agent's work folder (leases, job logs, the jobs' working folders, the reports socket) is
removed when the agent exits, however it exits, unless `--keep-workdir`; the agent says where
it was. Real agents and schedulers on 127.0.0.1."""

from __future__ import annotations

import re
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from roundhouse.tools.keys_cmd import make_keys
from tests.livecluster import TEST_PROFILE, LiveCluster

GRAPH = """
round = 1s;
cluster = "3x1:V100";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""
JOBS = "job_id,arrival_s,gpus,model,iterations,batch_size\n" + "".join(f"{i},0,1,LM,60,10\n" for i in range(3))


def _agent(cluster: LiveCluster, name: str, *extra: str, gpus: str = "1:V100"):
    """An agent as a user starts it: no --workdir unless `extra` gives one. Three agents share
    this machine's cores, so each job gets one thread (by default each agent would give its one
    job every core, and six spinning threads on two cores slowed the jobs tenfold)."""
    args = [
        "agent",
        "--scheduler",
        cluster.address,
        "--name",
        name,
        "--fake-gpus",
        gpus,
        "--emulate",
        "--threads-per-gpu",
        "1",
        *extra,
    ]
    return cluster._spawn(name, args)


@pytest.fixture
def temp(monkeypatch):
    """The agents' temporary folder (TMPDIR), so that the test sees what they leave there; its
    path is short enough for the agent's ipc socket (about 100 bytes at most; pytest's are longer)."""
    folder = Path(tempfile.mkdtemp(prefix="rh-test-"))
    monkeypatch.setenv("TMPDIR", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _work_folder(log: str) -> Path:
    found = re.search(r"work folder (\S+)", log)
    assert found, log
    return Path(found.group(1))


@pytest.mark.live
@pytest.mark.slow
def test_agents_remove_their_work_folders_unless_asked_to_keep_them(tmp_path, temp):
    named = tmp_path / "named"  # a folder the user gives, holding a file of theirs
    named.mkdir()
    (named / "mine.txt").write_text("the user's")
    cluster = LiveCluster(tmp_path / "run", GRAPH, {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS})
    try:
        cluster.start_scheduler()
        _agent(cluster, "plain", "--insecure")
        _agent(cluster, "named", "--insecure", "--workdir", str(named))
        _agent(cluster, "keeper", "--insecure", "--keep-workdir")
        # (Three fork servers import PyTorch at once before the jobs start: slow on two cores.)
        cluster.wait_for(lambda: len(cluster.query("SELECT * FROM exits WHERE outcome = 'done'")) == 3, 120, "the jobs")
        # One job ran on each agent (three one-GPU jobs, three one-GPU nodes).
        assert sorted(row[0] for row in cluster.query("SELECT node FROM exits")) == ["keeper", "named", "plain"]
        assert "each worker (a job process on one GPU) trains with 1 CPU thread(s)" in cluster.log("plain")
        plain = _work_folder(cluster.log("plain"))
        assert plain.parent == temp and plain.name.startswith("rh-plain-")
        assert list((plain / "logs").iterdir()) and (plain / "reports.sock").exists()
        assert list((named / "logs").iterdir())

        for name in ("plain", "named"):
            cluster.kill(name, signal.SIGTERM)
            assert cluster.processes[name].returncode == 0, cluster.log(name)
        assert not plain.exists(), sorted(plain.rglob("*"))
        assert f"removed its work folder {plain}" in cluster.log("plain")
        # In a folder the user named, only what the agent made goes.
        assert sorted(p.name for p in named.iterdir()) == ["mine.txt"]
        assert f"removed its files (leases, logs, jobs) from {named}" in cluster.log("named")

        cluster.kill("keeper", signal.SIGTERM)
        kept = _work_folder(cluster.log("keeper"))
        assert sorted(p.name for p in kept.iterdir()) == ["jobs", "leases", "logs"]
        assert len(list((kept / "logs").glob("job-*.log"))) == 1  # the log of the job it ran
        assert f"kept its work folder {kept}" in cluster.log("keeper")
    finally:
        cluster.close()


@pytest.mark.live
@pytest.mark.slow
def test_refused_agents_remove_their_work_folders(tmp_path, temp):
    keys = tmp_path / "keys"
    make_keys(keys, ["node-a"])
    strangers = tmp_path / "strangers"
    make_keys(strangers, ["mallory"])
    (strangers / "scheduler.key").write_bytes((keys / "scheduler.key").read_bytes())
    cluster = LiveCluster(
        tmp_path / "run",
        GRAPH,
        {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS},
        security=("--keys", str(keys)),
        serve_args=("--wait-for-agents", "0s"),
    )
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "round 0 starts" in cluster.log("scheduler"), 30, "the scheduler")
        # Refused at the handshake: a key the scheduler does not know.
        mallory = _agent(cluster, "mallory", "--keys", str(strangers))
        # Refused at registration: a known key, but a node that fits no node of the cluster.
        node_a = _agent(cluster, "node-a", "--keys", str(keys), gpus="3:V100")
        assert mallory.wait(timeout=30) == 2, cluster.log("mallory")
        assert node_a.wait(timeout=30) == 2, cluster.log("node-a")
        assert "refused this agent" in cluster.log("mallory")
        assert "refused to register node node-a" in cluster.log("node-a")
        for name in ("mallory", "node-a"):
            folder = _work_folder(cluster.log(name))
            assert folder.parent == temp
            assert f"removed its work folder {folder}" in cluster.log(name)
        assert list(temp.iterdir()) == []
    finally:
        cluster.close()
