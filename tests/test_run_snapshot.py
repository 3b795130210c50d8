"""`roundhouse run GRAPH --until TIME --snapshot FILE`: the run saved at --until as a simulation's
snapshot, which `whatif` reads and `Simulation.load` runs on; its corner cases, each refused with
a message naming the option (exit status 2), before the run where it can be."""

from __future__ import annotations

import json
import os

import numpy as np
import polars as pl
import pytest

from roundhouse import Simulation
from roundhouse.tools.cli import main
from tests.conftest import fails
from tests.own_elements import policy_file

# Long jobs arriving over the first hours on few GPUs: at 5 h some have finished, one runs and
# most wait; every job has finished by about 79 h.
GRAPH = (
    'round = 5min;\ncluster = "2x2:V100";\n'
    "src :: PoissonSource(rate=6/h, jobs=12, seed=3);\n"
    "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics;\n"
)
TIMES = ["job_id", "arrival_s", "first_start_s", "finish_s", "preemptions"]


@pytest.fixture
def graph(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "g.sched"
    path.write_text(GRAPH)
    return path


def _run(*argv) -> int:
    return main(["run", *map(str, argv)])


def test_the_snapshot_is_the_apis_and_whatif_reads_it(graph, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # (its header on one line, whatever the terminal)
    snap = tmp_path / "day.snap"
    assert _run(graph, "--until", "5h", "--snapshot", snap, "--quiet") == 0
    # The file Simulation(...).run_until(5 h).save(...) writes, byte for byte.
    api = Simulation(graph).run_until(5 * 3600).save(tmp_path / "api.snap")
    assert snap.read_bytes() == api.read_bytes()
    header = json.loads(snap.read_bytes().partition(b"\n")[0])
    assert header["format"] == "roundhouse-snapshot" and header["now_s"] == 5 * 3600 and header["until"] is None
    assert header["graph_path"] == str(graph) and header["graph_text"] == GRAPH
    assert main(["whatif", str(snap)]) == 0
    out = capsys.readouterr().out
    assert "from day.snap" in out.replace(str(tmp_path) + "/", "") and "average JCT" in out and "makespan" in out
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".partial")]


def test_the_overrides_trace_and_cluster_given_are_the_snapshots(graph, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n" + "".join(f"{i},{i * 600},1,{7200 + 600 * i}\n" for i in range(8)))
    traced = tmp_path / "traced.sched"
    traced.write_text(GRAPH.replace("PoissonSource(rate=6/h, jobs=12, seed=3)", 'TraceSource(path="none.csv")'))
    snap = tmp_path / "s.snap"
    argv = ["--trace", trace, "--cluster", "1x2:V100", "--set", "round=10min", "--until", "2h", "--snapshot", snap]
    assert _run(traced, *argv, "--quiet") == 0
    api = Simulation(traced, trace=trace, cluster="1x2:V100", overrides=["round=10min"]).run_until(7200)
    assert snap.read_bytes() == api.save(tmp_path / "api.snap").read_bytes()
    header = json.loads(snap.read_bytes().partition(b"\n")[0])
    assert header["trace"] == str(trace) and header["cluster"] == "1x2:V100" and header["overrides"] == ["round=10min"]


def test_loaded_and_run_to_the_end_every_job_is_as_in_a_run_that_never_stopped(graph, tmp_path):
    snap = tmp_path / "s.snap"
    # With --out: the run's results are those of `run --until` without --snapshot, explain.parquet too.
    assert _run(graph, "--until", "5h", "--snapshot", snap, "--out", tmp_path / "saved", "--quiet") == 0
    assert _run(graph, "--until", "5h", "--out", tmp_path / "plain", "--quiet") == 0
    for name in ("jobs.csv", "summary.json", "explain.parquet"):
        assert (tmp_path / "saved" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes(), name
    loaded = Simulation.load(snap)
    assert loaded.now == 5 * 3600 and not loaded.done
    loaded.run()
    whole = Simulation(graph)
    whole.run()
    got, want = loaded.jobs(TIMES), whole.jobs(TIMES)
    assert len(got) == 12 and got["finish_s"].is_not_nan().all()
    assert got.equals(want)
    assert loaded.summary() == whole.summary()
    # The record of why jobs waited (explain.parquet's) is the run's output, left out of the state.
    assert loaded.world.explain is None
    # And the same as `roundhouse run` to the end writes.
    assert _run(graph, "--out", tmp_path / "end", "--quiet") == 0
    ended = pl.read_csv(tmp_path / "end" / "jobs.csv").sort("job_id")
    np.testing.assert_allclose(ended["finish_s"].to_numpy(), got.sort("job_id")["finish_s"].to_numpy())


@pytest.mark.parametrize("until", [None, "inf"])
def test_without_a_time_limit_it_is_refused_before_the_run(graph, tmp_path, capsys, until):
    argv = [] if until is None else ["--until", until]
    err = fails(capsys, "run", graph, "--snapshot", tmp_path / "s.snap", "--out", tmp_path / "out", *argv)
    assert "--snapshot" in err and "needs --until" in err and "a run that has ended cannot be saved" in err
    assert not (tmp_path / "s.snap").exists() and not (tmp_path / "out").exists()


def test_a_run_that_ends_before_the_limit_writes_its_results_and_no_snapshot(graph, tmp_path, capsys):
    snap = tmp_path / "s.snap"
    snap.write_bytes(Simulation(graph).run_until(3600).save(tmp_path / "old.snap").read_bytes())
    before = snap.read_bytes()
    err = fails(capsys, "run", graph, "--until", "1000h", "--snapshot", snap, "--out", tmp_path / "out")
    assert f"--snapshot {snap}: no snapshot written: the run ended at t=" in err
    assert "before --until 1000h (every job finished)" in err and "a run that has ended cannot be saved" in err
    assert snap.read_bytes() == before  # (an earlier snapshot of that name is left as it was)
    assert len(pl.read_csv(tmp_path / "out" / "jobs.csv")) == 12
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".partial")]


