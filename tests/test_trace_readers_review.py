"""Trace readers: a Philly job that ran on GPUs after a GPU-less attempt is kept (as Blox keeps
it); a UTF-16 or UTF-32 trace is refused in one sentence by every command that reads it; a
Tiresias file's missing columns are said with the file's own names; `trace generate --format
philly` refuses --loss rather than ignoring it."""

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
