"""The live scheduler's server side, after a review: jobs accepted while a run waits for its
agents belong to that run's graph and cluster, so another graph's `serve` refuses the journal
rather than failing on them at round 0 and leaving the journal begun under the wrong graph; a
journal SQLite cannot open is refused saying why (a link to a file in no folder)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roundhouse.agents.submitter import SchedulerError, Submitter
from roundhouse.errors import UsageError
from roundhouse.runtime.journal import Journal
from roundhouse.wire.security import ClientSecurity
from tests.livecluster import free_port

PROJECT = Path(__file__).resolve().parents[1]

GRAPH = """
round = 1s;
cluster = "{cluster}";
src :: LiveSource(jobs=1);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def _meta(digest: str, cluster: str = "4 GPUs on 2 nodes (2x2:V100)") -> dict:
    return {"graph": "/runs/g.sched", "graph_digest": digest, "cluster": cluster, "round_s": 1.0}


def test_jobs_accepted_before_the_run_began_keep_the_runs_facts(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    assert journal.run_of(_meta("a")) == {}  # (a new journal: the run has not begun)
    journal.add_submission(0, {"gpus": "4", "model": "LM", "iterations": "10"}, 0.0)
    journal.close()

    other = Journal(path)
    with pytest.raises(UsageError, match=r"belongs to another run, which has not begun but accepted jobs: its graph \("):
        other.run_of(_meta("b"))
    with pytest.raises(
        UsageError, match=r"its cluster differs \('4 GPUs on 2 nodes \(2x2:V100\)' there, '2 GPUs on 1 node \(1x2:V100\)' now\)"
    ):
        other.run_of(_meta("a", "2 GPUs on 1 node (1x2:V100)"))
    other.close()

    same = Journal(path)
    assert same.run_of(_meta("a")) == {}  # still not begun: its scheduler waits for its agents
    began = same.begin(_meta("a"))
    assert began["graph_digest"] == "a" and began["epoch"] > 0
    assert [job for job, _, _ in same.pending_submissions()] == [0]  # (delivered at t=0)
    same.close()
    assert Journal(path).run_of(_meta("a"))["epoch"] == began["epoch"]


def test_a_journal_of_jobs_alone_still_reads_as_a_run_not_begun(tmp_path):
    # A journal whose jobs were accepted before their facts were kept with them.
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    journal.add_submission(0, {"gpus": "1", "model": "LM", "iterations": "10"}, 0.0)
    journal.close()
    journal = Journal(path)
    assert journal.run_of(_meta("a")) == {}
    journal.close()


def test_a_run_whose_epoch_was_lost_is_still_damaged(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    journal.begin(_meta("a"))
    journal.add_round(0, 0.0, {})
    journal.close()
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM meta WHERE key = 'epoch'")
    journal = Journal(path)
    with pytest.raises(UsageError, match="table meta, key 'epoch': missing, though table rounds holds a run's records"):
        journal.run_of(_meta("a"))
    journal.close()


def test_a_journal_that_leads_to_no_folder_is_refused_naming_the_folder(tmp_path):
    link = tmp_path / "j.sqlite"
    link.symlink_to(tmp_path / "gone" / "j.sqlite")
    with pytest.raises(UsageError) as err:
        Journal(link)
    assert str(err.value) == (
        f"{link}: cannot use as a journal: unable to open database file: no folder {tmp_path / 'gone'} (where {link} leads)"
    )
    assert not (tmp_path / "gone").exists()


def test_a_journal_whose_folder_takes_no_file_is_refused_naming_the_folder_even_for_root():
    # (/proc takes no new file, though `os.access` says yes to root: the folder is tried)
    with pytest.raises(UsageError) as err:
        Journal(Path("/proc/roundhouse-journal.sqlite"))
    assert "its folder /proc is not writable" in str(err.value)


@pytest.mark.live
def test_serve_refuses_jobs_another_graph_accepted_before_round_0(tmp_path, monkeypatch, capsys):
    from roundhouse.tools.cli import main

    (tmp_path / "big.sched").write_text(GRAPH.format(cluster="2x2:V100"))
    (tmp_path / "small.sched").write_text(GRAPH.format(cluster="1x1:V100"))
    monkeypatch.chdir(tmp_path)
    address = f"tcp://127.0.0.1:{free_port()}"
    serve = ["serve", "--bind", address, "--insecure", "--journal", "j.sqlite", "--checkpoints", "ck"]
    first = subprocess.Popen(
        [sys.executable, "-m", "roundhouse.tools.cli", serve[0], "big.sched", *serve[1:], "--wait-for-agents", "60s"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with Submitter(address, ClientSecurity(None), 20.0) as client:  # (waits for the scheduler to be up)
            assert client.submit([{"model": "LM", "iterations": 10, "gpus": 2}]) == [0]
        first.send_signal(signal.SIGINT)  # before round 0: the run has not begun, the job stays
        assert first.wait(timeout=30) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    before = (tmp_path / "j.sqlite").read_bytes()
    assert main([serve[0], "small.sched", *serve[1:], "--wait-for-agents", "0s", "--until", "0s"]) == 2
    err = capsys.readouterr().err
    assert (
        "j.sqlite: this journal belongs to another run, which has not begun but accepted jobs: its cluster differs ('4 GPUs on 2 nodes (2x2:V100)' there"
        in err
    ), err
    assert "Traceback" not in err
    assert (tmp_path / "j.sqlite").read_bytes() == before
    journal = Journal(tmp_path / "j.sqlite", read_only=True)
    assert "epoch" not in journal.meta() and [job for job, _, _ in journal.pending_submissions()] == [0]
    journal.close()


PROFILED = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
src :: LiveSource(jobs=1);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""
PROFILE = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nLM,10,V100,1,consolidated,200\n"


@pytest.mark.live
def test_a_resumed_run_that_does_not_replay_names_the_journal_and_round(tmp_path, monkeypatch, capsys):
    from roundhouse.tools.cli import main

    (tmp_path / "g.sched").write_text(PROFILED)
    (tmp_path / "profile.csv").write_text(PROFILE)
    monkeypatch.chdir(tmp_path)
    serve = ["serve", "g.sched", "--bind", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--journal", "j.sqlite"]
    serve += ["--checkpoints", "ck", "--wait-for-agents", "0s", "--until", "0s"]
    assert main(serve) == 0  # (the run begins: round 0 is journaled)
    journal = Journal(tmp_path / "j.sqlite")
    journal.add_submission(0, {"gpus": "1", "model": "LM", "iterations": "100", "job_id": "0"}, 0.5)
    journal.mark_delivered([0], 1)
    plan = {"launch": [], "gpus": [], "counts": [], "suspend": [], "complete": []}
    record = {"finished": [], "failed": [], "requeued": [], "online": None, "joined": [], "lost": [], "metrics": {}}
    journal.add_round(1, 1.0, {**record, "submitted": [0], "progress": [[], [], [], []], "plans": [plan]})
    journal.close()
    (tmp_path / "profile.csv").write_text(PROFILE.replace("LM,", "ResNet-18,"))  # (LM is no longer profiled)
    capsys.readouterr()
    before = {name: (tmp_path / name).read_bytes() for name in ("j.sqlite",)}

    assert main(serve) == 2
    err = capsys.readouterr().err
    assert (
        "error: j.sqlite: cannot replay the run it holds, at round 1 (t=1s): src (submission): job 0: model 'LM' is not in "
        "the profile" in err
    ), err
    assert "hint: the graph's files (a profile, a trace, a cluster spec) may have changed since the run began" in err
    assert "Traceback" not in err
    assert {name: (tmp_path / name).read_bytes() for name in before} == before


def test_another_runs_journal_is_refused_naming_what_differs_most_tellingly(tmp_path):
    # A --set round=... changes the graph's digest too: the round length is what to name.
    journal = Journal(tmp_path / "j.sqlite")
    journal.begin(_meta("a"))
    with pytest.raises(UsageError, match=r"another run: its round length \(seconds\) differs \(1.0 there, 2.0 now\)"):
        journal.run_of({**_meta("b"), "round_s": 2.0})
    with pytest.raises(UsageError) as err:
        journal.run_of({**_meta("b"), "graph": "/runs/other.sched"})
    assert "its graph (its elements, arguments and settings, with --set and --trace) differs " in str(err.value)
    assert "('/runs/g.sched' there, '/runs/other.sched' now; digests a and b)" in str(err.value)
    journal.close()


@pytest.mark.live
def test_a_run_that_has_ended_refuses_submissions_while_it_still_serves(tmp_path, monkeypatch):
    # The scheduler still serves after the run ends (jobs checkpointing at the time limit,
    # agents told to stop): a job accepted then would be journaled, answered, and never run.
    import threading

    from roundhouse.runtime import serve as serving
    from roundhouse.runtime.backends.live import LiveOptions
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.wire.security import ServerSecurity

    (tmp_path / "g.sched").write_text(GRAPH.format(cluster="1x2:V100"))
    address = f"tcp://127.0.0.1:{free_port()}"
    ended, answered = threading.Event(), threading.Event()
    close = serving.LiveBackend.close

    def close_later(backend):  # (the run is over: serve on for a moment, as ending a run does)
        ended.set()
        backend.server.serve(time.time() + 20, answered.is_set, lambda: None)
        close(backend)

    monkeypatch.setattr(serving.LiveBackend, "close", close_later)
    graph = compile_file(str(tmp_path / "g.sched"))
    options = LiveOptions(wait_for_agents_s=0.0)
    results = []
    args = (graph, address, ServerSecurity(None), tmp_path / "j.sqlite", options)
    thread = threading.Thread(target=lambda: results.append(serving.serve(*args, until=0.5)))
    thread.start()
    try:
        assert ended.wait(30)
        with Submitter(address, ClientSecurity(None), 10.0) as client:
            with pytest.raises(
                SchedulerError, match=r"the run has ended \(reached the time limit \(0.5s\)\): it takes no more jobs"
            ):
                client.submit([{"model": "LM", "iterations": 10, "gpus": 1}])
    finally:
        answered.set()
        thread.join(30)
    assert results and results[0].stop_reason == "reached the time limit (0.5s)"
    journal = Journal(tmp_path / "j.sqlite", read_only=True)
    assert journal.submission_ids() == set()
    journal.close()


def test_a_device_as_the_journal_is_said_to_be_no_regular_file():
    # (SQLite's own words for /dev/null are "disk I/O error")
    with pytest.raises(UsageError) as err:
        Journal(Path("/dev/null"))
    assert "/dev/null is not a regular file (a device or a pipe)" in str(err.value)
