"""Trace counts past what a count holds, as a damaged file gives them: a whole number too large
for 64 bits is said to be too large (not "not a whole number"), and Alibaba PAI's task table
names the task's own cell that makes its GPUs so many, not a total no cell holds."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.tools.cli import main
from roundhouse.traces.formats import read_trace

PAI_HEADER = "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"


def pai_table(tmp_path, third: str) -> str:
    path = tmp_path / "pai_task_table.csv"
    path.write_text(
        PAI_HEADER
        + "j1,worker,1,Terminated,1000,5000,600,29.3,100,V100\n"
        + "j2,worker,2,Terminated,2000,9000,800,10,50,P100\n"
        + third
        + "\n"
    )
    return str(path)


def refusal(path: str, format: str = "auto") -> TraceError:
    with pytest.raises(TraceError) as err:
        read_trace(path, format)
    return err.value


@pytest.mark.parametrize(
    ("row", "column", "said"),
    [
        ("j3,worker,1e30,Terminated,3000,3500,600,10,100,T4", "inst_num", "1e+30 instances of 1 GPU(s) each"),
        ("j3,worker,2,Terminated,3000,3500,600,10,1e30,T4", "plan_gpu", "come to 2e+28 GPUs"),
    ],
)
def test_pai_gpus_past_a_count_blame_the_cell_that_makes_them_so_at_its_line(tmp_path, row, column, said):
    err = refusal(pai_table(tmp_path, row))
    assert (err.row, err.column) == (4, column), str(err)
    assert "not a whole number" not in str(err)
    assert said in str(err)


def test_pai_table_of_ordinary_counts_still_reads(tmp_path):
    path = pai_table(tmp_path, "j3,worker,4,Terminated,3000,3500,600,10,100,T4")
    frame = read_trace(path)
    assert frame["gpus"].to_list() == [1, 2, 4]


def test_the_command_line_says_where_without_a_traceback(tmp_path, capsys):
    path = pai_table(tmp_path, "j3,worker,1e30,Terminated,3000,3500,600,10,100,T4")
    assert main(["trace", "describe", path]) == 2
    err = capsys.readouterr().err
    assert f"{path}:4: error: column 'inst_num'" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("gpus", "said"), [(1e30, "is too large (at most 2^63 - 1)"), (2.5, "is not a whole number")])
def test_a_parquet_float_count_says_too_large_or_not_whole(tmp_path, gpus, said):
    path = tmp_path / "t.parquet"
    pl.DataFrame({"job_id": [0, 1], "arrival_s": [0.0, 1.0], "gpus": [1.0, gpus], "duration_s": [5.0, 6.0]}).write_parquet(path)
    err = refusal(str(path))
    assert err.column == "gpus" and err.row == 2, str(err)
    assert said in str(err)


def test_a_parquet_float_count_far_below_a_count_says_too_small(tmp_path):
    path = tmp_path / "t.parquet"
    pl.DataFrame({"job_id": [0.0, -1e30], "arrival_s": [0.0, 1.0], "gpus": [1, 1], "duration_s": [5.0, 6.0]}).write_parquet(path)
    err = refusal(str(path))
    assert err.column == "job_id" and "is too small (at least -2^63)" in str(err), str(err)


def test_a_parquet_float_count_that_is_whole_still_reads(tmp_path):
    path = tmp_path / "t.parquet"
    pl.DataFrame({"job_id": [0, 1], "arrival_s": [0.0, 1.0], "gpus": [1.0, 8.0], "duration_s": [5.0, 6.0]}).write_parquet(path)
    assert read_trace(str(path))["gpus"].to_list() == [1, 8]
