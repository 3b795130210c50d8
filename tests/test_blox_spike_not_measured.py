"""graphs/blox-accept-1.2x.sched says its daily spike's jobs (ids from 1,000,000) load the
cluster but lie outside the tracked window, as in `roundhouse reproduce blox-admission`: the
graph's JobMetrics measures the trace's jobs only."""

import numpy as np

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.conftest import REPO

SPIKE_FIRST_ID = 1_000_000


def test_the_spike_loads_the_cluster_but_is_not_measured():
    graph = REPO / "graphs" / "blox-accept-1.2x.sched"
    assert "outside the tracked window" in graph.read_text()
    result = simulate(compile_file(graph), until=24 * 3600.0)  # past the first spike, at 12 h
    ids = result.world.jobs.column("job_id")
    started = ~np.isnan(result.world.jobs.column("first_start_s"))
    spike = ids >= SPIKE_FIRST_ID
    assert spike.sum() == 16 and started[spike].all()  # the spike ran ...
    summary = result.reports["report"]["summary"]
    assert summary["jobs_tracked"] == int((~spike).sum())  # ... and is not among the measured
