"""Philly's synthetic log drawn in bulk, its reader's unread keys, and Tiresias' writer making
no iterations up; `trace generate`'s whole numbers and counts."""

from __future__ import annotations

import json

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.traces import philly
from roundhouse.traces.formats import read_trace
from roundhouse.traces.schema import _WARNED

SAMPLES = "traces/samples"


def test_a_synthetic_log_reads_back_whole_and_in_order(tmp_path):
    path = tmp_path / "log.json"
    assert philly.SyntheticLog(3000, 0.05, seed=4, never_ran=0.3).write(path) == 3000
    records = json.loads(path.read_text())
    assert [r["jobid"] for r in records] == [f"application_1500000000000_{i:05d}" for i in range(1, 3001)]
    submitted = [r["submitted_time"] for r in records]
    assert submitted == sorted(submitted)
    for r in records:
        tries = r["attempts"]
        ends = [a["end_time"] for a in tries]
        if "None" in ends:  # (started and lost: one attempt, no end)
            assert r["status"] == "Failed" and len(tries) == 1
        times = [t for a in tries for t in (a["start_time"], a["end_time"]) if t != "None"]
        assert times == sorted(times) and all(t >= r["submitted_time"] for t in times)
        for a in tries:
            assert sum(len(d["gpus"]) for d in a["detail"]) in (1, 2, 4, 8)
    trace = philly.parse(path)
    ran = sum(1 for r in records if r["attempts"] and "None" not in [a["end_time"] for a in r["attempts"]])
    assert trace.frame.height == ran and trace.skipped == 3000 - ran


def test_philly_reader_warns_once_of_a_key_it_does_not_read(tmp_path, capsys):
    records = json.loads(open(f"{SAMPLES}/philly-cluster-job-log-50.json").read())
    for r in records[:3]:
        r["submit_time"] = r.pop("submitted_time")
        r["submitted_time"] = r["submit_time"]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(records))
    _WARNED.clear()
    philly.parse(path)
    err = capsys.readouterr().err
    assert err.count("warning:") == 1
    assert "'submit_time'" in err and "left out, unread" in err and "did you mean 'submitted_time'?" in err


def test_philly_to_tiresias_leaves_iterations_it_has_no_way_to_know_empty(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main(["trace", "convert", f"{SAMPLES}/philly-cluster-job-log-50.json", str(out), "--to", "tiresias"]) == 0
    err = capsys.readouterr().err
    assert "iterations of 45 job(s) left empty" in err
    back = read_trace(out)
    assert back["iterations"].null_count() == back.height == 45
    assert back["duration_s"].null_count() == 0


def test_a_known_model_still_gets_iterations_from_its_throughput(tmp_path):
    source = tmp_path / "in.csv"
    source.write_text("job_id,arrival_s,gpus,duration_s,model\n0,0,1,100,ResNet-18\n1,5,1,200,\n")
    out = tmp_path / "out.csv"
    assert main(["trace", "convert", str(source), str(out), "--to", "tiresias"]) == 0
    iterations = read_trace(out).sort("job_id")["iterations"].to_list()
    assert iterations[0] is not None and iterations[0] > 0 and iterations[1] is None


@pytest.mark.parametrize("sample, workload", [("ones-60.csv", "ones"), ("pollux-40.csv", "pollux")])
def test_epoch_traces_to_tiresias_say_what_generate_says(tmp_path, capsys, sample, workload):
    assert main(["trace", "convert", f"{SAMPLES}/{sample}", str(tmp_path / "o.csv"), "--to", "tiresias"]) == 2
    convert = capsys.readouterr().err
    args = ["trace", "generate", "-o", str(tmp_path / "g.csv"), "--jobs", "5", "--rate", "1/h", "--seed", "1"]
    assert main([*args, "--workload", workload, "--format", "tiresias"]) == 2
    generate = capsys.readouterr().err
    said = "a Tiresias trace needs each job's duration, and "
    assert said in convert and said in generate
    assert "gives its work in epochs" in convert and "gavel.csv has no throughput for to derive one" in convert
    assert "canonical CSV or Parquet (.csv, .parquet or .pq)" in convert
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize(
    "value, said",
    [
        ("٣", "--seed must be a whole number, got '٣'"),
        ("+-3", "--seed must be a whole number, got '+-3'"),
        ("9" * 4100, "--seed must be of at most 4,000 digits, got a whole number of 4,100 digits"),
        ("-" + "9" * 4100, "--seed must be 0 or more, got a negative whole number of 4,100 digits"),
        ("-1", "--seed must be 0 or more, got -1"),
    ],
)
def test_generate_reads_whole_numbers_as_the_other_commands_do(tmp_path, capsys, value, said):
    args = ["trace", "generate", "-o", str(tmp_path / "g.csv"), "--jobs", "5", "--rate", "1/h", "--seed", value]
    assert main(args) == 2
    assert said in capsys.readouterr().err


def test_generate_philly_says_its_record_count_with_digits_grouped(tmp_path, capsys):
    out = tmp_path / "log.json"
    assert main(["trace", "generate", "-o", str(out), "--jobs", "1500", "--rate", "60/h", "--seed", "2"]) == 0
    assert capsys.readouterr().out.startswith(f"wrote 1,500 records to {out} (")
    assert pl.Series(json.loads(out.read_text())).len() == 1500
