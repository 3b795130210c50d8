"""Trace files as users get them wrong: `trace convert` onto its own input; a CSV format's header
separated by tabs, in capitals, after a row index (pandas' and R's default), or in a file named
.trace; a Helios log with a key column misspelt; misspelt columns of Pollux's and ONES' files;
an unknown ONES model/task pair. Each error names the file, the line and the column where there is one."""

from __future__ import annotations

import os

import pytest

from roundhouse.errors import TraceError
from roundhouse.traces.formats import read_trace
from tests.conftest import fails

CANONICAL = "job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,50,2,200\n"
TIRESIAS = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,1000,resnet50,100,10\n"
HELIOS_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
HELIOS_ROW = "1,u1,vc1,1,4,1,COMPLETED,2020-06-01 00:00:00,2020-06-01 00:00:10,2020-06-01 00:01:10,60,10"
POLLUX = "name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,2,256\n"
ONES = "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n0,resnet18,cifar,20000,10,256,0.005,0.08,0.7,4\n"
HELIOS = HELIOS_HEADER + "\n" + HELIOS_ROW + "\n"
# A good file of each CSV format, by its name.
GOOD = {"canonical": CANONICAL, "tiresias": TIRESIAS, "helios": HELIOS, "pollux": POLLUX, "ones": ONES}


@pytest.mark.parametrize("same", ["itself", "dotted", "link"])
def test_convert_onto_its_own_input_is_refused_and_leaves_it_as_it_was(tmp_path, capsys, same):
    source = tmp_path / "a.csv"
    source.write_text(CANONICAL)
    output = {"itself": source, "dotted": tmp_path / "." / "a.csv", "link": tmp_path / "b.csv"}[same]
    if same == "link":
        os.symlink(source, output)
    err = fails(capsys, "trace", "convert", source, output)
    assert "OUTPUT" in err and "is the input" in err, err
    assert source.read_text() == CANONICAL


def test_convert_to_another_file_still_writes(tmp_path, capsys):
    from roundhouse.tools.cli import main

    source = tmp_path / "a.csv"
    source.write_text(CANONICAL)
    assert main(["trace", "convert", str(source), str(tmp_path / "b.csv")]) == 0
    assert read_trace(tmp_path / "b.csv").equals(read_trace(source))


@pytest.mark.parametrize("format", ["tiresias", "helios", "ones"])
@pytest.mark.parametrize("named", [False, True])
def test_a_csv_header_separated_by_tabs_is_not_read_as_a_gavel_line(tmp_path, format, named):
    text = GOOD[format]
    # (Tiresias' seven columns and ONES' ten are as many as a Gavel trace line's fields.)
    path = tmp_path / "jobs.csv"
    path.write_text(text.replace(",", "\t"))
    with pytest.raises(TraceError) as caught:
        read_trace(path, format if named else "auto")
    message = str(caught.value)
    assert caught.value.row == 1, message
    assert "separated by tabs" in message and "comma" in message, message
    assert f"the header is a {format} trace's" in message, message
    assert "gavel" not in message.lower() and "arrival_time" not in message, message


def test_a_gavel_trace_named_as_tiresias_still_says_it_is_gavel(tmp_path):
    line = "ResNet-18 (batch size 32)\tpython3 main.py\timage_classification/cifar10\t--num_steps\t1\t1006231\t1\t1.0\t-1\t0.0\n"
    path = tmp_path / "jobs.trace"
    path.write_text(line)
    with pytest.raises(TraceError, match="read it as gavel"):
        read_trace(path, "tiresias")
    assert read_trace(path).height == 1


@pytest.mark.parametrize(("wrong", "right"), [("gpu_num", "gpu_nm"), ("submit_time", "submitted_time")])
def test_a_helios_log_with_a_key_column_misspelt_is_read_as_helios(tmp_path, wrong, right):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HELIOS.replace(wrong, right, 1))
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    message = str(caught.value)
    assert f"missing column '{wrong}' of Helios' cluster_log" in message, message
    assert f"'{right}'" in message.split("columns found")[-1] and "did you mean" in message, message


