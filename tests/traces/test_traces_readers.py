"""Readers and writers for each format, on the shipped samples and (when ../shared is present)
on the real Gavel files, checked against what Gavel's own simulator saw."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import canonical, gavel, philly, tiresias
from roundhouse.traces.formats import detect_format, load_trace, read_trace, write_trace
from roundhouse.traces.generators import generate
from roundhouse.traces.profiles import ProfileTable

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "traces" / "samples"
SHARED = REPO.parent / "shared" / "data" / "gavel"
REAL_TRACES = ["phys_las", "phys_makespan", "msr_seed0_0e4a51", "msr_seed0_ed69ec"]
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/gavel is not present")


# --- samples --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, fmt, jobs",
    [
        ("philly-1000.csv", "canonical", 1000),
        ("philly-single-200.csv", "canonical", 200),
        ("philly-cluster-job-log-50.json", "philly", None),
        ("gavel-50.trace", "gavel", 50),
        ("tiresias-60.csv", "tiresias", 60),
    ],
)
def test_every_sample_reads(name, fmt, jobs):
    loaded = load_trace(SAMPLES / name)
    assert loaded.format == fmt == detect_format(SAMPLES / name)
    df = loaded.frame
    if jobs is not None:
        assert df.height == jobs
    assert df["arrival_s"].min() == 0.0
    assert df["arrival_s"].is_sorted()
    assert set(df["gpus"].unique()) <= {1, 2, 4, 8}


def test_samples_have_what_the_readme_says():
    df = read_trace(SAMPLES / "philly-1000.csv")
    assert df["model"].null_count() == 0 and df["batch_size"].null_count() == 0
    assert df["duration_s"].null_count() == 0
    single = read_trace(SAMPLES / "philly-single-200.csv")
    assert single["gpus"].unique().to_list() == [1] and single["model"].null_count() == 200


# --- canonical ------------------------------------------------------------------------------


def test_canonical_csv_and_parquet_round_trip(tmp_path):
    df = read_trace(SAMPLES / "philly-1000.csv")
    for name in ("a.csv", "a.parquet"):
        write_trace(df, tmp_path / name)
        assert read_trace(tmp_path / name).equals(df)


def test_write_trace_refuses_unknown_extension(tmp_path):
    from roundhouse.errors import UsageError

    with pytest.raises(UsageError):
        write_trace(read_trace(SAMPLES / "philly-single-200.csv"), tmp_path / "a.txt")


# --- Gavel ----------------------------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("name", REAL_TRACES)
def test_real_gavel_traces_match_gavels_own_view(name):
    df = gavel.read(SHARED / f"{name}.trace").sort("job_id")
    inputs = next(SHARED.glob(f"{name.replace('_seed0', '')}_*_input_jobs.csv"))
    expected = pl.read_csv(inputs)
    assert df.height == expected.height
    assert df["job_id"].to_list() == expected["job_id"].to_list()
    assert np.allclose(df["arrival_s"].to_numpy(), expected["arrival_time_s"].to_numpy())
    assert df["gpus"].to_list() == expected["scale_factor"].to_list()
    assert df["iterations"].to_list() == expected["total_steps"].cast(pl.Float64).to_list()
    assert df["weight"].to_list() == expected["priority_weight"].to_list()
    names = [gavel.job_type(m, b) for m, b in zip(df["model"], df["batch_size"])]
    assert names == expected["job_type"].to_list()
    assert df["slo_factor"].null_count() == df.height  # these traces have no SLOs (-1)


@needs_shared
def test_real_gavel_throughputs_match_the_profile_table():
    inputs = pl.read_csv(SHARED / "msr_0e4a51_36-36-36_input_jobs.csv")
    df = gavel.read(SHARED / "msr_seed0_0e4a51.trace").sort("job_id")
    table = ProfileTable.load()
    for gpu, column in (("V100", "tput_v100"), ("P100", "tput_p100"), ("K80", "tput_k80")):
        ours = table.rates(df["model"], df["batch_size"], gpu, df["gpus"])
        assert np.allclose(ours, inputs[column].to_numpy())


@needs_shared
def test_seven_column_layout(tmp_path):
    ten = (SHARED / "msr_seed0_ed69ec.trace").read_text().splitlines()[:40]
    seven = []
    for line in ten:
        f = line.split("\t")  # 10: type cmd wd steps_arg needs_data total sf weight slo arrival
        seven.append("\t".join([f[0], f[1], f[3], f[4], f[5], f[9], f[6]]))
    path = tmp_path / "old.trace"
    path.write_text("\n".join(seven) + "\n")
    old = gavel.read(path)
    new = gavel.read(SHARED / "msr_seed0_ed69ec.trace").head(40)
    for column in ("job_id", "arrival_s", "gpus", "model", "batch_size", "iterations", "command"):
        assert old[column].equals(new[column]), column
    assert "working_directory" not in old.columns and "slo_factor" not in old.columns


def test_gavel_write_read_round_trip(tmp_path):
    df = generate(200, 8 / 3600, seed=5, models="blox")
    path = tmp_path / "g.trace"
    gavel.write(df, path)
    lines = path.read_text().splitlines()
    assert len(lines) == 200 and all(line.count("\t") == 9 for line in lines)
    back = gavel.read(path)
    for column in ("job_id", "arrival_s", "gpus", "model", "batch_size", "weight"):
        assert back[column].equals(df[column]), column
    rates = ProfileTable.load().rates(df["model"], df["batch_size"], "V100", df["gpus"])
    assert np.allclose(back["iterations"].to_numpy(), np.round(df["duration_s"].to_numpy() * rates))
    # Writing what we read gives the same file.
    gavel.write(back, tmp_path / "again.trace")
    assert (tmp_path / "again.trace").read_text() == path.read_text()


def test_gavel_bad_lines(tmp_path):
    good = (SAMPLES / "gavel-50.trace").read_text().splitlines()
    fields = good[2].split("\t")
    fields[6] = "two"
    path = tmp_path / "bad.trace"
    path.write_text("\n".join(good[:2] + ["\t".join(fields)] + good[3:]) + "\n")
    with pytest.raises(TraceError) as info:
        gavel.read(path)
    assert (info.value.row, info.value.column) == (3, "scale_factor")
    fields[6] = "0"
    path.write_text("\n".join(good[:2] + ["\t".join(fields)]) + "\n")
    with pytest.raises(TraceError) as info:
        gavel.read(path)
    assert (info.value.row, info.value.column) == (3, "scale_factor")
    path.write_text("\n".join(good[:4] + ["\t".join(fields[:8])]) + "\n")
    with pytest.raises(TraceError) as info:
        gavel.read(path)
    assert info.value.row == 5 and "8 tab-separated fields" in info.value.message
    path.write_text("a\tb\tc\n")
    with pytest.raises(TraceError, match="10"):
        gavel.read(path)
    path.write_text("")
    with pytest.raises(TraceError, match="empty"):
        gavel.read(path)


def test_gavel_writer_needs_models(tmp_path):
    df = generate(5, 8 / 3600, seed=1)
    with pytest.raises(TraceError, match="no model"):
        gavel.write(df, tmp_path / "x.trace")


# --- Tiresias -------------------------------------------------------------------------------


def test_tiresias_round_trip_and_columns(tmp_path):
    df = generate(100, 20 / 3600, seed=6, models="blox")
    path = tmp_path / "t.csv"
    tiresias.write(df, path)
    assert path.read_text().splitlines()[0] == "job_id,num_gpu,submit_time,iterations,model_name,duration,interval,batch_size"
    back = read_trace(path)
    assert back["job_id"].to_list() == df["job_id"].to_list()
    assert back["arrival_s"].to_list() == df["arrival_s"].round().to_list()
    assert back["duration_s"].to_list() == df["duration_s"].round().to_list()
    assert back["model"].equals(df["model"]) and back["batch_size"].equals(df["batch_size"])
    intervals = pl.read_csv(path)["interval"].to_list()
    assert intervals[:-1] == np.diff(pl.read_csv(path)["submit_time"].to_numpy()).tolist()


def test_tiresias_reads_the_published_layout(tmp_path):
    path = tmp_path / "60_job.csv"
    path.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n1,8,30,133,resnet50,147,23\n"
    )
    df = read_trace(path)
    assert df["gpus"].to_list() == [1, 8]
    assert df["model"].to_list() == ["vgg19", "ResNet-50"]  # unknown names are kept
    assert df["iterations"].to_list() == [606.0, 133.0]
    assert "interval" not in df.columns
    path.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,x,0,606,vgg19,164,30\n")
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert (info.value.row, info.value.column) == (2, "num_gpu")
    path.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,-5,606,vgg19,164,30\n")
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert (info.value.row, info.value.column) == (2, "submit_time")


# --- Philly ---------------------------------------------------------------------------------


def job(jobid, submitted, attempts, user="u1"):
    return {"status": "Pass", "vc": "vc1", "jobid": jobid, "user": user, "submitted_time": submitted, "attempts": attempts}


def attempt(start, end, *gpus_per_machine):
    return {
        "start_time": start,
        "end_time": end,
        "detail": [{"ip": f"m{i}", "gpus": [f"gpu{g}" for g in range(n)]} for i, n in enumerate(gpus_per_machine)],
    }


def write_json(tmp_path, records, name="cluster_job_log"):
    """One record to a line, after the list's opening line: record n is on line n + 1."""
    path = tmp_path / name
    if isinstance(records, list):
        path.write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n")
    else:
        path.write_text(json.dumps(records))
    return path


