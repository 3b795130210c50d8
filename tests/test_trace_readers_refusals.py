"""What trace readers refuse, and where they say so: a Helios log's empty duration (skipped only
for a job cancelled before it started), an ONES epoch size whose work in samples is past what a
float counts exactly, a Gavel trace read as another format, a Pollux job with no name, and a CSV
trace named .json. Each message names the file, the line and the column where there is one."""

from __future__ import annotations

import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import helios, ones
from roundhouse.traces.formats import load_trace, read_trace
from tests.conftest import fails

HELIOS_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
RAN = "1,u1,vc1,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:10,2020-04-01 00:10:10,600,10"
LAST = "3,u1,vc1,2,4,1,COMPLETED,2020-04-01 00:02:00,2020-04-01 00:02:10,2020-04-01 00:12:10,600,10"


def _helios(tmp_path, middle: str, name: str = "cluster_log.csv"):
    path = tmp_path / name
    path.write_text(f"{HELIOS_HEADER}\n{RAN}\n{middle}\n{LAST}\n")
    return path


def test_a_helios_job_cancelled_before_it_started_is_skipped_and_counted(tmp_path):
    path = _helios(tmp_path, "2,u1,vc1,2,4,1,CANCELLED,2020-04-01 00:01:00,,2020-04-01 00:02:00,,")
    loaded = load_trace(path)
    assert loaded.format == "helios"
    assert loaded.skipped == 1
    assert loaded.frame["job_id"].to_list() == [1, 3]
    assert loaded.frame["arrival_s"].to_list() == [0.0, 120.0]


@pytest.mark.parametrize(
    "middle",
    [
        "2,u1,vc1,2,4,1,FAILED,2020-04-01 00:01:00,,2020-04-01 00:02:00,,",  # (not cancelled)
        "2,u1,vc1,2,4,1,CANCELLED,2020-04-01 00:01:00,2020-04-01 00:01:30,2020-04-01 00:02:00, ,",  # (it started)
        "2,u1,vc1,2,4,1,COMPLETED,2020-04-01 00:01:00,2020-04-01 00:01:30,2020-04-01 00:02:00,,30",
    ],
)
def test_any_other_empty_helios_duration_is_refused_as_empty_at_its_line(tmp_path, capsys, middle):
    path = _helios(tmp_path, middle)
    with pytest.raises(TraceError) as caught:
        helios.read(path)
    assert (caught.value.row, caught.value.column) == (3, "duration"), str(caught.value)
    assert "is empty" in caught.value.message
    err = fails(capsys, "trace", "describe", path)
    assert f"{path}:3: error: column 'duration': is empty" in err, err
    assert "model" not in err and "iterations" not in err, err


ONES_HEADER = "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus"
ONES_ROW = "0,resnet18,cifar,20000,10,256,0.005,0.08,0.7,4"


@pytest.mark.parametrize("size", ["1e300", "1e20", "4e14"])
def test_an_ones_epoch_size_past_an_exact_count_of_samples_is_refused_at_its_line(tmp_path, capsys, size):
    path = tmp_path / "ones.csv"
    path.write_text(f"{ONES_HEADER}\n{ONES_ROW}\n{ONES_ROW.replace('20000', size)}\n")
    with pytest.raises(TraceError) as caught:
        ones.read_trace(path)
    assert (caught.value.row, caught.value.column) == (3, "epoch_size"), str(caught.value)
    err = fails(capsys, "trace", "describe", path)
    assert f"{path}:3: error: column 'epoch_size': {size} is too large" in err, err


def test_an_ones_epoch_size_just_within_an_exact_count_is_read(tmp_path):
    # (resnet18-cifar runs 25 epochs: 25 x 3e14 samples is below 2**53.)
    path = tmp_path / "ones.csv"
    path.write_text(f"{ONES_HEADER}\n{ONES_ROW.replace('20000', '3e14')}\n")
    assert ones.read_trace(path)["epoch_size"].to_list() == [3e14]


GAVEL_LINE = "ResNet-18 (batch size 32)\tpython3 main.py\timage_classification/cifar10\t--num_steps\t1\t1006231\t1\t1.0\t-1\t0.0"


@pytest.mark.parametrize("format", ["canonical", "helios", "pollux", "ones"])
def test_a_gavel_trace_read_as_a_csv_format_gets_one_hint(tmp_path, format):
    path = tmp_path / "jobs.trace"
    path.write_text(f"{GAVEL_LINE}\n{GAVEL_LINE}\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path, format)
    message = str(caught.value)
    assert caught.value.row == 1, message
    assert message.count("read it as") == 1 and "read it as gavel" in message, message
    assert "comma" not in message and "python3" not in message, message
    assert read_trace(path).height == 2


@pytest.mark.parametrize("names", [("", ""), ("a", ""), ("  ", "b")])
def test_a_pollux_job_with_no_name_is_refused_as_empty_at_its_line(tmp_path, capsys, names):
    path = tmp_path / "workload.csv"
    path.write_text(f"name,time,application,num_replicas,batch_size\n{names[0]},0,cifar10,2,256\n{names[1]},5,cifar10,2,256\n")
    line = 2 if not names[0].strip() else 3
    err = fails(capsys, "trace", "describe", path, "--format", "pollux")
    assert f"{path}:{line}: error: column 'name': the job's name is empty" in err, err
    assert "used twice" not in err, err


@pytest.mark.parametrize(
    ("text", "format"),
    [
        (f"{HELIOS_HEADER}\n{RAN}\n", "helios"),
        ("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n", "canonical"),
        (f"{ONES_HEADER}\n{ONES_ROW}\n", "ones"),
    ],
)
def test_a_csv_trace_named_json_says_it_reads_as_a_csv_and_how_to_read_it(tmp_path, capsys, text, format):
    path = tmp_path / "cluster_log.json"
    path.write_text(text)
    err = fails(capsys, "trace", "describe", path)
    assert f"{path}:1: error: is named .json" in err, err
    assert f"a {format} trace's CSV header: read it as {format} (format={format})" in err and ".csv" in err, err
    assert "not valid JSON" not in err, err
    assert load_trace(path, format).frame.height == 1  # (and read so, it is)
