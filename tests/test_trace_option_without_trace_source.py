"""`run --trace` on a graph whose jobs come from a generator (Gavel's graphs, PoissonSource) is
refused; the refusal names that source and says how to run the graph on a trace, and doing what
it says runs."""

from __future__ import annotations

import re
from pathlib import Path

from roundhouse.tools.cli import main

REPO = Path(__file__).resolve().parents[1]


def _trace(tmp_path) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,arrival_s,gpus,model,batch_size,iterations\n0,0,1,ResNet-18,32,2000\n1,60,1,ResNet-50,64,2000\n")
    return path


def test_the_refusal_names_the_source_and_how_to_use_a_trace_and_that_runs(tmp_path, capsys):
    graph = REPO / "graphs" / "gavel-las.sched"
    trace = _trace(tmp_path)
    assert main(["run", str(graph), "--trace", str(trace), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "has no TraceSource element whose trace it could replace" in err, err
    assert "its jobs come from arrivals (PoissonSource)" in err, err
    told = re.search(r"`(arrivals :: TraceSource\(path=\"FILE\"\);)`", err)
    assert told, err
    # The advice, followed: the declaration replaced in a copy of the graph (its cluster given).
    text = graph.read_text()
    copied = re.sub(r"(?m)^arrivals\s+::.*$", told.group(1), text)
    copied = re.sub(r"(?m)^cluster = .*$", "", copied)
    (tmp_path / "g.sched").write_text(copied)
    assert main(["run", str(tmp_path / "g.sched"), "--trace", str(trace), "--cluster", "2:2:2", "--quiet"]) == 0
