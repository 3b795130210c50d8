"""A sweep's tables write times in one readable unit, chosen from every time column they show:
the table `roundhouse sweep` prints and the one `roundhouse report` shows for the sweep's folder.

The sweep below has jobs that finish within a minute, while another waits an hour or two to
start and never finishes before --until: its JCT columns are of seconds, its responsiveness of
an hour. A unit taken from the JCTs alone wrote the responsiveness as 3600.00 s; the printed
table wrote raw seconds (3600)."""

from __future__ import annotations

import contextlib
import html
import io
import math
import re

import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.results import in_units_of_table

GRAPH = """round = 1h;
cluster = "1x1:V100";
arrivals :: TraceSource(path="jobs.csv");
arrivals -> AcceptAll -> pool :: JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;
"""
# Job 0 finishes after 60 s; job 1 waits for the next round (1 h or 2 h) and runs for 100 h.
TRACE = "job_id,arrival_s,gpus,duration_s\n0,0,1,60\n1,0,1,360000\n"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The sweep's folder and its printed table."""
    folder = tmp_path_factory.mktemp("sweep")
    (folder / "g.sched").write_text(GRAPH)
    (folder / "jobs.csv").write_text(TRACE)
    out = folder / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "250")  # (one line per row: a narrow table would wrap its cells)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = main(
                ["sweep", str(folder / "g.sched"), "--vary", "round=1h,2h", "--until", "10h", "--workers", "1", "--out", str(out)]
            )
    assert status == 0
    return out, printed.getvalue()


def _rows(text: str) -> dict[str, list[str]]:
    """The printed table's rows by their first cell (the round)."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if cells and cells[0] in ("1h", "2h"):
            rows[cells[0]] = cells
    return rows


def test_the_printed_table_writes_times_in_the_unit_of_its_largest(swept):
    _, printed = swept
    rows = _rows(printed)
    # round, runs, jobs_finished, avg_jct_s, avg_responsiveness_s, utilization
    assert rows["1h"][3:5] == ["1.00 min", "30.00 min"]
    assert rows["2h"][3:5] == ["1.00 min", "60.00 min"]
    assert "3600" not in printed and "1800" not in printed


def test_the_report_of_the_sweep_writes_times_in_the_same_unit(swept, tmp_path):
    out, printed = swept
    page = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(page)]) == 0
    text = html.unescape(page.read_text())
    table = text[text.index("<table") : text.index("</table>")]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>.*?</td>", table, re.S)]
    # round, seed, jobs_finished, avg_jct_s, p99_jct_s, avg_responsiveness_s, utilization, preemptions
    assert len(cells) == 16
    first, second = cells[:8], cells[8:]
    assert first[3:6] == ["1.00 min", "1.00 min", "30.00 min"]
    assert second[3:6] == ["1.00 min", "1.00 min", "60.00 min"]
    assert "3600.00 s" not in text
    # The printed table says the same (one seed: the mean is the run's value).
    assert [first[5], second[5]] == [r[4] for r in _rows(printed).values()]


def test_the_unit_comes_from_every_time_column():
    show = in_units_of_table({"avg_jct_s": [60.0, None], "avg_responsiveness_s": [3600.0], "jobs_finished": [10**9]})
    assert show(3600.0) == "60.00 min"  # not seconds (the JCTs alone), not hours (a count is no time)
    show = in_units_of_table({"avg_jct_s": [100.0], "p99_jct_s": [8000.0]})
    assert show(100.0) == "0.028 h"
    # Cells that are no finite number, and booleans, choose nothing.
    show = in_units_of_table({"a_s": [math.nan, math.inf, None, True, "9999"], "b_s": [30.0]})
    assert show(30.0) == "30.00 s"
    assert in_units_of_table({})(None) == "—"


def test_a_narrow_table_wraps_its_headers_rather_than_cut_them(tmp_path, monkeypatch):
    # In a log (80 columns) a table of several varied names was drawn with each header cut
    # short ("arriva…" twice, for arrivals.rate and arrivals.seed): which column is which could
    # not be told. Each header is wrapped whole instead.
    (tmp_path / "g.sched").write_text(GRAPH.replace('cluster = "1x1:V100";', 'cluster = "1x2:V100";'))
    (tmp_path / "jobs.csv").write_text(TRACE)
    monkeypatch.setenv("COLUMNS", "80")
    printed = io.StringIO()
    argv = ["sweep", str(tmp_path / "g.sched"), "--until", "3h", "--workers", "1"]
    argv += ["--vary", "arrivals.rate=4/h,8/h", "--vary", "arrivals.seed=1,2", "--vary", "round=1h,2h"]
    with contextlib.redirect_stdout(printed):
        assert main(argv) == 0
    header = [line for line in printed.getvalue().splitlines() if line.startswith("┃")]
    assert header and "…" not in "".join(header)
    # Each column's header, read down its lines, is the whole name.
    columns = list(zip(*[[c.strip() for c in line.split("┃")[1:-1]] for line in header]))
    names = ["".join(parts) for parts in columns]
    assert names[:4] == ["arrivals.rate", "arrivals.seed", "round", "runs"]
    assert "avg_responsiveness_s" in names and "jobs_finished" in names