def test_philly_conversion_rules(tmp_path):
    records = [
        job(
            "b",
            "2017-10-01 10:10:00",
            [
                attempt("2017-10-01 10:11:00", "2017-10-01 10:21:00", 4, 4),
                attempt("2017-10-01 11:00:00", "2017-10-01 11:05:00", 2),
            ],
        ),
        job("a", "2017-10-01 10:00:00", [attempt("2017-10-01 10:00:30", "2017-10-01 10:01:30", 1)]),
        job("never", "2017-10-01 09:00:00", []),
        job("lost", "2017-10-01 09:30:00", [attempt("2017-10-01 09:31:00", "None", 1)]),
        job("nogpu", "2017-10-01 09:40:00", [attempt("2017-10-01 09:41:00", "2017-10-01 09:42:00")]),
        job("nulltimes", None, [attempt(None, None, 1)]),
    ]
    result = philly.parse(write_json(tmp_path, records))
    df = result.frame
    assert result.skipped == 4
    assert df["name"].to_list() == ["a", "b"]  # job ids follow submission, not file order
    assert df["job_id"].to_list() == [0, 1]
    assert df["arrival_s"].to_list() == [0.0, 600.0]  # the first kept submission is t = 0
    assert df["gpus"].to_list() == [1, 8]  # GPUs of the first attempt, over all its machines
    assert df["duration_s"].to_list() == [60.0, 900.0]  # attempts summed
    assert df["user"].to_list() == ["u1", "u1"]
    assert load_trace(tmp_path / "cluster_job_log").format == "philly"  # detected by content


