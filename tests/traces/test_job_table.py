"""The job table's bookkeeping of job ids and its storage (traces/jobs.py)."""

import copy

import numpy as np
import pytest

from roundhouse.errors import TraceError
from roundhouse.traces.jobs import LIVE_COLUMNS, JobBatch, JobTable


def batch(ids, origin="t") -> JobBatch:
    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    columns = {"job_id": ids, "arrival_s": np.arange(n, dtype=np.float64), "gpus": np.ones(n, dtype=np.int64)}
    return JobBatch(columns, np.ones((n, 1)), origin)


def test_ids_in_order_are_found_without_a_dict():
    table = JobTable(1, capacity=2)
    assert table.append(batch([3, 5, 9])).tolist() == [0, 1, 2]
    assert table.append(batch([10])).tolist() == [3]
    assert table._row_of_id is None  # a binary search over the sorted ids serves
    assert [table.row_of(i) for i in (3, 5, 9, 10)] == [0, 1, 2, 3]
    assert table.row_of(4) is None and table.row_of(11) is None and table.row_of(0) is None


def test_ids_out_of_order_switch_to_a_dict_and_keep_every_row():
    table = JobTable(1, capacity=2)
    table.append(batch([3, 5]))
    table.append(batch([4, 1]))
    table.append(batch([20, 21]))
    assert [table.row_of(i) for i in (3, 5, 4, 1, 20, 21)] == [0, 1, 2, 3, 4, 5]
    assert table.row_of(2) is None


@pytest.mark.parametrize("second", [[7, 7], [5], [1, 5], [8, 9, 8]])
def test_an_id_used_twice_is_refused_in_either_mode(second):
    table = JobTable(1)
    table.append(batch([1, 5, 7]))
    with pytest.raises(TraceError, match=r"job id \d+ is used twice"):
        table.append(batch(second, origin="second.csv"))
    assert len(table) == 3  # nothing added
    assert [table.row_of(i) for i in (1, 5, 7)] == [0, 1, 2]


def test_a_duplicate_within_one_batch_is_refused():
    with pytest.raises(TraceError, match="job id 2 is used twice"):
        JobTable(1).append(batch([1, 2, 2]))


def test_growing_keeps_rows_and_fills_new_rows_with_the_live_defaults():
    table = JobTable(1, capacity=1)
    for start in range(0, 40, 4):
        table.append(batch(range(start, start + 4)))
    assert len(table) == 40 and table.row_of(37) == 37
    store = table.writable
    for name, (_, fill) in LIVE_COLUMNS.items():
        values = store[name]  # the whole storage, rows not yet added included
        expected = np.full(len(values), fill, dtype=values.dtype)
        assert np.array_equal(values, expected, equal_nan=True), name
    assert table.column("job_id").tolist() == list(range(40))


def test_a_copy_looks_ids_up_on_its_own():
    table = JobTable(1)
    table.append(batch([1, 2]))
    other = copy.deepcopy(table)
    other.append(batch([0]))  # out of order in the copy only
    assert table._row_of_id is None and table.row_of(0) is None
    assert other.row_of(0) == 2 and other.row_of(2) == 1


def test_a_prepared_trace_keeps_shared_values_once_and_the_table_gets_them_all():
    from roundhouse.runtime.cluster import Cluster
    from roundhouse.traces.generators import generate
    from roundhouse.traces.prepare import prepare_jobs
    from roundhouse.traces.profiles import ProfileTable
    from roundhouse.traces.throughput import ThroughputModel

    profile = ProfileTable.load()
    cluster = Cluster.parse("4x4:V100", profile.gpu_types)
    trace = generate(500, 0.01, seed=1)
    batch, _ = prepare_jobs(trace, ThroughputModel(profile, cluster), "V100", cluster.n_gpus, "t")
    shared = {name for name, values in batch.columns.items() if values.strides == (0,)}
    # Generated jobs have no model, user or SLO, weight 1: one value each, kept once.
    assert {"model", "user", "weight", "slo_s", "batch_size", "has_model"} <= shared
    assert not {"job_id", "arrival_s", "gpus", "duration_s", "work"} & shared
    assert batch.type_rates.strides[0] == 0 and not batch.columns["weight"].flags.writeable
    table = JobTable(batch.type_rates.shape[1], capacity=8)
    for start in range(0, 500, 37):  # as a source hands them out, round by round
        table.append(batch.slice(start, min(start + 37, 500)))
    assert table.column("weight").tolist() == [1.0] * 500 and table.column("model").tolist() == [None] * 500
    assert np.isnan(table.column("slo_s")).all() and table.type_rates.tolist() == [[1.0]] * 500
    assert table.column("job_id").tolist() == trace["job_id"].to_list()
    assert table.column("work").tolist() == trace["duration_s"].to_list()


def test_a_batch_says_whether_its_ids_increase_and_the_table_follows():
    import polars as pl

    from roundhouse.runtime.cluster import Cluster
    from roundhouse.traces.prepare import prepare_jobs
    from roundhouse.traces.profiles import ProfileTable
    from roundhouse.traces.schema import validate
    from roundhouse.traces.throughput import ThroughputModel

    profile = ProfileTable.load()
    cluster = Cluster.parse("1x4:V100", profile.gpu_types)
    model = ThroughputModel(profile, cluster)

    def prepared(ids):
        frame = pl.DataFrame({"job_id": ids, "arrival_s": [0.0, 1.0, 2.0, 3.0], "gpus": [1] * 4, "duration_s": [9.0] * 4})
        return prepare_jobs(validate(frame, "t"), model, "V100", 4, "t")[0]

    ordered, shuffled = prepared([1, 2, 5, 9]), prepared([4, 2, 7, 3])
    assert ordered.ids_increasing and ordered.slice(1, 3).ids_increasing and not shuffled.ids_increasing
    table = JobTable(1)
    table.append(ordered.slice(0, 2))
    table.append(ordered.slice(2, 4))
    assert table._row_of_id is None and table.row_of(9) == 3
    with pytest.raises(TraceError, match="job id 2 is used twice"):
        table.append(shuffled)
    other = JobTable(1)
    other.append(shuffled)
    assert [other.row_of(i) for i in (4, 2, 7, 3)] == [0, 1, 2, 3]
