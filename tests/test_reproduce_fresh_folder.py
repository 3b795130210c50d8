"""`roundhouse reproduce` as a new user runs it: from a fresh folder with the default (relative)
output folder, and a failed experiment is a message and exit status 2, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.loopback import Loopback
from roundhouse.tools.reproductions import EXPERIMENTS, ExperimentFailed, Report, experiment
from tests.conftest import REPO, fails

GRAPH = """
round = 1s;
cluster = "1x1:V100";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_a_failed_experiment_is_a_message_with_exit_status_2(tmp_path, capsys, monkeypatch):
    seen = []

    @experiment("unit-test-fails", "fails as a measurement can", "nobody (2026)")
    def fails(out, quick):
        raise ExperimentFailed("the live run failed (the scheduler's exit status 2)")

    @experiment("unit-test-breaks", "breaks as a bug would", "nobody (2026)")
    def breaks(out, quick):
        seen.append(out)
        raise RuntimeError("something unforeseen")

    monkeypatch.chdir(tmp_path)
    try:
        assert main(["reproduce", "unit-test-fails", "--out", "q"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: experiment unit-test-fails failed: the live run failed (the scheduler's exit status 2)")
        assert "Traceback" not in err

        assert main(["reproduce", "unit-test-breaks", "--out", "q"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: experiment unit-test-breaks failed: RuntimeError: something unforeseen")
        assert "Traceback" not in err and "the Python detail is in q/unit-test-breaks/failure.txt" in err
        assert "raise RuntimeError" in (tmp_path / "q" / "unit-test-breaks" / "failure.txt").read_text()
        # The experiment is handed an absolute folder (it may start processes elsewhere).
        assert seen == [tmp_path / "q" / "unit-test-breaks"] and seen[0].is_absolute()
    finally:
        EXPERIMENTS.pop("unit-test-fails")
        EXPERIMENTS.pop("unit-test-breaks")


@pytest.mark.live
@pytest.mark.slow
def test_a_loopback_cluster_given_relative_paths_runs(tmp_path, monkeypatch):
    """Its processes start in the project's folder: relative paths must not reach them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "graph.sched").write_text(GRAPH)
    (tmp_path / "run" / "jobs.csv").write_text("job_id,arrival_s,gpus,model,iterations,batch_size\n0,0,1,LM,20,10\n")
    with Loopback("run", "run/graph.sched") as cluster:
        cluster.start_scheduler()
        cluster.start_agent("node-a", gpus="1:V100")
        assert cluster.wait_exit("scheduler", 60) == 0, cluster.logs()
    assert pl.read_csv(tmp_path / "run" / "out" / "jobs.csv")["status"].to_list() == ["finished"]


@pytest.mark.live
@pytest.mark.slow
@pytest.mark.timeout(1000)  # (its run may take up to 900 s on a slow machine: the wait below)
def test_live_fidelity_quick_runs_from_a_fresh_folder_with_the_default_out(tmp_path):
    """What a new user types first: `roundhouse reproduce --quick live-fidelity` in an empty folder."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", "reproduce", "--quick", "live-fidelity"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    out = tmp_path / "runs" / "reproduce" / "live-fidelity"
    table = pl.read_csv(out / "jct.csv")
    assert table.height == 4 and (table["live_jct_s"] > 0).all() and (table["sim_jct_s"] > 0).all()
    assert "wrote jct-cdf.png, jct.csv to runs/reproduce/live-fidelity/" in " ".join(done.stdout.split())
    # Nothing was written outside the fresh folder's runs/ (the project's folder included).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    assert not (REPO / "runs").exists()


# --- rerunning into the same folder -----------------------------------------------------------


def _contents(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_a_rerun_leaves_nothing_of_the_earlier_run_beside_its_results(tmp_path, capsys):
    """A full run, then a failed one, then a quick one, into one --out: each leaves only its own
    files (and a user's file added in between stays)."""
    plans = iter(("full", "fails", "quick", "quick"))

    @experiment("unit-test-reruns", "writes what its plan says", "nobody (2026)")
    def reruns(out, quick):
        plan = next(plans)
        (out / "graphs").mkdir()
        (out / "graphs" / f"{plan}.sched").write_text("// a graph\n")
        if plan == "fails":
            raise RuntimeError("a bug")
        (out / f"{plan}.png").write_bytes(b"png")
        return Report(tables={plan: pl.DataFrame({"x": [1]})})

    out = tmp_path / "out"
    folder = out / "unit-test-reruns"
    out.mkdir()
    (out / "beside.txt").write_text("not the experiment's")
    try:
        assert main(["reproduce", "unit-test-reruns", "--out", str(out)]) == 0
        assert _contents(folder) == {"reproduction.json", "graphs", "graphs/full.sched", "full.png", "full.csv"}
        assert main(["reproduce", "unit-test-reruns", "--out", str(out)]) == 2
        assert _contents(folder) == {"reproduction.json", "graphs", "graphs/fails.sched", "failure.txt"}
        (folder / "notes.txt").write_text("mine")
        assert main(["reproduce", "unit-test-reruns", "--quick", "--out", str(out)]) == 0
        assert _contents(folder) == {"reproduction.json", "graphs", "graphs/quick.sched", "quick.png", "quick.csv", "notes.txt"}
        mark = json.loads((folder / "reproduction.json").read_text())
        assert mark == {
            "experiment": "unit-test-reruns",
            "quick": True,
            "others": ["notes.txt"],
            "wrote": ["graphs", "quick.csv", "quick.png"],
        }
        assert main(["reproduce", "unit-test-reruns", "--quick", "--out", str(out)]) == 0
        assert (folder / "notes.txt").read_text() == "mine"
        assert (out / "beside.txt").read_text() == "not the experiment's"
    finally:
        EXPERIMENTS.pop("unit-test-reruns")
    capsys.readouterr()


def test_a_run_stopped_before_it_said_what_it_wrote_is_cleared_but_for_others(tmp_path):
    ran = []

    @experiment("unit-test-stopped", "writes nothing", "nobody (2026)")
    def stopped(out, quick):
        ran.append(sorted(p.name for p in out.iterdir()))
        return Report()

    folder = tmp_path / "unit-test-stopped"
    (folder / "graphs").mkdir(parents=True)
    (folder / "half.csv").write_text("x\n1\n")
    (folder / "notes.txt").write_text("mine")
    mark = {"experiment": "unit-test-stopped", "quick": False, "others": ["notes.txt"]}  # (no "wrote")
    (folder / "reproduction.json").write_text(json.dumps(mark))
    try:
        assert main(["reproduce", "unit-test-stopped", "--out", str(tmp_path)]) == 0
    finally:
        EXPERIMENTS.pop("unit-test-stopped")
    assert ran == [["notes.txt", "reproduction.json"]]


@pytest.mark.parametrize(
    ("files", "words"),
    [
        (
            {"precious.csv": "x\n1\n"},
            "holds files that `roundhouse reproduce unit-test-guarded` did not write (precious.csv; no reproduction.json)",
        ),
        (
            {"reproduction.json": '{"experiment": "gavel-fidelity", "others": []}', "fidelity.csv": "x\n"},
            "holds the output of experiment 'gavel-fidelity' (so says its reproduction.json), not of unit-test-guarded",
        ),
        ({"reproduction.json": "not json", "a.csv": "x\n"}, "its reproduction.json is not one of experiment unit-test-guarded"),
        # (a mark naming no experiment: the plain refusal, naming none)
        *(
            (
                {"reproduction.json": json.dumps({"experiment": owner, "others": []})},
                "its reproduction.json is not one of experiment unit-test-guarded",
            )
            for owner in (None, 3, "", "two\nlines")
        ),
    ],
)
def test_a_folder_that_is_not_the_experiments_output_is_refused_untouched(tmp_path, capsys, files, words):
    ran = []

    @experiment("unit-test-guarded", "must not run", "nobody (2026)")
    def guarded(out, quick):
        ran.append(out)
        return Report()

    folder = tmp_path / "unit-test-guarded"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    try:
        err = fails(capsys, "reproduce", "unit-test-guarded", "--out", tmp_path)
    finally:
        EXPERIMENTS.pop("unit-test-guarded")
    assert (
        err.strip()
        == f"error: --out {folder}: {words}; give another folder, or remove {'them' if 'did not' in words else 'it'} first"
    )
    assert ran == [] and {p.name: p.read_text() for p in folder.iterdir()} == files
