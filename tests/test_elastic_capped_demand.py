"""An elastic job asking for more GPUs than the cluster has starts on all of them (traces/prepare.py);
the cores and memory it asks for per GPU stay what its trace asks per GPU, not its total
divided by the smaller count it got (SynergyTune hands them out per GPU held)."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.conftest import write_trace

# 2 nodes of 4 GPUs, 32 cores and 244 GB each (the defaults): 8 GPUs, 64 cores, 488 GB.
CLUSTER = "2x4:V100"
GPUS, CORES, MEMORY = 8.0, 64.0, 488.0

GRAPHS = {
    "pollux": (
        'round = 60s;\ncluster = "{cluster}";\nelastic_profile = "pollux";\n'
        'src :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> Pollux(seed=0) -> PolluxAgent -> SynergyTune -> run :: Launch -> m :: JobMetrics;\n"
        "run -> u :: ResourceUsage;\n",
        "cifar10",
        256,
    ),
    "ones": (
        'round = 10s;\ncluster = "{cluster}";\nelastic_profile = "ones";\n'
        'src :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> Ones(population=8, seed=0) -> SynergyTune -> run :: Launch -> m :: JobMetrics;\n"
        "run -> u :: ResourceUsage;\n",
        "vgg16-cifar",
        512,
    ),
}


def _per_gpu_held(tmp_path: Path, scheduler: str, gpus: int, cpus: float, memory_gb: float) -> pl.DataFrame:
    """Cores and GB held per GPU held, in every round the job runs."""
    text, model, batch = GRAPHS[scheduler]
    job = {"job_id": 0, "arrival_s": 0.0, "gpus": gpus, "model": model, "batch_size": batch, "epochs": 1.0}
    write_trace(tmp_path / "trace.csv", [{**job, "cpus": cpus, "memory_gb": memory_gb}])
    graph = tmp_path / "graph.sched"
    graph.write_text(text.format(cluster=CLUSTER))
    result = simulate(compile_file(graph, ()), None, until=1800)
    usage = result.reports["u"]["usage"].filter(pl.col("gpu") > 0)
    assert usage.height > 0  # the job ran
    return usage.select(
        cores=pl.col("cpu") * CORES / (pl.col("gpu") * GPUS),
        gb=pl.col("memory") * MEMORY / (pl.col("gpu") * GPUS),
    )


@pytest.mark.parametrize("scheduler", sorted(GRAPHS))
def test_a_capped_elastic_job_asks_for_its_traces_cores_and_memory_per_gpu(tmp_path, scheduler):
    # 16 GPUs asked for on a cluster of 8, with 1 core and 2 GB per GPU (16 and 32 in all):
    # before, its demand was 16 / 8 = 2 cores and 4 GB per GPU it held.
    per_gpu = _per_gpu_held(tmp_path, scheduler, gpus=16, cpus=16.0, memory_gb=32.0)
    assert np.allclose(per_gpu["cores"].to_numpy(), 1.0)
    assert np.allclose(per_gpu["gb"].to_numpy(), 2.0)


@pytest.mark.parametrize("scheduler", sorted(GRAPHS))
def test_an_elastic_job_within_the_cluster_asks_as_before(tmp_path, scheduler):
    # 4 GPUs asked for, 1 core and 2 GB per GPU: not capped, the same demand per GPU.
    per_gpu = _per_gpu_held(tmp_path, scheduler, gpus=4, cpus=4.0, memory_gb=8.0)
    assert np.allclose(per_gpu["cores"].to_numpy(), 1.0)
    assert np.allclose(per_gpu["gb"].to_numpy(), 2.0)