def test_philly_sample(tmp_path):
    result = philly.parse(SAMPLES / "philly-cluster-job-log-50.json")
    records = json.loads((SAMPLES / "philly-cluster-job-log-50.json").read_text())
    assert len(records) == 50 and result.skipped > 0
    assert result.frame.height + result.skipped == 50
    assert set(records[0]) == {"status", "vc", "jobid", "user", "submitted_time", "attempts"}


def test_philly_truncated_json(tmp_path):
    path = tmp_path / "log.json"
    path.write_text((SAMPLES / "philly-cluster-job-log-50.json").read_text()[:3000])
    with pytest.raises(TraceError) as info:
        philly.parse(path)
    assert "not valid JSON" in info.value.message and info.value.row is not None


@pytest.mark.parametrize(
    "records, row, column, words",
    [
        ({"jobid": "a"}, None, None, "list of jobs"),
        ([job("a", "2017-10-01 10:00:00", []), 7], 3, None, "record 2: is a JSON number, expected an object"),
        ([job("a", "2017-10-01 10:00:00", "none")], 2, "attempts", "expected a list"),
        ([job("a", 5, [])], 2, "submitted_time", "expected a time"),
        ([job("b", "2017-10-01 10:00:00", []), job("a", "yesterday", [])], 3, "submitted_time", "'yesterday' is not a time"),
        ([job("a", "2017-10-01 10:00:00", [attempt("2017-10-01 10:00:00", "soon", 1)])], 2, "end_time", "not a time"),
        ([{"jobid": "a", "attempts": []}], 2, "submitted_time", "missing"),
        ([job("a", "2017-10-01 10:00:00", [{"start_time": None, "end_time": None, "detail": [{"gpus": 3}]}])], 2, "gpus", "list"),
        # An attempt that ends before it starts is an error, not a job that never ran.
        (
            [
                job("b", "2017-10-01 10:00:00", []),
                job("a", "2017-10-01 10:00:00", [attempt("2017-10-01 11:00:00", "2017-10-01 10:30:00", 1)]),
            ],
            3,
            "end_time",
            "record 2: attempt 1 ends at 2017-10-01 10:30:00, before it starts (2017-10-01 11:00:00)",
        ),
    ],
)
def test_philly_malformed_records(tmp_path, records, row, column, words):
    with pytest.raises(TraceError) as info:
        philly.parse(write_json(tmp_path, records))
    assert (info.value.row, info.value.column) == (row, column)
    assert words in info.value.message


def test_philly_empty_list(tmp_path):
    result = philly.parse(write_json(tmp_path, []))
    assert result.frame.height == 0 and result.skipped == 0


# --- detection ------------------------------------------------------------------------------


def test_format_detection_by_content(tmp_path):
    (tmp_path / "a").write_text((SAMPLES / "gavel-50.trace").read_text())
    (tmp_path / "b").write_text((SAMPLES / "tiresias-60.csv").read_text())
    (tmp_path / "c").write_text((SAMPLES / "philly-single-200.csv").read_text())
    canonical.write(read_trace(SAMPLES / "philly-single-200.csv"), tmp_path / "d.parquet")
    (tmp_path / "d.parquet").rename(tmp_path / "d")
    assert [detect_format(tmp_path / n) for n in "abcd"] == ["gavel", "tiresias", "canonical", "canonical"]
    assert read_trace(tmp_path / "d").height == 200
    (tmp_path / "e").write_text("hello\n")
    with pytest.raises(TraceError, match="cannot tell the trace format"):
        detect_format(tmp_path / "e")
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "missing.csv")
