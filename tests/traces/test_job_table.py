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
