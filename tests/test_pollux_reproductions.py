"""`roundhouse reproduce pollux-interval --quick` (pollux-load's is in
test_pollux_load_reproduction.py): every run finishes every job, the tables and figures are
written, Pollux's published figures are printed beside ours, and the effects the papers describe
have the right sign (not their size)."""

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.reproductions.pollux import WORKLOAD, retimed_workload

pytestmark = pytest.mark.skipif(not WORKLOAD.is_file(), reason="Pollux's reference data is not on this machine")


def test_retimed_workload_keeps_the_jobs_and_scales_the_gaps(tmp_path):
    slow = pl.read_csv(retimed_workload(tmp_path, 2, 20))
    fast = pl.read_csv(retimed_workload(tmp_path, 20, 20))
    original = pl.read_csv(WORKLOAD).head(20)
    for frame in (slow, fast):
        assert frame.drop("time").equals(original.drop("time"))
        assert frame["time"][0] == 0 and (frame["time"].diff().drop_nulls() >= 0).all()
    # Ten times the rate: the same gaps, a tenth as long (up to the whole-second floor).
    assert abs(slow["time"][-1] / 10 - fast["time"][-1]) <= 1
    # 19 gaps at 2 per hour last about 9.5 hours: a seeded Poisson draw, not a fixed spacing.
    assert 3 * 3600 < slow["time"][-1] < 20 * 3600


@pytest.mark.slow
def test_pollux_interval_quick(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["reproduce", "pollux-interval", "--quick", "--out", str(tmp_path)]) == 0
    out = tmp_path / "pollux-interval"
    runs = pl.read_csv(out / "runs.csv").sort("interval_s")
    assert runs["interval_s"].to_list() == [60, 480]
    assert (runs["jobs_finished"] == runs["jobs_tracked"]).all() and (runs["jobs_tracked"] == 40).all()
    # Pollux §5.3.2 and Blox Fig. 3: an 8-minute interval reacts later to arrivals and completions.
    jct = runs["avg_jct_s"].to_list()
    assert jct[1] > jct[0] > 0
    assert (out / "pollux-interval.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "2446 s" in printed  # Pollux's published figure for the 60 s interval, beside ours
    # The graphs name the workload the experiment wrote from their own folder: moved, they still check.
    graph = (out / "graphs" / "pollux-60s.sched").read_text()
    assert 'TraceSource(path="../workloads/workload-6-first-40.csv")' in graph and str(tmp_path) not in graph
    out.rename(tmp_path / "moved")
    assert main(["check", str(tmp_path / "moved" / "graphs" / "pollux-60s.sched")]) == 0
