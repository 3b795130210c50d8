"""Trace readers: a Philly job that ran on GPUs after a GPU-less attempt is kept (as Blox keeps
it); a UTF-16 or UTF-32 trace is refused in one sentence by every command that reads it; a
Tiresias file's missing columns are said with the file's own names; `trace generate --format
philly` refuses --loss rather than ignoring it. Format detection reads a quoted CSV header as
the readers do, and does not take a canonical trace named like PAI's task table for one; a JSON
file that is no list, and a Parquet file read as a text format, are said to be so plainly; a
PAI task that asks for GPUs with no inst_num is an error, not a job skipped as GPU-less.
Large inputs: Philly's and Helios' JSON lists are decoded with the cyclic collector paused, a
Pollux workload's applications are looked up once each, and the Tiresias writer puts no quote
in a file (which would send its reading down the slower quoted path)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import philly, tiresias
from roundhouse.traces.formats import load_trace
from tests.conftest import fails
from tests.traces.test_traces_readers import attempt, job


def _log(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "cluster_job_log.json"
    path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    return path


def test_philly_job_whose_first_attempt_had_no_gpu_is_kept(tmp_path):
    records = [
        job(
            "retried",
            "2017-10-01 10:00:00",
            [
                attempt("2017-10-01 10:01:00", "2017-10-01 10:02:00"),  # no GPU: never ran
                attempt("2017-10-01 10:05:00", "2017-10-01 11:05:00", 2),
            ],
        ),
        job("plain", "2017-10-01 10:00:30", [attempt("2017-10-01 10:01:00", "2017-10-01 10:11:00", 1)]),
        job("cpu", "2017-10-01 10:00:40", [attempt("2017-10-01 10:01:00", "2017-10-01 10:11:00")]),
    ]
    result = philly.parse(_log(tmp_path, records))
    frame = result.frame
    assert frame["name"].to_list() == ["retried", "plain"]
    assert result.skipped == 1  # (only the job that never had a GPU)
    assert frame["gpus"].to_list() == [2, 1]
    assert frame["duration_s"].to_list() == [3600.0, 600.0]  # (the GPU-less minute is not the job's)


def test_philly_gpu_count_is_the_first_attempt_that_ran(tmp_path):
    records = [
        job(
            "a",
            "2017-10-01 10:00:00",
            [
                attempt("2017-10-01 10:01:00", "2017-10-01 10:02:00", 4, 4),
                attempt("2017-10-01 10:03:00", "2017-10-01 10:04:00", 2),
            ],
        )
    ]
    frame = philly.parse(_log(tmp_path, records)).frame
    assert frame["gpus"].to_list() == [8] and frame["duration_s"].to_list() == [120.0]


@pytest.mark.parametrize("encoding, name", [("utf-16", "UTF-16"), ("utf-32", "UTF-32")])
@pytest.mark.parametrize("command", ["describe", "convert"])
def test_wide_unicode_json_is_refused_by_every_command(tmp_path, capsys, encoding, name, command):
    records = [job("a", "2017-10-01 10:00:00", [attempt("2017-10-01 10:01:00", "2017-10-01 10:11:00", 1)])]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(records), encoding=encoding)
    args = ["trace", "describe", path] if command == "describe" else ["trace", "convert", path, tmp_path / "out.csv"]
    err = fails(capsys, *args)
    assert f"is {name} text" in err and "UTF-8" in err
    assert not (tmp_path / "out.csv").exists()


def test_utf16_file_without_an_extension_is_named_as_such(tmp_path, capsys):
    path = tmp_path / "cluster_job_log"
    path.write_text("[]", encoding="utf-16")
    err = fails(capsys, "trace", "describe", path)
    assert "is UTF-16 text" in err and "cannot tell" not in err


def test_utf16_without_a_byte_order_mark_is_refused(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_bytes("job_id,arrival_s,gpus,duration_s\n0,0,1,10\n".encode("utf-16-le"))
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert "NUL" in info.value.message and "UTF-16" in info.value.message


def test_utf16_json_with_a_bad_record_says_the_encoding_in_every_path(tmp_path):
    records = [job("a", "yesterday", [])]
    path = tmp_path / "log.json"
    path.write_bytes(json.dumps(records).encode("utf-16-le"))  # (no byte-order mark)
    with pytest.raises(TraceError) as info:
        philly.parse(path)
    assert "UTF-16" in info.value.message


def test_tiresias_missing_columns_are_named_as_the_file_names_them(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,num_gpus,submit_time,duration\n0,1,0,100\n")
    with pytest.raises(TraceError) as info:
        tiresias.read(path)
    message = info.value.message
    assert "missing column 'num_gpu'" in message and "'submit_time', 'duration'" in message
    assert "arrival_s" not in message and "duration_s" not in message
    path.write_text("job_id,num_gpu,submit_time,iterations\n0,1,0,100\n")
    with pytest.raises(TraceError) as info:
        tiresias.read(path)
    assert "'duration' (or both 'model_name' and 'iterations')" in info.value.message
    assert "arrival_s" not in info.value.message


def test_tiresias_with_model_and_iterations_needs_no_duration(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,num_gpu,submit_time,iterations,model_name,interval\n0,1,0,606,vgg19,30\n")
    frame = tiresias.read(path)
    assert frame["iterations"].to_list() == [606.0] and frame["duration_s"].to_list() == [None]


@pytest.mark.parametrize("loss", ["blox", "bogus"])
def test_generate_philly_log_refuses_loss(tmp_path, capsys, loss):
    out = tmp_path / "log.json"
    err = fails(capsys, "trace", "generate", "-o", out, "--jobs", "5", "--rate", "8/h", "--seed", "1", "--loss", loss)
    assert "--loss" in err
    assert not out.exists()


def test_generate_philly_log_without_loss_still_works(tmp_path):
    from roundhouse.tools.cli import main

    out = tmp_path / "log.json"
    assert main(["trace", "generate", "-o", str(out), "--jobs", "5", "--rate", "8/h", "--seed", "1"]) == 0
    assert len(json.loads(out.read_text())) == 5


def test_philly_job_without_submission_is_not_said_to_have_never_run(tmp_path):
    ran = [attempt("2017-10-01 10:05:00", "2017-10-01 11:05:00", 1)]
    records = [job("nosubmit", None, ran), job("kept", "2017-10-01 10:00:00", ran), job("never", "2017-10-01 10:00:00", [])]
    path = _log(tmp_path, records)
    result = philly.parse(path)
    assert result.frame["name"].to_list() == ["kept"]
    assert (result.skipped, result.unsubmitted) == (2, 1)
    loaded = load_trace(path)
    assert "no submitted_time" in loaded.skipped_what and "1 of them" in loaded.skipped_what
    assert load_trace(_log(tmp_path, records[1:])).skipped_what == "jobs that never ran"


# --- format detection, messages, and large inputs ---------------------------------------------

_QUOTED = {
    "tiresias": '"job_id","num_gpu","submit_time","iterations","model_name","duration","interval"\n0,1,0,606,"vgg19",164,30\n',
    "pollux": '"name","time","application","num_replicas","batch_size"\n"cifar10-0",0,"cifar10",1,128\n',
    "helios": '"job_id","user","vc","gpu_num","cpu_num","node_num","state","submit_time","start_time","end_time",'
    '"duration","queue"\n1,"u","v",2,4,1,"COMPLETED","2020-04-01 00:00:00","2020-04-01 00:00:05","2020-04-01 00:00:15",10,5\n',
    "pai": '"job_name","task_name","inst_num","status","start_time","end_time","plan_cpu","plan_mem","plan_gpu","gpu_type"\n'
    '"j1","t1",1,"Terminated",100,200,600,29,100,"V100"\n',
}


@pytest.mark.parametrize("format", sorted(_QUOTED))
def test_a_csv_with_a_quoted_header_is_told_by_its_columns(tmp_path, format):
    # (R's write.csv and pandas' QUOTE_ALL quote every name; the readers take such files.)
    path = tmp_path / "jobs.csv"
    path.write_text(_QUOTED[format], encoding="utf-8")
    from roundhouse.traces.formats import detect_format

    assert detect_format(path) == format
    loaded = load_trace(path)
    assert loaded.format == format and loaded.frame.height == 1 and loaded.frame["gpus"][0] in (1, 2)


def test_a_json_file_that_is_no_list_says_what_a_json_trace_is(tmp_path, capsys):
    path = tmp_path / "jobs.json"
    path.write_text('{"jobs": 1}', encoding="utf-8")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert "a list of jobs is a list of jobs" not in info.value.message
    assert "holds a JSON object" in info.value.message and "Philly" in info.value.message
    err = fails(capsys, "trace", "describe", path)
    assert "is a list of jobs" in err and "a list of jobs is" not in err


def _collections_during(read) -> int:
    """How many times Python's cyclic collector ran while `read()` did."""
    import gc

    runs = []

    def count(phase, info):
        if phase == "start":
            runs.append(info["generation"])

    gc.callbacks.append(count)
    try:
        read()
    finally:
        gc.callbacks.remove(count)
    return len(runs)


