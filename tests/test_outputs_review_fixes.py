"""`explain`, `plot` and `report` on what a review of the output side found them to get wrong: a
job id spelled with a leading zero was not found (and the message said the job had not arrived),
a timeline's long times pushed their lines out of column, a sweep report's figures were captioned
"against load" whatever the sweep varied, a run of one job's CDF said "1 finished jobs", run.json
values a report shows were shown unchecked ("q rounds"), a folder in the place of a run's file was
called missing, an interrupted write left its part file behind, and an output name ending in a
slash was written as a file."""

from __future__ import annotations

import json
import os
import re
import textwrap

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.outputs import open_folder
from roundhouse.tools.outputs.whole_file import write_whole
from roundhouse.tools.plots import figure
from tests.conftest import fails, write_trace
from tests.test_outputs_cli_review import GRAPH, _job


def _run(tmp_path, jobs, name="out"):
    write_trace(tmp_path / "trace.csv", jobs)
    graph = tmp_path / "graph.sched"
    graph.write_text(textwrap.dedent(GRAPH))
    out = tmp_path / name
    assert main(["run", str(graph), "--cluster", "1x4:V100", "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture
def run_folder(tmp_path):
    """The --out folder of a small run: job 1 finishes at a time of 11 characters (1h05m13.25s)."""
    return _run(tmp_path, [_job(0, 0, 2, 1000), _job(1, 0, 1, 3913.25), _job(2, 100, 2, 300)])


# --- explain ----------------------------------------------------------------------------------


@pytest.mark.parametrize("spelled", ["01", "+1", "1.0", " 1 "])
def test_explain_finds_a_job_however_its_whole_number_is_spelled(run_folder, capsys, spelled):
    assert main(["explain", str(run_folder), spelled]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"job 1: 3 change(s) recorded in {run_folder}\n"), out


def test_explain_still_refuses_an_id_that_is_no_whole_number(run_folder, capsys):
    assert "job ids are whole numbers" in fails(capsys, "explain", run_folder, "1.5")


def test_explain_keeps_its_lines_in_column_when_a_time_is_long(run_folder, capsys):
    assert main(["explain", str(run_folder), "1"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert any("1h05m13.25s" in line for line in lines)
    starts = {re.match(r"  t=\S+\s+", line).end() for line in lines}  # type: ignore[union-attr]
    assert len(starts) == 1, lines


def test_explain_names_a_folder_in_the_place_of_the_record(run_folder, capsys):
    (run_folder / "explain.parquet").unlink()
    (run_folder / "explain.parquet").mkdir()
    err = fails(capsys, "explain", run_folder, 1)
    assert "explain.parquet: not a file" in err and "kept no record" not in err


# --- plots and reports of a run -------------------------------------------------------------


def test_the_cdf_of_one_finished_job_says_one_job(tmp_path):
    run = open_folder(str(_run(tmp_path, [_job(0, 0, 1, 600)])))
    labels = [t.get_text() for t in figure(run, "jct-cdf").axes[0].get_legend().get_texts()]
    assert "1 finished job" in labels


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("rounds", "q", "'rounds' should be a whole number"),
        ("rounds", -1, "'rounds' should be a number of 0 or more"),
        ("stop_reason", 5, "'stop_reason' should be a string"),
    ],
)
def test_run_json_values_a_report_shows_are_checked(run_folder, tmp_path, capsys, key, value, said):
    info = json.loads((run_folder / "run.json").read_text())
    info[key] = value
    (run_folder / "run.json").write_text(json.dumps(info))
    err = fails(capsys, "report", run_folder, "-o", tmp_path / "r.html")
    assert f"{run_folder / 'run.json'}: {said}" in err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("name", ["jobs.csv", "summary.json"])
def test_a_folder_in_the_place_of_a_runs_file_is_named_so(run_folder, tmp_path, capsys, name):
    (run_folder / name).unlink()
    (run_folder / name).mkdir()
    err = fails(capsys, "plot", run_folder, "-o", tmp_path / "p.png")
    assert f"{run_folder / name}: not a file" in err and "missing" not in err


# --- output files -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["plot", "report"])
@pytest.mark.parametrize(("given", "said"), [("p.png/", "names a folder"), ("", "no file name given")])
def test_an_output_that_names_no_file_is_refused(run_folder, tmp_path, capsys, monkeypatch, command, given, said):
    monkeypatch.chdir(tmp_path)
    if command == "report":
        given = given.replace(".png", ".html")
    assert said in fails(capsys, command, run_folder, "-o", given)
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "p.html").exists()


def test_an_interrupted_write_leaves_no_part_file(tmp_path, monkeypatch):
    out = tmp_path / "figure.png"
    out.write_bytes(b"the earlier figure")

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_whole(out, b"a new figure")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png"]
    assert out.read_bytes() == b"the earlier figure"


# --- reports of a sweep -----------------------------------------------------------------------

SWEEP_GRAPH = """\
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=8, seed=1);
arrivals -> AcceptAll -> JobPool -> Las(service=wall_seconds, backfill=false) -> Consolidated -> Launch -> JobMetrics;
"""


def test_a_sweep_reports_figures_are_captioned_with_what_it_varied(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(SWEEP_GRAPH)
    out = tmp_path / "sweep"
    assert main(["sweep", str(graph), "--vary", "round=5min,10min", "--workers", "1", "--out", str(out)]) == 0
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    captions = re.findall(r"<figcaption>([^<]*)</figcaption>", (tmp_path / "r.html").read_text())
    drawn = [c for c in captions if "bands are 95% intervals" in c]
    assert drawn and all(" against round;" in c for c in drawn), captions


# --- the results store ------------------------------------------------------------------------


def test_a_store_file_whose_column_fits_no_other_is_left_out_not_a_traceback(tmp_path, capsys):
    """A file of the store that reads, but whose column is of a kind the others' cannot be one
    with (a list where the runs hold a number), is left out as damaged: by the sweep that reads
    the store again, and by `plot`, instead of stopping both."""
    from roundhouse.runtime.results_store import ResultsStore

    graph = tmp_path / "g.sched"
    graph.write_text(SWEEP_GRAPH)
    out = tmp_path / "sweep"
    argv = ["sweep", str(graph), "--vary", "round=5min,10min", "--workers", "1", "--out", str(out)]
    assert main(argv) == 0
    # (Named to sort first: the store's other files still make the table.)
    damaged = out / "results" / "0damaged.parquet"
    pl.DataFrame({"key": ["0damaged"], "status": ["ok"], "point": ["round=5min"], "rounds": [[1, 2]]}).write_parquet(damaged)
    store = ResultsStore(out / "results")
    table = store.read()
    assert store.unreadable == [damaged] and table.height == 2 and table["rounds"].dtype.is_integer()
    capsys.readouterr()
    assert main(argv) == 0
    assert f"{damaged}: cannot be read" in capsys.readouterr().err
    assert main(["plot", str(out), "-o", str(tmp_path / "p.png")]) == 0
    assert f"{damaged}: cannot be read" in capsys.readouterr().err
