"""What `plot` and `report` read of a sweep's folder: only the last sweep's runs, each labelled
by what it was given (varied or fixed), measured columns that hold numbers, whole rows; and
what `sweep` refuses in --vary and --set values."""

from __future__ import annotations

import csv
import json
import re

import polars as pl
import pytest

from roundhouse.runtime.results_store import ResultsStore
from roundhouse.runtime.sweep import point_text
from roundhouse.tools.cli import main
from roundhouse.tools.outputs import NOT_RECORDED, NOT_VARIED, open_folder
from roundhouse.tools.plots import metric_bands
from tests.test_plots_and_report import JOBS, hand_run

GRAPH = """\
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=12, seed=1);
arrivals -> AcceptAll -> JobPool -> Las(service=wall_seconds, backfill=false) -> Consolidated -> Launch -> JobMetrics;
"""


def _sweep(graph, out, *argv: str) -> None:
    assert main(["sweep", str(graph), *argv, "--workers", "1", "--out", str(out)]) == 0


def _facts(page: str) -> str:
    return page[page.index('class="facts"') :].split("</p>")[0]


# --- only the last sweep's runs are drawn and tabulated --------------------------------------


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    """Two sweeps into one folder, of a graph edited between them: the store holds both's runs."""
    folder = tmp_path_factory.mktemp("edited")
    graph = folder / "g.sched"
    graph.write_text(GRAPH)
    argv = ["--vary", "arrivals.rate=4/h,8/h", "--seeds", "2"]
    _sweep(graph, folder / "out", *argv)
    graph.write_text(GRAPH.replace("backfill=false", "backfill=true"))
    _sweep(graph, folder / "out", *argv)
    assert len(list((folder / "out" / "results").glob("*.parquet"))) == 8
    return folder / "out"