def test_where_the_file_cannot_go_is_said_before_the_run(graph, tmp_path, capsys):
    (tmp_path / "folder").mkdir()
    cases = {
        tmp_path / "folder": "is a directory; give the file to write, such as",
        tmp_path / "nowhere" / "s.snap": f"cannot write it: no directory {tmp_path / 'nowhere'}",
        graph: "the file there is not a snapshot, and a save would replace it",
    }
    for path, message in cases.items():
        err = fails(capsys, "run", graph, "--until", "5h", "--snapshot", path, "--out", tmp_path / "made" / "out")
        assert f"error: --snapshot {path}: {message}" in err, err
        # (refused before the run: the folder made for --out is gone again, nothing printed)
        assert not (tmp_path / "made").exists() and "JCT" not in capsys.readouterr().out
    assert graph.read_text() == GRAPH
    err = fails(capsys, "run", graph, "--until", "5h", "--snapshot", "")
    assert "--snapshot: the file name is empty" in err


def test_the_file_may_go_in_the_results_folder_the_run_makes(graph, tmp_path):
    snap = tmp_path / "new" / "s.snap"
    assert _run(graph, "--until", "5h", "--snapshot", snap, "--out", tmp_path / "new", "--quiet") == 0
    assert Simulation.load(snap).now == 5 * 3600 and (tmp_path / "new" / "run.json").is_file()


def test_a_journal_is_not_replaced(graph, tmp_path, capsys):
    journal = tmp_path / "journal.sqlite"
    journal.write_bytes(b"SQLite format 3\x00" + bytes(100))
    err = fails(capsys, "run", graph, "--until", "5h", "--snapshot", journal)
    assert "the file there is not a snapshot" in err and journal.read_bytes().startswith(b"SQLite format 3")


def test_a_folder_no_file_can_be_made_in_is_said_before_the_run(graph, tmp_path, capsys):
    # (Linux's /proc, where no file can be made, even by root: CI and this project run on Linux)
    snap = "/proc/roundhouse-run.snap"
    err = fails(capsys, "run", graph, "--until", "5h", "--snapshot", snap, "--out", tmp_path / "out")
    assert f"error: --snapshot {snap}: cannot be written (" in err and "JCT" not in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_a_live_run_and_a_graph_of_live_sources_only_are_refused(graph, tmp_path, capsys):
    err = fails(capsys, "run", graph, "--live", "tcp://127.0.0.1:5555", "--snapshot", tmp_path / "s.snap")
    assert "--snapshot is for a simulation: a live run keeps its state in its journal (--journal)" in err
    live = tmp_path / "live.sched"
    live.write_text(GRAPH.replace("PoissonSource(rate=6/h, jobs=12, seed=3)", "LiveSource"))
    err = fails(capsys, "run", live, "--until", "5h", "--snapshot", tmp_path / "s.snap")
    assert f"--snapshot {tmp_path / 's.snap'}: the graph's only source(s) (src) bring jobs submitted live" in err
    assert "roundhouse whatif" in err and not (tmp_path / "s.snap").exists()
    # Beside another source, a LiveSource brings nothing in a simulation, and the run saves as any.
    both = tmp_path / "both.sched"
    both.write_text(GRAPH.replace("src -> AcceptAll", "live :: LiveSource;\na :: AcceptAll;\nlive -> a;\nsrc -> a"))
    assert _run(both, "--until", "5h", "--snapshot", tmp_path / "both.snap", "--quiet") == 0
    assert Simulation.load(tmp_path / "both.snap").run().stop_reason == "every job finished"


