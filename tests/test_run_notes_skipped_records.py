"""A run says how many of its trace's records the reader skipped (Philly's jobs that never ran,
Helios' and PAI's that asked for no GPU or never ran), as `trace describe` and `convert` do:
TraceSource's `skipped` counter, and a note under the run's summary."""

from __future__ import annotations

import json

from roundhouse.tools.cli import main
from tests.conftest import REPO

LOG = REPO / "traces" / "samples" / "philly-cluster-job-log-50.json"
GRAPH = f"""round = 5min;
cluster = "4x4:V100";
src :: TraceSource(path="{LOG}");
src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;
"""


def test_a_run_notes_the_records_its_trace_reader_skipped(tmp_path, capsys):
    from roundhouse.traces.formats import load_trace

    skipped = load_trace(LOG).skipped
    assert skipped > 0  # (the sample holds jobs that never ran)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH)
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out.replace("\n", " ")
    assert f"note: src: {skipped} record(s) of its trace skipped in reading" in out, out
    counters = json.loads((tmp_path / "out" / "run.json").read_text())["counters"]["src"]
    assert counters["skipped"] == skipped and counters["arrived"] == load_trace(LOG).frame.height


def test_a_trace_with_nothing_skipped_draws_no_note(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.replace(str(LOG), str(REPO / "traces" / "samples" / "philly-single-200.csv")))
    assert main(["run", str(graph), "--until", "5h"]) == 0
    assert "skipped in reading" not in capsys.readouterr().out
