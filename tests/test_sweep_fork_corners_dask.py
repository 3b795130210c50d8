"""A sweep on a Dask cluster whose scheduler goes away mid-sweep: the runs finished are kept,
the others are recorded as failed saying why (to be run again), and no traceback is printed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from roundhouse.runtime.results_store import ResultsStore
from roundhouse.runtime.sweep_exec import _dask_failure
from tests.conftest import REPO

pytestmark = pytest.mark.slow

TRACE = REPO / "traces" / "samples" / "philly-1000.csv"
PROBE = REPO / "tests" / "sweep_probe.py"

# A Dask cluster on loopback whose process ends outright (scheduler and all) once the sweep has
# stored its first run.
CLUSTER = """
import os, sys, time
from pathlib import Path

if __name__ == "__main__":
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None, silence_logs=50
    )
    Path(sys.argv[1]).write_text(cluster.scheduler_address)
    results = Path(sys.argv[2])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(results.glob("*.parquet")):
        time.sleep(0.05)
    time.sleep(0.5)
    os._exit(0)
"""


def test_a_lost_scheduler_keeps_the_finished_runs_and_prints_no_traceback(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "4x4:V100";\nrequire "{PROBE}";\n'
        f'arrivals :: TraceSource(path="{TRACE}", jobs=5);\n'
        "arrivals -> AcceptAll -> JobPool -> probe :: SweepProbe -> Consolidated -> Launch -> JobMetrics;\n"
    )
    script, address, out = tmp_path / "cluster.py", tmp_path / "address", tmp_path / "out"
    script.write_text(CLUSTER)
    cluster = subprocess.Popen([sys.executable, str(script), str(address), str(out / "results")], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not address.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert address.exists(), "the Dask cluster did not start"
        time.sleep(0.2)  # (the address is written whole by then)
        sweep = subprocess.run(
            [sys.executable, "-m", "roundhouse.tools.cli", "sweep", str(graph), "--vary", "probe.delay=0,60"]
            + ["--dask", address.read_text(), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        cluster.kill()
        cluster.wait()
    assert sweep.returncode == 1, sweep.stderr
    assert "Traceback" not in sweep.stderr
    assert "Dask cancelled it before it finished (scheduler-connection-lost" in sweep.stderr
    stored = ResultsStore(out / "results").read()
    assert sorted(stored["status"].to_list()) == ["error", "ok"]
    assert stored.filter(pl.col("status") == "ok")["probe.delay"].to_list() == ["0"]
    assert Path(out / "summary.csv").exists()


def test_a_cancelled_run_says_why():
    from distributed.client import FutureCancelledError

    text = _dask_failure(FutureCancelledError("roundhouse-run-x", reason="scheduler-connection-lost"))
    assert text.startswith("Dask cancelled it before it finished (scheduler-connection-lost")
    assert "run the same command" in text
