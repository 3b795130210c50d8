"""An element of one's own whose `tick` does not take its input ports by name (the engine
calls `tick(ctx, **inputs)`) is refused where its file is required, naming the class, the
parameters it has and the ones it needs, rather than failing at its first tick with Python's
"unexpected keyword argument"."""

from pathlib import Path

import pytest

from roundhouse.tools.cli import main
from tests.own_elements import policy_file

# (Whatever the tick's parameters, the admitted jobs are found among them.)
BY_ANY_PARAMETERS = """
given = dict(locals())
jobs = given["inputs"]["active"] if "inputs" in given else given["active"]
return Ranking(jobs.rows, jobs.gpus)
"""
IN_POOL_ORDER = "return Ranking(active.rows, active.gpus)"


def _require_and_run(tmp_path, name: str, cluster: str, source: str, settings: str = "") -> Path:
    """A graph beside mine.py that requires it and runs `name` between a pool and FirstFree,
    its jobs from `source` on `cluster`."""
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'require "mine.py";\nround = 5min;\ncluster = "{cluster}";\n{settings}'
        f"{source} -> AcceptAll -> JobPool -> {name} -> FirstFree -> Launch -> JobMetrics;\n"
    )
    return graph


GRAPH = """require "mine.py";
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=5, seed=1);
arrivals -> AcceptAll -> JobPool -> {name} -> FirstFree -> Launch -> JobMetrics;
"""


def _graph(tmp_path, name, params):
    (tmp_path / "mine.py").write_text(policy_file(name, "Rank jobs in pool order.", BY_ANY_PARAMETERS, params))
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name=name))
    return graph


@pytest.mark.parametrize(
    ("name", "params", "shown"),
    [
        ("TickMisnamed", "self, ctx, jobs", "tick(self, ctx, jobs)"),
        ("TickWithoutCtx", "self, active", "tick(self, active)"),
        ("TickExtraRequired", "self, ctx, active, limit", "tick(self, ctx, active, limit)"),
        ("TickPositionalOnly", "self, ctx, active, /", "tick(self, ctx, active, /)"),
    ],
)
def test_a_tick_that_does_not_take_its_ports_by_name_is_refused_at_the_require(tmp_path, capsys, name, params, shown):
    graph = _graph(tmp_path, name, params)
    assert main(["check", str(graph)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"{graph}:1:9: error: cannot require 'mine.py'" in err
    assert f"{name}.{shown}" in err
    assert "def tick(self, ctx, active)" in err


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("TickByPortName", "self, ctx, active"),
        ("TickKeywordOnly", "self, ctx, *, active"),
        ("TickAnyInputs", "self, ctx, **inputs"),
        ("TickAnyArguments", "self, *args, **inputs"),
        ("TickOptionalExtra", "self, ctx, active, limit=3"),
    ],
)
def test_a_tick_taking_its_ports_by_name_runs(tmp_path, capsys, name, params):
    graph = _graph(tmp_path, name, params)
    assert main(["run", str(graph)]) == 0
    assert "every job finished" in " ".join(capsys.readouterr().out.split())


