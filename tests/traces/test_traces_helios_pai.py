"""Readers for Helios (`cluster_log.csv`, and the JSON job lists Dally's workloads use) and for
Alibaba PAI 2020's task table: the mapping to the canonical schema, skipped jobs, format
detection, and a located error for every damaged row. With ../shared present, Dally's own
workload files are read in place and checked against the counts in the Dally notes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roundhouse.errors import TraceError
from roundhouse.tools.cli import main
from roundhouse.traces import helios, pai
from roundhouse.traces.formats import detect_format, load_trace, read_trace

REPO = Path(__file__).resolve().parents[2]
SHARED = next((p / "shared" / "data" / "dally" for p in (REPO.parent, REPO.parent.parent) if (p / "shared").is_dir()), None)
needs_dally = pytest.mark.skipif(SHARED is None or not SHARED.is_dir(), reason="../shared/data/dally is not present")

HELIOS_CSV = (
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
    "1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0\n"
    "1425512,uVMrF,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0\n"
    "1425513,uzqls,vcpDC,0,4,1,COMPLETED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-09 19:00:00,1112,0\n"
    "1425514,uzqls,vcpDC,8,32,1,CANCELLED,2020-06-09 18:45:00,2020-06-09 18:45:00,2020-06-09 18:45:00,0,0\n"
    "1425515,uVMrF,vchbv,16,64,2,COMPLETED,2020-06-09 19:00:01,2020-06-09 19:10:01,2020-06-09 21:10:01,7200,600\n"
)


def dally_record(job_id: str, model: str, gpus: str, arrival: str = "0", **more) -> dict:
    record = {
        "job_id": job_id,
        "user": "uAbc1",
        "cpu_num": "8",
        "node_num": "1",
        "state": "COMPLETED",
        "submit_time": "2020-03-26 13:42:30",
        "duration": "1000",
        "dataset": "ImageNet",
        "model": model,
        "batchsize": "32",
        "total_iterations": "2000",
        "time_per_iteration": "0.5",
        "max_parallelism": gpus,
        "cross_machine_slowdown": "0.8",
        "arrival_time": arrival,
    }
    record.update(more)
    return record


def write(tmp_path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- Helios cluster_log.csv ------------------------------------------------------------------


def test_helios_csv_maps_columns_and_skips_cpu_and_never_ran_jobs(tmp_path):
    path = write(tmp_path, HELIOS_CSV, "cluster_log.csv")
    assert detect_format(path) == "helios"
    loaded = load_trace(path)
    frame = loaded.frame
    assert loaded.skipped == 2  # gpu_num 0, and duration 0
    assert frame["job_id"].to_list() == [1425511, 1425512, 1425515]
    assert frame["arrival_s"].to_list() == [0.0, 26.0, 19 * 60.0]
    assert frame["gpus"].to_list() == [1, 4, 16]
    assert frame["duration_s"].to_list() == [36848.0, 249.0, 7200.0]
    assert frame["cpus"].to_list() == [1.0, 16.0, 64.0]
    assert frame["state"].to_list() == ["COMPLETED", "FAILED", "COMPLETED"]
    assert frame["queue"].to_list() == [0.0, 0.0, 600.0] and frame["vc"][0] == "vcJkd"


def test_helios_csv_header_only_or_without_times(tmp_path):
    header = HELIOS_CSV.splitlines()[0]
    assert read_trace(write(tmp_path, header + "\n", "cluster_log.csv")).height == 0
    row = "1,u,vc,1,1,1,COMPLETED,,,,60,0"
    with pytest.raises(TraceError) as caught:
        read_trace(write(tmp_path, f"{header}\n{row}\n", "cluster_log.csv"))
    assert caught.value.row == 2 and caught.value.column == "submit_time" and "has no value" in str(caught.value)


@pytest.mark.parametrize(
    ("line", "column", "words"),
    [
        (2, "gpu_num", "'x' is not a number"),
        (3, "submit_time", "not a time like"),
        (4, "duration", "'-' is not a number"),
        (6, "gpu_num", "must be at least 1"),
        (3, "job_id", "used twice"),
    ],
)
def test_helios_csv_damaged_rows_are_located(tmp_path, line, column, words):
    rows = HELIOS_CSV.splitlines()
    cells = rows[line - 1].split(",")
    if column == "gpu_num":
        cells[3] = "x" if line == 2 else "-2"
    elif column == "submit_time":
        cells[7] = "2020-13-45 99:00:00"
    elif column == "duration":
        cells[10] = "-"
    else:
        cells[0] = rows[1].split(",")[0]
    rows[line - 1] = ",".join(cells)
    path = write(tmp_path, "\n".join(rows) + "\n", "cluster_log.csv")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == line and caught.value.column == column, str(caught.value)
    assert words in str(caught.value)


# --- Dally's JSON job lists ------------------------------------------------------------------


def test_dally_json_maps_fields_and_table_one_names(tmp_path):
    records = [
        dally_record("7", "VGG", "1", arrival="30"),
        dally_record("3", "BERT", "8", time_per_iteration="0.25"),
        dally_record("5", "ResNet50", "16"),
        dally_record("9", "MobileNetV3", "4", cpu_num="40"),
    ]
    path = write(tmp_path, json.dumps(records, indent=1), "dally.json")
    assert detect_format(path) == "helios"
    frame = read_trace(path)
    assert frame["job_id"].to_list() == [3, 5, 9, 7]  # sorted by arrival, then id
    assert frame["model"].to_list() == ["BERT-large", "ResNet-50", "MobileNetV3", "VGG11"]
    assert frame["gpus"].to_list() == [8, 16, 4, 1]
    assert frame["arrival_s"].to_list() == [0.0, 0.0, 0.0, 30.0]
    assert frame["iterations"].to_list() == [2000.0] * 4 and frame["batch_size"].to_list() == [32] * 4
    assert frame["iteration_time_s"].to_list() == [0.25, 0.5, 0.5, 0.5]
    assert frame["cpus"].to_list() == [8.0, 8.0, 40.0, 8.0]
    assert "cross_machine_slowdown" not in frame.columns and frame["dataset"][0] == "ImageNet"


def test_dally_json_without_arrival_time_uses_submissions(tmp_path):
    records = [dally_record(str(i), "AlexNet", "2") for i in range(3)]
    for record, stamp in zip(records, ("2020-03-26 13:42:30", "2020-03-26 13:40:30", "2020-03-27 13:40:30")):
        del record["arrival_time"]
        record["submit_time"] = stamp
    frame = read_trace(write(tmp_path, json.dumps(records), "d.json"))
    assert frame["arrival_s"].to_list() == [0.0, 120.0, 86400.0]


@pytest.mark.parametrize(
    ("change", "record", "column", "words"),
    [
        ({"max_parallelism": "many"}, 2, "max_parallelism", "'many' is not a number"),
        ({"max_parallelism": ["4"]}, 2, "max_parallelism", "is a JSON list"),
        ({"arrival_time": "-5"}, 2, "arrival_time", "must be 0 or more"),
        ({"total_iterations": "0"}, 2, "total_iterations", "must be greater than 0"),
        ({"time_per_iteration": "fast"}, 2, "time_per_iteration", "'fast' is not a number"),  # a number by Dally's definition
        ({"time_per_iteration": "-1"}, 2, "time_per_iteration", "must be greater than 0"),
        ({"cpu_num": "-1"}, 2, "cpu_num", "must be 0 or more"),  # (the file's own name for cpus)
        ({"job_id": "1"}, 2, "job_id", "used twice"),
    ],
)
def test_dally_json_damaged_records_are_located(tmp_path, change, record, column, words):
    records = [dally_record("1", "VGG", "1"), dally_record("2", "VGG", "4")]
    records[record - 1].update(change)
    path = write(tmp_path, json.dumps(records, indent=2), "d.json")  # (pretty-printed, as Dally's own files)
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    # Named by the line the record begins on, and by its number.
    first_line = path.read_text().split("\n").index("  {", 2) + 1
    assert caught.value.row == first_line and caught.value.column == column, str(caught.value)
    assert f"record {record}: " in str(caught.value) and words in str(caught.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[{"job_id": "1", "max_parallelism": "1", "arrival_time": "0", "duration": "5"}, 3]', "record 2: is a JSON number"),
        ('{"job_id": "1", "max_parallelism": "1"}', "holds a JSON object"),
        ('[{"job_id": "1", "max_parallelism": "1", "duration": "5"}]', "'arrival_time' or 'submit_time'"),
        ('[{"job_id": "1", "max_parallelism": "1", ', "is not valid JSON"),
    ],
)
def test_dally_json_bad_structure(tmp_path, text, words):
    with pytest.raises(TraceError, match=words.replace("(", r"\(")):
        helios.read(write(tmp_path, text, "d.json"))


@needs_dally
def test_dally_batch_workload_matches_the_notes():
    loaded = load_trace(SHARED / "sense_500jobs_0start0arrival-withBert.json")
    frame = loaded.frame
    assert loaded.format == "helios" and loaded.skipped == 0 and frame.height == 500
    models = dict(frame.group_by("model").len().iter_rows())
    assert models == {"MobileNetV3": 125, "BERT-large": 125, "ResNet-50": 125, "AlexNet": 53, "ResNet-18": 38, "VGG11": 34}
    gpus = dict(frame.group_by("gpus").len().iter_rows())
    assert gpus == {1: 270, 2: 13, 4: 52, 8: 109, 16: 42, 32: 11, 40: 1, 48: 1, 56: 1}
    assert frame["gpus"].sum() == 2544 and frame["arrival_s"].max() == 0.0
    assert frame["duration_s"].median() == 55975.0
    # time per iteration x iterations is the duration, as the notes say
    product = frame["iteration_time_s"] * frame["iterations"] / frame["duration_s"]
    assert (product - 1).abs().max() < 1e-6


@needs_dally
@pytest.mark.parametrize("name", ["sense_500jobs_poisson_1proc-week.json", "sense_500jobs_poisson_1proc-week2.json"])
def test_dally_poisson_workloads_match_the_notes(name):
    frame = read_trace(SHARED / name)
    assert frame.height == 411 and frame["gpus"].min() >= 2
    gpus = dict(frame.group_by("gpus").len().iter_rows())
    assert {g: gpus[g] for g in (2, 4, 8, 16, 32)} == {2: 41, 4: 96, 8: 190, 16: 56, 32: 23}
    assert 590_000 < frame["arrival_s"].max() < 610_000


@needs_dally
def test_describe_and_convert_a_dally_file(tmp_path, capsys):
    source = SHARED / "sense_500jobs_0start0arrival-withBert.json"
    assert main(["trace", "describe", str(source)]) == 0
    out = capsys.readouterr().out
    assert "helios" in out and "500" in out and "VGG11 34" in out
    target = tmp_path / "dally.csv"
    assert main(["trace", "convert", str(source), str(target)]) == 0
    back = read_trace(target)
    assert back.height == 500 and back.equals(read_trace(source))


# --- Alibaba PAI task table ------------------------------------------------------------------

PAI_ROWS = (
    # a 1-GPU job: one worker at half a GPU, 6 cores, 29.3 GB
    "4f057009a5d481acec67b088,tensorflow,1.0,Terminated,1739162.0,1739200.0,600.0,29.296875,50.0,MISC\n"
    # a PS/worker job: a CPU-only ps and 2 workers of 1 GPU each
    "af724763f4f5d0beef445849,ps,1.0,Terminated,1739100.0,1739900.0,600.0,10.0,,\n"
    "af724763f4f5d0beef445849,worker,2.0,Terminated,1739110.0,1740000.0,400.0,20.0,100.0,V100\n"
    # a CPU-only job, and a job that never started
    "0d39aa867a79c16eff67daa8,worker,4.0,Terminated,1739300.0,1739400.0,800.0,4.0,0.0,\n"
    "54dbcd2db287841c03d0639b,worker,1.0,Failed,0.0,0.0,600.0,4.0,100.0,T4\n"
    # a job asking for 2 GPUs in each of 4 instances
    "e387fbc18d80cc3c9ca4f1f1,worker,4.0,Running,1739500.0,1739800.0,1200.0,62.5,200.0,V100\n"
)


def test_pai_task_table_without_header(tmp_path):
    path = write(tmp_path, PAI_ROWS, "pai_task_table.csv")
    assert detect_format(path) == "pai"
    loaded = load_trace(path)
    frame = loaded.frame
    assert loaded.skipped == 2
    assert frame["name"].to_list() == ["af724763f4f5d0beef445849", "4f057009a5d481acec67b088", "e387fbc18d80cc3c9ca4f1f1"]
    assert frame["job_id"].to_list() == [0, 1, 2]
    assert frame["arrival_s"].to_list() == [0.0, 62.0, 400.0]
    assert frame["duration_s"].to_list() == [900.0, 38.0, 300.0]
    assert frame["gpus"].to_list() == [2, 1, 8]
    assert frame["gpu_share"].to_list() == [2.0, 0.5, 8.0]
    assert frame["cpus"].to_list() == [14.0, 6.0, 48.0]
    assert frame["memory_gb"].to_list() == [50.0, 29.296875, 250.0]
    assert frame["gpu_type"].to_list() == ["V100", "MISC", "V100"]


def test_pai_task_table_with_header_reads_the_same(tmp_path):
    plain = read_trace(write(tmp_path, PAI_ROWS, "pai_task_table.csv"))
    headed = write(tmp_path, ",".join(pai.COLUMNS) + "\n" + PAI_ROWS, "tasks.csv")
    assert detect_format(headed) == "pai"
    assert read_trace(headed).equals(plain)


@pytest.mark.parametrize(
    ("line", "cell", "value", "column", "words"),
    [
        (1, 8, "fifty", "plan_gpu", "'fifty' is not a number"),
        (2, 6, "-600", "plan_cpu", "must be a finite number, 0 or more"),
        (3, 2, "inf", "inst_num", "must be a finite number, 0 or more"),
        (6, 4, "soon", "start_time", "'soon' is not a number"),
        (6, 0, "", "job_name", "has no value"),
        (1, 5, "1739100.0", "end_time", "1.7391e+06 is before the task's start_time 1.73916e+06"),
    ],
)
def test_pai_damaged_rows_are_located(tmp_path, line, cell, value, column, words):
    rows = PAI_ROWS.splitlines()
    cells = rows[line - 1].split(",")
    cells[cell] = value
    rows[line - 1] = ",".join(cells)
    path = write(tmp_path, "\n".join(rows) + "\n", "pai_task_table.csv")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.row == line and caught.value.column == column, str(caught.value)
    assert words in str(caught.value)


def test_pai_wrong_width_row_is_located(tmp_path):
    rows = PAI_ROWS.splitlines()
    rows[2] += ",extra"
    with pytest.raises(TraceError) as caught:
        read_trace(write(tmp_path, "\n".join(rows) + "\n", "pai_task_table.csv"))
    assert caught.value.row == 3 and "has 11 values" in str(caught.value)


def test_describe_and_convert_pai(tmp_path, capsys):
    path = write(tmp_path, PAI_ROWS, "pai_task_table.csv")
    assert main(["trace", "describe", str(path)]) == 0
    out = capsys.readouterr().out
    assert "pai" in out and "2 (jobs that asked for no GPU or never ran)" in out
    target = tmp_path / "jobs.csv"
    assert main(["trace", "convert", str(path), str(target)]) == 0
    assert "2 records skipped: jobs that asked for no GPU or never ran" in capsys.readouterr().out
    assert read_trace(target).equals(read_trace(path))
