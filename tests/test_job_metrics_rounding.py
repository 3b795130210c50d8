"""JobMetrics' derived columns are exactly 0 where the docs say so, not a rounding error away."""

import types

import numpy as np
import polars as pl

from roundhouse import Simulation
from roundhouse.elements import sinks
from tests.conftest import REPO


def _jobs(result) -> pl.DataFrame:
    [jobs] = [r["jobs"] for r in result.reports.values() if isinstance(r, dict) and "jobs" in r]
    return jobs


def test_no_communication_without_tiers_and_no_wait_after_preemption_without_one():
    # LAS on 32x4:V100 (no network tiers): run_s - compute_s left up to 1e-10 s behind.
    result = Simulation(REPO / "graphs" / "las.sched").run()
    jobs = _jobs(result)
    assert jobs.height == 1000
    assert (jobs["comm_s"] == 0).all()
    never = jobs.filter(pl.col("preemptions") == 0)
    assert never.height and (never["queue_after_preemption_s"].drop_nulls() == 0).all()
    summary = next(r["summary"] for r in result.reports.values() if isinstance(r, dict) and "summary" in r)
    assert summary["avg_comm_s"] == 0.0 and summary["total_comm_s"] == 0.0


def test_rounding_is_zero_on_a_tiered_cluster_too():
    ctx = types.SimpleNamespace(cluster=types.SimpleNamespace(tiers=object()))
    run = np.array([1e4, 1e4, 1e4])
    comm = sinks._exposed_communication(ctx, run, run - np.array([1e-10, -1e-10, 5.0]))
    assert comm.tolist() == [0.0, 0.0, 5.0]
    waited = sinks._waited_after_preemption(
        np.array([100.0, 100.0, 100.0, np.nan]),
        np.array([100.0 - 1e-12, 40.0, 40.0, 5.0]),
        np.full(4, 1e4),
        np.array([1, 0, 2, 0]),
    )
    assert waited[:3].tolist() == [0.0, 0.0, 60.0] and np.isnan(waited[3])
