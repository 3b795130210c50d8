"""`roundhouse whatif` on a real live run on loopback (emulated agents): from the journal of a
scheduler still running, then from the saved journal of the finished run."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3

import pytest

from tests.conftest import fails
from tests.livecluster import TEST_PROFILE, LiveCluster

pytestmark = [pytest.mark.live, pytest.mark.slow]

# Rounds of a second: the first test waits for eight rounds to be journaled.
GRAPH = """
round = 1s;
cluster = "2x2:V100";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Srtf -> FirstFree -> Launch -> m :: JobMetrics;
"""
FIFO = GRAPH.replace("Srtf", "Fifo")

# Long enough that the run is still busy at round 8 (8 s in), when the first projection is
# made (workers start in milliseconds, forked from the agent's fork server).
JOBS = """job_id,arrival_s,gpus,model,iterations,batch_size
0,0,2,LM,2700,10
1,0,1,ResNet-18,1440,16
2,0,1,Recommendation,2700,64
3,4,1,ResNet-18,360,16
4,4,1,LM,750,10
5,9,1,Recommendation,600,64
6,12,2,ResNet-18,300,16
7,13,1,LM,900,10
"""


def whatif(capsys, *argv) -> dict:
    from roundhouse.tools.cli import main

    capsys.readouterr()
    assert main(["whatif", *map(str, argv), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_whatif_from_a_running_scheduler_and_from_its_saved_journal(tmp_path, capsys):
    cluster = LiveCluster(tmp_path, GRAPH, {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS, "fifo.sched": FIFO})
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        cluster.start_agent("node-b")
        cluster.wait_for(
            lambda: (cluster.query("SELECT COUNT(*) FROM rounds") or [(0,)])[0][0] >= 8, 120, "eight journaled rounds"
        )
        # While the scheduler runs: its state as of its last journaled round, projected forward.
        live = whatif(capsys, cluster.journal_path, "--graph", tmp_path / "fifo.sched")
        point = live["from"]
        assert point["rounds"] >= 8 and point["jobs"] >= 3 and point["unfinished"] >= 1, point
        same, other = live["projections"]
        assert (same["graph"], other["graph"]) == ("graph.sched", "fifo.sched")
        for p in (same, other):
            assert p["stop"] == "every job finished", p
            m = p["metrics"]
            assert m["jobs"] == m["jobs_finished"] == 8 - (point["jobs"] - point["unfinished"]), (point, m)
            assert m["avg_jct_s"] > 0 and m["makespan_s"] > 0 and 0 < m["utilization"] <= 1
        # FIFO gives the waiting jobs Srtf had preempted their GPUs back first: another future.
        assert same["metrics"] != other["metrics"]
        cluster.kill("scheduler", signal.SIGTERM)  # the run stops; its journal stays
        cluster.wait_exit("scheduler", timeout=60)
    finally:
        cluster.close()

    # The saved journal: the same answer every time, and the table for people.
    saved = whatif(capsys, cluster.journal_path, "--graph", tmp_path / "fifo.sched")
    assert saved["from"]["rounds"] >= point["rounds"] and saved == whatif(
        capsys, cluster.journal_path, "--graph", tmp_path / "fifo.sched"
    )
    finished = cluster.query("SELECT COUNT(DISTINCT job_id) FROM attempts WHERE outcome = 'done'")[0][0]
    assert saved["from"]["jobs"] - saved["from"]["unfinished"] == finished
    # The run's own graph with other arguments (--set), from the journal cut after round 8.
    cut = tmp_path / "cut.sqlite"
    shutil.copy(cluster.journal_path, cut)
    with sqlite3.connect(cut) as db:
        db.execute("DELETE FROM rounds WHERE k > 8")
    again = whatif(capsys, cut, "--set", "Srtf@3.backfill=false")
    assert again["from"]["rounds"] == 9 and [p["graph"] for p in again["projections"]] == ["graph.sched"] * 2
    # A run's rounds numbered with a gap (as after a restart, which numbers its rounds on): the
    # header names the last one. (Renumbered, not deleted: a round left out could hold a plan,
    # and the replay would rightly find the run's later plans not its own.)
    with sqlite3.connect(cut) as db:
        db.execute("UPDATE rounds SET k = -k WHERE k >= 3")
        db.execute("UPDATE rounds SET k = 5 - k WHERE k < 0")
    assert whatif(capsys, cut)["from"] | {"now_s": None} == again["from"] | {"round": 13, "now_s": None}
    # The run's graph on both sides: the same future, measured over the same span from the fork point.
    as_run, fresh = whatif(capsys, cut, "--graph", tmp_path / "graph.sched")["projections"]
    assert as_run["end_s"] == fresh["end_s"] and as_run["metrics"] == fresh["metrics"], (as_run, fresh)
    # What built the run's world is the run's; a journal from another trace names --run-trace.
    assert '--set cluster="1x1:V100": the run\'s cluster is its own' in fails(
        capsys, "whatif", cut, "--set", 'cluster="1x1:V100"'
    )
    shutil.copy(tmp_path / "jobs.csv", tmp_path / "other.csv")
    assert "its --trace with --run-trace" in fails(capsys, "whatif", cut, "--run-trace", tmp_path / "other.csv")
    from roundhouse.tools.cli import main

    assert main(["whatif", str(cut), "--graph", str(tmp_path / "fifo.sched")]) == 0
    out = capsys.readouterr().out
    for label in ("average JCT", "makespan (from now)", "average responsiveness", "utilisation (from now)", "difference"):
        assert label in out, out


SYNTH = """
round = 2s;
cluster = "2x2:V100";
profile = "profile.csv";
synth :: Synthesizer(switches=[order], every=2, horizon=1min, workers=1);
src   :: TraceSource(path="jobs.csv");
fifo  :: Fifo;
srtf  :: Srtf;
order :: ChoosePolicy(candidates=[fifo, srtf]);
src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_whatif_from_a_synthesizer_s_run_and_from_a_scheduler_waiting_for_its_agents(tmp_path, capsys):
    """A synthesizer forks the world as the journal is replayed (its look-ahead simulates from the
    round's clock, as it did in the live run); before the agents come, the run has not begun."""
    cluster = LiveCluster(tmp_path, SYNTH, {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS, "fifo.sched": FIFO})
    try:
        cluster.start_scheduler()
        cluster.wait_for(lambda: cluster.query("SELECT COUNT(*) FROM meta") == [(0,)], 30, "the scheduler's journal")
        assert "the run has not begun: its scheduler is waiting for its agents" in fails(capsys, "whatif", cluster.journal_path)
        cluster.start_agent("node-a")
        cluster.start_agent("node-b")
        # (Round 0 waits for the agents; the synthesizer's look-ahead may make rounds overrun.)
        cluster.wait_for(lambda: (cluster.query("SELECT COUNT(*) FROM rounds") or [(0,)])[0][0] >= 6, 120, "six journaled rounds")
        got = whatif(capsys, cluster.journal_path, "--graph", tmp_path / "fifo.sched")
        assert got["from"]["rounds"] >= 6 and got["from"]["unfinished"] >= 1, got["from"]
        assert [p["graph"] for p in got["projections"]] == ["graph.sched", "fifo.sched"]
        for p in got["projections"]:
            assert p["stop"] == "every job finished" and p["metrics"]["jobs_finished"] == p["metrics"]["jobs"], p
    finally:
        cluster.close()
