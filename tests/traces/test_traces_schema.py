"""The canonical schema: typing, defaults, ordering, and an error naming file, line and column
for every kind of bad cell."""

from __future__ import annotations

import math

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import canonical
from roundhouse.traces.schema import CANONICAL_COLUMNS, validate

HEADER = "job_id,arrival_s,gpus,duration_s"


def write(tmp_path, text: str, name: str = "t.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def read_error(tmp_path, text: str) -> TraceError:
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as info:
        canonical.read_csv(path)
    return info.value


def test_valid_csv_is_typed_complete_and_sorted(tmp_path):
    path = write(tmp_path, f"{HEADER},note\n2,50,1,100,b\n1,10,4,200.5,a\n0,10,2,30,c\n")
    df = canonical.read_csv(path)
    assert list(df.columns) == [*CANONICAL_COLUMNS, "note"]
    assert dict(zip(df.columns, df.dtypes)) == {**CANONICAL_COLUMNS, "note": pl.String}
    assert df["job_id"].to_list() == [0, 1, 2]  # by arrival, then job id
    assert df["weight"].to_list() == [1.0, 1.0, 1.0]
    assert df["gpus"].to_list() == [2, 4, 1]


def test_bad_number_names_line_and_column(tmp_path):
    err = read_error(tmp_path, f"{HEADER}\n0,0,1,10\n1,5,four,10\n")
    assert (err.row, err.column) == (3, "gpus")
    assert str(err) == f"{tmp_path / 't.csv'}:3: error: column 'gpus': 'four' is not a whole number"


def test_first_problem_in_file_order_is_reported(tmp_path):
    err = read_error(tmp_path, f"{HEADER}\n0,0,1,x\n1,y,1,10\n")
    assert (err.row, err.column) == (2, "duration_s")
    err = read_error(tmp_path, f"{HEADER}\n0,0,1,10\n1,y,1,x\n")
    assert (err.row, err.column) == (3, "arrival_s")
    err = read_error(tmp_path, f"{HEADER}\n0,0,-1,10\n1,0,x,10\n")  # a bad range before a bad number
    assert (err.row, err.column) == (2, "gpus") and "at least 1" in err.message
    err = read_error(tmp_path, f"{HEADER}\n0,0,1,10\n0,0,1,10\n2,0,x,10\n")  # a duplicate before a bad number
    assert (err.row, err.column) == (3, "job_id")


@pytest.mark.parametrize(
    "row, column, words",
    [
        ("1,5,-2,10", "gpus", "must be at least 1, got -2"),
        ("1,5,0,10", "gpus", "must be at least 1"),
        ("1,nan,1,10", "arrival_s", "finite"),
        ("1,inf,1,10", "arrival_s", "finite"),
        ("1,-1,1,10", "arrival_s", "0 or more"),
        ("-1,5,1,10", "job_id", "0 or more"),
        ("1,5,1,0", "duration_s", "greater than 0"),
        ("1,5,1.5,10", "gpus", "'1.5' is not a whole number"),
        ("1,5,,10", "gpus", "no value"),
        ("1,abc,1,10", "arrival_s", "'abc' is not a number"),
        ("1,5,1,", "duration_s", "model"),
    ],
)
def test_bad_values(tmp_path, row, column, words):
    err = read_error(tmp_path, f"{HEADER}\n0,0,1,10\n{row}\n")
    assert (err.row, err.column) == (3, column)
    assert words in err.message


def test_whole_numbers_written_as_floats_are_accepted(tmp_path):
    df = canonical.read_csv(write(tmp_path, f"{HEADER}\n0.0,0,4.0,10\n1,1,2e0,10\n"))
    assert df["gpus"].to_list() == [4, 2]


def test_missing_column_lists_found_columns_and_suggests(tmp_path):
    err = read_error(tmp_path, "job_id,arrival_s,gpu,duration_s\n0,0,1,10\n")
    assert err.row is None
    assert "missing column 'gpus'" in err.message
    assert "'job_id', 'arrival_s', 'gpu', 'duration_s'" in err.message
    assert "did you mean 'gpu'" in err.message


def test_duration_or_model_and_iterations(tmp_path):
    df = canonical.read_csv(write(tmp_path, "job_id,arrival_s,gpus,model,iterations\n0,0,1,lstm,100\n"))
    assert df["model"].to_list() == ["LM"]  # aliases become Gavel's names
    err = read_error(tmp_path, "job_id,arrival_s,gpus,model\n0,0,1,LM\n")
    assert "missing column 'duration_s'" in err.message


def test_duplicate_job_id_names_both_rows(tmp_path):
    err = read_error(tmp_path, f"{HEADER}\n0,0,1,10\n1,1,1,10\n0,2,1,10\n")
    assert (err.row, err.column) == (4, "job_id")
    assert f"{tmp_path / 't.csv'}:2" in err.message


def test_empty_and_header_only_files(tmp_path):
    err = read_error(tmp_path, "")
    assert "empty" in err.message
    err = read_error(tmp_path, "\n\n# only a comment\n")
    assert "empty" in err.message
    assert canonical.read_csv(write(tmp_path, HEADER + "\n")).height == 0


def test_line_numbers_count_comments_blank_lines_and_quoted_newlines(tmp_path):
    err = read_error(tmp_path, f"# a trace\n\n{HEADER}\n0,0,1,10\n\n1,0,x,10\n")
    assert err.row == 6
    err = read_error(tmp_path, f'{HEADER},note\n0,0,1,10,"two\nlines"\n1,0,x,10,plain\n')
    assert err.row == 4


def test_wrong_number_of_values(tmp_path):
    err = read_error(tmp_path, f"{HEADER}\n0,0,1,10\n1,0,1\n")
    assert err.row == 3 and "3 values" in err.message
    err = read_error(tmp_path, f"{HEADER}\n0,0,1,10,5\n")
    assert err.row == 2


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(f"{HEADER}\n0,0,1,10\n1,0,\xff,10\n".encode("latin-1"))
    with pytest.raises(TraceError) as info:
        canonical.read_csv(path)
    assert info.value.row == 3 and "UTF-8" in info.value.message


def test_extra_columns_numbers_or_text(tmp_path):
    df = canonical.read_csv(write(tmp_path, f"{HEADER},loss,vc,tag\n0,0,1,10,0.5,6214e9,x\n1,0,1,10,1e-3,0e4a51,\n"))
    assert df.schema["loss"] == pl.Float64 and df["loss"].to_list() == [0.5, 0.001]
    assert df.schema["vc"] == pl.String  # hex-like ids are not numbers
    assert df["tag"].to_list() == ["x", None]


def test_validate_typed_frame_and_record_numbers():
    frame = pl.DataFrame({"job_id": [0, 1], "arrival_s": [0.0, 1.0], "gpus": [1.0, 2.0], "duration_s": [5, 6]})
    df = validate(frame, "mem")
    assert df.schema["gpus"] == pl.Int64 and df.schema["duration_s"] == pl.Float64
    with pytest.raises(TraceError) as info:
        validate(frame.with_columns(gpus=pl.Series([1.0, 2.5])), "mem")
    assert (info.value.row, info.value.column) == (2, "gpus")
    with pytest.raises(TraceError) as info:
        validate(frame.with_columns(arrival_s=pl.Series([0.0, math.nan])), "mem", row_numbers=[10, 20])
    assert info.value.row == 20


def test_parquet_round_trip_and_errors(tmp_path):
    frame = pl.DataFrame({"job_id": [0, 1], "arrival_s": [0.0, 1.0], "gpus": [1, 2], "duration_s": [5.0, 6.0]})
    path = tmp_path / "t.parquet"
    canonical.write(frame, path)
    assert canonical.read(path).equals(validate(frame, "x"))
    frame.with_columns(gpus=pl.Series([1, -3])).write_parquet(path)
    with pytest.raises(TraceError) as info:
        canonical.read(path)
    assert (info.value.row, info.value.column) == (2, "gpus")
    path.write_text("not parquet")
    with pytest.raises(TraceError, match="Parquet"):
        canonical.read(path)


def test_writer_leaves_out_empty_optional_columns(tmp_path):
    frame = pl.DataFrame({"job_id": [0], "arrival_s": [0.0], "gpus": [1], "duration_s": [5.0]})
    path = tmp_path / "t.csv"
    canonical.write(frame, path)
    assert path.read_text() == "job_id,arrival_s,gpus,duration_s\n0,0.0,1,5.0\n"