def test_an_edited_graphs_old_runs_are_not_taken_for_seeds_of_the_new_sweep(edited, tmp_path, capsys):
    sweep = open_folder(str(edited))
    assert sweep.table.height == 4 and set(sweep.table["key"]) == set(pl.read_csv(edited / "summary.csv")["key"])
    bands, _ = metric_bands(sweep, "avg_jct_s")
    points = pl.read_csv(edited / "points.csv", schema_overrides={"arrivals.rate": pl.String})
    assert bands["runs"].to_list() == [2, 2]
    assert bands["mean"].to_list() == pytest.approx(points["avg_jct_s_mean"].to_list(), rel=1e-12)
    assert sweep.notes and "4 other runs of its results store" in sweep.notes[0]
    assert main(["plot", str(edited), "-o", str(tmp_path / "p.svg")]) == 0
    assert b"mean of up to 2 seeds" in (tmp_path / "p.svg").read_bytes()
    assert "4 other runs of its results store" in capsys.readouterr().err
    assert main(["report", str(edited), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "4 runs finished" in _facts(page) and "4 other runs of its results store" in page


def test_a_store_without_summary_draws_the_later_of_two_runs_of_one_point_and_seed(edited, tmp_path, capsys):
    import shutil

    stopped = tmp_path / "stopped"
    shutil.copytree(edited, stopped)
    (stopped / "summary.csv").unlink()
    sweep = open_folder(str(stopped))
    assert "8 runs share 4 points and seeds" in capsys.readouterr().err
    assert sweep.table.height == 4 and sweep.table.select("point", "seed").is_unique().all()
    last = set(pl.read_csv(edited / "summary.csv")["key"])  # (the later sweep's)
    assert set(sweep.table["key"]) == last
    assert "the sweep did not finish (no summary.csv); 8 runs are in its results store" == sweep.incomplete


def test_a_summary_listing_two_runs_of_one_point_and_seed_is_refused(tmp_path, capsys):
    rows = [{"x": "1", "seed": 0, "key": k, "avg_jct_s": v, "point": "x=1"} for k, v in (("a", 1.0), ("b", 2.0))]
    (tmp_path / "s").mkdir()
    pl.DataFrame(rows).write_csv(tmp_path / "s" / "summary.csv")
    assert main(["plot", str(tmp_path / "s"), "-o", str(tmp_path / "p.png")]) == 2
    assert "summary.csv:3: a second run of x=1 seed=0 (the first is on line 2)" in capsys.readouterr().err


# --- a value fixed with --set labels the runs that did not vary it ---------------------------


def test_a_value_fixed_with_set_is_the_label_of_runs_that_did_not_vary_it(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH)
    out = tmp_path / "out"
    _sweep(graph, out, "--set", "round=5min", "--vary", "arrivals.rate=4/h,8/h")
    _sweep(graph, out, "--vary", "round=5min,10min", "--set", "arrivals.rate=4/h")
    summary = pl.read_csv(out / "summary.csv")
    assert [json.loads(t) for t in summary["set"]] == [{"arrivals.rate": "4/h"}] * 2
    sweep = open_folder(str(out))  # the last sweep's runs, as it describes them
    assert sweep.labels == ("round", "seed") and sweep.table["round"].to_list() == ["5min", "10min"]
    # Without summary.csv, every stored run, each labelled by what it was given.
    (out / "summary.csv").unlink()
    sweep = open_folder(str(out))
    labelled = sorted(sweep.table.select("arrivals.rate", "round").iter_rows())
    assert labelled == [("4/h", "10min"), ("4/h", "5min"), ("8/h", "5min")]
    bands, axis = metric_bands(sweep, "avg_jct_s", "round")
    assert set(axis.positions) == {"5min", "10min"}


def test_runs_that_do_not_record_what_was_fixed_are_said_to_be_so(tmp_path):
    store = ResultsStore(tmp_path / "s" / "results", labels=("round", "arrivals.rate"))
    store.folder.mkdir(parents=True)
    rows = [({"round": "5min"}, None), ({"arrivals.rate": "4/h"}, '{"round": "10min"}'), ({"arrivals.rate": "8/h"}, "{}")]
    for i, (labels, fixed) in enumerate(rows):
        row = {"key": f"k{i}", "status": "ok", "seed": 0, "avg_jct_s": 1.0 + i, "point": point_text(labels), **labels}
        store.write(row if fixed is None else {**row, "set": fixed})
    table = open_folder(str(tmp_path / "s")).table
    assert table.select("round", "arrivals.rate").rows() == [("5min", NOT_RECORDED), ("10min", "4/h"), (NOT_VARIED, "8/h")]


# --- measured columns that do not hold numbers -----------------------------------------------


def _summary(folder, rows) -> None:
    folder.mkdir(parents=True)
    for row in rows:
        row["point"] = point_text({"x": row["x"]})
    pl.DataFrame(rows).write_csv(folder / "summary.csv")


@pytest.mark.parametrize("column", ["avg_jct_s", "utilization"])
def test_a_measured_column_that_is_not_a_number_is_named(tmp_path, capsys, column):
    rows = [{"x": str(i), "seed": 0, "avg_jct_s": 10.0, "utilization": 0.5} for i in range(3)]
    _summary(tmp_path / "s", rows)
    text = (tmp_path / "s" / "summary.csv").read_text().splitlines()
    cells = text[3].split(",")
    cells[text[0].split(",").index(column)] = "abc"
    text[3] = ",".join(cells)
    (tmp_path / "s" / "summary.csv").write_text("\n".join(text) + "\n")
    for command in ("report", "plot"):
        out = tmp_path / ("r.html" if command == "report" else "p.png")
        assert main([command, str(tmp_path / "s"), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert f'summary.csv:4: {column} is "abc", not a number' in err and "Traceback" not in err


def test_a_stored_metric_that_is_not_a_number_is_named_with_its_file(tmp_path, capsys):
    store = ResultsStore(tmp_path / "s" / "results", labels=("x",))
    store.folder.mkdir(parents=True)
    for i, value in enumerate((10.0, "abc")):
        store.write({"key": f"k{i}", "status": "ok", "seed": 0, "x": str(i), "avg_jct_s": value, "point": f"x={i}"})
    for command, out in (("report", "r.html"), ("plot", "p.png")):
        assert main([command, str(tmp_path / "s"), "-o", str(tmp_path / out)]) == 2
        assert 'results/k1.parquet: avg_jct_s is "abc", not a number' in capsys.readouterr().err


# --- rows cut short, runs with no point, files that are no run's ------------------------------


def test_a_jobs_csv_row_cut_short_is_refused(tmp_path, capsys):
    last = JOBS.splitlines()[-1].split(",")
    hand_run(tmp_path / "run", jobs=JOBS + ",".join(last[:11]) + "\n")  # (cut after `launches`)
    assert main(["plot", str(tmp_path / "run"), "--kind", "utilisation", "-o", str(tmp_path / "u.png")]) == 2
    assert "jobs.csv:7: a row cut short (11 fields, the header has 16)" in capsys.readouterr().err


def test_a_summary_row_cut_short_or_without_a_point_is_refused(tmp_path, capsys):
    rows = [{"x": str(i), "seed": 0, "avg_jct_s": 10.0 + i, "utilization": 0.5} for i in range(3)]
    _summary(tmp_path / "s", rows)
    whole = (tmp_path / "s" / "summary.csv").read_text()
    (tmp_path / "s" / "summary.csv").write_text(whole[: whole.index("\n", whole.index("\n") + 1) + 8])
    for command, out in (("report", "r.html"), ("plot", "p.png")):
        assert main([command, str(tmp_path / "s"), "-o", str(tmp_path / out)]) == 2
        assert re.search(r"summary\.csv:3: a row cut short \(\d fields, the header has 5\)", capsys.readouterr().err)
    lines = whole.splitlines()
    lines[2] = lines[2].rsplit(",", 1)[0] + ","  # (no point)
    (tmp_path / "s" / "summary.csv").write_text("\n".join(lines) + "\n")
    assert main(["report", str(tmp_path / "s"), "-o", str(tmp_path / "r.html")]) == 2
    assert "summary.csv:3: a run with no point" in capsys.readouterr().err


def test_a_store_file_that_holds_no_run_is_named_and_left_out(tmp_path, capsys):
    store = ResultsStore(tmp_path / "s" / "results", labels=("x",))
    store.folder.mkdir(parents=True)
    for i in range(2):
        store.write({"key": f"k{i}", "status": "ok", "seed": 0, "x": str(i), "avg_jct_s": 1.0 + i, "point": f"x={i}"})
    pl.DataFrame({"a": [1, 2]}).write_parquet(store.folder / "foreign.parquet")
    pl.DataFrame({"key": ["k9"], "avg_jct_s": [3.0]}).write_parquet(store.folder / "k9.parquet")  # (no point)
    assert main(["report", str(tmp_path / "s"), "-o", str(tmp_path / "r.html")]) == 0
    err = capsys.readouterr().err
    assert "foreign.parquet: holds no run's row" in err and "k9.parquet: holds no run's row" in err
    assert "2 runs finished" in _facts((tmp_path / "r.html").read_text())
    assert open_folder(str(tmp_path / "s")).table["key"].to_list() == ["k0", "k1"]


# --- --vary and --set values ---------------------------------------------------------------------


@pytest.mark.parametrize("values, empty", [("4/h,,8/h", 2), ("4/h,", 2), (",4/h", 1)])
def test_an_empty_value_of_vary_is_refused(tmp_path, capsys, values, empty):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH)
    assert main(["sweep", str(graph), "--vary", f"arrivals.rate={values}"]) == 2
    assert f"--vary arrivals.rate: value {empty} is empty" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--vary", "--set"])
def test_a_list_without_its_closing_bracket_is_said_to_end_too_soon(tmp_path, capsys, option):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH)
    assert main(["sweep", str(graph), option, "arrivals.rate=[4/h,8/h"]) == 2
    err = capsys.readouterr().err
    assert "the value ends before its closing ']'" in err and "';'" not in err and "quotes" not in err


def test_summary_csv_reads_as_csv_with_its_set_column(edited):
    with open(edited / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert all(json.loads(row["set"]) == {} for row in rows)