def test_an_element_that_declares_no_state_is_refused_before_the_run(tmp_path, capsys):
    tick = "order = np.argsort(active.arrival_s, kind='stable')\nself._seen = 1\nreturn Ranking(active.rows[order], active.gpus[order])"
    (tmp_path / "mine.py").write_text(
        policy_file("Forgetful", "Rank by arrival.", tick, before="import numpy as np", declares=None)
    )
    graph = tmp_path / "mine.sched"
    graph.write_text('require "mine.py";\n' + GRAPH.replace("Fifo", "Forgetful"))
    err = fails(capsys, "run", graph, "--until", "5h", "--snapshot", tmp_path / "s.snap", "--out", tmp_path / "out")
    assert "element 'Forgetful" in err and "cannot be saved: it declares no state" in err
    assert not (tmp_path / "s.snap").exists() and not (tmp_path / "out").exists()


def test_one_of_the_files_the_run_writes_in_its_out_folder_is_refused(graph, tmp_path, capsys):
    for name in ("explain.parquet", "run.json", "m-jobs.csv"):
        snap = tmp_path / "out" / name
        err = fails(capsys, "run", graph, "--until", "5h", "--snapshot", snap, "--out", tmp_path / "out")
        assert f"--snapshot {snap}: is one of the files the run writes in its --out folder" in err
        assert not (tmp_path / "out").exists()


def test_a_graph_of_your_own_elements_saves_the_code_it_runs(tmp_path, capsys):
    tick = "order = np.argsort(active.arrival_s, kind='stable')\nself._seen = 1\nreturn Ranking(active.rows[order], active.gpus[order])"
    mine = tmp_path / "mine.py"
    mine.write_text(policy_file("Minded", "Rank by arrival.", tick, before="import numpy as np", declares='state = ("_seen",)'))
    graph = tmp_path / "mine.sched"
    graph.write_text('require "mine.py";\n' + GRAPH.replace("Fifo", "Minded"))
    snap = tmp_path / "s.snap"
    assert _run(graph, "--until", "5h", "--snapshot", snap, "--quiet") == 0
    assert list(json.loads(snap.read_bytes().partition(b"\n")[0])["code"]) == [str(mine)]
    loaded = Simulation.load(snap)
    assert loaded.run().stop_reason == "every job finished"
    whole = Simulation(graph)
    whole.run()
    assert loaded.jobs(TIMES).equals(whole.jobs(TIMES))


def test_with_its_progress_line_on_a_terminal_the_snapshot_is_the_same_bytes(graph, tmp_path):
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()  # (stderr a terminal: the run keeps a progress line's hook)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "roundhouse.tools.cli", "run", str(graph), "--until", "5h", "--snapshot", "s.snap"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 0 and b"JCT" in done.stdout
    api = Simulation(graph).run_until(5 * 3600).save(tmp_path / "api.snap")
    assert (tmp_path / "s.snap").read_bytes() == api.read_bytes()


def test_whatif_on_a_run_s_results_folder_names_the_command_that_saves_a_snapshot(graph, tmp_path, capsys):
    assert _run(graph, "--until", "5h", "--out", tmp_path / "out", "--quiet") == 0
    err = fails(capsys, "whatif", tmp_path / "out")
    assert "is a folder of a run's results" in err
    assert err.rstrip().endswith("`roundhouse run GRAPH --until TIME --snapshot FILE` saves a run's state at TIME")


def test_docs_whatif_example_runs_as_written_and_saves_what_the_api_saves(tmp_path, capsys, monkeypatch):
    import re
    import shlex

    from tests.conftest import REPO

    text = (REPO / "docs" / "whatif.md").read_text()
    [block] = re.findall(r"### A snapshot from the command line\n.*?```\n(.*?)```", text, re.S)
    run, whatif = (shlex.split(line) for line in block.strip().splitlines())
    assert run[:2] == ["roundhouse", "run"] and whatif[:2] == ["roundhouse", "whatif"]
    monkeypatch.chdir(REPO)  # (the commands name the shipped graphs by their paths in the repository)
    snap = str(tmp_path / "day1.snap")
    assert main([snap if a == "day1.snap" else a for a in run[1:]] + ["--quiet"]) == 0
    assert main([snap if a == "day1.snap" else a for a in whatif[1:]]) == 0
    assert "srtf.sched" in capsys.readouterr().out
    # The API's call the page gives for it writes the same bytes.
    [call] = re.findall(r"\(It is the file `(Simulation\(.*?\))` writes", text, re.S)
    api = eval(call.replace("\n", " ").replace('"day1.snap"', repr(str(tmp_path / "api.snap"))), {"Simulation": Simulation})
    assert api.read_bytes() == (tmp_path / "day1.snap").read_bytes()
