"""What-if corners: paths with [brackets] printed as they are (rich reads them as markup), and
the snapshot's own side the same as running the simulation on from the snapshot."""

from __future__ import annotations

import json

import polars as pl

from roundhouse import Simulation
from roundhouse.tools.cli import main
from tests.conftest import REPO

TRACE = REPO / "traces" / "samples" / "philly-1000.csv"
GRAPH = (
    'round = 5min;\ncluster = "4x4:V100";\n'
    f'arrivals :: TraceSource(path="{TRACE}", jobs=30);\n'
    "arrivals -> AcceptAll -> JobPool -> order :: Fifo -> Consolidated -> Launch -> JobMetrics;\n"
)


def snapshot(folder, at_s: float = 86400.0):
    folder.mkdir(parents=True, exist_ok=True)
    graph = folder / "fifo.sched"
    graph.write_text(GRAPH)
    sim = Simulation(str(graph))
    sim.run_until(at_s)
    path = folder / "day1.snap"
    sim.save(path)
    return graph, path


def test_paths_with_brackets_are_printed_as_they_are(tmp_path, capsys):
    graph, snap = snapshot(tmp_path / "runs[bold]" / "a[/x]")
    assert main(["whatif", str(snap), "--graph", str(graph), "--horizon", "2h"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    printed = "".join(out.split())  # (rich wraps long lines, at a slash too)
    assert f"from{snap}:".replace(" ", "") in printed
    assert "stopped early: reached the horizon (2h)" in out


def test_the_snapshots_side_is_the_simulation_run_on(tmp_path, capsys):
    """The run's own side, from a snapshot, reports what running the simulation on from there
    gives the jobs unfinished at the fork point; and the other side, the same policy given with
    another argument, what running on with that argument changed gives."""
    _, snap = snapshot(tmp_path)
    assert main(["whatif", str(snap), "--set", "order.backfill=true", "--json"]) == 0
    sides = json.loads(capsys.readouterr().out)["projections"]
    now = 86400.0
    for side, backfill in zip(sides, (False, True), strict=True):
        sim = Simulation.load(snap)
        object.__setattr__(sim.graph.elements["order"], "backfill", backfill)  # (Fifo keeps no state of it)
        unfinished = set(sim.world_now().jobs.column("job_id")[sim.world_now().jobs.column("status") != 2].tolist())
        sim.run()
        jobs = sim.jobs().filter(pl.col("job_id").is_in(list(unfinished)))
        jct = jobs["finish_s"] - jobs["arrival_s"]
        assert side["metrics"]["jobs"] == jobs.height == len(unfinished)
        assert side["metrics"]["jobs_finished"] == jobs.height
        assert abs(side["metrics"]["avg_jct_s"] - jct.mean()) < 1e-6
        assert abs(side["metrics"]["makespan_s"] - (jobs["finish_s"].max() - now)) < 1e-6
        assert side["metrics"]["preemptions"] == jobs["preemptions"].sum()
