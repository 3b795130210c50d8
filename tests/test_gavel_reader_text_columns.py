"""A Gavel trace's text columns (command, working_directory, num_steps_arg) read as text even
where every cell is a number: read in pieces, the pieces' columns agree, so the trace is read a
piece at a time to the end (never again at once), into the frame a whole read gives."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.traces import gavel
from tests.test_trace_readers_pieces import job_line, read_both, write

TEXT_COLUMNS = ("command", "working_directory", "num_steps_arg")


@pytest.fixture
def piece_sizes(monkeypatch) -> list[int | None]:
    """The piece size of every pass the Gavel reader makes over a file (None: all at once)."""
    sizes: list[int | None] = []
    pieces = gavel.pieces

    def noting(path, size=gavel.PIECE_BYTES):
        sizes.append(size)
        return pieces(path, size)

    monkeypatch.setattr(gavel, "pieces", noting)
    return sizes


@pytest.mark.parametrize("column", TEXT_COLUMNS)
def test_a_text_column_of_numbers_in_one_piece_only_is_read_in_pieces(tmp_path, piece_sizes, column):
    # Lines 300-399 give the column as numbers (with a sign, an exponent, a fraction): pieces of
    # about 2,000 bytes among them hold only those.
    numbers = {i: ("12", "+3", "1e+3", "4.50")[i % 4] for i in range(300, 400)}
    lines = [job_line(i, **({column: numbers[i]} if i in numbers else {})) for i in range(800)]
    path = write(tmp_path, lines)
    whole, parts = read_both(path, 2000)
    assert piece_sizes == [None, 2000]  # (one pass each: the pieces were not read again at once)
    assert isinstance(whole, pl.DataFrame) and isinstance(parts, pl.DataFrame)
    assert parts.equals(whole) and parts.schema == whole.schema
    assert parts.schema[column] == pl.String
    by_id = dict(zip(parts["job_id"].to_list(), parts[column].to_list(), strict=True))
    assert [by_id[i] for i in (300, 301, 302, 303)] == ["12", "+3", "1e+3", "4.50"]


def test_a_text_column_all_numbers_stays_the_texts_written(tmp_path, piece_sizes):
    # (Read as numbers, `7` came back as 7.0, and written again as "7.0": not the command given.)
    lines = [job_line(i, command=str(i), num_steps_arg=" 5 ") for i in range(50)]
    path = write(tmp_path, lines)
    frame = gavel.read(path, piece_bytes=300)
    assert piece_sizes == [300]
    assert frame["command"].to_list()[:3] == ["0", "1", "2"]
    assert frame["num_steps_arg"].unique().to_list() == ["5"]  # (cells are stripped, as text always was)
    again = tmp_path / "again.trace"
    gavel.write(frame, again)
    assert gavel.read(again).equals(frame)
    assert again.read_text().splitlines()[1].split("\t")[1] == "1"


def test_an_empty_text_column_in_one_piece_is_read_in_pieces(tmp_path, piece_sizes):
    # (An all-empty column counted as numbers, nulls: in one piece only, the types differed.)
    lines = [job_line(i, **({"working_directory": " "} if 100 <= i < 200 else {})) for i in range(400)]
    path = write(tmp_path, lines)
    whole, parts = read_both(path, 1500)
    assert piece_sizes == [None, 1500]
    assert isinstance(parts, pl.DataFrame) and parts.equals(whole)
    assert parts.schema["working_directory"] == pl.String
    assert parts.filter(pl.col("job_id") == 150)["working_directory"].to_list() == [None]
