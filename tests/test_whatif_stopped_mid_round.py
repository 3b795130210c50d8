"""`roundhouse whatif` from the journal of a live scheduler stopped mid-round: its last round is
cut short at the stop, and the projection goes on on the run's round schedule (the run's start
and every round after), as a restarted `serve` resumes, not a round after the stop. And what
`--json` names the file it read: a journal or a snapshot."""

from __future__ import annotations

import json
import math
import signal
import time

import pytest

from roundhouse import Simulation
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import load_cluster, load_profile, new_world
from roundhouse.runtime.whatif import open_journal, replay, take_over
from roundhouse.tools.cli import main
from tests.livecluster import TEST_PROFILE, LiveCluster
from tests.test_journal_reading import make_journal

ROUND_S = 4.0
GRAPH = f"""
round = {ROUND_S:g}s;
cluster = "1x2:V100";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""
# Long enough that the jobs still run when the scheduler is stopped, a few rounds in.
JOBS = "job_id,arrival_s,gpus,model,iterations,batch_size\n0,0,1,LM,20000,10\n1,0,1,ResNet-18,20000,16\n2,3,1,LM,4000,10\n"


def _whatif(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(["whatif", *map(str, argv), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _on_the_schedule(t: float) -> bool:
    return abs(t / ROUND_S - round(t / ROUND_S)) < 1e-6


@pytest.mark.live
@pytest.mark.slow
def test_a_run_stopped_mid_round_is_projected_on_its_round_schedule(tmp_path, capsys):
    cluster = LiveCluster(tmp_path, GRAPH, {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS})
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        cluster.wait_for(
            lambda: (cluster.query("SELECT COUNT(*) FROM rounds") or [(0,)])[0][0] >= 3, 120, "three journaled rounds"
        )
        # Stopped half-way through the round after the last journaled one.
        epoch = json.loads(cluster.query("SELECT value FROM meta WHERE key = 'epoch'")[0][0])
        last = cluster.query("SELECT MAX(now) FROM rounds")[0][0]
        time.sleep(max(0.0, epoch + last + 1.5 * ROUND_S - time.time()))
        cluster.kill("scheduler", signal.SIGTERM)
        cluster.wait_exit("scheduler", timeout=60)
    finally:
        cluster.close()
    stopped = cluster.query("SELECT MAX(now) FROM rounds")[0][0]
    assert not _on_the_schedule(stopped), f"the run's last round, at t={stopped}s, was not cut short by the stop"

    # The projection's rounds, as `whatif` runs them: on the run's boundaries, t = k * round.
    journal, meta = open_journal(cluster.journal_path)
    try:
        graph = compile_file(meta["graph"])
        profile = load_profile(graph)
        engine = replay(journal, meta, graph, new_world(graph, load_cluster(graph, None, profile), profile))
    finally:
        journal.db.close()
    assert engine.backend.now == stopped and not engine.stop_reason
    engine = take_over(engine)
    rounds = [engine.backend.now]
    while len(rounds) < 20 and not engine.step():
        rounds.append(engine.backend.now)
    assert rounds[0] == math.ceil(stopped / ROUND_S) * ROUND_S, rounds  # (the boundary the stop cut the round short of)
    assert all(_on_the_schedule(t) for t in rounds), rounds

    # The command: each side ends on the schedule, and the run's graph on both sides gives the
    # same figures (both go on from the stop to the run's next boundary, then by whole rounds).
    got = _whatif(capsys, cluster.journal_path, "--graph", tmp_path / "graph.sched")
    assert got["from"]["now_s"] == stopped
    as_run, fresh = got["projections"]
    assert as_run["stop"] == fresh["stop"] == "every job finished", got
    assert _on_the_schedule(as_run["end_s"]) and _on_the_schedule(fresh["end_s"]), got
    assert as_run["end_s"] == fresh["end_s"] and as_run["metrics"] == fresh["metrics"], got


def test_the_json_names_the_file_read_a_journal_or_a_snapshot(tmp_path, capsys):
    path = make_journal(tmp_path, stop_s=40.0)
    point = _whatif(capsys, path)["from"]
    assert point["kind"] == "journal" and point["journal"] == str(path) and "snapshot" not in point

    graph = tmp_path / "s.sched"
    graph.write_text(
        'round = 5min;\ncluster = "2x2:V100";\nsrc :: PoissonSource(rate=6/h, jobs=12, seed=3);\n'
        "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
    )
    snap = Simulation(graph).run_until(3600).save(tmp_path / "hour.snap")
    point = _whatif(capsys, snap)["from"]
    assert point["kind"] == "snapshot" and point["snapshot"] == str(snap) and "journal" not in point
    # The table's header names it too.
    assert main(["whatif", str(snap)]) == 0
    # (the console may wrap a long path anywhere: compared without the spaces it breaks at)
    assert "".join(capsys.readouterr().out.split()).startswith("".join(f"from {snap}: after 12 rounds".split()))
