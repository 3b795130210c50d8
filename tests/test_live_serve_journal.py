"""What `serve` keeps in its journal and takes back from it: a journal that already holds a job
whose command does not split into words resumes (that job fails as "cannot run", the others
run), and the graph is journaled by its absolute path, so that `whatif` finds it from any
folder (an older journal's relative path is looked for from the current folder, then from the
journal's)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from roundhouse.runtime.journal import Journal
from roundhouse.runtime.serve import journaled_graph
from tests.livecluster import TEST_PROFILE, LiveCluster, free_port

PROJECT = Path(__file__).resolve().parents[1]

GRAPH = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
src :: LiveSource(jobs=2);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


@pytest.mark.live
@pytest.mark.slow
def test_a_journal_holding_a_command_that_does_not_split_resumes(tmp_path):
    """Submissions are checked now, but a journal written before may hold such a job (it
    stopped the scheduler at its launch, and every restart with it)."""
    cluster = LiveCluster(tmp_path, GRAPH, {"profile.csv": TEST_PROFILE})
    journal = Journal(cluster.journal_path)
    journal.add_submission(0, {"job_id": "0", "command": "echo 'oops", "duration_s": "5", "gpus": "1"}, 0.0)
    journal.add_submission(1, {"job_id": "1", "model": "LM", "iterations": "40", "gpus": "1", "batch_size": "10"}, 0.0)
    journal.close()
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        log = cluster.log("scheduler")
        assert 'job 0 cannot run: its command "echo \'oops" does not split into words (no closing quotation)' in log, log
        assert "stopped: every job finished" in log and "Traceback" not in log, log
        outcomes = {job: [a[2] for a in attempts] for job, attempts in cluster.attempts().items()}
        assert outcomes == {0: ["failed"], 1: ["done"]}, outcomes
    finally:
        cluster.close()


@pytest.mark.live
def test_serve_journals_the_graph_s_absolute_path(tmp_path, monkeypatch, capsys):
    from roundhouse.tools.cli import main

    shutil.copy(PROJECT / "graphs" / "live-loopback.sched", tmp_path / "g.sched")
    monkeypatch.chdir(tmp_path)
    bind = f"tcp://127.0.0.1:{free_port()}"
    args = ["serve", "g.sched", "--bind", bind, "--insecure", "--wait-for-agents", "0s", "--until", "0s"]
    assert main(args) == 0, capsys.readouterr().err
    journal = Journal(tmp_path / "checkpoints" / "roundhouse-journal.sqlite")
    try:
        assert journal.meta()["graph"] == str(tmp_path.resolve() / "g.sched")
    finally:
        journal.close()
    # whatif blames a --run-graph that names no file on the option, not on the journal
    capsys.readouterr()
    journal_file = str(tmp_path / "checkpoints" / "roundhouse-journal.sqlite")
    assert main(["whatif", journal_file, "--run-graph", str(tmp_path / "gone.sched")]) == 2
    assert f"--run-graph {tmp_path / 'gone.sched'}: no such file" in capsys.readouterr().err


def test_an_old_journal_s_relative_graph_path_is_found_from_the_current_folder_or_the_journal_s(tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "g.sched").write_text("// the run's graph\n")
    journal = run / "checkpoints" / "roundhouse-journal.sqlite"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # serve ran in run/ with its default journal, checkpoints/roundhouse-journal.sqlite
    assert journaled_graph("g.sched", journal) == run / "g.sched"
    # a journal beside the graph (serve --journal j.sqlite)
    assert journaled_graph("g.sched", run / "j.sqlite") == run / "g.sched"
    # the current folder first
    (elsewhere / "g.sched").write_text("// another graph of that name\n")
    assert journaled_graph("g.sched", journal) == Path("g.sched")
    # an absolute path, or one found nowhere, is given back as it is (for the caller to report)
    assert journaled_graph(str(run / "g.sched"), journal) == run / "g.sched"
    assert journaled_graph("gone.sched", journal) == Path("gone.sched")
