"""`roundhouse plot --kind utilisation` (and `report`, which draws it) of a run whose record
(explain.parquet) was removed, or replaced by a Parquet file of other columns: the curve is
drawn from jobs.csv, and a warning says why, naming the file and what it lacks (not "cannot be
read as Parquet" of a file that reads)."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.conftest import small_run_folder


@pytest.fixture
def run(tmp_path):
    return small_run_folder(tmp_path)


def draw(run, tmp_path, capsys, command: str = "plot") -> str:
    args = ["--kind", "utilisation", "-o", str(tmp_path / "u.svg")] if command == "plot" else ["-o", str(tmp_path / "r.html")]
    assert main([command, str(run), *args]) == 0
    return capsys.readouterr().err


def test_the_record_kept_draws_without_a_warning(run, tmp_path, capsys):
    assert "warning" not in draw(run, tmp_path, capsys)


@pytest.mark.parametrize("command", ["plot", "report"])
def test_a_record_removed_since_is_named(run, tmp_path, capsys, command):
    (run / "explain.parquet").unlink()
    err = draw(run, tmp_path, capsys, command)
    assert f"warning: {run / 'explain.parquet'}: missing, though run.json lists it" in err, err
    assert "drawn from jobs.csv" in err


def test_a_run_without_a_record_is_not_warned_of(tmp_path, capsys):
    out = small_run_folder(tmp_path, "--no-explain")
    capsys.readouterr()
    assert "warning" not in draw(out, tmp_path, capsys)


def test_a_record_of_other_columns_is_named_by_what_it_lacks(run, tmp_path, capsys):
    path = run / "explain.parquet"
    pl.read_parquet(path).drop("reason").write_parquet(path)
    err = draw(run, tmp_path, capsys)
    assert f"warning: {path}: no column 'reason'" in err, err
    assert "cannot be read as Parquet" not in err
