"""Sweeps and what-if, where a review found them wanting: the other graph of `whatif` requiring
its own copy of the run's element file (classes of the same names); a sweep's points.csv with a
metric no run has a value of; two points of one run key; `simulate_ahead` given a time that is
not the world's; a file of a --vary or --set that a run or its cluster cannot read; the worker
a run whose worker process died is recorded with; and a journal's plan naming a GPU or a job the
run does not have."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import polars as pl
import pytest

from roundhouse.runtime import registry
from roundhouse.runtime.compiler import Override
from roundhouse.runtime.sweep import RUN_COLUMNS, RunSpec, compile_spec, record_run
from roundhouse.runtime.sweep_exec import LocalExecutor, Task
from roundhouse.tools.cli import main
from tests.conftest import REPO, fails, write_trace
from tests.own_elements import policy_file
from tests.test_journal_reading import change, live_journal, make_journal

TRACE = REPO / "traces" / "samples" / "philly-1000.csv"

# A policy of the user's: the jobs in pool order, or the reverse.


def _policy(reverse: bool) -> str:
    return policy_file(
        "Mine",
        f"Rank jobs in pool order ({'reversed' if reverse else 'as they came'}).",
        f"""
        order = np.arange(len(active.rows)){"[::-1]" if reverse else ""}
        return Ranking(active.rows[order], active.gpus[order], backfill=True)
        """,
        before="import numpy as np",
    )


@pytest.fixture(autouse=True)
def own_registry():
    """Each test's element files are its own: forget them after the test (several define Mine)."""
    with registry.scope():
        yield