@pytest.mark.parametrize(
    ("format", "wrong", "right"),
    [
        ("pollux", "num_replicas", "num_replica"),
        ("pollux", "application", "aplication"),
        ("ones", "num_gpus", "num_gpu"),
        ("ones", "task", "tsk"),
    ],
)
def test_a_misspelt_column_of_pollux_or_ones_is_named_with_the_likely_spelling(tmp_path, format, wrong, right):
    header, rest = GOOD[format].split("\n", 1)
    path = tmp_path / "w.csv"
    path.write_text(",".join(right if name == wrong else name for name in header.split(",")) + "\n" + rest)
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    message = str(caught.value)
    assert f"missing column(s) {wrong}" in message and f"did you mean '{right}'" in message, message


@pytest.mark.parametrize("format", GOOD)
def test_good_traces_still_read(tmp_path, format):
    path = tmp_path / "ok.csv"
    path.write_text(GOOD[format])
    assert read_trace(path).height >= 1


@pytest.mark.parametrize("format", ["tiresias", "pollux", "canonical"])
def test_a_csv_named_as_a_gavel_trace_says_what_it_is(tmp_path, format):
    # (Tiresias' job files are CSV, Gavel's .trace: an easy pair to mix up.)
    path = tmp_path / "jobs.trace"
    path.write_text(GOOD[format])
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    message = str(caught.value)
    assert caught.value.row == 1 and f"a {format} trace's CSV header" in message, message
    assert f"format={format}" in message and "tab-separated field" not in message, message
    assert read_trace(path, format).height >= 1  # (as the message says)


@pytest.mark.parametrize(
    ("model", "task", "column"), [("gpt", "cola", "model"), ("bert", "imagenet", "task"), ("", "cola", "model")]
)
def test_an_unknown_ones_pair_names_the_column_at_fault(tmp_path, model, task, column):
    path = tmp_path / "ones.csv"
    path.write_text(ONES + f"10,{model},{task},5000,5,16,5e-6,2e-5,0.8,2\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert (caught.value.row, caught.value.column) == (3, column), str(caught.value)
    assert f"unknown model/task '{model}-{task}'" in str(caught.value)


@pytest.mark.parametrize("format", ["canonical", "tiresias", "pollux", "ones"])
@pytest.mark.parametrize("writer", ["pandas", "R"])
def test_a_row_index_written_before_the_columns_is_said_to_be_one(tmp_path, format, writer):
    lines = GOOD[format].splitlines()
    empty = '""' if writer == "R" else ""
    path = tmp_path / "indexed.csv"
    path.write_text("\n".join([f"{empty},{lines[0]}"] + [f"{i},{line}" for i, line in enumerate(lines[1:], start=1)]) + "\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    message = str(caught.value)
    assert caught.value.row == 1 and "column 1 has no name" in message and "index=False" in message, message


@pytest.mark.parametrize("format", ["canonical", "tiresias", "pollux", "ones"])
@pytest.mark.parametrize("named", [False, True])
def test_a_header_in_capitals_is_said_to_be_one(tmp_path, format, named):
    header, rest = GOOD[format].split("\n", 1)
    path = tmp_path / "jobs.csv"
    path.write_text(header.title() + "\n" + rest)
    with pytest.raises(TraceError) as caught:
        read_trace(path, format if named else "auto")
    message = str(caught.value)
    assert caught.value.row == 1 and f"the header is a {format} trace's, with names in capitals" in message, message
    assert f"'{header.split(',')[0].title()}'" in message, message


@pytest.mark.parametrize(("format", "column"), [("pollux", "time"), ("ones", "time")])
def test_an_empty_number_of_pollux_or_ones_is_said_to_have_no_value(tmp_path, format, column):
    # (a spreadsheet's empty row, say: only commas)
    header = GOOD[format].split("\n", 1)[0]
    path = tmp_path / "w.csv"
    path.write_text(GOOD[format] + "," * header.count(",") + "\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert (caught.value.row, caught.value.column) == (3, column)
    assert caught.value.message.startswith("has no value (it must be a number, 0 or more)"), caught.value.message
