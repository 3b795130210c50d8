"""`roundhouse report` of a run made with a graph given by a relative path, from a folder other
than the one the run was started in; and checkpoints' temporary files that a worker killed
while writing one left behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from roundhouse.tools.cli import main

GRAPH = """\
round = 60s;
cluster = "1x2:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> JobMetrics;
"""


def _graph_section(page: str) -> str:
    return page[page.index("<h2>Graph</h2>") : page.index("<h2>Summary</h2>")]


@pytest.fixture
def started(tmp_path, monkeypatch):
    """A folder holding a graph and its trace, named relative to it (`TraceSource(path=
    "trace.csv")`), from which the graph is run."""
    start = tmp_path / "start"
    start.mkdir()
    rows = [{"job_id": i, "arrival_s": 30.0 * i, "gpus": 1 + i % 2, "duration_s": 400.0 + 90 * i} for i in range(8)]
    pl.DataFrame(rows).write_csv(start / "trace.csv")
    (start / "graph.sched").write_text(GRAPH)
    monkeypatch.chdir(start)
    return start


@pytest.mark.parametrize("out", ["out", "results/las/1"])
def test_report_draws_a_run_s_graph_from_any_folder_as_from_the_one_it_was_started_in(started, tmp_path, monkeypatch, out):
    assert main(["run", "graph.sched", "--cluster", "1x2:V100", "--out", out, "--quiet"]) == 0
    run = started / out
    assert main(["report", str(run), "-o", str(tmp_path / "there.html")]) == 0
    there = (tmp_path / "there.html").read_text()
    assert "data:image/svg+xml;base64," in _graph_section(there) and 'class="note"' not in there
    for elsewhere in (Path("/"), tmp_path):  # (neither holds a graph.sched or a trace.csv)
        monkeypatch.chdir(elsewhere)
        assert main(["report", str(run), "-o", str(tmp_path / "elsewhere.html")]) == 0
        assert (tmp_path / "elsewhere.html").read_text() == there


def test_a_trace_missing_since_the_run_is_named_in_a_note(started, tmp_path, monkeypatch, capsys):
    assert main(["run", "graph.sched", "--cluster", "1x2:V100", "--out", "out", "--quiet"]) == 0
    (started / "trace.csv").unlink()
    monkeypatch.chdir("/")
    assert main(["report", str(started / "out"), "-o", str(tmp_path / "r.html")]) == 0
    section = _graph_section((tmp_path / "r.html").read_text())
    assert "data:image" not in section and "Traceback" not in section + capsys.readouterr().err
    note = re.search(r'<p class="note">([^<]*)</p>', section)
    assert note is not None
    assert f"The graph graph.sched could not be drawn (read from {started}, where its file is)" in note.group(1)
    assert f"names no file: {started / 'trace.csv'}" in note.group(1)


# --- checkpoints' temporary files -----------------------------------------------------------------

# A worker of the client library writing a checkpoint, held once the file is on disk and before
# it is renamed into place (the test kills it there, or lets it live).
WRITER = """\
import os, sys, time
from pathlib import Path
from roundhouse.agents import client

real_fsync = os.fsync
def held(fd):
    real_fsync(fd)
    Path(sys.argv[2]).write_text("written")
    time.sleep(600)
os.fsync = held
client._write_checkpoint({"job": 1, "iteration": 3, "objects": {}}, Path(sys.argv[1]))
"""


def _job(tmp_path, attempt: int):
    from roundhouse.agents.client import Job, Lease

    lease = tmp_path / f"lease-{attempt}"
    Lease.create(lease)
    env = {
        "ROUNDHOUSE_JOB_ID": "1",
        "ROUNDHOUSE_ATTEMPT": str(attempt),
        "ROUNDHOUSE_ITERATIONS": "20",
        "ROUNDHOUSE_BATCH_SIZE": "8",
        "ROUNDHOUSE_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "ROUNDHOUSE_LEASE": str(lease),
        "ROUNDHOUSE_SEED": "3",
    }
    return Job(env)


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


def _writer_held(tmp_path, name: str) -> subprocess.Popen:
    """A worker process held in the middle of writing checkpoint `name`, its temporary file whole."""
    ready = tmp_path / f"{name}.ready"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "ckpt" / name), str(ready)])
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, "the writer ended before it wrote its checkpoint"
        assert time.monotonic() < deadline, "the writer never wrote its checkpoint"
        time.sleep(0.05)
    return proc


def test_a_later_save_or_load_removes_what_a_writer_killed_mid_write_left_but_not_a_live_one(tmp_path):
    killed = _writer_held(tmp_path, "a1-i3.pt")
    live = _writer_held(tmp_path, "a1-i4.pt")
    try:
        folder = tmp_path / "ckpt"
        left = _temporaries(folder)  # (each named for its writer's process)
        assert len(left) == 2 and left[0].startswith(f"a1-i3.tmp{killed.pid}") and left[1].startswith(f"a1-i4.tmp{live.pid}")
        killed.send_signal(signal.SIGKILL)
        assert killed.wait(timeout=30) == -signal.SIGKILL
        assert not (folder / "a1-i3.pt").exists()

        job = _job(tmp_path, attempt=2)  # the next attempt saves: the dead writer's file goes
        job.iteration = 5
        saved = Path(job.save_checkpoint())
        assert saved.is_file() and _temporaries(folder) == [left[1]]

        live.send_signal(signal.SIGKILL)  # and once the other writer is killed, a load removes it
        live.wait(timeout=30)
        assert _temporaries(folder) == [left[1]]
        resumed = _job(tmp_path, attempt=3)
        resumed.resume_path = str(saved)
        assert resumed.resume() == 5
        assert _temporaries(folder) == [] and sorted(p.name for p in folder.iterdir()) == [saved.name]
    finally:
        for proc in (killed, live):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_only_this_host_s_temporaries_of_dead_processes_are_removed(tmp_path):
    from roundhouse.agents import client

    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    dead, mine = done.pid, os.getpid()
    folder = tmp_path / "ckpt"
    folder.mkdir()
    names = {
        f"a1-i3.tmp{dead}": False,  # as earlier versions named them (no host): this host's
        f"a1-i4.tmp{dead}@{client._HOST}": False,
        f"a1-i5.tmp{mine}@{client._HOST}": True,  # a live process's
        f"a1-i6.tmp{dead}@another-node": True,  # another host's: its process cannot be seen
        f"notes.tmp{dead}": True,  # not a checkpoint's
    }
    for name in names:
        (folder / name).write_bytes(b"half a checkpoint")
    removed = client.remove_stale_temporaries(folder)
    assert sorted(removed) == sorted(folder / n for n, kept in names.items() if not kept)
    assert sorted(p.name for p in folder.iterdir()) == sorted(n for n, kept in names.items() if kept)
    assert client.remove_stale_temporaries(tmp_path / "no such folder") == []


def test_a_checkpoint_s_temporary_file_is_named_for_its_writer_s_process_and_host(tmp_path):
    proc = _writer_held(tmp_path, "a1-i3.pt")
    try:
        from roundhouse.agents import client

        assert _temporaries(tmp_path / "ckpt") == [f"a1-i3.tmp{proc.pid}@{client._HOST}"]
    finally:
        proc.kill()
        proc.wait()
