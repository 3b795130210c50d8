"""A graph whose sources bring no job at all (a trace of a header and no rows) is warned of
before the run, at the source's line, by `check` and `run`: it would end after one round with
nothing measured and "every job finished", which reads as a run that went well."""

from __future__ import annotations

from roundhouse.tools.cli import main

GRAPH = """round = 5min;
cluster = "4x4:V100";
src :: TraceSource(path="{trace}");
src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;
"""
HEADER = "job_id,arrival_s,gpus,duration_s\n"


def _graph(tmp_path, rows: str):
    (tmp_path / "t.csv").write_text(HEADER + rows)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(trace=tmp_path / "t.csv"))
    return str(graph)


def test_a_trace_of_no_job_is_warned_of_at_the_sources_line(tmp_path, capsys):
    graph = _graph(tmp_path, "")
    for command in (["check", graph], ["run", graph]):
        assert main(command) == 0
        err = capsys.readouterr().err
        assert f"{graph}:3:1: warning: the graph's source 'src' (TraceSource) brings no job" in err, command


def test_a_trace_of_one_job_is_not(tmp_path, capsys):
    graph = _graph(tmp_path, "0,0,1,600\n")
    assert main(["check", graph]) == 0
    assert "brings no job" not in capsys.readouterr().err


def test_a_jobs_argument_beyond_the_traces_jobs_is_warned_of(tmp_path, capsys):
    # jobs=5 on a trace of 2 runs the 2: a sweep of jobs=2,5 would give two runs alike with
    # nothing said. check, run and sweep say so at the source's line; jobs within the trace, or
    # equal to it, are not warned of.
    graph = _graph(tmp_path, "0,0,1,600\n1,60,1,600\n")
    trace = tmp_path / "t.csv"
    said = f"{graph}:3:1: warning: element 'src' (TraceSource) is given jobs=5, but its trace {trace} holds 2 jobs"
    for command in (["check", graph], ["run", graph]):
        assert main([*command, "--set", "src.jobs=5"]) == 0
        assert said in capsys.readouterr().err, command
    assert main(["sweep", graph, "--vary", "src.jobs=2,5"]) == 0
    err = capsys.readouterr().err
    assert f"{graph}:3:1: warning: with src.jobs=5: element 'src' (TraceSource) is given jobs=5" in err
    assert "jobs=2," not in err
    for jobs in ("1", "2"):
        assert main(["check", graph, "--set", f"src.jobs={jobs}"]) == 0
        assert "warning" not in capsys.readouterr().err
