"""`roundhouse trace describe|convert --format pollux|ones` of a file in another format (a
Philly JSON log, a Gavel trace), whose first line read as a CSV header is one column: the error
names the format the file is in, as it does for the other formats, rather than only that line
2 has more values than the header."""

from __future__ import annotations

import pytest

from roundhouse.tools.cli import main


@pytest.fixture
def philly_log(tmp_path):
    path = tmp_path / "log.json"
    assert main(["trace", "generate", "-o", str(path), "--jobs", "5", "--rate", "8/h", "--seed", "1", "--format", "philly"]) == 0
    return path


@pytest.mark.parametrize("format", ["pollux", "ones"])
def test_a_philly_log_read_as_another_format_is_named(philly_log, capsys, format):
    capsys.readouterr()
    assert main(["trace", "describe", str(philly_log), "--format", format]) == 2
    err = capsys.readouterr().err
    assert str(philly_log) in err and "by its contents it is a philly trace" in err, err


RAGGED = {
    "pollux": "name,time,application,num_replicas,batch_size\nj0,0,cifar10,1,128,7\n",
    "ones": "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n0,resnet50,imagenet,10000,10,32,5e-4,0.008,0.55,16,7\n",
}


@pytest.mark.parametrize("format", ["pollux", "ones"])
def test_a_ragged_trace_of_that_format_gets_no_hint(tmp_path, capsys, format):
    """A file with a header of several columns and a line with too many values is one of a
    format's own files damaged: read as that format, no other format is suggested for it."""
    path = tmp_path / "t.csv"
    path.write_text(RAGGED[format])
    assert main(["trace", "describe", str(path), "--format", format]) == 2
    err = capsys.readouterr().err
    assert "by its contents" not in err and ":2:" in err, err


@pytest.mark.parametrize(("format", "named"), [("pollux", "ones"), ("ones", "pollux"), ("ones", "pai")])
def test_a_ragged_trace_read_as_another_format_is_named(tmp_path, capsys, format, named):
    """The same damaged file read as a format whose files start otherwise: the error is the
    line's, and names the format the file's header is."""
    path = tmp_path / "t.csv"
    path.write_text(RAGGED[format])
    assert main(["trace", "describe", str(path), "--format", named]) == 2
    err = capsys.readouterr().err
    assert f"by its contents it is a {format} trace" in err and ":2:" in err, err