def test_philly_and_helios_json_are_read_without_the_collector_rescanning_them(tmp_path):
    import gc

    from roundhouse.traces import helios

    log = tmp_path / "cluster_job_log"
    philly.SyntheticLog(20_000, 0.1, seed=3).write(log)
    dally = tmp_path / "dally.json"
    dally.write_text(
        json.dumps([{"job_id": str(i), "max_parallelism": "2", "arrival_time": str(i), "duration": "60"} for i in range(20_000)]),
        encoding="utf-8",
    )
    assert gc.isenabled()
    assert _collections_during(lambda: philly.parse(log)) == 0
    assert _collections_during(lambda: helios.parse(dally)) == 0
    # (`trace describe` lists a JSON trace's keys, decoding the file once more.)
    from roundhouse.traces.formats import file_columns

    columns: list[tuple[str, ...]] = []
    assert _collections_during(lambda: columns.append(file_columns(log, "philly"))) == 0
    assert columns == [("status", "vc", "jobid", "attempts", "submitted_time", "user")]
    assert _collections_during(lambda: columns.append(file_columns(dally, "helios"))) == 0
    assert columns[1] == ("job_id", "max_parallelism", "arrival_time", "duration")
    assert gc.isenabled()
    # The same result as with the collector on throughout, and its state restored after an error.
    assert philly.parse(log).frame.height == load_trace(log).frame.height > 15_000
    bad = _log(tmp_path, [job("a", "yesterday", [])])
    with pytest.raises(TraceError):
        philly.parse(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        philly.parse(log)
        assert not gc.isenabled()  # (left off, as it was)
    finally:
        gc.enable()


def test_pollux_workload_looks_each_application_up_once_not_per_row(tmp_path, monkeypatch):
    from roundhouse.traces import pollux
    from roundhouse.traces.goodput import ElasticProfile

    rows = ["name,time,application,num_replicas,batch_size"]
    rows += [f"j-{i},{i},{('cifar10', 'bert', 'ncf')[i % 3]},1,{(128, 12, 32768)[i % 3]}" for i in range(3000)]
    path = tmp_path / "workload.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    expected = pollux.read_workload(path)
    calls = []
    original = ElasticProfile.row
    monkeypatch.setattr(ElasticProfile, "row", lambda self, name: calls.append(name) or original(self, name))
    frame = pollux.read_workload(path)
    assert len(calls) <= 3
    assert frame.equals(expected)
    assert frame["max_gpus"].to_list()[:3] == [64.0, 64.0, 1.0] and frame["batch_fixed"].to_list()[:3] == [0.0, 0.0, 1.0]
    assert frame["epochs"].to_list()[:3] == [100.0, 2.0, 10.0] and frame["model"].to_list()[:3] == ["cifar10", "bert", "ncf"]


@pytest.mark.parametrize(
    "cells, line, column, words",
    [
        (("cifar10", "128", "bert", "1", "xx", "128"), 3, "batch_size", "1 is outside what the elastic profile covers for bert"),
        (("cifar10", "128", "xx", "1", "bert", "1"), 3, "application", "unknown application 'xx'"),
        (("cifar10", "128", "recommendation", "32768", "bert", "12"), 3, "application", "unknown application 'recommendation'"),
    ],
)
def test_pollux_workload_names_the_first_bad_row(tmp_path, cells, line, column, words):
    from roundhouse.traces import pollux

    rows = ["name,time,application,num_replicas,batch_size"]
    rows += [f"j-{i},{i},{cells[2 * i]},1,{cells[2 * i + 1]}" for i in range(3)]
    path = tmp_path / "workload.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(TraceError) as info:
        pollux.read_workload(path)
    assert (info.value.row, info.value.column) == (line, column) and words in info.value.message


def test_tiresias_writer_leaves_a_missing_model_unquoted(tmp_path):
    import polars as pl

    from roundhouse.traces.formats import write_trace

    jobs = pl.DataFrame({"job_id": [0, 1], "arrival_s": [0.0, 5.0], "gpus": [1, 2], "duration_s": [60.0, 90.0]})
    path = tmp_path / "tiresias.csv"
    write_trace(jobs, path, "tiresias")
    text = path.read_text(encoding="utf-8")
    assert '"' not in text  # (a file with quotes is read through Python's csv module, several times slower)
    back = load_trace(path)
    assert back.format == "tiresias" and back.frame["model"].null_count() == 2
    assert back.frame["duration_s"].to_list() == [60.0, 90.0]


def test_a_canonical_trace_named_like_pai_task_table_is_not_taken_for_one(tmp_path):
    # (`trace convert pai_task_table.csv pai_task_table_jobs.csv` keeps the name; with ten
    # columns the file was read as a headerless task table, its header a task.)
    path = tmp_path / "pai_task_table_jobs.csv"
    path.write_text(
        "job_id,arrival_s,gpus,duration_s,cpus,memory_gb,name,gpu_share,gpu_type,model\n"
        "0,0.0,1,10.0,6.0,29.0,j4,1.0,P100,ResNet-50\n",
        encoding="utf-8",
    )
    loaded = load_trace(path)
    assert loaded.format == "canonical" and loaded.frame["name"].to_list() == ["j4"]
    headerless = tmp_path / "pai_task_table.csv"
    headerless.write_text("j1,t1,1.0,Ready,100.0,200.0,600.0,29.0,100.0,V100\n", encoding="utf-8")
    assert load_trace(headerless).format == "pai"  # (the name still tells a headerless table)


@pytest.mark.parametrize("format", ["gavel", "tiresias", "philly", "helios", "pai", "pollux", "ones"])
def test_a_parquet_file_read_as_a_text_format_says_it_is_parquet(tmp_path, capsys, format):
    import polars as pl

    path = tmp_path / "jobs.parquet"
    pl.DataFrame({"job_id": [0], "arrival_s": [0.0], "gpus": [1], "duration_s": [60.0]}).write_parquet(path)
    err = fails(capsys, "trace", "describe", "--format", format, path)
    assert "is a Parquet file" in err and f"not {format} traces" in err and "UTF-8" not in err
    assert load_trace(path, "canonical").frame.height == 1


def test_a_pai_gpu_task_without_instances_is_an_error_not_a_skipped_job(tmp_path):
    path = tmp_path / "pai_task_table.csv"
    path.write_text(
        "j1,t1,1.0,Terminated,100.0,300.0,600.0,29.0,100.0,V100\n"
        "j2,t1,,Terminated,100.0,200.0,600.0,29.0,100.0,V100\n"
        "j3,t1,,Terminated,100.0,200.0,600.0,29.0,,\n",  # (a CPU task: its instances count no GPU)
        encoding="utf-8",
    )
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert (info.value.row, info.value.column) == (2, "inst_num") and "has no value" in info.value.message
    path.write_text(path.read_text(encoding="utf-8").replace("j2,t1,,", "j2,t1,2.0,"), encoding="utf-8")
    loaded = load_trace(path)
    assert loaded.frame["gpus"].to_list() == [1, 2] and loaded.skipped == 1
