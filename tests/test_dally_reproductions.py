"""`roundhouse reproduce dally-batch --quick` and `dally-poisson --quick`: every scheme runs on
every size, the tables and figures are written, and the paper's numbers are printed beside ours."""

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.reproductions import load_all
from roundhouse.tools.reproductions.dally import QUICK_RACKS, SCHEMES, p95_demand


@pytest.mark.slow
def test_dally_batch_quick(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # (table cells unwrapped)
    assert main(["reproduce", "dally-batch", "--quick", "--out", str(tmp_path)]) == 0
    out = tmp_path / "dally-batch"
    runs = pl.read_csv(out / "runs.csv")
    assert sorted(zip(runs["scheme"], runs["racks"])) == sorted((s, r) for s in SCHEMES for r in QUICK_RACKS)
    assert (runs["jobs_finished"] == runs["jobs_tracked"]).all()
    starts = {
        (s, r): (m, k, n)
        for s, r, m, k, n in runs.select("scheme", "racks", "machine_starts", "rack_starts", "network_starts").rows()
    }
    for r in QUICK_RACKS:
        # No job of the mix is larger than a rack: waiting for the tightest fit never spans racks.
        assert starts[("Dally-fullyConsolidated", r)][2] == 0
        # Without waiting, more starts spread beyond one machine than when waiting for one.
        assert sum(starts[("Dally-noWait", r)][1:]) > sum(starts[("Dally-fullyConsolidated", r)][1:])
    # Fig. 4: the tuned rack timer of the P95 job's demand is longer in the smaller cluster.
    timers = pl.read_csv(out / "timers.csv")
    demand = p95_demand(pl.read_csv(out / "jobs.csv"))
    assert demand == 16  # the 95th percentile of the batch mix's GPU demands, more than a machine
    mean = {r: timers.filter((pl.col("racks") == r) & (pl.col("gpus") == demand))["rack_timer_s"].mean() for r in QUICK_RACKS}
    assert mean[min(QUICK_RACKS)] > mean[max(QUICK_RACKS)]
    for name in ("makespan", "queue-p95", "queue-p99", "comm", "jct", "timers"):
        assert (out / f"dally-batch-{name}.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "Table II" in printed and "2.83M / 2.40M / 5.98M / 8.40M s" in printed  # Dally's row, typed from the paper


@pytest.mark.slow
def test_dally_poisson_quick(tmp_path):
    report = load_all()["dally-poisson"].run(tmp_path, True)
    runs = report.tables["runs"]
    assert runs.height == len(SCHEMES) * len(QUICK_RACKS)
    jobs = report.tables["jobs"]
    assert jobs["arrival_s"].max() > 24 * 3600  # Poisson arrivals spread over days, not a batch at 0
    assert any(c.what.startswith("Table III") for c in report.comparisons)
