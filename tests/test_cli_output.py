"""What `elements`, `trace describe` and `render` show."""

import json
import re

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.conftest import REPO


def describe(capsys, path) -> dict[str, str]:
    """`trace describe` rows by label (a value wrapped over several lines joined back)."""
    assert main(["trace", "describe", str(path)]) == 0
    rows: dict[str, str] = {}
    label = None
    for line in capsys.readouterr().out.splitlines():
        cells = [c.strip() for c in line.split("│")][1:-1]
        if len(cells) != 2:
            continue
        if cells[0]:
            label = cells[0]
            rows[label] = cells[1]
        elif label:
            rows[label] += " " + cells[1]
    return rows


def test_the_ports_table_names_every_column(capsys):
    assert main(["elements", "Consolidated"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = lines[lines.index(next(ln for ln in lines if ln.startswith("ports"))) + 2]
    names = [c.strip() for c in header.strip("┃").split("┃")]
    assert names == ["direction", "#", "port", "type", "notes", "what"]


def test_describe_lists_the_files_own_columns(tmp_path, capsys):
    tiresias = REPO / "traces" / "samples" / "tiresias-60.csv"
    header = tiresias.read_text().splitlines()[0].split(",")
    assert describe(capsys, tiresias)["columns"] == ", ".join(header)
    trace = tmp_path / "t.csv"
    trace.write_text("# a comment\ngpus,arrival_s,duration_s,job_id\n1,0,10,0\n2,5,20,1\n")
    assert describe(capsys, trace)["columns"] == "gpus, arrival_s, duration_s, job_id"
    parquet = tmp_path / "t.parquet"
    pl.DataFrame({"job_id": [0], "arrival_s": [0.0], "gpus": [1], "iterations": [10.0], "model": ["LM"]}).write_parquet(parquet)
    assert describe(capsys, parquet)["columns"] == "job_id, arrival_s, gpus, iterations, model"
    gavel = REPO / "traces" / "samples" / "gavel-50.trace"
    assert describe(capsys, gavel)["columns"].startswith("job_type, command, ")
    philly = tmp_path / "cluster_job_log.json"
    record = {
        "jobid": "a",
        "user": "u",
        "vc": "v",
        "status": "Pass",
        "submitted_time": "2017-10-03 08:00:00",
        "attempts": [
            {
                "start_time": "2017-10-03 08:00:00",
                "end_time": "2017-10-03 09:00:00",
                "detail": [{"ip": "m1", "gpus": ["gpu0"]}],
            }
        ],
    }
    philly.write_text(json.dumps([record]))
    assert describe(capsys, philly)["columns"] == ", ".join(record)


@pytest.mark.parametrize(
    "rows, given, absent",
    [
        ("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,9,1,50\n", "duration", "iterations"),
        ("job_id,arrival_s,gpus,iterations,model\n0,0,1,100,LM\n1,9,1,50,LM\n", "iterations", "duration"),
    ],
)
def test_describe_says_nothing_of_what_a_trace_does_not_give(tmp_path, capsys, rows, given, absent):
    trace = tmp_path / "t.csv"
    trace.write_text(rows)
    shown = describe(capsys, trace)
    assert shown[given].startswith("p10 ") and absent not in shown
    assert "not given" not in " ".join(shown.values())


def test_render_shows_a_path_as_the_graph_writes_it(tmp_path, capsys, monkeypatch):
    out = tmp_path / "las.dot"
    monkeypatch.chdir(tmp_path)  # elsewhere than the graph's folder or the repository
    assert main(["render", str(REPO / "graphs" / "las.sched"), "-o", str(out)]) == 0
    written = re.search(r'path="([^"]*)"', (REPO / "graphs" / "las.sched").read_text()).group(1)
    assert f"path=&quot;{written}&quot;" in out.read_text()


def test_a_placers_report_leaves_the_sinks_files_their_plain_names(tmp_path):
    # DelayPlacer's timeline is a report, but the placer is no sink: jobs.csv and summary.json
    # keep their names, and its table is written under its own.
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "dally:1";\nsrc :: PoissonSource(rate=6/h, jobs=12);\n'
        "src -> AcceptAll -> JobPool -> NetworkSensitive -> place :: DelayPlacer(tuned=true, timeline=true)"
        " -> Launch -> report :: JobMetrics;\n"
    )
    out = tmp_path / "out"
    assert main(["run", str(graph), "--out", str(out), "--quiet", "--no-explain"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["jobs.csv", "place-timers.csv", "run.json", "summary.json"]
    assert pl.read_csv(out / "place-timers.csv").columns[:2] == ["time_s", "gpus"]


def test_render_ties_each_element_named_in_an_argument_to_the_one_naming_it(tmp_path):
    from roundhouse.runtime.compiler import compile_file

    path = REPO / "graphs" / "blox-synthesizer.sched"
    out = tmp_path / "synth.dot"
    assert main(["render", str(path), "-o", str(out)]) == 0
    dashed = set(re.findall(r"(n_\w+) -> (n_\w+) \[label=(\w+) [^]]*style=dashed", out.read_text()))
    graph = compile_file(path)
    assert graph.held == {"acceptall", "accept12", "accept14", "fifo", "srtf", "las"}
    for holder, held in (("admit", ("acceptall", "accept12", "accept14")), ("order", ("fifo", "srtf", "las"))):
        assert {(f"n_{holder}", f"n_{h}", "candidates") for h in held} <= dashed
    assert {("n_synth", "n_admit", "switches"), ("n_synth", "n_order", "switches")} <= dashed
    assert len(dashed) == 8
    # Drawn by Graphviz, every element is tied into the picture: no box stands apart.
    svg = tmp_path / "synth.svg"
    assert main(["render", str(path), "-o", str(svg)]) == 0
    assert svg.read_text().count('class="edge"') == len(graph.connections) + 8


def test_a_pdf_rendered_twice_is_the_same_file_and_still_reads(tmp_path):
    import shutil
    import time

    if shutil.which("dot") is None:
        pytest.fail("Graphviz's dot is required (the README's test command installs it)")
    first, second = tmp_path / "a.pdf", tmp_path / "b.pdf"
    assert main(["render", str(REPO / "graphs" / "las.sched"), "-o", str(first)]) == 0
    time.sleep(1.1)  # (Graphviz's cairo dates a PDF to the second)
    assert main(["render", str(REPO / "graphs" / "las.sched"), "-o", str(second)]) == 0
    data = first.read_bytes()
    assert data == second.read_bytes() and b"/CreationDate" not in data and b"/Producer" in data
    # Every object is where the cross-reference table says it is.
    start = int(re.search(rb"startxref\s+(\d+)\s+%%EOF\s*$", data).group(1))
    table = re.match(rb"xref\s+0 (\d+)\s+((?:\d{10} \d{5} [nf]\s{1,2})+)trailer", data[start:])
    entries = re.findall(rb"(\d{10}) \d{5} ([nf])", table.group(2))
    assert len(entries) == int(table.group(1)) > 1
    for number, (offset, kind) in enumerate(entries):
        if kind == b"n":
            assert data[int(offset) :].startswith(b"%d 0 obj" % number)


TRACED = 'round = 5min;\ncluster = "4x4";\nt :: TraceSource(path="{trace}");\nt -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n'


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_check_reads_the_header_of_each_trace_as_a_run_would(tmp_path, capsys, suffix):
    trace = tmp_path / f"t.{suffix}"
    frame = pl.DataFrame({"job_id": [1], "arrival_s": [0.0], "gpus": [1]})
    frame.write_csv(trace) if suffix == "csv" else frame.write_parquet(trace)
    graph = tmp_path / "g.sched"
    graph.write_text(TRACED.format(trace=trace.name))
    good = tmp_path / "good.sched"
    good.write_text(TRACED.format(trace="good.csv"))
    (tmp_path / "good.csv").write_text("job_id,arrival_s,gpus,duration_s\n1,0,1,60\n")
    assert main(["check", str(good), str(graph)]) == 2  # (each graph on its own: the first is ok)
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{good}: ok")
    assert captured.err.startswith(
        f"{graph}:3:23: error: argument 'path' of TraceSource: t.{suffix}: missing column 'duration_s' (or both 'model' "
        "and 'iterations'); columns found: 'job_id', 'arrival_s', 'gpus'\n 3 | t :: TraceSource("
    )
    assert main(["run", str(graph), "--quiet"]) == 2  # what a run says of the same trace
    assert "missing column 'duration_s'" in capsys.readouterr().err
