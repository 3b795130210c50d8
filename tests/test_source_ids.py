"""Two sources that would emit one job id are refused before the first round, by `check` and by
`run` alike, naming the later source and the id; sources whose ids lie apart run."""

from __future__ import annotations

from roundhouse.tools.cli import main
from tests.conftest import fails

GRAPH = """round = 5min;
cluster = "4x8:V100";
a :: {a};
b :: {b};
pool :: JobPool;
a -> AcceptAll -> pool; b -> AcceptAll -> pool;
pool -> Las -> Consolidated -> Launch -> m :: JobMetrics;
"""


def _graph(tmp_path, a: str, b: str):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(a=a, b=b))
    return path


def test_two_traces_with_one_id_are_refused_by_check_and_run(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    assert main(["trace", "generate", "-o", str(trace), "--jobs", "20", "--rate", "10/h", "--seed", "1"]) == 0
    graph = _graph(tmp_path, f'TraceSource(path="{trace}")', f'TraceSource(path="{trace}")')
    for command in ("check", "run"):
        err = fails(capsys, command, graph)
        assert "g.sched:4:1: error: element 'b' (TraceSource): job id 0 is also one of element 'a's jobs" in err
    assert not (tmp_path / "out").exists()


def test_generated_sources_whose_ids_meet_are_refused(tmp_path, capsys):
    graph = _graph(
        tmp_path, "PoissonSource(jobs=30, rate=10/h)", "BurstSource(jobs=5, every=1h, length=10min, bursts=2, start_id=29)"
    )
    err = fails(capsys, "check", graph)
    assert "element 'b' (BurstSource): job id 29 is also one of element 'a's jobs" in err


def test_sources_whose_ids_lie_apart_run(tmp_path, capsys):
    graph = _graph(
        tmp_path, "PoissonSource(jobs=30, rate=10/h)", "BurstSource(jobs=5, every=1h, length=10min, bursts=2, start_id=30)"
    )
    assert main(["check", str(graph)]) == 0
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "jobs.csv").read_text().count("\n") == 1 + 30 + 10
