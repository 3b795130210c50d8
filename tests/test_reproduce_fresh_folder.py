"""`roundhouse reproduce` as a new user runs it: from a fresh folder with the default (relative)
output folder, and a failed experiment is a message and exit status 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.loopback import Loopback
from roundhouse.tools.reproductions import EXPERIMENTS, ExperimentFailed, experiment
from tests.conftest import REPO

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
