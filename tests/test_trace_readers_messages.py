"""Readers' messages for a file in another format or with a job named twice: a Gavel trace read
as a Tiresias CSV says it looks like a Gavel trace (not that its whole first line is a column
name), and a Pollux workload with a job name used twice is refused, naming both lines."""

from __future__ import annotations

import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import formats, pollux, tiresias

GAVEL_LINE = "LM (batch size 20)\tpython main.py --batch_size 20\tlanguage_modeling\t--steps\t1\t2792809\t1\t1.0\t-1\t0.0"


def message(read, *args, **kwargs) -> str:
    with pytest.raises(TraceError) as caught:
        read(*args, **kwargs)
    return str(caught.value)


@pytest.mark.parametrize("name", ["jobs.trace", "jobs.csv"])
def test_gavel_trace_read_as_tiresias_says_it_looks_like_gavel(tmp_path, name):
    path = tmp_path / name
    path.write_text(f"{GAVEL_LINE}\n{GAVEL_LINE}\n")
    for said in (message(tiresias.read, path), message(formats.read_trace, path, format="tiresias")):
        assert said.startswith(f"{path}:1: error: its first line has no commas but 10 tab-separated fields")
        assert "read it as gavel" in said
        assert "python main.py" not in said  # (the line itself is not quoted as a column name)
        assert said.count("read it as") == 1


def test_older_gavel_layout_read_as_tiresias(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text("# comment\nLM (batch size 20)\tpython main.py\t--steps\t1\t100\t0.0\t1\n")
    said = message(tiresias.read, path)
    assert f"{path}:2: error:" in said and "7 tab-separated fields" in said and "gavel" in said


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("job_id;num_gpu;submit_time;iterations;model_name;duration;interval", "separated by semicolons"),
        ("job_id\tnum_gpu\tsubmit_time", "separated by tabs"),
        ("jobs", "its first line has no commas;"),
    ],
)
def test_tiresias_header_without_commas_names_the_separator(tmp_path, header, expected):
    path = tmp_path / "t.csv"
    path.write_text(f"{header}\n1;2;3\n")
    said = message(tiresias.read, path)
    assert f"{path}:1: error:" in said and expected in said
    assert "a Tiresias job CSV has a header of comma-separated names (job_id,num_gpu,submit_time," in said


def test_json_read_as_tiresias_says_json(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('[{"jobid": "a", "attempts": []},\n {"jobid": "b"}]\n')
    said = message(tiresias.read, path)
    assert "looks like JSON" in said and "'jobid'" not in said


def test_tiresias_csv_still_read_and_its_missing_columns_named(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,num_gpu,submit_time,duration\n1,2,0,60\n")
    assert tiresias.read(path)["duration_s"].to_list() == [60.0]
    path.write_text("job_id,num_gpu,duration\n1,2,60\n")
    assert "missing column 'submit_time'" in message(tiresias.read, path)


WORKLOAD = "name,time,application,num_replicas,batch_size\n"


def test_pollux_job_name_used_twice_is_refused_naming_both_lines(tmp_path):
    path = tmp_path / "workload.csv"
    path.write_text(WORKLOAD + "cifar10-0,0,cifar10,1,128\n\nbert-1,5,bert,1,12\ncifar10-0 ,9,cifar10,2,256\n")
    for said in (message(pollux.read_workload, path), message(formats.read_trace, path)):
        assert said == f"{path}:5: error: column 'name': job name 'cifar10-0' is used twice: here and at {path}:2"


def test_pollux_distinct_names_read(tmp_path):
    path = tmp_path / "workload.csv"
    path.write_text(WORKLOAD + "cifar10-0,0,cifar10,1,128\ncifar10-1,9,cifar10,2,256\n")
    assert pollux.read_workload(path)["name"].to_list() == ["cifar10-0", "cifar10-1"]
    assert pollux.generate(jobs=300, seed=3)["name"].n_unique() == 300
