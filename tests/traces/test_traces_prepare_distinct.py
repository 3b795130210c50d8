"""Preparing a trace per distinct model name and (model, batch size) pair (traces/distinct.py,
traces/prepare.py): the same job specs as asking the profile job by job."""

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.cluster import Cluster
from roundhouse.traces.distinct import DistinctNames
from roundhouse.traces.placement import PlacementTable
from roundhouse.traces.prepare import prepare_jobs
from roundhouse.traces.profiles import ProfileTable
from roundhouse.traces.schema import validate
from roundhouse.traces.throughput import ThroughputModel


@pytest.mark.parametrize("n", [9, 5000])  # (split by a dictionary, and by polars)
def test_distinct_names_are_each_rows_name_in_order_of_first_appearance(n):
    rng = np.random.default_rng(n)
    pool = ["ResNet-50", "LM", "A3C", "Transformer", "x", None]
    values = [pool[i] for i in rng.integers(0, len(pool), n)]
    names = DistinctNames.of(pl.Series(values, dtype=pl.String), n)
    first_seen = list(dict.fromkeys(v for v in values if v is not None))
    assert names.names == first_seen
    assert [names.name_of(i) for i in range(n)] == values
    assert names.codes.dtype == np.int64


def test_distinct_names_in_order_of_first_appearance_with_none_apart():
    names = DistinctNames.of(pl.Series(["b", None, "a", "b", None, "c", "a"], dtype=pl.String), 7)
    assert names.names == ["b", "a", "c"]
    assert names.codes.tolist() == [0, -1, 1, 0, -1, 2, 1]
    assert [names.name_of(i) for i in range(7)] == ["b", None, "a", "b", None, "c", "a"]
    assert names.per_row([10, 20, 30], -1, np.int64).tolist() == [10, -1, 20, 10, -1, 30, 20]
    assert names.per_row(["B", "A", "C"], None).tolist() == ["B", None, "A", "B", None, "C", "A"]
    none = DistinctNames.of(None, 3)
    assert none.names == [] and none.per_row([], 0.5, np.float64).tolist() == [0.5] * 3
    empty = DistinctNames.of(pl.Series([], dtype=pl.String), 0)
    assert empty.names == [] and len(empty.per_row([], 0, np.int64)) == 0


@pytest.mark.parametrize("cluster_spec", ["4x4:V100", "2x4:V100,2x4:K80"])
def test_prepared_jobs_match_the_profile_asked_job_by_job(cluster_spec):
    profile = ProfileTable.load()
    cluster = Cluster.parse(cluster_spec, profile.gpu_types)
    model = ThroughputModel(profile, cluster)
    rng = np.random.default_rng(7)
    n = 3000
    # Profiled (model, batch size) pairs for each GPU count, some under another spelling or with
    # no batch size (the model's default), a model the profile lacks, and jobs naming none.
    gpus = rng.choice([1, 2, 4, 8], n)
    models: list = []
    batch: list = []
    for g in gpus.tolist():
        pairs = profile.configs(g)
        m, b = pairs[int(rng.integers(len(pairs)))]
        draw = rng.random()
        if draw < 0.1:
            m, b = "FancyNet", None
        elif draw < 0.2:
            m, b = None, None
        elif draw < 0.4 and (m, profile.default_batch_size(m)) in pairs:
            b = None
        if m is not None and m != "FancyNet" and rng.random() < 0.3:
            m = m.lower()
        models.append(m)
        batch.append(b)
    frame = pl.DataFrame(
        {
            "job_id": np.arange(n),
            "arrival_s": np.sort(rng.uniform(0, 1e5, n)),
            "gpus": gpus,
            "duration_s": rng.uniform(60, 1e4, n),
            "model": pl.Series(models, dtype=pl.String),
            "batch_size": pl.Series(batch, dtype=pl.Int64),
        }
    )
    trace = validate(frame, "t")
    prepared, unknown = prepare_jobs(trace, model, "V100", cluster.n_gpus, "t")
    cols = prepared.columns
    assert unknown == {"FancyNet"}

    raw = trace["model"].to_list()
    given = trace["batch_size"].fill_null(0).to_numpy()
    rows_gpus = trace["gpus"].to_numpy()
    canonical = [profile.canonical_model(m) if m is not None else None for m in raw]
    assert cols["model"].tolist() == canonical
    known = np.array([c is not None for c in canonical])
    assert cols["has_model"].tolist() == known.tolist()
    expected_batch = [profile.default_batch_size(c) if c is not None and b <= 0 else b for c, b in zip(canonical, given.tolist())]
    assert cols["batch_size"].tolist() == expected_batch

    skew, slowdown = PlacementTable.load().lookup(raw)
    slowdown = slowdown.copy()
    for i in np.flatnonzero(known):
        c, b, g = canonical[i], expected_batch[i], int(rows_gpus[i])
        ref = model.estimate([c], [b], "V100", g, True)[0]
        on_types = [model.estimate([c], [b], t, g, True)[0] for t in cluster.gpu_types]
        assert prepared.type_rates[i].tolist() == on_types
        assert cols["reference_rate"][i] == (ref if ref > 0 else max(on_types))
        if g > 1:
            together, apart = ref, model.estimate([c], [b], "V100", g, False)[0]
            slowdown[i] = together / apart if together > 0 and apart > 0 else np.nan
    assert prepared.type_rates[~known].tolist() == [[1.0] * len(cluster.gpu_types)] * int((~known).sum())
    assert np.array_equal(cols["tensor_skew"], skew, equal_nan=True)
    assert np.array_equal(cols["spread_slowdown"], slowdown, equal_nan=True)
