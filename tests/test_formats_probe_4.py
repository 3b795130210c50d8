"""Slips a user makes with real traces in their own formats: spaces or a doubled carriage return
around Pollux's and ONES' cells (read as the canonical reader reads them), a huge batch size
named as written, and a Tiresias CSV missing one of its own columns named by that column."""

from __future__ import annotations

import pytest

from roundhouse.errors import TraceError
from roundhouse.traces.formats import read_trace

POLLUX = "name,time,application,num_replicas,batch_size\ncifar10-0,53,cifar10,6,2048\nbert-1,154,bert,1,12\n"
ONES = (
    "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n"
    "0,resnet50,imagenet,10000,10,32,5.00E-04,0.008,0.55,16\n"
    "30,bert,cola,8000,5,32,2.00E-05,5.00E-05,0.8,2\n"
)
TIRESIAS = "job_id,num_gpu,submit_time,duration,model_name\n0,4,0,100,ResNet-18\n1,2,30,200,LM\n"


def _write(tmp_path, name, text, newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode())
    return path


@pytest.mark.parametrize(("name", "text"), [("w.csv", POLLUX), ("t.csv", ONES)])
def test_spaces_after_commas_read_as_without(tmp_path, name, text):
    plain = read_trace(_write(tmp_path, name, text))
    spaced = read_trace(_write(tmp_path, "spaced-" + name, text.replace(",", ", ")))
    assert spaced.equals(plain)


@pytest.mark.parametrize(("name", "text"), [("w.csv", POLLUX), ("t.csv", ONES)])
def test_doubled_carriage_return_reads_as_one(tmp_path, name, text):
    # (a CRLF file passed once more through a text-mode copy: lines end "\r\r\n")
    plain = read_trace(_write(tmp_path, name, text))
    doubled = read_trace(_write(tmp_path, "cr-" + name, text, "\r\r\n"))
    assert doubled.equals(plain)


def test_pollux_huge_batch_named_as_written(tmp_path):
    path = _write(tmp_path, "w.csv", POLLUX.replace(",2048", ",1e300"))
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert err.value.row == 2 and err.value.column == "batch_size"
    assert "1e300 is outside what the elastic profile covers for cifar10" in err.value.message
    assert len(str(err.value)) < 300


@pytest.mark.parametrize("lost", ["num_gpu", "submit_time"])
def test_tiresias_missing_own_column_is_named(tmp_path, lost):
    path = _write(tmp_path, "t.csv", TIRESIAS.replace(lost, lost + "X"))
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert f"missing column '{lost}' of Tiresias' job CSV" in err.value.message
    assert "arrival_s" not in err.value.message


def test_helios_csv_missing_gpu_num_is_not_taken_for_tiresias(tmp_path):
    header = "job_id,user,vc,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
    path = _write(tmp_path, "cluster_log.csv", header + "1,u,v,4,1,COMPLETED,2020-04-01 00:00:00,-,-,10,0\n")
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert "Tiresias" not in err.value.message
