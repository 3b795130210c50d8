"""Live mode's leftovers: one scheduler per journal whatever name reaches it (a hard link too),
and the live benchmarks' loopback cluster (benchmarks/live_common.py) leaving no folder and no
process behind, however its start is cut short. Every process a test starts is stopped by the
test itself (`LiveCluster.close`, `stop`, or a bounded `subprocess.run`)."""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.backends.live.submissions import as_submitted
from roundhouse.runtime.journal import Journal
from tests.conftest import REPO
from tests.livecluster import LiveCluster, free_port, stop

BENCH = REPO / "benchmarks"

GRAPH = """
round = 1s;
cluster = "1x2:V100";
src :: LiveSource(jobs=2);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def _holder(path: Path, lock_first: bool = False) -> subprocess.Popen:
    """Another process holding journal `path` as a scheduler does (locked once opened, or, with
    `lock_first`, before SQLite opens it, as `serve` does), until killed."""
    opened = f"Journal({str(path)!r}, lock=True)" if lock_first else f"Journal({str(path)!r}); j.lock()"
    code = f"from roundhouse.runtime.journal import Journal; import time\nj = {opened}\n"
    code += "j.add_round(0, 0.0, {}); j.commit(); print('locked', flush=True); time.sleep(60)\n"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "locked"
    return child


# --- one scheduler per journal, by any name ---
@pytest.mark.parametrize("lock_first", [False, True])
def test_a_journal_reached_through_a_hard_link_is_locked_by_its_holder(tmp_path, lock_first):
    """The lock was taken on a lock file named after the path: a hard link is another path, so
    its lock file was another file, and a second scheduler ran on the same journal."""
    path, link = tmp_path / "j.sqlite", tmp_path / "other" / "link.sqlite"
    link.parent.mkdir()
    child = _holder(path, lock_first)
    try:
        os.link(path, link)
        busy = rf"journal {link} is in use by another scheduler \(pid {child.pid}\); stop it first"
        with pytest.raises(UsageError, match=busy):
            Journal(link, lock=True)
        assert not link.with_name("link.sqlite-wal").exists()  # (refused before SQLite opened it by that name)
        with pytest.raises(UsageError, match="the file has 2 names"):
            Journal(link)  # (read through a second name, it would miss what the write-ahead log holds)
        assert path.exists() and link.exists()
    finally:
        child.kill()
        child.wait()
    # The holder gone, the lock went with it; the second name is still refused, the first is not.
    with pytest.raises(UsageError, match="the file has 2 names"):
        Journal(link, lock=True)
    link.unlink()
    Journal(path, lock=True).close()


def test_a_journal_made_by_its_first_scheduler_is_locked_from_the_start(tmp_path):
    path = tmp_path / "j.sqlite"
    first = Journal(path, lock=True)
    assert path.exists() and (tmp_path / "j.sqlite.lock").read_text() == f"{os.getpid()}\n"
    with pytest.raises(UsageError, match=rf"journal {path} is in use by another scheduler \(pid {os.getpid()}\)"):
        Journal(path, lock=True)
    first.close()
    assert path.exists() and not (tmp_path / "j.sqlite.lock").exists()


def test_an_empty_journal_another_scheduler_holds_is_not_removed(tmp_path):
    """Two schedulers started at once on a journal not there yet each think they made it: the
    one refused must not remove the one the other runs on as empty."""
    path = tmp_path / "j.sqlite"
    child = _holder(path)
    try:
        journal = Journal(path)
        journal.close(remove_if_empty=True)
        assert path.exists()
    finally:
        child.kill()
        child.wait()


def test_an_empty_journal_is_removed_by_its_holder(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = Journal(path, lock=True)
    journal.close(remove_if_empty=True)
    assert sorted(tmp_path.iterdir()) == []


@pytest.mark.live
def test_a_second_scheduler_on_a_journal_reached_through_a_hard_link_is_refused(tmp_path):
    with LiveCluster(tmp_path / "c", GRAPH) as cluster:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "waiting for agents" in cluster.log("scheduler"), 20, "the first scheduler to start")
        link = tmp_path / "link.sqlite"
        os.link(cluster.journal_path, link)
        second = subprocess.run(
            [sys.executable, "-m", "roundhouse.tools.cli", "serve", str(cluster.graph), "--bind",
             f"tcp://127.0.0.1:{free_port()}", "--insecure", "--journal", str(link), "--checkpoints", str(tmp_path / "ck2")],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert second.returncode == 2, second.stdout + second.stderr
        pid = cluster.processes["scheduler"].pid
        assert f"journal {link} is in use by another scheduler (pid {pid})" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
        assert cluster.processes["scheduler"].poll() is None  # (the first one runs on)
        assert link.exists() and not Path(f"{link}-wal").exists()


# --- the live benchmarks' cluster ---
def _live_common():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("live_common")


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _recording_folders(monkeypatch, live_common) -> list[Path]:
    made: list[Path] = []
    real = live_common.tempfile.mkdtemp

    def mkdtemp(**kwargs):
        made.append(Path(real(**kwargs)))
        return str(made[-1])

    monkeypatch.setattr(live_common.tempfile, "mkdtemp", mkdtemp)
    return made


def test_a_benchmark_cluster_interrupted_before_it_is_made_leaves_no_folder(monkeypatch):
    live_common = _live_common()
    made = _recording_folders(monkeypatch, live_common)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(live_common, "Loopback", interrupted)
    with pytest.raises(KeyboardInterrupt), live_common.live_cluster("rh-test-leftovers-", "round = 1s;"):
        pytest.fail("the body ran")
    assert len(made) == 1 and not made[0].exists()


@pytest.mark.live
def test_a_benchmark_cluster_interrupted_while_its_scheduler_starts_leaves_nothing(monkeypatch, capfd):
    live_common = _live_common()
    made = _recording_folders(monkeypatch, live_common)
    started = []
    start = live_common.Loopback.start_scheduler

    def interrupted(cluster):
        started.append(start(cluster))
        cluster.wait_for(lambda: _listening(cluster.port), 30, "the scheduler to listen")
        raise KeyboardInterrupt  # (Ctrl-C while the benchmark starts its cluster)

    monkeypatch.setattr(live_common.Loopback, "start_scheduler", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt), live_common.running_scheduler(1, 1):
            pytest.fail("the body ran")
        assert len(made) == 1 and not made[0].exists()
        assert len(started) == 1 and started[0].poll() is not None
        assert "the run did not finish" not in capfd.readouterr().err  # (an interrupt is no failure to explain)
    finally:
        for process in started:
            stop(process, 5)


@pytest.mark.live
def test_a_benchmark_cluster_whose_agent_fails_to_start_keeps_its_logs_and_says_why(capfd):
    live_common = _live_common()
    processes = []
    with pytest.raises(RuntimeError, match="the agent did not register"):
        with live_common.running_scheduler(1, 1) as cluster:
            folder = cluster.folder
            processes.append(cluster.processes["scheduler"])
            processes.append(cluster.start_agent("a", "1:V100", ("--insecure", "--no-such-flag")))
            cluster.wait_for(lambda: processes[-1].poll() is not None, 30, "the agent to refuse its flag")
            raise RuntimeError("the agent did not register")
    try:
        assert (folder / "scheduler.log").is_file()  # (kept for its logs: a failure to look into)
        assert all(process.poll() is not None for process in processes)
        err = capfd.readouterr().err
        assert f"the run did not finish; its folder (logs included) is kept: {folder}" in err
        assert "the end of its logs:" in err and "===== scheduler =====" in err
        assert "no-such-flag" in err  # (the agent's own words, from its log)
    finally:
        for process in processes:
            stop(process, 5)
        shutil.rmtree(folder, ignore_errors=True)


# --- a refused submission, as the scheduler logs it ---
def test_a_refusal_is_logged_naming_a_job_without_an_id_by_its_row():
    """The scheduler named a refused job by the id it chose for it, which the job never had (and
    the next job accepted may be given): the submitter named it right, the log did not."""
    specs = [{"job_id": 5, "model": "LM"}, {"model": "NoSuchModel"}, {"model": "LM", "job_id": 7}]
    reason = "submission:2: error: job 0: model 'NoSuchModel' is not in the profile"
    assert (
        as_submitted(reason, specs)
        == "row 2 of the submission (which gave no job id): error: model 'NoSuchModel' is not in the profile"
    )
    reason = "submission:2: error: column 'gpus': job 0 asks for 9 GPUs"
    assert (
        as_submitted(reason, specs) == "row 2 of the submission (which gave no job id): error: column 'gpus': it asks for 9 GPUs"
    )
    reason = "submission:3: error: job 7: iterations 2.5 is not a whole number"  # (its own id: kept)
    assert as_submitted(reason, specs) == "row 3 of the submission: error: job 7: iterations 2.5 is not a whole number"
    for reason in ("no jobs in the submission", "submission:9: error: job 0: out of range", "the key of agent a submits no jobs"):
        assert as_submitted(reason, specs) == reason


@pytest.mark.live
def test_the_scheduler_logs_a_refused_submitted_job_as_the_submitter_named_it(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,model,iterations,gpus\n5,LM,100,1\n,NoSuchModel,100,1\n")
    with LiveCluster(tmp_path / "c", GRAPH) as cluster:
        cluster.start_scheduler()
        cluster.wait_for(lambda: "waiting for agents" in cluster.log("scheduler"), 20, "the scheduler to start")
        submit = subprocess.run(
            [sys.executable, "-m", "roundhouse.tools.cli", "submit", cluster.address, str(trace), "--insecure"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert submit.returncode != 0 and f"{trace}:3: error: model 'NoSuchModel' is not in the profile" in submit.stderr
        cluster.wait_for(lambda: "refused a submission" in cluster.log("scheduler"), 10, "the refusal to be logged")
        (line,) = [line for line in cluster.log("scheduler").splitlines() if "refused a submission" in line]
        assert "refused a submission: row 2 of the submission (which gave no job id): error: model 'NoSuchModel'" in line, line
        assert "job 0" not in line and "submission:2" not in line
