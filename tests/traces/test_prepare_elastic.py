"""Preparing elastic jobs (traces/prepare.py): where their work comes from, GPU requests larger
than the cluster, and errors on work too long to run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.runtime.cluster import Cluster
from roundhouse.traces import pollux
from roundhouse.traces.prepare import prepare_jobs
from roundhouse.traces.profiles import ProfileTable
from roundhouse.traces.schema import validate
from roundhouse.traces.throughput import ThroughputModel
from tests.conftest import fails, jobs_of, write_trace

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def _prepare(rows: list[dict], cluster: str = "2x4:V100"):
    elastic = pollux.profile()
    profile = ProfileTable.load()
    model = ThroughputModel(profile, Cluster.parse(cluster, profile.gpu_types), elastic=elastic)
    trace = validate(pl.DataFrame(rows), "t.csv", elastic=elastic)
    batch, _ = prepare_jobs(trace, model, "V100", model.cluster.n_gpus, "t.csv")
    return batch, elastic


def _goodput(elastic, app: str, gpus: int, batch: int, per_node: int = 4) -> float:
    nodes = -(-gpus // per_node)
    return float(elastic.rates(np.array([elastic.row(app)]), nodes, gpus, batch)[0])


def test_an_elastic_jobs_duration_sets_its_work_at_its_trace_gpus_and_batch():
    rows = [
        dict(job_id=0, arrival_s=0.0, gpus=1, duration_s=100.0, model="cifar10", batch_size=128),
        dict(job_id=1, arrival_s=0.0, gpus=2, duration_s=360000.0, model="Recommendation", batch_size=2048),
    ]
    batch, elastic = _prepare(rows)
    work = batch.columns["work"]
    assert work[0] == pytest.approx(100.0 * _goodput(elastic, "cifar10", 1, 128))
    assert work[1] == pytest.approx(360000.0 * _goodput(elastic, "ncf", 2, 2048))
    # Alone, on the GPUs it asked for, it takes its duration (not its application's training).
    alone = work / batch.columns["reference_rate"]
    assert alone.tolist() == pytest.approx([100.0, 360000.0])
    assert work[0] != pytest.approx(elastic.apps[elastic.row("cifar10")].work_samples)


def test_iterations_then_epochs_then_duration_then_the_applications_own_work():
    base = dict(arrival_s=0.0, gpus=1, model="cifar10", batch_size=128)
    rows = [
        dict(base, job_id=0, duration_s=50.0, epochs=2.0, iterations=1000.0),
        dict(base, job_id=1, duration_s=50.0, epochs=2.0, iterations=None),
        dict(base, job_id=2, duration_s=50.0, epochs=None, iterations=None),
        dict(base, job_id=3, duration_s=None, epochs=None, iterations=None),
    ]
    batch, elastic = _prepare(rows)
    app = elastic.apps[elastic.row("cifar10")]
    expected = [1000.0, 2.0 * app.epoch_samples, 50.0 * _goodput(elastic, "cifar10", 1, 128), app.work_samples]
    assert batch.columns["work"].tolist() == pytest.approx(expected)


def test_an_elastic_job_asking_more_gpus_than_the_cluster_starts_on_all_of_them():
    rows = [
        dict(job_id=0, arrival_s=0.0, gpus=16, model="cifar10", batch_size=512),
        dict(job_id=1, arrival_s=0.0, gpus=16, duration_s=600.0, model="cifar10", batch_size=512),
    ]
    batch, elastic = _prepare(rows, "2x4:V100")
    assert batch.columns["gpus"].tolist() == [8, 8]
    assert batch.columns["batch_size"].tolist() == [512, 512]  # (its global batch, kept)
    at_eight = _goodput(elastic, "cifar10", 8, 512)
    assert batch.columns["reference_rate"].tolist() == pytest.approx([at_eight] * 2)
    # Its duration was taken on the 16 GPUs it asked for: its work is what those do in it.
    assert batch.columns["work"][1] == pytest.approx(600.0 * _goodput(elastic, "cifar10", 16, 512))


def test_a_job_of_the_throughput_profile_asking_more_gpus_than_the_cluster_is_still_refused():
    rows = [
        dict(job_id=0, arrival_s=0.0, gpus=16, model="cifar10", batch_size=512),
        dict(job_id=7, arrival_s=0.0, gpus=16, duration_s=600.0, model="ResNet-50", batch_size=64),
    ]
    with pytest.raises(TraceError, match="job 7 asks for 16 GPUs but the cluster has 8"):
        _prepare(rows)


@pytest.mark.parametrize(
    ("extra", "column", "said"),
    [
        (dict(epochs=1e30), "epochs", "1e+30 epochs"),
        (dict(iterations=1e30), "iterations", "1e+30 iterations"),
    ],
)
def test_work_of_more_than_a_century_names_the_column_that_gave_it(extra, column, said):
    rows = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="cifar10", batch_size=128),
        dict(dict(job_id=2, arrival_s=5.0, gpus=1, model="cifar10", batch_size=128), **extra),
    ]
    with pytest.raises(TraceError) as caught:
        _prepare(rows)
    assert caught.value.column == column
    assert caught.value.message.startswith(f"job 2: {said}")
    assert "more than a century" in caught.value.message


def test_huge_epochs_in_a_trace_run_is_an_error_naming_the_column_and_job(capsys, tmp_path):
    trace = write_trace(
        tmp_path / "t.csv",
        [
            dict(job_id=0, arrival_s=0.0, gpus=4, model="vgg16-cifar", batch_size=512, epochs=25.0),
            dict(job_id=2, arrival_s=98.0, gpus=16, model="alexnet-imagenet", batch_size=1024, epochs=1e30),
        ],
    )
    err = fails(capsys, "run", GRAPHS / "ones.sched", "--trace", trace)
    assert "column 'epochs': job 2: 1e+30 epochs" in err
    assert "'iterations'" not in err


def test_pollux_runs_a_trace_asking_more_gpus_than_the_cluster(tmp_path, run_graph):
    graph = """
    round = 60s;
    cluster = "1x4:V100";
    elastic_profile = "pollux";
    TraceSource(path="trace.csv") -> AcceptAll -> JobPool -> Pollux(seed=0, population=4, generations=2) -> PolluxAgent -> Launch -> JobMetrics;
    """
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=16, model="cifar10", batch_size=128, epochs=1.0),
        dict(job_id=1, arrival_s=0.0, gpus=1, model="cifar10", batch_size=128, duration_s=300.0),
    ]
    result = run_graph(graph, jobs)
    assert result.stop_reason == "every job finished"
    done = jobs_of(result)
    # Given 300 s of work on one GPU, it is done in about that (more GPUs, or a better batch
    # size, may speed it up; restarts and rounds slow it a little), not in its training's time.
    assert 60.0 < done[1]["run_s"] < 400.0


def test_a_duration_on_more_gpus_than_the_cluster_that_then_takes_over_a_century_is_refused():
    rows = [dict(job_id=4, arrival_s=0.0, gpus=64, duration_s=3.1e9, model="cifar10", batch_size=4096)]
    with pytest.raises(TraceError) as caught:
        _prepare(rows)
    assert caught.value.column == "duration_s"
    assert caught.value.message.startswith("job 4: 3.1e+09 s of 'cifar10' on the 64 GPUs it asks for take")
    assert "on the cluster's 8, more than a century" in caught.value.message
