"""The commands that read a run's outputs (`explain`, `plot`, `report`) and write a file
(`render`, `plot`, `report`), on what a review found them to get wrong: a record whose columns
are damaged gave a traceback, a jobs.csv cut at the end of a line was drawn as the whole run, and
a write that failed left a half-written file in the output's place."""

from __future__ import annotations

import json
import resource
import shutil
import signal
import textwrap

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.conftest import REPO, fails, write_trace

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


def _damage_record(out, column: pl.Expr) -> None:
    path = out / "explain.parquet"
    pl.read_parquet(path).with_columns(column).write_parquet(path)


@pytest.mark.parametrize(
    ("column", "said"),
    [
        (pl.col("a").cast(pl.String) + "x", "column 'a' holds String, not numbers"),
        (pl.col("t_s").cast(pl.String), "column 't_s' holds String, not numbers"),
        (pl.col("reason").to_physical(), "column 'reason' holds UInt32, not words"),
        (pl.when(pl.col("job_id") == 1).then(None).otherwise(pl.col("b")).alias("b"), "job 1 has no value in column 'b'"),
        (pl.when(pl.col("job_id") == 1).then(float("nan")).otherwise(pl.col("t_s")).alias("t_s"), "job 1 has nan"),
        (pl.when(pl.col("job_id") == 1).then(float("inf")).otherwise(pl.col("c")).alias("c"), "job 1 has inf"),
    ],
)
def test_explain_names_a_damaged_column_of_the_record(run_folder, capsys, column, said):
    _damage_record(run_folder, column)
    err = fails(capsys, "explain", run_folder, 1)
    assert str(run_folder / "explain.parquet") in err
    assert said in err


def test_the_utilisation_figure_is_drawn_from_jobs_csv_when_the_record_has_a_column_of_the_wrong_type(run_folder, capsys):
    _damage_record(run_folder, pl.col("b").cast(pl.String) + "x")
    assert main(["plot", str(run_folder), "--kind", "utilisation", "-o", str(run_folder / "u.png")]) == 0
    err = capsys.readouterr().err
    assert f"{run_folder / 'explain.parquet'}: column 'b' holds String, not numbers" in err
    assert "drawn from jobs.csv" in err
    assert (run_folder / "u.png").stat().st_size > 0
    assert main(["report", str(run_folder), "-o", str(run_folder / "r.html")]) == 0


def test_a_jobs_csv_cut_at_the_end_of_a_line_is_said_to_be_incomplete(run_folder, capsys):
    jobs = run_folder / "jobs.csv"
    lines = jobs.read_text().splitlines(keepends=True)
    tracked = json.loads((run_folder / "summary.json").read_text())["jobs_tracked"]
    assert len(lines) == tracked + 1
    jobs.write_text("".join(lines[:-2]))  # (the header and all but the last two jobs' rows)
    said = f"jobs.csv holds {tracked - 2} jobs, but summary.json counts {tracked} (cut short?)"
    for kind in ("jct-cdf", "utilisation", "gantt"):
        assert main(["plot", str(run_folder), "--kind", kind, "-o", str(run_folder / f"{kind}.svg")]) == 0
        assert f"warning: {run_folder}: {said}; drawn from those jobs" in capsys.readouterr().err
        assert f"incomplete: {said}" in (run_folder / f"{kind}.svg").read_text()
    assert main(["report", str(run_folder), "-o", str(run_folder / "r.html")]) == 0
    assert f"Incomplete: {said}; the plots show only those jobs." in (run_folder / "r.html").read_text()


def test_a_whole_jobs_csv_is_not_said_to_be_incomplete(run_folder, capsys):
    assert main(["plot", str(run_folder), "-o", str(run_folder / "p.svg")]) == 0
    assert "incomplete" not in capsys.readouterr().err + (run_folder / "p.svg").read_text()


def _sweep(tmp_path):
    graph = tmp_path / "graph.sched"
    graph.write_text(textwrap.dedent(GRAPH))
    write_trace(tmp_path / "trace.csv", [_job(0, 0, 1, 600), _job(1, 60, 1, 300), _job(2, 120, 2, 900)])
    out = tmp_path / "sweep"
    argv = ["sweep", str(graph), "--cluster", "1x4:V100", "--vary", "round=1min,5min", "--seeds", "2", "--workers", "1"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


def test_a_summary_csv_cut_at_the_end_of_a_line_is_not_taken_for_the_last_sweep(tmp_path, capsys):
    out = _sweep(tmp_path)
    summary = out / "summary.csv"
    summary.write_text("".join(summary.read_text().splitlines(keepends=True)[:3]))  # (2 of its 4 runs)
    capsys.readouterr()
    assert main(["plot", str(out), "-o", str(tmp_path / "p.png")]) == 0
    err = capsys.readouterr().err
    assert f"{summary}: lists 2 runs, but points.csv beside it counts 4 (cut short?)" in err
    assert "earlier sweeps" not in err  # (its other runs are of the same sweep)
    shutil.rmtree(out / "results")  # (summary.csv alone: nothing else lists the runs)
    err = fails(capsys, "plot", out, "-o", tmp_path / "q.png")
    assert f"{summary}: lists 2 runs, but points.csv beside it counts 4 (cut short?)" in err


def test_a_damaged_file_of_the_results_store_is_not_taken_for_the_sweep_s_folder(tmp_path, capsys):
    out = _sweep(tmp_path)
    pl.DataFrame({"x": [1]}).write_parquet(out / "results" / f"{'f' * 64}.parquet")
    (out / "summary.csv").unlink()
    capsys.readouterr()
    assert main(["plot", str(out), "-o", str(tmp_path / "p.png")]) == 0
    err = capsys.readouterr().err
    assert f"warning: {out}: the sweep did not finish (no summary.csv)" in err


def _limited(bytes_: int):
    """A file size limit for this process (a write past it fails with EFBIG, as on a full disk)."""
    old = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (bytes_, old[1]))
    return old, previous


