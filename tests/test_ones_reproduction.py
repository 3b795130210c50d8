"""`roundhouse reproduce ones-64gpu --quick`: every scheduler runs on 64 GPUs and the sweep's
smaller cluster, every tracked job finishes, the tables, figures and comparisons are written, and
the figures obey what must hold whatever the throughput model (not the paper's values)."""

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.reproductions.ones import PAPER_ONES_JCT, SCHEDULERS


@pytest.mark.slow
def test_ones_64gpu_quick(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # (table cells unwrapped)
    assert main(["reproduce", "ones-64gpu", "--quick", "--out", str(tmp_path)]) == 0
    out = tmp_path / "ones-64gpu"
    summary = pl.read_csv(out / "summary.csv")
    jobs = pl.read_csv(out / "jobs.csv")
    runs = set(zip(summary["scheduler"], summary["nodes"], strict=True))
    assert runs == {(s, 16) for s in SCHEDULERS} | {(s, 4) for s in SCHEDULERS if s != "FIFO"}
    # The first 5% of the 40 jobs are left out, the rest all finish under every scheduler.
    assert jobs["job_id"].min() == 2 and (summary["jobs"] == 38).all()
    assert (jobs["status"] == "finished").all()
    assert ((summary["avg_exec_s"] - (summary["avg_jct_s"] - summary["avg_queue_s"])).abs() < 1e-6).all()
    assert ((summary["under_200s"] >= 0) & (summary["under_200s"] <= 1)).all()
    row = {(r["scheduler"], r["nodes"]): r for r in summary.to_dicts()}
    for s in ("ONES", "Tiresias", "Optimus"):
        # A quarter of the GPUs for the same jobs: nobody finishes sooner on average.
        assert row[(s, 4)]["avg_jct_s"] >= row[(s, 16)]["avg_jct_s"]
    # The rigid schedulers keep each job's GPUs and batch: they differ only in when jobs start.
    for s in ("Optimus", "FIFO"):
        assert row[(s, 16)]["avg_exec_s"] == pytest.approx(row[("Tiresias", 16)]["avg_exec_s"], rel=1e-6)
    # Optimus decides every 10 minutes: arrivals wait for the next decision.
    assert row[("Optimus", 16)]["avg_queue_s"] > row[("Tiresias", 16)]["avg_queue_s"]
    # ONES resizes: its jobs' GPU-seconds are not their requested GPUs times their run time.
    ones = jobs.filter((pl.col("scheduler") == "ONES") & (pl.col("nodes") == 16))
    assert (ones["service_gpu_s"] != ones["gpus"] * ones["run_s"]).any()
    for name in ("ones_avg_jct.png", "ones_scaling.png"):
        assert (out / name).stat().st_size > 0
    printed = capsys.readouterr().out
    assert f"{PAPER_ONES_JCT:.1f}" in printed and "paired Wilcoxon p" in printed
