"""Trace tooling as a new user meets it: counts in `trace describe` and in trace messages group
their digits (1,050, not 1050), a share that rounds to 0% is not shown as none, and an error of
a Philly or Alibaba PAI job's arrival names the field the file has (not the canonical
`arrival_s`, which neither file holds)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import pytest

from roundhouse.errors import TraceError
from roundhouse.tools.cli import main
from roundhouse.traces.formats import read_trace, write_trace


def _describe(capsys, path) -> str:
    assert main(["trace", "describe", str(path)]) == 0
    return " ".join(capsys.readouterr().out.replace("│", " ").split())


def test_describe_groups_the_digits_of_its_counts(tmp_path, capsys):
    # 1,050 jobs known by model and iterations, 1,050 by duration alone (no model), one of them
    # on 8 GPUs: every count past 999 is grouped, in every row that gives one.
    rows = ["job_id,arrival_s,gpus,duration_s,model,iterations"]
    rows += [f"{i},{i},1,,LM,500" for i in range(1050)]
    rows += [f"{i},{i},{8 if i == 2000 else 1},600,," for i in range(1050, 2100)]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(rows) + "\n")
    text = _describe(capsys, path)
    assert "1: 2,099 (>99%)" in text, text
    assert "8: 1 (<1%)" in text, text
    assert "LM 1,050; 1,050 without" in text, text
    assert text.count("(1,050 jobs without)") == 2, text  # (the durations, the iterations)


def test_a_share_is_said_as_it_rounds_when_it_is_neither_none_nor_all(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("job_id,arrival_s,gpus,duration_s\n" + "".join(f"{i},{i},{1 + i % 2},60\n" for i in range(4)))
    assert "1: 2 (50%), 2: 2 (50%)" in _describe(capsys, path)


def _philly_record(number: int, submitted: str) -> dict:
    return {
        "status": "Pass",
        "vc": "vc1",
        "jobid": f"application_1_{number:05d}",
        "submitted_time": submitted,
        "user": "u1",
        "attempts": [{"start_time": submitted, "end_time": "2017-10-09 00:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}],
    }


def test_a_philly_submission_too_late_names_submitted_time(tmp_path):
    path = tmp_path / "cluster_job_log"
    records = [_philly_record(1, "2017-10-02 08:00:00"), _philly_record(2, "2217-10-02 08:00:00")]
    records[1]["attempts"][0]["end_time"] = "2217-10-03 08:00:00"
    path.write_text(json.dumps(records, indent=1))
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert err.value.column == "submitted_time", str(err.value)
    assert "arrival_s" not in str(err.value)
    assert "a century" in str(err.value)


def test_a_pai_start_too_late_names_start_time(tmp_path):
    path = tmp_path / "pai_task_table.csv"
    path.write_text("j1,t1,1,Terminated,100,200,600,10,100,V100\nj2,t1,1,Terminated,1e12,1.00001e12,600,10,100,V100\n")
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert (err.value.row, err.value.column) == (2, "start_time"), str(err.value)
    assert "arrival_s" not in str(err.value)


def test_the_two_clocks_warning_groups_its_counts(tmp_path, capsys):
    start = datetime(2020, 3, 26, 13, 0, 0)
    records = []
    for number in range(2200):
        record = {"job_id": str(number), "max_parallelism": "4", "duration": "3600", "model": "BERT"}
        record["submit_time"] = (start + timedelta(seconds=number)).strftime("%Y-%m-%d %H:%M:%S")
        if number < 1100:
            record["arrival_time"] = str(number)
        records.append(record)
    path = tmp_path / "d.json"
    path.write_text(json.dumps(records))
    read_trace(path)
    err = capsys.readouterr().err
    assert "1,100 job(s) arrive at their 'arrival_time'" in err and "1,100 at their 'submit_time'" in err, err


def test_the_gavel_writer_s_note_of_slos_left_out_groups_its_count(tmp_path):
    # Jobs of a model with no V100 throughput, known by iterations: their SLOs cannot be kept
    # as factors of a duration, and the note lists five and counts the rest.
    path = tmp_path / "t.csv"
    path.write_text(
        "job_id,arrival_s,gpus,model,iterations,slo_s\n" + "".join(f"{i},{i},1,NoSuchModel,100,900\n" for i in range(1010))
    )
    notes = write_trace(read_trace(path), tmp_path / "t.trace", "gavel")
    assert any("0, 1, 2, 3, 4 and 1,005 more" in note for note in notes), notes


@pytest.mark.parametrize(
    ("cluster", "trace", "said"),
    [
        ("4096x4:V100", "job_id,arrival_s,gpus,duration_s\n0,0,20000,100\n", "asks for 20,000 GPUs but the cluster has 16,384"),
        (
            "256x4:P100,2048x4:V100",
            "job_id,arrival_s,gpus,duration_s,gpu_type\n0,0,2000,100,P100\n",
            "asks for 2,000 GPUs of type P100 (its gpu_type), and the cluster has 1,024 of them",
        ),
        (
            "1024x4:P100,1024x4:V100",
            "job_id,arrival_s,gpus,model,batch_size,iterations\n0,0,5000,ResNet-50,64,100\n",
            "asks for 5,000 GPUs but the largest GPU type of the cluster, P100, has 4,096",
        ),
    ],
)
def test_a_job_too_large_for_the_cluster_is_said_in_grouped_counts(tmp_path, capsys, cluster, trace, said):
    (tmp_path / "t.csv").write_text(trace)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\narrivals :: TraceSource(path="t.csv");\n'
        "arrivals -> AcceptAll -> pool :: JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
    )
    code = main(["run", str(graph), "--cluster", cluster, "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code != 0 and said in err, err


def test_a_job_table_s_whole_number_check_groups_its_counts():
    from roundhouse.traces.jobs import _check_whole

    with pytest.raises(ValueError, match=r"\(2,000 of 2,000 not whole\)"):
        _check_whole(np.full(2000, 0.5))


@pytest.mark.parametrize("flag", ["--gpus", "--batch-sizes"])
def test_profile_says_which_count_is_below_one(tmp_path, capsys, flag):
    assert main(["profile", "--out", str(tmp_path / "p.csv"), flag, "2,0"]) == 2
    err = capsys.readouterr().err
    assert f"error: {flag}: give whole numbers of 1 or more, got 0" in err, err


def test_describe_shows_a_huge_count_of_iterations_in_significant_digits(tmp_path, capsys):
    # (a Gavel trace's total_steps past what a float holds to the unit: not 31 digits of noise)
    path = tmp_path / "t.trace"
    fields = ["ResNet-18 (batch size 32)", "python3 main.py", "cifar10", "--num_steps", "1", "1e30", "1", "1", "-1", "0"]
    path.write_text("\t".join(fields) + "\n")
    text = _describe(capsys, path)
    assert "max 1e+30" in text and "000,000" not in text, text


def test_a_pipe_is_refused_as_no_trace_file_not_read_as_an_empty_one(tmp_path, capsys):
    # Format detection reads a file's start and the reader reads it again: from a pipe the
    # second read found nothing ("is empty"), and from a FIFO whose writer had gone it waited
    # for ever. Read in a thread, so that a wait fails the test rather than hanging it.
    import os
    import threading

    fifo = tmp_path / "t.csv"
    os.mkfifo(fifo)

    def write() -> None:
        try:
            fifo.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,60\n")
        except OSError:  # (a reader gone before the writing ended: a broken pipe)
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    outcome: list = []

    def describe() -> None:
        try:
            read_trace(fifo)
        except TraceError as err:
            outcome.append(err)

    reader = threading.Thread(target=describe, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "reading a FIFO did not return"
    assert outcome and "is not a regular file" in str(outcome[0]), outcome
    # (A reader that opens and goes lets the writer, if still waiting for one, finish.)
    os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    writer.join(timeout=5)


GAVEL_LINE = "ResNet-18 (batch size 16)\tpython3 main.py --batch_size 16\t.\t--num_steps\t1\t{steps}\t1\t1\t-1\t{arrival}\n"


def test_a_gavel_trace_s_fractional_total_steps_is_refused_naming_the_line(tmp_path):
    # (Gavel's own reader takes total_steps with int(), which refuses "10000.5"; ours read it as
    # 10,000.5 steps.)
    path = tmp_path / "t.trace"
    path.write_text(GAVEL_LINE.format(steps=500, arrival=0.0) + GAVEL_LINE.format(steps="10000.5", arrival=6.0))
    with pytest.raises(TraceError) as bad:
        read_trace(path, format="gavel")
    message = str(bad.value)
    assert message.startswith(f"{path}:2: ") and "'total_steps'" in message, message
    assert "must be a whole number of steps (Gavel reads it with int()), got 10000.5" in message
    path.write_text(GAVEL_LINE.format(steps=500, arrival=0.0) + GAVEL_LINE.format(steps="10000.0", arrival=6.0))
    assert read_trace(path, format="gavel").get_column("iterations").to_list() == [500.0, 10000.0]
