"""`roundhouse explain` of a record edited by hand since its run wrote it: a state its reason
does not put a job in, or a negative GPU count, is refused naming the file, the job, the time
and the column, rather than worded as if the run had decided it."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.conftest import small_run_folder


@pytest.fixture
def run(tmp_path):
    return small_run_folder(tmp_path)


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
