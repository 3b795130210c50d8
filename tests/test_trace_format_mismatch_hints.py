"""A trace read with `--format X` that is, by its contents, in another known format: every such
error names the format found, not only the errors of a header. The PAI reader takes a
10-column header of another format for a task (its first cell error is of a column), and the
CSV readers take a JSON list's lines for rows (their error is of a later line)."""

from __future__ import annotations

import json

import pytest

from roundhouse.errors import TraceError
from roundhouse.tools.cli import main
from roundhouse.traces.formats import read_trace

ONES = (
    "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n"
    "0,resnet50,imagenet,10000,10,32,5e-4,0.008,0.55,16\n"
    "60,bert,cola,5000,5,16,5e-6,2e-5,0.8,2\n"
)
DALLY = [
    {"job_id": "1", "max_parallelism": "4", "arrival_time": "0", "duration": "3600", "model": "BERT"},
    {"job_id": "2", "max_parallelism": "2", "arrival_time": "30", "duration": "600", "model": "VGG"},
]


@pytest.fixture
def ones_trace(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(ONES)
    return path


@pytest.fixture
def dally_list(tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(DALLY, indent=1))
    return path


def test_an_ones_trace_read_as_pai_is_named(ones_trace, capsys):
    assert main(["trace", "describe", str(ones_trace), "--format", "pai"]) == 2
    err = capsys.readouterr().err
    # (the cell's column stays named, and the hint follows)
    assert f"{ones_trace}:1: error: column 'inst_num': 'task' is not a number" in err, err
    assert "by its contents it is a ones trace: read it as ones (format=ones, or no format)" in err, err
    assert main(["trace", "describe", str(ones_trace), "--format", "ones"]) == 0  # (as the hint says)


@pytest.mark.parametrize("named", ["canonical", "pollux", "ones", "philly", "pai"])
def test_a_dally_job_list_read_as_another_format_is_named(dally_list, named):
    with pytest.raises(TraceError, match="by its contents it is a helios trace: read it as helios"):
        read_trace(dally_list, named)
    assert read_trace(dally_list, "helios").height == 2


def test_a_bad_task_of_a_pai_table_read_as_pai_gets_no_hint(tmp_path):
    """A file that starts as a format's own files do is that format's, damaged: its error is
    its own, whatever format detection would have taken it for."""
    path = tmp_path / "pai_task_table.csv"
    path.write_text("j1,t1,1,Terminated,100,200,600,29,100,V100\nj2,t1,x,Terminated,100,200,600,29,100,V100\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path, "pai")
    assert caught.value.row == 2 and caught.value.column == "inst_num"
    assert "by its contents" not in str(caught.value)