def policy_graph(folder: Path, reverse: bool, source: str) -> Path:
    """A graph in `folder` requiring its own `mine.py`, which defines the class Mine."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mine.py").write_text(_policy(reverse))
    graph = folder / "g.sched"
    graph.write_text(
        f'require "mine.py";\nround = 10s;\ncluster = "2x4:V100";\nsrc :: {source};\n'
        "src -> AcceptAll -> JobPool -> Mine -> FirstFree -> Launch -> JobMetrics;\n"
    )
    return graph


def whatif_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(["whatif", *map(str, argv), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


# --- whatif: the other graph's element file defines classes of the run's names ---------------
def test_whatif_from_a_snapshot_compares_a_changed_copy_of_the_runs_policy_file(tmp_path, capsys):
    from roundhouse import Simulation

    # Eight jobs of minutes: the sample trace's first eight run for hours to days, tens of thousands of 10 s rounds.
    trace = write_trace(
        tmp_path / "trace.csv",
        [{"job_id": i, "arrival_s": 10.0 * i, "gpus": 1 + i % 4, "duration_s": 100.0 + 50 * i} for i in range(8)],
    )
    source = f'TraceSource(path="{trace}", jobs=8)'
    run = policy_graph(tmp_path / "v1", reverse=False, source=source)
    other = policy_graph(tmp_path / "v2", reverse=True, source=source)
    snap = tmp_path / "v1.snap"
    Simulation(run).run_until(60).save(snap)
    got = whatif_json(capsys, snap, "--graph", other)
    assert [p["file"] for p in got["projections"]] == [str(run.resolve()), str(other.resolve())]
    assert all(p["metrics"]["jobs"] == 8 for p in got["projections"])
    assert registry.get("Mine") is None  # (neither file's class is left known after)


def journal_of(graph: Path) -> Path:
    """A journal of a run of `graph` (a LiveSource's), made as test_journal_reading makes one,
    the graph compiled with its element file its own."""
    return live_journal(graph.parent, graph, [(1, 40 + 10 * i) for i in range(4)], 30.0, own=True)[0]


def test_whatif_from_a_journal_compares_a_changed_copy_of_the_runs_policy_file(tmp_path, capsys):
    run = policy_graph(tmp_path / "live", reverse=False, source="LiveSource(jobs=4)")
    other = policy_graph(tmp_path / "v2", reverse=True, source="LiveSource(jobs=4)")
    journal = journal_of(run)
    got = whatif_json(capsys, journal, "--graph", other)
    assert [p["file"] for p in got["projections"]] == [str(run.resolve()), str(other.resolve())]
    assert all(p["metrics"]["jobs_finished"] == 4 for p in got["projections"])
    assert registry.get("Mine") is None


# --- sweeps: points.csv's metrics, and two points of one run --------------------------------
def small_graph(folder: Path, trace: Path = TRACE) -> Path:
    graph = folder / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "2x4:V100";\narrivals :: TraceSource(path="{trace}", jobs=6);\n'
        "arrivals -> AcceptAll -> JobPool -> order :: Las(backfill=false) -> FirstFree -> Launch -> JobMetrics;\n"
    )
    return graph


def test_points_csv_has_every_metric_even_one_no_run_has_a_value_of(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["sweep", small_graph(tmp_path), "--until", "30min", "--vary", "order.backfill=false,true", "--workers", "1"]
    assert main([*map(str, argv), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    runs = pl.read_csv(out / "summary.csv")
    points = pl.read_csv(out / "points.csv")
    assert runs["avg_jct_s"].null_count() == runs.height == 2  # (no job finished in 30 minutes)
    measured = [c for c in runs.columns if c not in RUN_COLUMNS and c != "order.backfill"]
    assert [c for c in points.columns if c.endswith(("_mean", "_ci95"))] == [
        f"{m}_{s}" for m in measured for s in ("mean", "ci95")
    ]
    assert points["avg_jct_s_mean"].null_count() == points["avg_jct_s_ci95"].null_count() == 2
    assert "avg_jct_s" in printed


def _two_copies_of_the_trace(tmp_path, monkeypatch):
    """Two files of the same contents in a folder made the current one, a sweep's output folder
    there, and the --vary value that names both files."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(TRACE.read_text())
    b.write_text(TRACE.read_text())
    monkeypatch.chdir(tmp_path)
    return a, b, tmp_path / "out", f'arrivals.path="{a.name}","{b.name}"'


def test_two_points_of_one_run_key_share_the_run_and_are_each_listed(tmp_path, capsys, monkeypatch):
    from roundhouse.tools.outputs.sweep_folder import open_sweep

    a, b, out, vary = _two_copies_of_the_trace(tmp_path, monkeypatch)
    assert main(["sweep", str(small_graph(tmp_path)), "--until", "1h", "--vary", vary, "--workers", "1", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "running 1 run on" in err and "1 of the grid's 2 runs is the same run as another" in err
    assert 'ok arrivals.path="a.csv" seed=0 (also arrivals.path="b.csv" seed=0: the same run)' in err
    runs, points = pl.read_csv(out / "summary.csv"), pl.read_csv(out / "points.csv")
    assert runs["arrivals.path"].to_list() == points["arrivals.path"].to_list() == ['"a.csv"', '"b.csv"']
    assert runs["key"].n_unique() == 1
    folder = open_sweep(out)
    assert folder.table["arrivals.path"].to_list() == ['"a.csv"', '"b.csv"'] and folder.incomplete is None
    assert folder.table["point"].to_list() == ['arrivals.path="a.csv"', 'arrivals.path="b.csv"']


def test_a_failed_run_shared_by_two_copies_of_a_trace_names_each_points_own_file(tmp_path, capsys, monkeypatch):
    # (The two files are one run; its error, found reading the first, would name it for both.)
    a, b, out, vary = _two_copies_of_the_trace(tmp_path, monkeypatch)
    argv = ["sweep", str(small_graph(tmp_path)), "--cluster", "1x1:V100", "--vary", vary, "--workers", "1"]
    assert main([*argv, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    listed = err.split("2 of 2 runs failed:")[1].splitlines()
    assert f'arrivals.path="a.csv" seed=0: error: --vary arrivals.path="a.csv": {a}: ' in listed[1]
    assert f'arrivals.path="b.csv" seed=0: error: --vary arrivals.path="b.csv": {b}: ' in listed[2]
    errors = pl.read_csv(out / "summary.csv")["error"].to_list()
    assert [str(a) in errors[0], str(b) in errors[0], str(b) in errors[1], str(a) in errors[1]] == [True, False, True, False]


# --- simulate_ahead: from the world's own time ------------------------------------------------
def test_simulate_ahead_refuses_a_time_that_is_not_the_worlds(tmp_path):
    from roundhouse import Simulation
    from roundhouse.errors import UsageError
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.whatif import simulate_ahead

    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x2:V100";\n'
        "PoissonSource(rate=4/h, jobs=8, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    sim = Simulation(graph).run_until(3600)
    world, other = sim.world_now(), compile_file(graph)
    for later in (sim.now + 7200, sim.now + 17):  # (a later boundary; a time between two)
        with pytest.raises(UsageError, match=rf"now: {later:g} s is not the time the world is as of, 3600 s"):
            simulate_ahead(world, other, later, 86400)
    with pytest.raises(UsageError, match="world: the time it is as of is not known"):
        simulate_ahead(sim.world, other, sim.now, 86400)  # (not folded in: not a world_now())
    assert simulate_ahead(world, other, sim.now, 30 * 86400).metrics["jobs"] == 8


def test_a_worlds_time_goes_with_its_copies(tmp_path):
    """The time a world is as of is part of it: a copy keeps it, so a projection can start
    from the copy; a world's time can also be given by hand."""
    import copy

    from roundhouse import Simulation
    from roundhouse.errors import UsageError
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.whatif import simulate_ahead

    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x2:V100";\n'
        "PoissonSource(rate=4/h, jobs=8, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    sim = Simulation(graph).run_until(3600)
    other = compile_file(graph)
    expected = simulate_ahead(sim.world_now(), other, sim.now, 30 * 86400).metrics
    world = copy.deepcopy(sim.world_now())
    assert world.as_of == 3600
    assert simulate_ahead(world, other, sim.now, 30 * 86400).metrics == expected
    assert sim.world.as_of is None  # (the engine's own world lies between two rounds' facts)
    by_hand = copy.deepcopy(sim.world)
    with pytest.raises(UsageError, match="world: the time it is as of is not known"):
        simulate_ahead(by_hand, other, sim.now, 86400)
    by_hand.as_of = 7200.0
    with pytest.raises(UsageError, match="now: 3600 s is not the time the world is as of, 7200 s"):
        simulate_ahead(by_hand, other, sim.now, 86400)


# --- a file given with --vary or --set that a run or its cluster cannot read -----------------
def test_a_missing_cluster_file_names_the_option_that_gave_it(tmp_path, capsys):
    graph = small_graph(tmp_path)
    err = fails(capsys, "sweep", graph, "--vary", f'cluster="2x4:V100","{tmp_path}/missing.toml"')
    assert err.startswith(f'error: --vary cluster="{tmp_path}/missing.toml": {tmp_path}/missing.toml: '), err
    err = fails(capsys, "sweep", graph, "--set", f'cluster="{tmp_path}/missing.toml"')
    assert err.startswith(f'error: --set cluster="{tmp_path}/missing.toml": '), err


def test_a_run_failing_on_a_varied_trace_names_the_option_and_says_error_once(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,10,-2,100\n")
    given = Override(f'arrivals.path="{bad}"', flag="--vary")
    spec = RunSpec(str(small_graph(tmp_path)), (given,), labels={"arrivals.path": '"bad.csv"', "seed": 0})
    with registry.scope():
        key = compile_spec(spec)[1]
    row = record_run(spec, key)
    assert row["status"] == "error"
    assert row["error"] == f"--vary arrivals.path=\"bad.csv\": {bad}:3: column 'gpus': must be at least 1, got -2"


# --- the worker a run whose worker process died is recorded with ------------------------------
def test_a_run_whose_worker_process_died_names_that_process(tmp_path):
    pid_file = tmp_path / "pid"
    (tmp_path / "dies.py").write_text(
        _policy(reverse=False).replace(
            "    def tick(self, ctx, active):\n",
            f"    def tick(self, ctx, active):\n        import os\n        open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
            "        os._exit(5)\n",
        )
    )
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'require "dies.py";\nround = 5min;\ncluster = "2x4:V100";\nsrc :: TraceSource(path="{TRACE}", jobs=2);\n'
        "src -> AcceptAll -> JobPool -> Mine -> FirstFree -> Launch -> JobMetrics;\n"
    )
    spec = RunSpec(str(graph), labels={"seed": 0})
    with registry.scope():
        key = compile_spec(spec)[1]
    [row] = list(LocalExecutor(1).run([Task(key, spec)]))
    assert row["error"] == "its worker process died (exit status 5)"
    assert row["worker"] == f"{socket.gethostname()}:{int(pid_file.read_text())}" != f"{socket.gethostname()}:{os.getpid()}"


# --- a journal's plan naming a GPU or job the run does not have -----------------------------
@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        ("$.plans[0].gpus[1]", "9", "round 0: its plans name GPU 9, and the cluster's are 0 to 1"),
        ("$.plans[0].launch[0]", "99", "round 0: its plan's launch names job 99, which no round so far brought"),
    ],
)
def test_a_journals_plan_naming_what_the_run_lacks_is_named_as_damage(tmp_path, capsys, path, value, words):
    journal = make_journal(tmp_path, stop_s=60.0)
    change(journal, f"UPDATE rounds SET record = json_set(record, '{path}', {value}) WHERE k = 0;")
    err = fails(capsys, "whatif", journal)
    assert f"{journal}: damaged journal: table rounds, {words}" in err, err
    assert "not those of the run" not in err
