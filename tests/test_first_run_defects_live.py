"""Defects found running live mode as a new user meets it (docs/live.md's walkthrough, then bad
input, signals, crashes and restarts), on loopback. Every process a test starts is stopped by the
test itself (`LiveCluster.close`, or a bounded `subprocess.run`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.livecluster import LiveCluster, free_port

pytestmark = pytest.mark.live

GRAPH = """
round = 1s;
cluster = "1x2:V100";
src :: LiveSource(jobs=2);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def _roundhouse(*args: str, cwd=None, timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_a_second_scheduler_on_a_journal_reached_through_a_symbolic_link_is_refused(tmp_path):
    """The journal's lock file was named after the path given, so a second `serve` given a
    symbolic link to a journal in use locked another file and ran on the same journal, each
    scheduler writing its own rounds into it."""
    with LiveCluster(tmp_path, GRAPH) as cluster:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "waiting for agents" in cluster.log("scheduler"), 20, "the first scheduler to start")
        link = tmp_path / "link.sqlite"
        link.symlink_to(cluster.journal_path)
        second = _roundhouse(
            "serve", str(cluster.graph), "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure",
            "--journal", str(link), "--checkpoints", str(tmp_path / "ck2"), timeout=10,
        )  # fmt: skip
        assert second.returncode == 2, second.stdout + second.stderr
        pid = cluster.processes["scheduler"].pid
        assert f"journal {link} is in use by another scheduler (pid {pid})" in second.stderr
        assert "Traceback" not in second.stderr
        assert cluster.processes["scheduler"].poll() is None  # (the first one runs on)
    assert not os.path.exists(f"{cluster.journal_path}.lock")  # (released as the first one stopped)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1].startswith("Z")  # (a zombie has ended)
    except FileNotFoundError:
        return True


def _one_job_running(cluster) -> int:
    """A scheduler and agent a, running one job that sleeps (it ignores its lease): its worker's pid."""
    cluster.start_scheduler()
    cluster.start_agent("a")
    cluster.wait_for(lambda: "round 0 starts now" in cluster.log("scheduler"), 30, "round 0")
    sent = _roundhouse("submit", cluster.address, "--insecure", "--command", "sleep 60", "--duration", "1min")
    assert sent.returncode == 0, sent.stderr
    cluster.wait_for(lambda: "started job 0 attempt 1" in cluster.log("a"), 20, "job 0 to start")
    line = next(x for x in cluster.log("a").splitlines() if "started job 0 attempt 1" in x)
    return int(line.rsplit("(pid ", 1)[1].split(")")[0])


def test_a_second_ctrl_c_stops_an_agent_whose_worker_does_not_stop_without_waiting_out_the_grace(tmp_path):
    """An agent stopped by Ctrl-C revokes its workers and waits up to --revoke-grace (a minute by
    default) for them to checkpoint; a second Ctrl-C did nothing, so a job that ignores its lease
    (a command without the client library) held the terminal for the whole grace. The scheduler
    already ends its waits on a second signal; now the agent does too: it kills its workers at
    once and exits."""
    with LiveCluster(tmp_path, GRAPH) as cluster:
        worker = _one_job_running(cluster)  # (agent a: --revoke-grace 30s)
        agent = cluster.processes["a"]
        agent.send_signal(2)
        cluster.wait_for(lambda: "agent a stopping (signal SIGINT)" in cluster.log("a"), 10, "the agent to start stopping")
        assert agent.poll() is None  # (still waiting for the worker to checkpoint)
        agent.send_signal(2)
        assert cluster.wait_exit("a", 10) == 0
        cluster.wait_for(lambda: _gone(worker), 5, f"worker {worker} to be gone")
        assert "SIGINT again kills its workers now" in cluster.log("a")  # (said at the first)
        assert "again while stopping: killing 1 worker(s) now" in cluster.log("a")
        assert "Traceback" not in cluster.log("a")


