"""The throughput model's quick paths for profiled jobs give the profile's own rates, bit for bit:
a round's few launches priced one by one through a dictionary, many at once through the
remembered-rates table, and a cluster of one GPU type with no types worked out, each against
the straightforward answer (the profile asked launch by launch: its model, batch size, GPU type,
count and whether its GPUs share a machine, the slowest type for a launch over several), on
random jobs and placements."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.cluster import Cluster
from roundhouse.traces import throughput
from roundhouse.traces.jobs import JobReader, JobTable
from roundhouse.traces.prepare import prepare_jobs
from roundhouse.traces.profiles import ProfileTable
from roundhouse.traces.schema import validate
from roundhouse.traces.throughput import Placement, ThroughputModel

# (model, batch size, GPU counts it may ask for): configurations the shipped profile has on
# every type of the clusters below, so that every job is prepared.
CONFIGS = [("ResNet-18", 64, (1, 2, 4)), ("Transformer", 64, (1, 2, 4)), ("LM", 40, (1, 2, 4)), ("A3C", 4, (1,))]


def _jobs(model: ThroughputModel, n: int, rng: np.random.Generator) -> JobReader:
    picks = rng.integers(len(CONFIGS), size=n)
    gpus = [int(rng.choice(CONFIGS[p][2])) for p in picks.tolist()]
    frame = pl.DataFrame(
        {
            "job_id": list(range(n)),
            "arrival_s": [0.0] * n,
            "iterations": [1000.0] * n,
            "gpus": gpus,
            "model": [CONFIGS[p][0] for p in picks.tolist()],
            "batch_size": [CONFIGS[p][1] for p in picks.tolist()],
        }
    )
    batch, unknown = prepare_jobs(validate(frame, "t"), model, "V100", model.cluster.n_gpus, "t")
    assert not unknown
    table = JobTable(len(model.cluster.gpu_types))
    table.append(batch)
    return JobReader(table)


def _launches(cluster: Cluster, jobs: JobReader, n: int, rng: np.random.Generator) -> tuple[np.ndarray, Placement]:
    """Up to `n` distinct jobs, as many as the cluster holds, and where they run."""
    rows = rng.permutation(len(jobs))[:n]
    rows = rows[np.asarray(jobs.column("gpus"))[rows].cumsum() <= cluster.n_gpus]
    return rows, _placement(cluster, jobs, rows, rng)


def _placement(cluster: Cluster, jobs: JobReader, rows: np.ndarray, rng: np.random.Generator) -> Placement:
    # Each launch its job's GPU count, on free GPUs picked at random: some on one machine,
    # some spread, on a mixed cluster some over several types.
    counts = np.asarray(jobs.column("gpus"))[rows]
    free = rng.permutation(cluster.n_gpus)
    gpus = free[: int(counts.sum())]
    together = rng.random(len(rows)) < 0.5
    at = 0
    for i, c in enumerate(counts.tolist()):
        if together[i]:  # (the lowest free GPUs of a random machine, when it has enough)
            node = int(rng.integers(cluster.n_nodes))
            on = np.setdiff1d((cluster.gpu_node == node).nonzero()[0], gpus[:at])[:c]
            if len(on) == c:
                gpus[at : at + c] = on
        at += c
    if len(np.unique(gpus)) < len(gpus):  # (a machine picked twice: every launch on random GPUs)
        gpus = free[: int(counts.sum())]
    return Placement.of(gpus, counts)


def _straightforward(model: ThroughputModel, jobs: JobReader, rows: np.ndarray, placement: Placement) -> np.ndarray:
    cluster, profile = model.cluster, model.profile
    out = np.empty(len(rows))
    for i, r in enumerate(rows.tolist()):
        held = placement.gpus[placement.starts[i] : placement.starts[i] + placement.counts[i]]
        one_node = len(np.unique(cluster.gpu_node[held])) == 1
        count = int(placement.counts[i])
        got = [
            profile.rate(jobs.column("model")[r], int(jobs.column("batch_size")[r]), cluster.gpu_types[t], count, one_node)
            for t in np.unique(cluster.gpu_type[held]).tolist()
        ]
        out[i] = min(g or 0.0 for g in got)
    return out


@pytest.mark.parametrize("spec", ["60x4:V100", "30x4:V100,30x4:K80"], ids=["one-type", "two-types"])
def test_rates_few_and_many_launches_equal_the_profile_asked_launch_by_launch(spec):
    rng = np.random.default_rng(7)
    profile = ProfileTable.load()
    cluster = Cluster.parse(spec, profile.gpu_types)
    model = ThroughputModel(profile, cluster)
    jobs = _jobs(model, 400, rng)
    sizes = {"few": 0, "many": 0}
    for _ in range(60):
        # Launches of distinct jobs, as many as fit: a round's few, or (as after a
        # reshuffle) more than the one-by-one path takes.
        n = int(rng.choice([1, 3, 12, throughput._FEW, throughput._FEW + 1, 200]))
        rows, placement = _launches(cluster, jobs, n, rng)
        got = model.rates(jobs, rows, placement)
        np.testing.assert_array_equal(got, _straightforward(model, jobs, rows, placement))
        sizes["few" if len(rows) <= throughput._FEW else "many"] += 1
    assert sizes["few"] > 10 and sizes["many"] > 10  # both paths taken, each many times


def test_the_dictionary_and_the_table_remember_the_same_rates():
    # The same launches priced by a model that only ever takes the one-by-one path and by one
    # that only ever takes the table: equal, and equal once remembered (asked twice).
    rng = np.random.default_rng(11)
    profile = ProfileTable.load()
    cluster = Cluster.parse("2x8:V100,2x8:P100", profile.gpu_types)
    few, many = ThroughputModel(profile, cluster), ThroughputModel(profile, cluster)
    jobs = _jobs(few, 300, rng)
    for _ in range(40):
        rows, placement = _launches(cluster, jobs, int(rng.integers(1, 20)), rng)
        by_dictionary = few.rates(jobs, rows, placement)
        assert few._cache._n_columns == 0  # (the table untouched: every launch went one by one)
        old = throughput._FEW
        throughput._FEW = 0
        try:
            by_table = many.rates(jobs, rows, placement)
        finally:
            throughput._FEW = old
        np.testing.assert_array_equal(by_dictionary, by_table)
        np.testing.assert_array_equal(few.rates(jobs, rows, placement), by_dictionary)
    assert many._cache._n_columns > 0 and few._cache._known
