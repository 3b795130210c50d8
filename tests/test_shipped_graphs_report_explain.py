"""Every shipped graph as a user first runs it: `roundhouse render` draws it, a short
`roundhouse run --out` writes its folder, and `roundhouse report` and `roundhouse explain` read
that folder (whichever sinks the graph has: a cost, SLO, fairness or throughput report beside
the jobs'). Determinism and the run's invariants are checked in tests/test_run_invariants.py,
`roundhouse check` of every graph in tests/test_cli.py."""

from __future__ import annotations

import polars as pl
import pytest
from test_fork import SHIPPED

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.explain import FILE_NAME
from roundhouse.tools.cli import main
from tests.conftest import REPO

GRAPHS = REPO / "graphs"
# Rounds run: enough for jobs to be launched (and in most graphs to finish or be preempted), and
# in the Gavel graphs that measure a window of job ids, for some of those to finish (so that the
# report has their plots); the elastic searches' and the synthesizer's rounds cost the most.
ROUNDS = {"ones.sched": 20, "pollux.sched": 20, "blox-synthesizer.sched": 20}
ROUNDS |= {"gavel-fifo.sched": 600, "gavel-ftf.sched": 800, "gavel-las.sched": 800, "gavel-las-agnostic.sched": 800}
DEFAULT_ROUNDS = 60


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_graph_renders_runs_and_is_reported_and_explained(name, tmp_path, capsys):
    graph = GRAPHS / name
    compiled = compile_file(graph)
    dot = tmp_path / "graph.dot"
    assert main(["render", str(graph), "-o", str(dot)]) == 0
    drawn = dot.read_text()
    assert all(type(element).__name__ in drawn for element in compiled.elements.values())

    until = ROUNDS.get(name, DEFAULT_ROUNDS) * float(compiled.settings.round)
    out = tmp_path / "run"
    assert main(["run", str(graph), "--until", f"{until}s", "--out", str(out), "--quiet"]) == 0

    page = tmp_path / "report.html"
    assert main(["report", str(out), "-o", str(page)]) == 0
    text = page.read_text()
    assert f"<title>Run of {name}" in text and '<figure class="plot"><img' in text

    # The job with the most changes recorded (the lowest id among equals): the most reasons said.
    record = pl.read_parquet(out / FILE_NAME)
    assert (record["reason"] == "launched").any()
    counts = record.group_by("job_id").len().sort(["len", "job_id"], descending=[True, False])
    job, changes = counts.row(0)
    capsys.readouterr()
    assert main(["explain", str(out), str(job)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"job {job}: {changes} change(s) recorded in ")
    assert "running: launched" in said
