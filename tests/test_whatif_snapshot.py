"""`roundhouse whatif` from a simulation's snapshot: where each side stops, which jobs the other
graph is given, and the header (the bad inputs and a run to the end are in test_whatif.py)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from roundhouse import Simulation
from roundhouse.tools.cli import main
from tests.conftest import fails

# Long jobs that all arrive in the first hours on few GPUs: with event skipping, a step passes
# many quiet rounds at once.
GRAPH = (
    'round = 5min;\ncluster = "2x2:V100";\n'
    "src :: PoissonSource(rate=6/h, jobs=12, seed=3);\n"
    "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics{track};\n"
)


def _whatif(capsys, *argv) -> dict:
    assert main(["whatif", *map(str, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# From 5 h, event skipping passes the quiet rounds to 15 h, where a job finishes, in one step.
@pytest.mark.parametrize("hours", [9.5, 10.0], ids=["a-step-passes-the-horizon", "a-job-finishes-in-the-last-round"])
def test_each_side_stops_at_the_horizon_with_its_last_round_counted_skipping_or_not(tmp_path, capsys, hours):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(track=""))
    fork, horizon = 5 * 3600.0, hours * 3600.0
    sim = Simulation(graph).run_until(fork)
    ahead = sim.fork()
    # (The engine's own steps: a Simulation's step() is one round.)
    ahead._engine.step()  # (the round at the fork point, where run_until paused)
    ahead._engine.step()
    assert ahead.now == 15 * 3600.0
    skipping = sim.save(tmp_path / "skipping.snap")
    ticking = Simulation(graph, skip_rounds=False).run_until(fork).save(tmp_path / "ticking.snap")
    # The truth: the world at the horizon, its last round's progress and completions folded in.
    before, after = sim.world_now(), sim.fork().run_until(fork + horizon).world_now()
    rows = np.flatnonzero(before.jobs.column("status") != 2)
    service = after.jobs.column("service")[rows].sum() - before.jobs.column("service")[rows].sum()
    finished = int((after.jobs.column("status")[rows] == 2).sum())
    got = [
        p
        for path in (skipping, ticking)
        for value in ("true", "false")
        for p in _whatif(capsys, path, "--set", f"skip_rounds={value}", "--horizon", f"{hours}h")["projections"]
    ]
    assert len(got) == 8  # (each snapshot as run and with each --set)
    for p in got:
        assert p["end_s"] == fork + horizon and p["stop"].startswith("reached the horizon")
        assert p["metrics"] == got[0]["metrics"]
    assert got[0]["metrics"]["utilization"] == pytest.approx(service / (4 * horizon))
    assert got[0]["metrics"]["jobs_finished"] == finished == (1 if hours == 10.0 else 0)


def test_neither_the_snapshots_time_limit_nor_a_sinks_goal_ends_a_side(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(track=""))
    (tmp_path / "tracked.sched").write_text(GRAPH.format(track="(track=0..3)"))
    path = Simulation(graph, until=4 * 3600.0).run_until(3600).save(tmp_path / "until.snap")
    done = Simulation(graph).run_until(3600)
    done.run()
    frame = done.jobs()
    affected = frame["finish_s"].to_numpy() > 3600 + 1e-6
    jct = (frame["finish_s"] - frame["arrival_s"]).to_numpy()[affected].mean()
    same, tracked = _whatif(capsys, path, "--graph", tmp_path / "tracked.sched")["projections"]
    for p in (same, tracked):
        assert p["stop"] == "every job finished" and p["metrics"]["jobs_finished"] == int(affected.sum())
    assert same["metrics"]["avg_jct_s"] == pytest.approx(jct)
    assert tracked["metrics"] == same["metrics"]  # (the same policy: its window done early changes nothing)


def _trace(path, ids, arrivals, duration=7200.0):
    columns = {"job_id": ids, "arrival_s": arrivals, "gpus": [1] * len(ids), "duration_s": [duration] * len(ids)}
    pl.DataFrame(columns).write_csv(path)


def test_the_other_graph_gets_only_the_jobs_still_to_come_and_no_other_job_with_a_known_id(tmp_path, capsys):
    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "1x2:V100";\nsrc :: TraceSource(path="a.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    # A job arrives inside the round before the fork point: the world has not seen it yet.
    _trace(tmp_path / "a.csv", [0, 1, 2, 3, 4], [0.0, 600.0, 1200.0, 3500.0, 5000.0])
    path = Simulation(tmp_path / "g.sched").run_until(3600).save(tmp_path / "s.snap")
    # The same graph: the same jobs on both sides, the one arriving at 3500 s among them.
    same, other = _whatif(capsys, path, "--set", "Fifo@3.backfill=false")["projections"]
    assert same["metrics"] == other["metrics"] and same["metrics"]["jobs"] == 5
    # Another trace: its jobs that arrive before the world's last round (7) are no one's; a job
    # with an id the world has, the same job but for its arrival, is that job (1).
    _trace(tmp_path / "b.csv", [1, 7, 8, 9], [4000.0, 1000.0, 3400.0, 4000.0])
    same, other = _whatif(capsys, path, "--set", f'src.path="{tmp_path / "b.csv"}"')["projections"]
    assert other["metrics"]["jobs"] == 3 + 2  # the world's jobs 0 to 2, then 8 and 9
    # A later job with the id of another job the world has is refused, naming it and where both
    # come from (an earlier one is passed over).
    _trace(tmp_path / "c.csv", [2, 9, 10], [1000.0, 4000.0, 4100.0], duration=60.0)
    assert _whatif(capsys, path, "--set", f'src.path="{tmp_path / "c.csv"}"')["projections"][1]["metrics"]["jobs"] == 3 + 2
    _trace(tmp_path / "d.csv", [9, 2], [4000.0, 4100.0], duration=60.0)
    said = fails(capsys, "whatif", path, "--set", f'src.path="{tmp_path / "d.csv"}"')
    assert f"job 2: {tmp_path / 'd.csv'} has one arriving at t=4100s, and the snapshot {path}" in said
    assert f"(its jobs from {tmp_path / 'a.csv'}) already has another job 2 (duration_s 7200, not 60)" in said


def test_the_header_says_how_many_rounds_ran_and_the_clock(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(track=""))
    path = Simulation(graph).run_until(3600).save(tmp_path / "s.snap")
    assert main(["whatif", str(path), "--horizon", "1h"]) == 0
    assert "after 12 rounds, at t=3600s, of" in " ".join(capsys.readouterr().out.split())


def test_a_narrow_table_wraps_long_graph_names_rather_than_cut_them(tmp_path, capsys, monkeypatch):
    # In a log (80 columns) two graphs' names sharing a long beginning were both cut to it
    # ("a_rather_long_graph_…"): which column is which could not be told.
    graph = tmp_path / "a_rather_long_graph_name_for_fifo.sched"
    graph.write_text(GRAPH.format(track=""))
    other = tmp_path / "a_rather_long_graph_name_for_las.sched"
    other.write_text(GRAPH.format(track="").replace("Fifo", "Las"))
    path = Simulation(graph).run_until(5 * 3600.0).save(tmp_path / "s.snap")
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["whatif", str(path), "--graph", str(other), "--horizon", "2h"]) == 0
    header = [line for line in capsys.readouterr().out.splitlines() if line.startswith("┃")]
    assert header and "…" not in "".join(header)
    names = ["".join(parts) for parts in zip(*[[c.strip() for c in line.split("┃")[1:-1]] for line in header])]
    assert any("for_fifo" in name for name in names) and any("for_las" in name for name in names)
