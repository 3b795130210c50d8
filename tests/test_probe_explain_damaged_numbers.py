"""`roundhouse explain` on a record whose numbers are not what a run writes: a reason's number
with a fraction (they are whole numbers: a fraction was cut off without a word), a time that is
not finite, and job ids that are not whole numbers (job 3, held as 3.0, was said not to be there)."""

from __future__ import annotations

import textwrap

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.conftest import fails, write_trace

GRAPH = """\
round = 5min;
src :: TraceSource(path="trace.csv");
src -> admit :: AcceptAll -> JobPool -> order :: Fifo -> place :: Consolidated -> Launch -> m :: JobMetrics;
"""


def _job(job_id, arrival_s, gpus, duration_s):
    return {"job_id": job_id, "arrival_s": float(arrival_s), "gpus": gpus, "duration_s": float(duration_s)}


@pytest.fixture
def run_folder(tmp_path):
    """The --out folder of a small run (four jobs on one machine of four GPUs)."""
    write_trace(tmp_path / "trace.csv", [_job(0, 0, 4, 1000), _job(1, 100, 1, 500), _job(2, 100, 2, 300), _job(3, 600, 1, 60)])
    graph = tmp_path / "graph.sched"
    graph.write_text(textwrap.dedent(GRAPH))
    out = tmp_path / "out"
    assert main(["run", str(graph), "--cluster", "1x4:V100", "--out", str(out), "--quiet"]) == 0
    return out


def _rewrite_record(out, column: pl.Expr) -> None:
    path = out / "explain.parquet"
    pl.read_parquet(path).with_columns(column).write_parquet(path)


def _of_job_1(value, column: str) -> pl.Expr:
    return pl.when(pl.col("job_id") == 1).then(value).otherwise(pl.col(column).cast(pl.Float64)).alias(column)


@pytest.mark.parametrize(
    ("column", "said"),
    [
        (_of_job_1(2.5, "b"), "a record of job 1 has 2.5 (not a whole number) in column 'b'"),
        (_of_job_1(-0.25, "a"), "a record of job 1 has -0.25 (not a whole number) in column 'a'"),
        (_of_job_1(float("inf"), "t_s"), "a record of job 1 has inf (not a time) in column 't_s'"),
        (_of_job_1(float("-inf"), "t_s"), "a record of job 1 has -inf (not a time) in column 't_s'"),
    ],
)
def test_explain_refuses_a_number_no_run_writes_naming_the_job_and_column(run_folder, capsys, column, said):
    _rewrite_record(run_folder, column)
    err = fails(capsys, "explain", run_folder, 1)
    assert str(run_folder / "explain.parquet") in err
    assert said in err
    # Another job's records are whole: its timeline is still printed.
    assert main(["explain", str(run_folder), "0"]) == 0
    assert "job 0:" in capsys.readouterr().out


def test_explain_refuses_job_ids_that_are_not_whole_numbers_naming_the_column(run_folder, capsys):
    _rewrite_record(run_folder, pl.col("job_id").cast(pl.Float64))
    err = fails(capsys, "explain", run_folder, 3)
    assert f"{run_folder / 'explain.parquet'}: column 'job_id' holds Float64, not whole numbers" in err
    assert "no job '3'" not in err


def test_a_record_with_whole_numbers_held_as_floats_reads_as_the_run_wrote_it(run_folder, capsys):
    assert main(["explain", str(run_folder), "1"]) == 0
    written = capsys.readouterr().out
    _rewrite_record(run_folder, pl.col("a", "b", "c").cast(pl.Float64))
    assert main(["explain", str(run_folder), "1"]) == 0
    assert capsys.readouterr().out == written
