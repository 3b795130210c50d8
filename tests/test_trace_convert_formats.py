"""`trace convert --to` a format Roundhouse only reads says so (and where one comes from), not
that the format is unknown; and Helios' arrivals count from the first job kept, as PAI's do, so
that a skipped record (a CPU job, one that never ran) moves no job's arrival."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roundhouse.errors import UsageError
from roundhouse.tools.trace_cmd import GENERATE_FORMATS
from roundhouse.traces import helios, pai
from roundhouse.traces.formats import FORMATS, WRITE_FORMATS, check_write_format, write_trace
from tests.conftest import fails

CANONICAL = "job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,50,2,200\n"


@pytest.mark.parametrize("target", [f for f in FORMATS if f not in WRITE_FORMATS])
def test_convert_to_a_read_only_format_says_it_is_read_only(tmp_path, capsys, target):
    source = tmp_path / "a.csv"
    source.write_text(CANONICAL)
    err = fails(capsys, "trace", "convert", source, tmp_path / "x.txt", "--to", target)
    written = ", ".join(WRITE_FORMATS[:-1]) + f" or {WRITE_FORMATS[-1]}"
    assert f"convert writes {written} only; {target} is read-only" in err, err
    assert "unknown trace format" not in err
    made = f"trace generate --format {target} writes a synthetic one"
    assert (made in err) == (target in GENERATE_FORMATS), err
    assert not (tmp_path / "x.txt").exists()


def test_convert_to_an_unknown_format_still_lists_those_written(tmp_path, capsys):
    source = tmp_path / "a.csv"
    source.write_text(CANONICAL)
    err = fails(capsys, "trace", "convert", source, tmp_path / "x.trace", "--to", "gavl")
    assert "unknown trace format 'gavl'; use one of auto, canonical, gavel, tiresias" in err and "'gavel'" in err


def test_write_trace_names_a_read_only_format_as_such(tmp_path):
    from roundhouse.traces.formats import read_trace

    frame = read_trace(_write(tmp_path / "a.csv", CANONICAL))
    with pytest.raises(UsageError, match="write_trace writes canonical, gavel or tiresias only; pai is read-only"):
        write_trace(frame, tmp_path / "x.csv", "pai")
    assert check_write_format("gavel") == "gavel" and check_write_format("auto") == "auto"


# --- Helios: arrivals from the first job kept ----------------------------------------------------

HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


def _row(job: int, gpus: int, submit: str, duration: int) -> str:
    return f"{job},u,vc,{gpus},4,1,COMPLETED,{submit},{submit},{submit},{duration},0\n"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_helios_arrivals_count_from_the_first_job_kept(tmp_path):
    """A CPU job submitted a day before the first GPU job, and a GPU job that never ran before
    it too, do not count: the first job kept arrives at 0."""
    path = _write(
        tmp_path / "cluster_log.csv",
        HEADER
        + _row(1, 0, "2020-04-01 00:00:00", 3600)  # CPU only: skipped
        + _row(2, 4, "2020-04-01 12:00:00", 0)  # never ran: skipped
        + _row(3, 8, "2020-04-02 00:00:00", 3600)
        + _row(4, 2, "2020-04-02 00:10:00", 3000),
    )
    found = helios.parse(path)
    assert found.skipped == 2
    assert found.frame["job_id"].to_list() == [3, 4]
    assert found.frame["arrival_s"].to_list() == [0.0, 600.0]


def test_helios_json_of_submit_times_counts_from_the_first_job_kept(tmp_path):
    records = [
        {"job_id": "1", "gpu_num": "0", "submit_time": "2020-04-01 00:00:00", "duration": "3600"},
        {"job_id": "2", "gpu_num": "8", "submit_time": "2020-04-02 00:00:00", "duration": "3600"},
        {"job_id": "3", "gpu_num": "2", "submit_time": "2020-04-02 00:00:30", "duration": "60"},
    ]
    found = helios.parse(_write(tmp_path / "jobs.json", json.dumps(records)))
    assert found.skipped == 1 and found.frame["arrival_s"].to_list() == [0.0, 30.0]
    # A record of Dally's arrival_time keeps it; the others count from the first kept submission.
    records[1]["arrival_time"] = "5"
    found = helios.parse(_write(tmp_path / "mixed.json", json.dumps(records)))
    assert sorted(found.frame["arrival_s"].to_list()) == [5.0, 30.0]
    # Only a skipped record has a submission to count from: the jobs kept keep their own times.
    only = [records[0], {"job_id": "2", "gpu_num": "1", "arrival_time": "7", "duration": "10"}]
    assert helios.parse(_write(tmp_path / "only.json", json.dumps(only))).frame["arrival_s"].to_list() == [7.0]


def test_helios_and_pai_agree_on_where_arrivals_count_from(tmp_path):
    """The same jobs, a skipped one first, in both formats: the same arrivals."""
    hel = _write(
        tmp_path / "cluster_log.csv",
        HEADER
        + _row(1, 0, "2020-04-01 00:00:00", 100)
        + _row(2, 1, "2020-04-01 01:00:00", 100)
        + _row(3, 1, "2020-04-01 01:05:00", 100),
    )
    table = _write(
        tmp_path / "pai_task_table.csv",
        "j1,t,1,Terminated,1000,1100,600,29.3,0,\n"
        "j2,t,1,Terminated,4600,4700,600,29.3,100,V100\n"
        "j3,t,1,Terminated,4900,5000,600,29.3,100,V100\n",
    )
    assert helios.parse(hel).frame["arrival_s"].to_list() == pai.parse(table).frame["arrival_s"].to_list() == [0.0, 300.0]
