"""A graph file whose name holds a control character (an escape, a bell) runs, and its name is
shown with each such character written as its escape wherever it is printed: a terminal would
obey it otherwise. A trace file of such a name, which no graph's string can name, is refused
naming the option that gave it."""

from __future__ import annotations

from roundhouse.tools.cli import main
from tests.conftest import fails

NAME = "g\x1b[31mred\x07.sched"
SHOWN = "g\\x1b[31mred\\x07.sched"

# Job 3 asks for 2 GPUs.
TRACE = "job_id,arrival_s,gpus,duration_s\n1,0.0,1,100\n2,10.0,1,100\n3,20.0,2,100\n"


def _graph(tmp_path, cluster: str = "2x2:V100"):
    (tmp_path / "t.csv").write_text(TRACE)
    graph = tmp_path / NAME
    graph.write_text(
        f'round = 5min;\ncluster = "{cluster}";\narrivals :: TraceSource(path="t.csv");\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    return graph


def _raw(text: str) -> bool:
    return "\x1b" in text or "\x07" in text


def test_a_run_s_summary_shows_the_graph_s_name_escaped(tmp_path, capsys):
    assert main(["run", str(_graph(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert SHOWN in out and not _raw(out), out


def test_an_error_naming_the_graph_shows_its_name_escaped(tmp_path, capsys):
    graph = _graph(tmp_path, cluster="1x1:V100")  # (too small for job 3)
    for command in ("run", "check"):
        err = fails(capsys, command, graph)
        assert f"declared at {tmp_path}/{SHOWN}:3:1" in err and not _raw(err), err


def test_an_error_at_a_place_in_the_graph_shows_its_name_escaped(tmp_path, capsys):
    graph = _graph(tmp_path)
    graph.write_text(graph.read_text() + "arrivals -> Nope;\n")
    err = fails(capsys, "check", graph)
    assert err.startswith(f"{tmp_path}/{SHOWN}:5:") or err.startswith(f"{SHOWN}:5:"), err
    assert not _raw(err), err


def test_a_sweep_s_failed_runs_and_table_show_the_graph_s_name_escaped(tmp_path, capsys):
    graph = _graph(tmp_path, cluster="1x1:V100")
    assert main(["sweep", str(graph), "--vary", "round=5min,6min", "--workers", "1"]) == 1
    printed = capsys.readouterr()
    assert f"declared at {tmp_path}/{SHOWN}:3:1" in printed.err and not _raw(printed.err), printed.err
    assert "g\\x1b[31mred" in printed.out and not _raw(printed.out), printed.out  # (the title may wrap)


def test_a_trace_file_of_such_a_name_is_refused_naming_the_option(tmp_path, capsys):
    graph = _graph(tmp_path)
    trace = tmp_path / "t\x1bx.csv"
    trace.write_text(TRACE)
    for command in ("run", "sweep"):
        err = fails(capsys, command, graph, "--trace", trace)
        assert err.startswith(f"error: --trace {str(trace)!r}: the trace file name holds '\\x1b'"), err
        assert not _raw(err), err
