"""A sweep's report: each failed point's own error (a point of a run shared with another, run
again for its own error, as summary.csv keeps it), and its graph drawn with the sweep's
--trace. And warnings naming a file whose name holds a control character print it as its
escape, as errors do."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.outputs import open_folder
from tests.conftest import REPO

TRACE = REPO / "traces" / "samples" / "philly-1000.csv"
GRAPH = (
    'round = 5min;\ncluster = "2x4:V100";\narrivals :: TraceSource(path="{trace}", jobs=6);\n'
    "arrivals -> AcceptAll -> JobPool -> order :: Las(backfill=false) -> FirstFree -> Launch -> JobMetrics;\n"
)


def _text(page: Path) -> str:
    """The report's text, its images left out."""
    return html.unescape(re.sub(r'src="data:[^"]*"', "", page.read_text()))


def test_a_sweeps_report_lists_each_failed_points_own_error(tmp_path, capsys, monkeypatch):
    # Two copies of one trace are one run; it fails reading the first, and the sweep runs the
    # second point again so that its error names its own file: the report says so too.
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(TRACE.read_text())
    b.write_text(TRACE.read_text())
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(trace=TRACE))
    out, page = tmp_path / "out", tmp_path / "report.html"
    monkeypatch.chdir(tmp_path)
    vary = 'arrivals.path="a.csv","b.csv"'
    argv = ["sweep", str(graph), "--cluster", "1x1:V100", "--vary", vary, "--workers", "1", "--out", str(out)]
    assert main(argv) == 1
    capsys.readouterr()
    folder = open_folder(str(out))
    errors = dict(zip(folder.failures["point"], folder.failures["error"]))
    assert errors['arrivals.path="a.csv"'].startswith(f'--vary arrivals.path="a.csv": {a}: ')
    assert errors['arrivals.path="b.csv"'].startswith(f'--vary arrivals.path="b.csv": {b}: ')
    assert main(["report", str(out), "-o", str(page)]) == 0
    failed = _text(page).split("<h3>Failed runs</h3>")[1]
    rows = re.findall(r"<tr>(.*?)</tr>", failed)
    assert len(rows) == 3  # (the header and a row per point)
    assert f'--vary arrivals.path="a.csv": {a}: ' in rows[1] and str(b) not in rows[1]
    assert f'--vary arrivals.path="b.csv": {b}: ' in rows[2] and str(a) not in rows[2]


def test_a_sweeps_report_draws_its_graph_with_the_sweeps_trace(tmp_path, capsys):
    # The graph's own trace is not there: only with the sweep's --trace can it be drawn.
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(trace="nowhere.csv"))
    out, page = tmp_path / "out", tmp_path / "report.html"
    argv = ["sweep", str(graph), "--trace", str(TRACE), "--until", "30min", "--vary", "order.backfill=false,true"]
    assert main([*argv, "--workers", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    assert open_folder(str(out)).trace == str(TRACE.resolve())
    assert main(["report", str(out), "-o", str(page)]) == 0
    text = _text(page)
    graph_part = text.split("<h2>Graph</h2>")[1].split("<h2>")[0]
    assert "could not be drawn" not in graph_part and "<img" in graph_part
    assert "its TraceSource's path the trace given with --trace" in graph_part


@pytest.fixture
def odd_folder(tmp_path) -> Path:
    """A folder whose name holds ESC and a terminal's colour code."""
    folder = tmp_path / "d\x1b[31m"
    folder.mkdir()
    return folder


def test_a_trace_warning_names_its_file_with_control_characters_escaped(odd_folder, capsys):
    lines = TRACE.read_text().splitlines()
    header = lines[0].replace("batch_size", "batch_sise")  # (a misspelt column: warned of, kept)
    (odd_folder / "t.csv").write_text("\n".join([header, *lines[1:20]]) + "\n")
    graph = odd_folder / "g.sched"
    graph.write_text(GRAPH.format(trace="t.csv"))
    assert main(["check", str(graph)]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert re.search(r"warning: \S*d\\x1b\[31m/t\.csv: column 'batch_sise' is not a column Roundhouse reads", err)


def test_a_sweep_folders_warning_names_a_damaged_file_with_control_characters_escaped(odd_folder, tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(trace=TRACE))
    made = tmp_path / "out"
    assert main(["sweep", str(graph), "--until", "30min", "--vary", "order.backfill=false,true", "--out", str(made)]) == 0
    out = made.rename(odd_folder / "out")  # (sweep refuses such a name for --out; the folder is moved there)
    (out / "results" / "damaged.parquet").write_bytes(b"not parquet")
    capsys.readouterr()
    assert main(["report", str(out), "-o", str(tmp_path / "report.html")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert re.search(r"warning: \S*d\\x1b\[31m/out/results/damaged\.parquet: cannot be read", err)
    assert err.count("cannot be read") == 1  # (the runs' own files read, a folder named with "[" though it is)
