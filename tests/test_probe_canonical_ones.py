"""A canonical trace carrying ONES' training settings (lr, max_lr, target_acc, patience) refuses
what the ONES reader refuses, at the value's line or record, naming the column, in the ONES
reader's words."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import canonical, ones

HEADER = "job_id,arrival_s,gpus,duration_s,lr,max_lr,target_acc,patience"
GOOD = "0,0,1,100,0.01,0.1,0.5,2"

# (the bad row's settings, the column refused, what the message says)
BAD = [
    ("0.01,0.1,1.5,10", "target_acc", "'1.5' is above 1: the target accuracy is a fraction"),
    ("-1,0.001,0.5,2", "lr", "'-1' is not a number more than 0"),
    ("0,0.1,0.5,2", "lr", "'0' is not a number more than 0"),
    ("0.01,0.1,0.5,2.5", "patience", "'2.5' is not a whole number of at least 1"),
    ("0.01,0.1,0.5,0", "patience", "'0' is not a whole number of at least 1"),
    ("0.1,0.01,0.5,2", "max_lr", "'0.01' is below lr '0.1': max_lr is the largest"),
    ("0.01,inf,0.5,2", "max_lr", "'inf' is not a number more than 0"),
]


def _csv(tmp_path, settings: str):
    path = tmp_path / "jobs.csv"
    path.write_text(f"{HEADER}\n{GOOD}\n# a comment line\n1,5,1,100,{settings}\n")
    return path


@pytest.mark.parametrize(("settings", "column", "words"), BAD)
def test_canonical_csv_refuses_a_bad_setting_at_its_line(tmp_path, settings, column, words):
    path = _csv(tmp_path, settings)
    with pytest.raises(TraceError) as caught:
        canonical.read_csv(path)
    err = caught.value
    assert (err.row, err.column) == (4, column)
    assert words in err.message
    assert str(err).startswith(f"{path}:4: error: column '{column}': ")


@pytest.mark.parametrize(("settings", "column", "words"), BAD)
def test_ones_reader_says_the_same(tmp_path, settings, column, words):
    """The same value in an ONES trace: the same message, word for word."""
    lr, max_lr, target, patience = settings.split(",")
    path = tmp_path / "trace_1.csv"
    path.write_text(",".join(ones.TRACE_COLUMNS) + f"\n0,resnet18,cifar,20000,{patience},256,{lr},{max_lr},{target},4\n")
    with pytest.raises(TraceError) as from_ones:
        ones.read_trace(path)
    with pytest.raises(TraceError) as from_canonical:
        canonical.read_csv(_csv(tmp_path, settings))
    assert from_ones.value.column == from_canonical.value.column == column
    assert from_ones.value.message == from_canonical.value.message


def test_canonical_parquet_refuses_a_bad_setting_at_its_record(tmp_path):
    frame = pl.DataFrame(
        {
            "job_id": [0, 1, 2],
            "arrival_s": [0.0, 1.0, 2.0],
            "gpus": [1, 1, 1],
            "duration_s": [10.0, 10.0, 10.0],
            "lr": [0.01, 0.01, 0.01],
            "target_acc": [0.5, 0.5, 2.0],
        }
    )
    path = tmp_path / "jobs.parquet"
    frame.write_parquet(path)
    with pytest.raises(TraceError) as caught:
        canonical.read_parquet(path)
    assert (caught.value.row, caught.value.column) == (3, "target_acc")
    assert caught.value.message.startswith("2.0 is above 1")


def test_writing_a_bad_setting_is_refused(tmp_path):
    """What we write we can read: a frame with a bad setting is refused before it is written."""
    frame = pl.DataFrame({"job_id": [0], "arrival_s": [0.0], "gpus": [1], "duration_s": [5.0], "max_lr": [-0.5]})
    with pytest.raises(TraceError, match="column 'max_lr': -0.5 is not a number more than 0"):
        canonical.write_csv(frame, tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()


def test_settings_not_given_and_good_ones_pass(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text(f"{HEADER}\n{GOOD}\n1,5,1,100,,,,\n2,6,1,100,0.02,0.02,1,1\n")
    frame = canonical.read_csv(path)
    assert frame.height == 3
    assert frame.get_column("lr").dtype == pl.Float64
    assert frame.get_column("lr").null_count() == 1
    # max_lr alone (lr not given) is not compared with anything
    path.write_text("job_id,arrival_s,gpus,duration_s,max_lr\n0,0,1,10,0.001\n")
    assert canonical.read_csv(path).get_column("max_lr").to_list() == [0.001]


def test_ones_trace_written_canonically_reads_back(tmp_path):
    """An ONES workload's settings are all in range: written as a canonical trace, it reads back."""
    jobs = ones.generate(jobs=40, seed=3)
    path = tmp_path / "ones.csv"
    canonical.write_csv(jobs, path)
    back = canonical.read_csv(path)
    for column in ("lr", "max_lr", "target_acc", "patience"):
        assert back.get_column(column).to_list() == jobs.sort(["arrival_s", "job_id"]).get_column(column).to_list()


def test_shipped_ones_sample_still_reads():
    frame = canonical.read_csv("traces/samples/ones-60.csv")
    assert frame.height == 60
    assert (frame.get_column("target_acc") <= 1).all()
