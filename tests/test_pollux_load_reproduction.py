"""`roundhouse reproduce pollux-load --quick`: every run finishes every job, the tables and
figures are written, and the effects Blox describes have the right sign (not their size). Apart
from tests/test_pollux_reproductions.py so that the two quick runs, each tens of seconds, can
run on different test workers."""

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.reproductions.pollux import POLICIES, WORKLOAD

pytestmark = pytest.mark.skipif(not WORKLOAD.is_file(), reason="Pollux's reference data is not on this machine")


@pytest.mark.slow
def test_pollux_load_quick(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["reproduce", "pollux-load", "--quick", "--out", str(tmp_path)]) == 0
    out = tmp_path / "pollux-load"
    runs = pl.read_csv(out / "runs.csv")
    assert sorted(zip(runs["policy"], runs["load"])) == sorted((p, load) for p in POLICIES for load in (5, 40))
    assert (runs["jobs_finished"] == runs["jobs_tracked"]).all() and (runs["jobs_tracked"] == 30).all()
    jct = {(p, load): v for p, load, v in runs.select("policy", "load", "avg_jct_s").rows()}
    resp = {(p, load): v for p, load, v in runs.select("policy", "load", "avg_responsiveness_s").rows()}
    for p in POLICIES:
        # More jobs at once on the same GPUs: each waits and shares more.
        assert jct[(p, 40)] > jct[(p, 5)]
    # FIFO never preempts: at 40 jobs/hour its late arrivals wait longest to start (Blox Fig. 9).
    assert resp[("FIFO", 40)] >= resp[("LAS", 40)]
    for name in ("jct", "responsiveness"):
        assert (out / f"pollux-load-{name}.png").stat().st_size > 0
    for graph in (out / "graphs").iterdir():
        assert 'TraceSource(path="../workloads/workload-6-' in graph.read_text() and str(tmp_path) not in graph.read_text()
