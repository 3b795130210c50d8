"""The Simulation API's leftovers: a run's result printed short, the state at the time limit,
a results folder written from Python, and `roundhouse run`'s warnings before a run."""

from __future__ import annotations

import json
import warnings

import pytest

from roundhouse import Simulation
from roundhouse.errors import RoundhouseWarning
from roundhouse.tools.cli import main
from tests.conftest import REPO

GRAPH = """
round = 5min;
arrivals :: TraceSource(path="{trace}");
arrivals -> AcceptAll -> pool :: JobPool -> Fifo -> Consolidated -> Launch -> metrics :: JobMetrics;
"""
ROWS = "job_id,arrival_s,gpus,duration_s\n" + "".join(f"{i},{i * 600},{1 + i % 4},{3600 + 900 * i}\n" for i in range(12))
UNTIL = 7200.0


def _graph(tmp_path, rows: str = ROWS):
    (tmp_path / "jobs.csv").write_text(rows)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(trace="jobs.csv"))
    return graph


def _sim(tmp_path, **kw) -> Simulation:
    return Simulation(_graph(tmp_path), cluster="2x4:V100", **kw)


def test_a_run_result_prints_as_a_short_summary(tmp_path):
    sim = _sim(tmp_path, until=UNTIL)
    result = sim.run()
    text = repr(result)
    assert "\n" not in text and len(text) < 300, text  # (not the world and every table)
    finished = int((sim.jobs()["status"] == 2).sum())
    assert f"{result.rounds:,} rounds" in text and result.stop_reason in text, text
    assert f"{finished:,} of {len(sim.jobs()):,} jobs finished" in text and "metrics" in text, text
    assert str(result) == text


def test_the_graph_world_and_cluster_print_in_a_line_each(tmp_path):
    sim = _sim(tmp_path)
    sim.run_until(3600)
    running = len(sim.world.running_rows)
    assert running > 0
    # (The graph sets no cluster: it says the one the simulation was given, which it runs on.)
    assert repr(sim.graph) == "CompiledGraph(g.sched: 7 elements, 6 connections, round 5min, cluster 2x4:V100)"
    assert repr(sim.world.cluster) == "Cluster(8 GPUs on 2 nodes (2x4:V100))"
    assert repr(sim.world) == (
        f"World({len(sim.jobs())} jobs, {sim.world.unfinished} unfinished, {running} running, on 8 GPUs on 2 nodes (2x4:V100))"
    )


def test_a_simulation_at_its_time_limit_says_its_last_round_is_left(tmp_path):
    # run_until(until) stops before the round at the limit (a what-if forks from there): the
    # round left ticks without moving the clock, and the run then stops as run() stops it.
    sim = _sim(tmp_path, until=UNTIL).run_until(UNTIL)
    assert not sim.done and "last round, at its time limit, is left" in repr(sim), repr(sim)
    assert sim.step() is False and sim.done and sim.now == UNTIL
    whole = _sim(tmp_path, until=UNTIL)
    whole.run()
    assert sim.stop_reason == whole.stop_reason and sim.rounds == whole.rounds
    assert "left" not in repr(sim)


def _without_wall_clock(folder):
    run = json.loads((folder / "run.json").read_text())
    for key in ("graph", "graph_text", "trace"):  # (the path as given, and the text it read)
        run.pop(key, None)
    return run


def test_a_simulation_writes_the_folder_run_out_writes_and_report_and_plot_read_it(tmp_path, capsys):
    graph = _graph(tmp_path)
    sim = Simulation(graph, cluster="2x4:V100", until=UNTIL)
    sim.run()
    assert sim.write(tmp_path / "api") == tmp_path / "api"
    assert (
        main(
            [
                "run",
                str(graph),
                "--cluster",
                "2x4:V100",
                "--until",
                "7200",
                "--out",
                str(tmp_path / "cli"),
                "--no-explain",
                "--quiet",
            ]
        )
        == 0
    )
    for name in ("jobs.csv", "summary.json"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert _without_wall_clock(tmp_path / "api") == _without_wall_clock(tmp_path / "cli")
    assert json.loads((tmp_path / "api" / "run.json").read_text())["graph_text"] == graph.read_text()
    capsys.readouterr()
    assert main(["report", str(tmp_path / "api"), "-o", str(tmp_path / "r.html")]) == 0, capsys.readouterr().err
    assert main(["plot", str(tmp_path / "api"), "-o", str(tmp_path / "p.png")]) == 0, capsys.readouterr().err
    assert (tmp_path / "r.html").stat().st_size and (tmp_path / "p.png").stat().st_size


def test_a_simulation_of_a_graph_given_as_text_writes_its_text(tmp_path, monkeypatch):
    _graph(tmp_path)
    monkeypatch.chdir(tmp_path)
    text = GRAPH.format(trace="jobs.csv")
    sim = Simulation(text, cluster="2x4:V100", until=3600)
    sim.run_until(1800)  # (mid-run: the result of a fork ended now, as result() gives)
    sim.write("mid")
    run = json.loads((tmp_path / "mid" / "run.json").read_text())
    assert run["graph_text"] == text and run["end_s"] == sim.result().end_s
    assert not sim.done  # (the simulation itself goes on)


def test_a_folder_holding_a_sweep_s_results_is_refused_as_run_out_refuses_it(tmp_path):
    from roundhouse.errors import UsageError

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "points.csv").write_text("x\n")
    sim = _sim(tmp_path, until=600)
    with pytest.raises(UsageError, match="holds a sweep's results"):
        sim.write(tmp_path / "s")
    with pytest.raises(UsageError, match="folder: expected a folder"):
        sim.write("")


def test_a_trace_that_brings_no_job_is_warned_of_as_run_warns_of_it(tmp_path, capsys):
    graph = _graph(tmp_path, rows="job_id,arrival_s,gpus,duration_s\n")
    assert main(["run", str(graph), "--cluster", "2x4:V100"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert said and "brings no job" in said[0], said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Simulation(graph, cluster="2x4:V100")
    ours = [w for w in caught if issubclass(w.category, RoundhouseWarning)]
    assert [str(w.message) for w in ours] == said
    assert ours[0].filename == __file__  # (the line that built the simulation)


def test_a_graph_that_runs_to_use_gives_no_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RoundhouseWarning)
        Simulation(REPO / "graphs" / "fifo.sched", cluster="2x4:V100", overrides=["arrivals.jobs=3"])