@pytest.mark.parametrize("command", ["report", "plot", "render"])
def test_a_write_that_fails_leaves_no_half_written_file(run_folder, tmp_path, capsys, command):
    out = tmp_path / {"report": "r.html", "plot": "p.png", "render": "g.png"}[command]
    out.write_text("an earlier file")
    argv = [command, str(REPO / "graphs" / "las.sched") if command == "render" else str(run_folder), "-o", str(out)]
    old, previous = _limited(4096)
    try:
        status = main(argv)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old)
        signal.signal(signal.SIGXFSZ, previous)
    assert status == 2
    err = capsys.readouterr().err
    assert f"cannot write {out}: File too large" in err
    assert "Traceback" not in err
    assert out.read_text() == "an earlier file"  # (the earlier file is kept whole)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("command", ["report", "plot", "render"])
def test_a_folder_in_the_output_s_place_is_named_and_kept(run_folder, tmp_path, capsys, command):
    out = tmp_path / {"report": "r.html", "plot": "p.png", "render": "g.svg"}[command]
    out.mkdir()
    source = REPO / "graphs" / "las.sched" if command == "render" else run_folder
    err = fails(capsys, command, source, "-o", out)
    assert f"cannot write {out}: Is a directory" in err
    assert out.is_dir() and not list(out.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_job_id_given_with_spaces_is_named_without_them(run_folder, capsys):
    capsys.readouterr()
    assert main(["explain", str(run_folder), " 1 "]) == 0
    assert capsys.readouterr().out.startswith(f"job 1: 4 change(s) recorded in {run_folder}\n")


def test_a_link_in_the_output_s_place_is_written_through(run_folder, tmp_path):
    target = tmp_path / "kept.html"
    target.write_text("an earlier report")
    (tmp_path / "link.html").symlink_to(target)
    assert main(["report", str(run_folder), "-o", str(tmp_path / "link.html")]) == 0
    assert (tmp_path / "link.html").is_symlink()
    assert target.read_text().startswith("<!DOCTYPE html>")


def test_a_sweep_none_of_whose_listed_runs_is_stored_says_so_rather_than_that_none_finished(tmp_path, capsys):
    out = _sweep(tmp_path)
    summary = out / "summary.csv"
    table = pl.read_csv(summary, infer_schema_length=0)
    table.with_columns(pl.format("{}", pl.int_range(pl.len()).cast(pl.String).str.zfill(64)).alias("key")).write_csv(summary)
    err = fails(capsys, "plot", out, "-o", tmp_path / "p.png")
    assert f"{out}: 0 of the 4 runs summary.csv lists are in its results store" in err
    assert "no run of the sweep finished" not in err
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "No run of the sweep is in its results store: there is nothing to plot." in page
    assert "No run of the sweep finished" not in page


# A record whose numbers are not what a run writes: a reason's number with a fraction (they are
# whole numbers: a fraction was cut off without a word), a time that is not finite, and job ids
# that are not whole numbers (job 3, held as 3.0, was said not to be there).


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
    _damage_record(run_folder, column)
    err = fails(capsys, "explain", run_folder, 1)
    assert str(run_folder / "explain.parquet") in err
    assert said in err
    # Another job's records are whole: its timeline is still printed.
    assert main(["explain", str(run_folder), "0"]) == 0
    assert "job 0:" in capsys.readouterr().out


def test_explain_refuses_job_ids_that_are_not_whole_numbers_naming_the_column(run_folder, capsys):
    _damage_record(run_folder, pl.col("job_id").cast(pl.Float64))
    err = fails(capsys, "explain", run_folder, 3)
    assert f"{run_folder / 'explain.parquet'}: column 'job_id' holds Float64, not whole numbers" in err
    assert "no job '3'" not in err


def test_a_record_with_whole_numbers_held_as_floats_reads_as_the_run_wrote_it(run_folder, capsys):
    assert main(["explain", str(run_folder), "1"]) == 0
    written = capsys.readouterr().out
    _damage_record(run_folder, pl.col("a", "b", "c").cast(pl.Float64))
    assert main(["explain", str(run_folder), "1"]) == 0
    assert capsys.readouterr().out == written