def test_a_trace_file_submit_cannot_tell_the_format_of_says_how_to_name_it(tmp_path):
    """`submit FILE` with a file whose format it could not tell said "name it (one of ...)", but
    submit had no way to name a format. It takes --format now, and the message says so."""
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("- model: LM\n  iterations: 10\n")
    address = f"tcp://127.0.0.1:{free_port()}"  # (nothing listens: every case is refused before sending)
    told = _roundhouse("submit", address, "--insecure", str(jobs), "--timeout", "1s")
    assert told.returncode == 2
    assert "cannot tell the trace format" in told.stderr
    assert "name it with --format (one of canonical, gavel," in told.stderr
    named = _roundhouse("submit", address, "--insecure", str(jobs), "--format", "canonical", "--timeout", "1s")
    assert named.returncode == 2
    assert f"{jobs}: error: missing column 'gpus'" in named.stderr  # (read as the format named)
    unknown = _roundhouse("submit", address, "--insecure", str(jobs), "--format", "csv", "--timeout", "1s")
    assert "unknown trace format 'csv'; use one of auto, canonical," in unknown.stderr
    alone = _roundhouse("submit", address, "--insecure", "--format", "gavel", "--model", "LM", "--iterations", "5")
    assert alone.returncode == 2
    assert "--format gavel names a trace file's format" in alone.stderr
    for run in (told, named, unknown, alone):
        assert "Traceback" not in run.stderr


def test_an_agent_killed_leaves_no_work_folder_behind(tmp_path):
    """An agent removes the work folder it made when it exits; killed (SIGKILL, the OOM killer)
    it could not, and each crash left its folder (job logs, leases, the jobs' folders) in /tmp.
    Its guardian, which outlives it to kill its workers, now removes the folder too."""
    with LiveCluster(tmp_path, GRAPH) as cluster:
        worker = _one_job_running(cluster)  # (agent a: --workdir tmp_path/a, which it makes)
        folder = tmp_path / "a"
        assert (folder / "logs").is_dir()
        cluster.kill("a")  # (SIGKILL)
        cluster.wait_for(lambda: _gone(worker), 5, f"worker {worker} to be gone")
        cluster.wait_for(lambda: not folder.exists(), 5, f"{folder} to be removed")
        # An agent started again in its place makes the folder afresh and serves as before.
        cluster.start_agent("a")
        cluster.wait_for(lambda: cluster.log("a").count("agent a registered as node") == 2, 20, "a to register again")
        assert (folder / "agent.lock").exists()


def test_an_agent_that_keeps_its_work_folder_keeps_it_when_killed(tmp_path):
    with LiveCluster(tmp_path, GRAPH) as cluster:
        cluster.start_scheduler()
        cluster.start_agent("a", extra=("--insecure", "--keep-workdir"))
        cluster.wait_for(lambda: "node a registered" in cluster.log("scheduler"), 30, "a to register")
        cluster.kill("a")
        time.sleep(1.5)  # (the guardian acts within milliseconds of the agent's death)
        assert (tmp_path / "a" / "logs").is_dir()


def test_an_agent_given_an_empty_name_is_refused_not_named_after_the_host(tmp_path):
    """`--name ""` (`--name "$NODE"` with NODE unset) was taken as no name: the agent ran as the
    host's name, and a second one on the machine clashed with it. An empty name is refused as
    any bad name is, before anything starts."""
    address = f"tcp://127.0.0.1:{free_port()}"
    for extra in (("--workdir", str(tmp_path / "w")), ("--emulate", "--nodes", "2")):
        run = _roundhouse(
            "agent", "--scheduler", address, "--insecure", "--name", "", "--fake-gpus", "1:V100", *extra, timeout=10
        )  # fmt: skip
        assert run.returncode == 2, run.stderr
        assert "error: bad --name '': use up to 64 letters, digits" in run.stderr
        assert "Traceback" not in run.stderr
    assert not (tmp_path / "w").exists()


def _guardian_told(folder: Path) -> None:
    """A guardian told `folder` is its agent's work folder, whose agent then dies (its end of
    the pipe closes without a word)."""
    from roundhouse.agents.agent import guardian

    read, write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", guardian.__file__, str(read)], pass_fds=(read,), stdin=subprocess.DEVNULL
    )
    os.close(read)
    os.write(write, f"!{folder}\n".encode())
    os.close(write)
    assert process.wait(timeout=30) == 0


def test_a_killed_agents_guardian_leaves_its_folder_to_an_agent_that_took_it_since(tmp_path):
    import fcntl

    taken = tmp_path / "taken"
    (taken / "jobs").mkdir(parents=True)
    fd = os.open(taken / "agent.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (as a live agent holds it)
    try:
        _guardian_told(taken)
        assert (taken / "jobs").is_dir() and (taken / "agent.lock").exists()
    finally:
        os.close(fd)
    left = tmp_path / "left"
    (left / "jobs").mkdir(parents=True)
    (left / "agent.lock").write_text("12345\n")  # (its agent killed: nobody holds the lock)
    _guardian_told(left)
    assert not left.exists()
