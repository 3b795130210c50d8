"""`roundhouse report` on what a new user may give it: a graph's file named with control
characters and markup, a sweep whose table is wider than the page, and a run of many jobs."""

from __future__ import annotations

import base64
import re
import warnings
import xml.etree.ElementTree as ET

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.outputs import open_folder
from roundhouse.tools.plots import figure, figure_bytes

GRAPH = """\
round = 60s;
cluster = "1x2:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> JobMetrics;
"""
# A file name a shell lets one make: markup, a terminal's colour escape and a bell.
ODD_NAME = "g<script>alert(1)</script>\x1b[31m\x07&.sched".replace("/", "\\")


def _trace(folder, jobs: int = 6) -> None:
    rows = [{"job_id": i, "arrival_s": 30.0 * i, "gpus": 1 + i % 2, "duration_s": 300.0 + 60 * i} for i in range(jobs)]
    pl.DataFrame(rows).write_csv(folder / "trace.csv")


@pytest.fixture
def odd_run(tmp_path, monkeypatch):
    _trace(tmp_path)
    (tmp_path / ODD_NAME).write_text(GRAPH)
    monkeypatch.chdir(tmp_path)
    assert main(["run", ODD_NAME, "--out", "out", "--quiet"]) == 0
    return tmp_path / "out"


def test_a_graph_named_with_control_characters_is_drawn_and_its_name_shown_escaped(odd_run, tmp_path):
    out = tmp_path / "r.html"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (matplotlib warns of each glyph its font lacks)
        assert main(["report", str(odd_run), "-o", str(out)]) == 0
    page = out.read_text()
    # No control character reaches the page (HTML shows none of them) ...
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", page)
    # ... nor markup from the name: it is text, its escapes written out.
    assert "<script" not in page and "g&lt;script&gt;alert(1)&lt;\\script&gt;\\x1b[31m\\x07&amp;.sched" in page
    # The graph's drawing is an SVG an image can show (XML holds no such character).
    drawn = re.search(r'data:image/svg\+xml;base64,([^"]+)', page)
    assert drawn is not None
    svg = ET.fromstring(base64.b64decode(drawn.group(1)))
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    texts = "".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    assert "\\x1b[31m\\x07" in texts


def _drawn_texts(page: str) -> str:
    drawn = re.search(r'data:image/svg\+xml;base64,([^"]+)', page)
    assert drawn is not None, page
    svg = ET.fromstring(base64.b64decode(drawn.group(1)))
    return "".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))


def test_a_run_given_another_trace_is_drawn_with_the_trace_it_read(tmp_path, monkeypatch):
    _trace(tmp_path)
    (tmp_path / "g.sched").write_text(GRAPH)
    pl.read_csv(tmp_path / "trace.csv").write_csv(tmp_path / "other.csv")
    monkeypatch.chdir(tmp_path)
    pages = {}
    for name, given in (("own", []), ("other", ["--trace", "other.csv"])):
        assert main(["run", "g.sched", *given, "--out", name, "--quiet"]) == 0
        assert main(["report", name, "-o", f"{name}.html"]) == 0
        pages[name] = (tmp_path / f"{name}.html").read_text()
    assert "trace.csv" in _drawn_texts(pages["own"]) and "other.csv" not in _drawn_texts(pages["own"])
    assert "other.csv" in _drawn_texts(pages["other"]) and "trace.csv" not in _drawn_texts(pages["other"])
    assert "the trace given with --trace" in pages["other"] and "the trace given with --trace" not in pages["own"]


def test_a_table_scrolls_in_its_own_box_and_images_fit_the_page(odd_run, tmp_path):
    page_file = tmp_path / "r.html"
    assert main(["report", str(odd_run), "-o", str(page_file)]) == 0
    page = page_file.read_text()
    tables = page.count("<table>")
    assert tables >= 1 and page.count('<div class="table"><table>') == tables
    assert "div.table { overflow-x: auto; }" in page
    assert re.search(r"figure img \{[^}]*box-sizing: border-box", page)


def test_the_gantt_chart_of_many_jobs_draws_each_bar_cheaply(tmp_path):
    """Many jobs: the chart is drawn from arrays of segments, not from one masked array per
    job, which took some 160 Python calls a job (seconds of a report of 100,000 jobs). The
    calls are counted, not timed: a machine's load does not change them."""
    import cProfile
    import pstats

    n = 20_000
    folder = tmp_path / "run"
    folder.mkdir()
    arrival = [10.0 * i for i in range(n)]
    start = [a + 5.0 for a in arrival]
    finish = [s + 100.0 + i % 7 for i, s in enumerate(start)]
    pl.DataFrame(
        {
            "job_id": range(n),
            "arrival_s": arrival,
            "first_start_s": start,
            "finish_s": finish,
            "jct_s": [f - a for f, a in zip(finish, arrival)],
            "run_s": [f - s for f, s in zip(finish, start)],
            "gpus": [1 << (i % 4) for i in range(n)],
            "preemptions": [int(i % 11 == 0) for i in range(n)],
        }
    ).write_csv(folder / "jobs.csv")
    (folder / "run.json").write_text(f'{{"graph": "x.sched", "end_s": {finish[-1]!r}}}')
    run = open_folder(str(folder))
    figure(run, "gantt")  # (matplotlib's first figure loads its fonts)
    profile = cProfile.Profile()
    profile.enable()
    fig = figure(run, "gantt")
    profile.disable()
    assert pstats.Stats(profile).total_calls < 80 * n
    assert figure_bytes(fig, "png").startswith(b"\x89PNG")
