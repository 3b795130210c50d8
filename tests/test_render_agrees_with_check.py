"""`roundhouse render` refuses what `roundhouse check` refuses, with the same messages, and
draws nothing then; what check accepts, render draws."""

import pytest

from roundhouse.tools.cli import main
from tests.conftest import fails

TRACE = "job_id,arrival_s,gpus,duration_s\n0,0,1,600\n1,60,2,1200\n"

GRAPH = """round = 5min;
cluster = "2x4:V100";
a :: TraceSource(path="a.csv");
a -> pool :: JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;
"""

# Two sources whose traces give the same job ids: refused when the sources start.
TWO_SOURCES = GRAPH + 'b :: TraceSource(path="b.csv");\nb -> pool;\n'


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "a.csv").write_text(TRACE)
    (tmp_path / "b.csv").write_text(TRACE)
    return tmp_path


def _refused_alike(capsys, graph, out) -> str:
    """Check and render both refuse `graph` with the same message; render writes nothing."""
    checked = fails(capsys, "check", graph)
    rendered = fails(capsys, "render", graph, "-o", out)
    assert rendered == checked
    assert not out.exists()
    return rendered


@pytest.mark.parametrize("fmt", ["dot", "svg"])
def test_render_refuses_a_bad_cluster_setting_as_check_does(folder, capsys, fmt):
    graph = folder / "g.sched"
    graph.write_text(GRAPH.replace("2x4:V100", "4x4:Q100"))
    err = _refused_alike(capsys, graph, folder / f"g.{fmt}")
    assert f"{graph}:2:11" in err and "setting 'cluster'" in err and "unknown GPU type 'Q100'" in err


def test_render_refuses_two_sources_giving_the_same_job_ids_as_check_does(folder, capsys):
    graph = folder / "g.sched"
    graph.write_text(TWO_SOURCES)
    err = _refused_alike(capsys, graph, folder / "g.dot")
    assert "job id 0 is also one of element 'a's jobs" in err and f"{graph}:5:1" in err


def test_render_refuses_a_trace_lacking_a_column_as_check_does(folder, capsys):
    (folder / "a.csv").write_text("job_id,arrival_s,duration_s\n0,0,600\n")
    graph = folder / "g.sched"
    graph.write_text(GRAPH)
    err = _refused_alike(capsys, graph, folder / "g.dot")
    assert "argument 'path' of TraceSource" in err


def test_render_refuses_a_graph_that_does_not_compile_as_check_does(folder, capsys):
    graph = folder / "g.sched"
    graph.write_text(GRAPH.replace("Fifo", "Fiffo"))
    err = _refused_alike(capsys, graph, folder / "g.dot")
    assert "Fiffo" in err


def test_a_cluster_option_replaces_a_bad_setting_for_check_only(folder, capsys):
    """check's --cluster replaces the setting; render has no such option, so it refuses the
    graph as `check` without the option does."""
    graph = folder / "g.sched"
    graph.write_text(GRAPH.replace("2x4:V100", "4x4:Q100"))
    assert main(["check", str(graph), "--cluster", "2x4:V100"]) == 0
    capsys.readouterr()
    fails(capsys, "render", graph, "-o", folder / "g.dot")


@pytest.mark.parametrize("text", [GRAPH, TWO_SOURCES.replace('cluster = "2x4:V100";\n', "")])
def test_render_draws_what_check_accepts(folder, capsys, text):
    """A graph check accepts is drawn, its elements named in the drawing; a graph that names no
    cluster is not started (by check or render), so two sources' ids are not compared."""
    graph = folder / "g.sched"
    graph.write_text(text)
    assert main(["check", str(graph)]) == 0
    out = folder / "g.dot"
    assert main(["render", str(graph), "-o", str(out)]) == 0
    assert capsys.readouterr().err == ""
    drawing = out.read_text()
    assert "Consolidated" in drawing and "pool" in drawing
