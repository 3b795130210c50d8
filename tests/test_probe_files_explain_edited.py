"""`roundhouse explain` of a record edited by hand since its run wrote it: a state its reason
does not put a job in, or a negative GPU count, is refused naming the file, the job, the time
and the column, rather than worded as if the run had decided it."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.tools.cli import main

GRAPH = """\
round = 5min;
cluster = "2x4:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> metrics :: JobMetrics;
"""
TRACE = "job_id,arrival_s,gpus,duration_s\n0,0,2,3600\n1,60,4,1800\n"


@pytest.fixture
def run(tmp_path):
    (tmp_path / "trace.csv").write_text(TRACE)
    (tmp_path / "g.sched").write_text(GRAPH)
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "g.sched"), "--quiet", "--out", str(out)]) == 0
    return out


def edit(run, **columns) -> None:
    path = run / "explain.parquet"
    record = pl.read_parquet(path)
    record.with_columns(**columns).write_parquet(path)


def explain(run, capsys, job: str = "1") -> tuple[int, str, str]:
    status = main(["explain", str(run), job])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_record_unedited_reads(run, capsys):
    status, out, _ = explain(run, capsys)
    assert status == 0 and "launched" in out and "finished" in out


def test_a_state_its_reason_does_not_give_is_refused(run, capsys):
    # Every record of job 1 made "finished": worded, the job would finish at its admission.
    edit(run, state=pl.when(pl.col("job_id") == 1).then(pl.lit("finished")).otherwise(pl.col("state").cast(pl.String)))
    status, out, err = explain(run, capsys)
    assert status == 2 and out == ""
    assert "explain.parquet" in err and "job 1" in err and "'finished'" in err and "'admitted'" in err, err


def test_a_state_no_run_records_is_refused(run, capsys):
    edit(run, state=pl.lit("flying"))
    status, _, err = explain(run, capsys)
    assert status == 2 and "'flying'" in err and "waiting" in err, err


def test_a_negative_gpu_count_is_refused(run, capsys):
    edit(run, b=pl.when(pl.col("reason").cast(pl.String) == "launched").then(-5).otherwise(pl.col("b")))
    status, out, err = explain(run, capsys)
    assert status == 2 and out == ""
    assert "-5" in err and "'b'" in err and "GPUs" in err and "below 0" in err, err
