"""`roundhouse plot --kind utilisation` (and `report`, which draws it) of a run whose record
(explain.parquet) was removed, or replaced by a Parquet file of other columns: the curve is
drawn from jobs.csv, and a warning says why, naming the file and what it lacks (not "cannot be
read as Parquet" of a file that reads)."""

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
    (tmp_path / "trace.csv").write_text(TRACE)
    (tmp_path / "g.sched").write_text(GRAPH)
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "g.sched"), "--quiet", "--no-explain", "--out", str(out)]) == 0
    capsys.readouterr()
    assert "warning" not in draw(out, tmp_path, capsys)


def test_a_record_of_other_columns_is_named_by_what_it_lacks(run, tmp_path, capsys):
    path = run / "explain.parquet"
    pl.read_parquet(path).drop("reason").write_parquet(path)
    err = draw(run, tmp_path, capsys)
    assert f"warning: {path}: no column 'reason'" in err, err
    assert "cannot be read as Parquet" not in err
