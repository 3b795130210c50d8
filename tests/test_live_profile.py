"""`roundhouse profile` measures a real workload here and writes a table the simulator reads."""

from __future__ import annotations

import pytest

from roundhouse.tools.cli import main
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import jobs_of

# Real agents, schedulers or training processes on this machine (the quick loop is -m "not live").
pytestmark = pytest.mark.live


def test_profile_writes_a_table_a_simulation_is_calibrated_with(tmp_path, capsys, run_graph):
    out = tmp_path / "here.csv"
    assert main(["profile", "--models", "Recommendation", "--seconds", "1", "--gpu-type", "CPU1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "it/s" in printed and "restore =" in printed
    table = ProfileTable.load(out)
    rate = table.rate("Recommendation", 64, "CPU1", 1)
    assert rate is not None and rate > 1.0  # iterations per second of a real run
    text = out.read_text()
    assert "# launch overhead:" in text and "# revocation to exit" in text

    # The simulator runs the same model at the measured speed.
    (tmp_path / "here.csv").write_text(text)
    result = run_graph(
        f"""
        round = 1s;
        cluster = "1x1:CPU1";
        profile = "{out}";
        reference_gpu = "CPU1";
        src :: TraceSource(path="trace.csv");
        src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
        """,
        jobs=[{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "model": "Recommendation", "iterations": 100 * rate}],
    )
    assert jobs_of(result)[0]["jct_s"] == pytest.approx(100.0)