def test_a_class_without_its_element_decorator_is_named_as_such(tmp_path, capsys):
    """A class of the required file that is an Element but was never declared with @element is
    unknown to the graph; the error says what is missing rather than only that the name is unknown."""
    text = policy_file("NotDecorated", "Rank jobs in pool order.", IN_POOL_ORDER).replace("@element\n", "")
    (tmp_path / "mine.py").write_text(text)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name="NotDecorated"))
    assert main(["check", str(graph)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"{graph}:5:37: error: unknown element or class 'NotDecorated'" in err
    assert "class NotDecorated in mine.py is an Element not declared as one: put @element on the line above its class" in err


def test_an_empty_system_jumps_to_the_next_arrivals_boundary_uncounted(tmp_path, capsys):
    """docs/semantics.md, "Rounds": a job is visible at the boundary at or after its arrival;
    with no job in the system the clock jumps to the boundary that sees the next one, even
    with `skip_rounds = false;`, and the rounds jumped over are not counted."""
    import json

    tick = """
    SEEN.append((ctx.now, sorted(int(i) for i in ctx.jobs.column("job_id")[active.rows])))
    return Ranking(active.rows, active.gpus)
    """
    finish = """
    def finish(self, ctx):
        return {"ticks": {"at": [t for t, _ in SEEN], "seen": [ids for _, ids in SEEN]}}
    """
    noting = "Rank jobs in pool order, noting the time of each tick."
    (tmp_path / "mine.py").write_text(policy_file("TickTimes", noting, tick, before="SEEN = []", after=finish))
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,600\n1,300,1,450\n2,301,1,100\n3,5000,1,100\n")
    graph = _require_and_run(tmp_path, "TickTimes", "1x1:V100", 'TraceSource(path="t.csv")', "skip_rounds = false;\n")
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    ticks = json.loads(next((tmp_path / "out").glob("*-ticks.json")).read_text())
    assert ticks["at"] == [0, 300, 600, 900, 1200, 1500, 5100, 5400]
    # (job 1 arrives on the 300 s boundary, job 2 a second later: seen at 600 s)
    assert ticks["seen"][:3] == [[0], [0, 1], [1, 2]]
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["rounds"] == 8 and run["end_s"] == 5400


def _explaining(name: str, call: str) -> str:
    """A policy that explains, by `ctx.explain(call)`, why all but its first job wait."""
    tick = f"""
    if ctx.explaining and len(active.rows) > 1:
        rows = active.rows[1:]
        ctx.explain({call})
    return Ranking(active.rows, active.gpus)
    """
    return policy_file(
        name,
        "Rank jobs in pool order, saying why the others wait.",
        tick,
        before="import numpy as np\nfrom roundhouse.runtime.explain import Reason",
    )


@pytest.mark.parametrize(
    ("name", "call", "said"),
    [
        ("ExplainsNoCode", "999, rows", "ctx.explain: reason 999 is not a reason code (runtime.explain.Reason)"),
        ("ExplainsWord", '"behind", rows', "ctx.explain: reason 'behind' is not a reason code (runtime.explain.Reason)"),
        ("ExplainsCodes", "np.full(len(rows), 999), rows", "ctx.explain: reason 999 is not a reason code"),
        ("ExplainsFarRows", "Reason.RANKED_BEHIND, rows + 100000", "ctx.explain: row 100001 is not a row of the job table"),
        (
            "ExplainsFloatRows",
            "Reason.RANKED_BEHIND, rows * 1.5",
            "ctx.explain: rows must be whole numbers (rows of the job table), got float64",
        ),
        ("ExplainsFloatCodes", "np.full(len(rows), 3.0), rows", "ctx.explain: reason codes must be whole numbers"),
        ("ExplainsFewCodes", "np.full(len(rows) + 1, Reason.RANKED_BEHIND), rows", "ctx.explain: 3 reason codes for 2 row(s)"),
    ],
)
def test_a_bad_explanation_is_said_as_such(tmp_path, capsys, name, call, said):
    text = _explaining(name, call)
    (tmp_path / "mine.py").write_text(text)
    graph = _require_and_run(tmp_path, name, "1x4:V100", "PoissonSource(rate=8/h, jobs=20, seed=1)")
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"element '{name}@4' ({name}; declared at {graph}:4:" in err
    assert said in err
    line = next(i for i, text in enumerate(text.splitlines(), 1) if "ctx.explain(" in text)
    assert f"mine.py:{line} (in tick)" in err


def test_a_good_explanation_is_recorded(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(_explaining("ExplainsWell", "Reason.RANKED_BEHIND, rows, 1"))
    graph = _require_and_run(tmp_path, "ExplainsWell", "1x4:V100", "PoissonSource(rate=8/h, jobs=20, seed=1)")
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    import polars as pl

    record = pl.read_parquet(tmp_path / "out" / "explain.parquet")
    assert len(record) > 0


@pytest.mark.parametrize(
    ("name", "answer", "said"),
    [
        ("QuietNan", 'float("nan")', "its quiet_until returned nan, not a time"),
        ("QuietWord", '"soon"', "its quiet_until returned 'soon' (a str), not a time"),
        ("QuietList", "[1]", "its quiet_until returned [1] (a list), not a time"),
    ],
)
def test_quiet_until_answering_no_time_is_said_as_such(tmp_path, capsys, name, answer, said):
    """A NaN would compare as no time at all and pass every round up to the next event
    unticked, as `inf` does; a value that is not a number is named, not Python's '<'."""
    quiet = f"def quiet_until(self, ctx):\n    return {answer}"
    (tmp_path / "mine.py").write_text(
        policy_file(name, "Rank jobs in pool order, declaring when it is quiet.", IN_POOL_ORDER, after=quiet)
    )
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,30000\n1,100,1,3000\n")
    graph = _require_and_run(tmp_path, name, "1x1:V100", 'TraceSource(path="t.csv")')
    assert main(["run", str(graph)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"element '{name}@4' ({name}; declared at {graph}:4:" in err
    assert said in err
    assert "(seconds, inf, or None for not declared)" in err


def test_a_long_value_in_an_emission_error_is_seen_to_be_cut_short():
    from roundhouse.runtime.output_checks import describe_value

    assert describe_value(list(range(100))).endswith("…)")
    assert len(describe_value(list(range(100)))) < 80
    assert describe_value([1, 2]) == "a list ([1, 2])"
