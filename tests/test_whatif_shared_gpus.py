"""A what-if projection counts a GPU two jobs share once in its utilisation, as the world's
books do, whether the projection starts before the pair forms or while it holds the GPU."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulation import Simulation
from roundhouse.runtime.whatif import simulate_ahead

GRAPH = (
    'round = 6min;\ncluster = "1x1:V100";\nsrc :: TraceSource(path="trace.csv");\n'
    "src -> AcceptAll -> JobPool -> MaxMinFairness(space_sharing=true, interval=0) -> GavelRounds -> GavelPlacer"
    " -> Launch -> m :: JobMetrics;\n"
)


@pytest.mark.parametrize("fork_s", [0.0, 1800.0])
def test_a_projection_counts_a_shared_gpu_once(tmp_path, fork_s):
    pl.DataFrame(
        [
            dict(job_id=0, arrival_s=0.0, gpus=1, model="A3C", iterations=20000.0),
            dict(job_id=1, arrival_s=0.0, gpus=1, model="CycleGAN", iterations=10000.0),
        ]
    ).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(GRAPH)
    sim = Simulation(tmp_path / "g.sched")
    sim.run_until(fork_s)
    ahead = simulate_ahead(sim.world_now(), compile_file(tmp_path / "g.sched"), sim.now, 30 * 86400.0)
    assert ahead.stop == "every job finished"
    # One GPU, busy from the fork point until the last job finishes (a pair shares it most of
    # that time): counted once, the utilisation is the busy span over the projection's span.
    finish = ahead.metrics["makespan_s"]
    span = ahead.end_s - sim.now
    assert ahead.metrics["utilization"] == pytest.approx(finish / span)
    assert ahead.metrics["utilization"] <= 1.0
