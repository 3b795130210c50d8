"""`roundhouse report` of a run that had no jobs: real runs with `run --out` (a trace with no
rows, jobs that arrive only after --until, a sink tracking ids none of the jobs has) give a page
with the graph drawn, the summary and a sentence in place of the plots; a damaged folder of
such a run is still refused, naming the file."""

from __future__ import annotations

import json
import re

import pytest

from roundhouse.tools.cli import main
from tests.conftest import fails

GRAPH = """\
round = 5min;
cluster = "2x4:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> metrics :: JobMetrics;
"""
HEADER = "job_id,arrival_s,gpus,duration_s\n"
NO_JOBS = "The run had no jobs: its jobs.csv has no rows, so there is no JCT, utilisation or timeline to plot."


def run_into(folder, trace: str, *options: str):
    """`roundhouse run` of GRAPH on `trace` from `folder`, written to folder/out."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.csv").write_text(trace)
    (folder / "g.sched").write_text(GRAPH)
    out = folder / "out"
    assert main(["run", str(folder / "g.sched"), "--quiet", "--out", str(out), *options]) == 0
    return out


def report_of(run, tmp_path, capsys) -> str:
    page = tmp_path / "r.html"
    status = main(["report", str(run), "-o", str(page)])
    assert status == 0, capsys.readouterr().err
    return page.read_text()


def notes(page: str) -> list[str]:
    return re.findall(r'<p class="note">(.*?)</p>', page)


def summary_rows(page: str) -> dict[str, str]:
    summary = page[page.index("<h2>Summary</h2>") : page.index("<h2>Plots</h2>")]
    return dict(re.findall(r'<td class="">(.*?)</td><td class="n">(.*?)</td>', summary))


@pytest.mark.parametrize(
    "trace, options, stop",
    [
        (HEADER, (), "every job finished"),  # a trace with no job
        (HEADER + "0,7200.0,1,600.0\n", ("--until", "1h"), "reached the time limit (1h)"),  # none before --until
    ],
)
def test_the_report_of_a_run_with_no_jobs_draws_the_graph_and_shows_the_summary(tmp_path, capsys, trace, options, stop):
    run = run_into(tmp_path / "a", trace, *options)
    assert json.loads((run / "summary.json").read_text())["jobs_tracked"] == 0
    page = report_of(run, tmp_path, capsys)
    assert page.count('src="data:image/svg+xml;base64,') == 1  # the graph, drawn by Graphviz
    assert "data:image/png" not in page  # no plot: they need jobs
    facts = re.search(r'<p class="facts">(.*?)</p>', page).group(1)
    assert f"stopped: {stop}" in facts and facts.endswith("no jobs")
    rows = summary_rows(page)
    assert rows["jobs finished / tracked"] == "0 / 0" and rows["average JCT"] == "—" and rows["preemptions"] == "0"
    assert notes(page) == [NO_JOBS]


def test_the_report_says_when_the_sink_tracked_none_of_the_jobs(tmp_path, capsys):
    """Jobs ran, but none of those the sink measures: the sentence says so, naming its range."""
    trace = HEADER + "0,0.0,1,600.0\n1,60.0,2,300.0\n"
    run = run_into(tmp_path / "a", trace, "--set", "metrics.track=5..9")
    page = report_of(run, tmp_path, capsys)
    assert notes(page) == [
        "The run had no job of those metrics tracks (track=5..9): its jobs.csv has no rows, "
        "so there is no JCT, utilisation or timeline to plot."
    ]
    assert summary_rows(page)["jobs finished / tracked"] == "0 / 0" and "data:image/png" not in page


def test_a_run_with_jobs_still_gets_its_plots(tmp_path, capsys):
    run = run_into(tmp_path / "a", HEADER + "0,0.0,1,600.0\n1,60.0,2,300.0\n")
    page = report_of(run, tmp_path, capsys)
    assert page.count('src="data:image/png;base64,') == 3 and notes(page) == []
    assert "no jobs" not in page


@pytest.mark.parametrize(
    "damage, words",
    [
        # Emptied of the jobs its summary counts: not a run with no jobs.
        (
            lambda run: (run / "jobs.csv").write_text((run / "jobs.csv").read_text().splitlines()[0] + "\n"),
            "jobs.csv: no rows, but summary.json counts 2 jobs (the file was cut short?)",
        ),
        (lambda run: (run / "jobs.csv").unlink(), "jobs.csv: missing, though run.json lists it"),
        (lambda run: (run / "jobs.csv").write_text(""), "jobs.csv: cannot be read as CSV"),
        (lambda run: (run / "run.json").write_text("{"), "run.json:1: not valid JSON"),
    ],
)
def test_a_damaged_run_folder_is_refused_naming_the_file(tmp_path, capsys, damage, words):
    run = run_into(tmp_path / "a", HEADER + "0,0.0,1,600.0\n1,60.0,2,300.0\n")
    damage(run)
    err = fails(capsys, "report", run, "-o", tmp_path / "r.html")
    assert err.startswith("error: ") and words in err and not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    "damage, words",
    [
        # A table with no rows and another's header: not the table the run wrote.
        (lambda run: (run / "jobs.csv").write_text("a,b\n"), "jobs.csv: no column 'job_id'"),
        (lambda run: (run / "jobs.csv").write_text(""), "jobs.csv: cannot be read as CSV"),
        (lambda run: (run / "summary.json").write_text('{"jobs_tracked": "none"}'), "'jobs_tracked' should be a number"),
        (lambda run: (run / "jobs.csv").unlink(), "jobs.csv: missing, though run.json lists it"),
    ],
)
def test_a_damaged_folder_of_a_run_with_no_jobs_is_refused(tmp_path, capsys, damage, words):
    run = run_into(tmp_path / "a", HEADER)
    damage(run)
    err = fails(capsys, "report", run, "-o", tmp_path / "r.html")
    assert err.startswith("error: ") and words in err and not (tmp_path / "r.html").exists()


def test_a_run_with_no_jobs_and_no_summary_says_so(tmp_path, capsys):
    """As for a run with jobs: the page says the summary is not there, and still draws the graph."""
    run = run_into(tmp_path / "a", HEADER)
    (run / "summary.json").unlink()
    page = report_of(run, tmp_path, capsys)
    assert page.count('src="data:image/svg+xml;base64,') == 1
    assert notes(page) == [f"{run / 'summary.json'}: not there; the run&#x27;s summary cannot be shown.", NO_JOBS]


def test_a_run_json_of_other_shapes_gives_the_plain_sentence(tmp_path, capsys):
    """run.json's list of reports and its arguments, read to find the sink's range, may be of
    another shape (written by hand, or by an older Roundhouse): no traceback, the plain sentence."""
    run = run_into(tmp_path / "a", HEADER, "--set", "metrics.track=5..9")
    info = json.loads((run / "run.json").read_text())
    for reports, arguments in (([], {}), ({"metrics": "jobs.csv"}, "x"), (info["reports"], {"metrics": [1]})):
        (run / "run.json").write_text(json.dumps({**info, "reports": reports, "arguments": arguments}))
        assert notes(report_of(run, tmp_path, capsys)) == [NO_JOBS]
