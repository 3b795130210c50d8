"""Defects found running the reproductions as a user does (`roundhouse reproduce --quick NAME`)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from roundhouse.tools.reproduce_cmd import wrote_line
from roundhouse.tools.reproductions import Report


def test_the_wrote_line_names_everything_the_run_left_in_its_folder(tmp_path):
    """The last line named only the plots and tables: the graphs, traces and profiles a run
    writes beside them (live-fidelity's trace.csv, Gavel's profile-consolidated.csv, ...) were
    in the folder, and in its reproduction.json, but not in what the command said it wrote."""
    for name in ("jct-cdf.png", "jct.csv", "trace.csv", "graph.sched"):
        (tmp_path / name).write_text("x")
    (tmp_path / "graphs").mkdir()
    report = Report(tables={"jct": pl.DataFrame({"a": [1]})}, figures=[tmp_path / "jct-cdf.png"])
    wrote = {p.name for p in tmp_path.iterdir()}
    line = wrote_line(report, wrote, tmp_path, Path("runs/reproduce/x"))
    # Plots and tables first, as before (what a reader opens), then the rest, folders marked.
    assert line.startswith("wrote jct-cdf.png, jct.csv to runs/reproduce/x/")
    assert line.endswith("; also graph.sched, graphs/, trace.csv")


def test_the_wrote_line_of_a_run_with_no_tables_names_its_files(tmp_path):
    (tmp_path / "graphs").mkdir()
    assert wrote_line(Report(), {"graphs"}, tmp_path, Path("o")) == "wrote graphs/ to o/"
    assert wrote_line(Report(), set(), tmp_path, Path("o")) == ""
