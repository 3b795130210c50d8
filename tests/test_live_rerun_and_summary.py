"""The documented loopback block run twice in one folder, and the line that closes a run's
summary.

`serve` on a journal whose run had already ended (the default journal,
checkpoints/roundhouse-journal.sqlite, is still there) is refused, saying so: it used to replay
the old run in a fraction of a second and print that run's summary as its own ("ran 8.00 s in
0.14 s"), then exit, leaving the block's agents waiting. A live run's closing line gives the
run's time alone (a resumed run's rounds and clock count from its start, the scheduler's own
time did not), and a simulation's rate of rounds is not rounded to 0 below one a second. A job
that failed for good is said to have, not to be "preempted and waiting". A command known by its
duration alone takes that long on an emulated node, as the simulator runs it (its launch carried
no work, so it was done at once). An agent emulating many nodes says INSECURE MODE once, not once
a node. A submitter named with --name whose pair the key folder lacks is told the submitters'
pairs there and how to make its own as a submitter's (the hint was `roundhouse keys DIR NAME`,
which makes a node's)."""

from __future__ import annotations

import io
import re
import sqlite3
import subprocess
import sys

import polars as pl
import pytest
from rich.console import Console

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.simulate import simulate
from roundhouse.tools.results import print_summary
from tests.livecluster import TEST_PROFILE, LiveCluster, free_port, stop, wait_until

GRAPH = """
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
src :: LiveSource(jobs=1);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def dump(path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return list(db.iterdump())
    finally:
        db.close()


@pytest.mark.live
@pytest.mark.slow
def test_serve_refuses_a_journal_whose_run_had_ended(tmp_path):
    cluster = LiveCluster(tmp_path, GRAPH, {"profile.csv": TEST_PROFILE})
    journal = Journal(cluster.journal_path)
    journal.add_submission(0, {"job_id": "0", "model": "LM", "iterations": "40", "gpus": "1", "batch_size": "10"}, 0.0)
    journal.close()
    try:
        cluster.start_scheduler()
        cluster.start_agent("emu", nodes=1)
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        first = cluster.log("scheduler")
        # The closing line: the run's time, no time taken or rate beside it.
        assert re.search(r"\d+ rounds, ran [\d.]+ s; stopped: every job finished", first), first
        assert "rounds/s" not in first, first
        before = dump(cluster.journal_path)

        cluster.start_scheduler()
        assert cluster.wait_exit("scheduler", timeout=60) == 2, cluster.logs()
        again = cluster.log("scheduler")[len(first) :]
        assert (
            f"error: {cluster.journal_path}: the run this journal holds had already ended, at round " in again
            and "; every job finished): nothing is left to resume" in again
            and "give another --journal or --checkpoints, or remove this journal" in again
        ), again
        # No summary of the old run passed off as this one's, no traceback, the journal as it was.
        assert "stopped: every job finished" not in again and "jobs finished / tracked" not in again, again
        assert "Traceback" not in again, again
        assert dump(cluster.journal_path) == before
    finally:
        cluster.close()


CANNOT_RUN = """
round = 1s;
cluster = "1x2:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


@pytest.mark.live
@pytest.mark.slow
def test_the_summary_says_jobs_failed_not_waiting(tmp_path):
    # Jobs of a duration alone (no model, no command) cannot run live: each fails for good at
    # its launch, and the run ends with them failed.
    trace = "job_id,arrival_s,gpus,duration_s\n0,0,1,5\n1,0,1,5\n"
    cluster = LiveCluster(tmp_path, CANNOT_RUN, {"trace.csv": trace})
    try:
        cluster.start_scheduler()
        cluster.start_agent("emu", nodes=1)
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        log = " ".join(cluster.log("scheduler").split())  # (rich wraps its lines)
        assert "job 0 cannot run; giving up" in log, log
        assert "note: m: 2 job(s) failed for good (status failed); JCT and queueing leave them out" in log, log
        assert "preempted and waiting" not in log, log
    finally:
        cluster.close()


COMMAND = """
round = 1s;
cluster = "1x2:V100";
src :: LiveSource(jobs=1);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


@pytest.mark.live
@pytest.mark.slow
def test_an_emulated_node_runs_a_command_for_its_duration(tmp_path):
    cluster = LiveCluster(tmp_path, COMMAND)
    journal = Journal(cluster.journal_path)
    journal.add_submission(0, {"job_id": "0", "command": "sleep 3", "duration_s": "3", "gpus": "1"}, 0.0)
    journal.close()
    try:
        cluster.start_scheduler()
        cluster.start_agent("emu", nodes=1)
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        assert "job 0 attempt 1 rank 0 on emu-0: done at iteration 3" in cluster.log("scheduler"), cluster.logs()
        jobs = pl.read_csv(tmp_path / "out" / "jobs.csv")
        assert jobs["status"].to_list() == ["finished"] and jobs["jct_s"][0] >= 3.0, jobs
    finally:
        cluster.close()


@pytest.mark.live
def test_an_agent_emulating_many_nodes_warns_of_insecure_mode_once(tmp_path):
    # (No scheduler: the nodes connect, and keep trying, to an address nobody listens at.)
    log_path = tmp_path / "agent.log"
    args = ["agent", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--insecure", "--name", "emu"]
    with open(log_path, "wb") as log:
        agent = subprocess.Popen(
            [sys.executable, "-m", "roundhouse.tools.cli", *args, "--nodes", "5", "--fake-gpus", "2:V100", "--emulate"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until(lambda: "emulating 5 node(s)" in log_path.read_text(), 60, "the agent's start", log_path.read_text)
    finally:
        stop(agent)
    said = log_path.read_text()
    assert said.count("INSECURE MODE") == 1, said


def test_submit_names_the_submitters_pairs_when_its_own_is_missing(tmp_path, capsys):
    from roundhouse.tools.cli import main

    keys = tmp_path / "keys"
    assert main(["keys", str(keys), "node1", "--submitters", "alice"]) == 0
    capsys.readouterr()
    assert main(["submit", f"tcp://127.0.0.1:{free_port()}", "--keys", str(keys), "--name", "bob", "--status"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert (
        f"--name bob: {keys}/bob.key_secret is not there (the submitters' key pairs there: alice; "
        f"make it with `roundhouse keys {keys} --submitters bob`)"
    ) in err, err
    # Made as told, the pair is found (and no scheduler answers at that address).
    assert main(["keys", str(keys), "--submitters", "bob"]) == 0
    assert (keys / "bob.key_secret").is_file()


def test_a_simulation_slower_than_a_round_a_second_gives_its_rate_in_figures(tmp_path):
    pl.DataFrame(dict(job_id=[0], arrival_s=[0.0], gpus=[1], duration_s=[600.0])).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "1x1:V100";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    graph = compile_file(tmp_path / "g.sched")
    result = simulate(graph)
    # (The wall time a large cluster's rounds take: the rate alone is under test.)
    result.wall_s = result.rounds / 0.4
    out = io.StringIO()
    print_summary(Console(file=out, width=400), graph, result.world.cluster, result)
    assert f"simulated 10.00 min in {result.wall_s:.2f} s (0.4 rounds/s)" in out.getvalue(), out.getvalue()
