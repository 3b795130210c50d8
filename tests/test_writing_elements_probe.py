"""An element of one's own whose `tick` does not take its input ports by name (the engine
calls `tick(ctx, **inputs)`) is refused where its file is required, naming the class, the
parameters it has and the ones it needs, rather than failing at its first tick with Python's
"unexpected keyword argument"."""

import pytest

from roundhouse.tools.cli import main

ELEMENT = '''
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking


@element
class {name}(Element):
    """Rank jobs in pool order.

    Ports:
        active: admitted jobs.
        ranking: the jobs in pool order.
    Arguments:
        none
    Counters:
        none
    See also: Fifo
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)
    state = ()

    def tick({params}):
        given = dict(locals())
        jobs = given["inputs"]["active"] if "inputs" in given else given["active"]
        return Ranking(jobs.rows, jobs.gpus)
'''

GRAPH = """require "mine.py";
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=5, seed=1);
arrivals -> AcceptAll -> JobPool -> {name} -> FirstFree -> Launch -> JobMetrics;
"""


def _graph(tmp_path, name, params):
    (tmp_path / "mine.py").write_text(ELEMENT.format(name=name, params=params))
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
    text = ELEMENT.format(name="NotDecorated", params="self, ctx, active").replace("@element\n", "")
    (tmp_path / "mine.py").write_text(text)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name="NotDecorated"))
    assert main(["check", str(graph)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"{graph}:5:37: error: unknown element or class 'NotDecorated'" in err
    assert "class NotDecorated in mine.py is an Element not declared as one: put @element on the line above its class" in err


TICKS = '''
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking

SEEN = []


@element
class TickTimes(Element):
    """Rank jobs in pool order, noting the time of each tick.

    Ports:
        active: admitted jobs.
        ranking: the jobs in pool order.
    Arguments:
        none
    Counters:
        none
    See also: Fifo
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)
    state = ()

    def tick(self, ctx, active):
        SEEN.append((ctx.now, sorted(int(i) for i in ctx.jobs.column("job_id")[active.rows])))
        return Ranking(active.rows, active.gpus)

    def finish(self, ctx):
        return {"ticks": {"at": [t for t, _ in SEEN], "seen": [ids for _, ids in SEEN]}}
'''


def test_an_empty_system_jumps_to_the_next_arrivals_boundary_uncounted(tmp_path, capsys):
    """docs/semantics.md, "Rounds": a job is visible at the boundary at or after its arrival;
    with no job in the system the clock jumps to the boundary that sees the next one, even
    with `skip_rounds = false;`, and the rounds jumped over are not counted."""
    import json

    (tmp_path / "ticks.py").write_text(TICKS)
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,600\n1,300,1,450\n2,301,1,100\n3,5000,1,100\n")
    graph = tmp_path / "g.sched"
    graph.write_text(
        'require "ticks.py";\nround = 5min;\ncluster = "1x1:V100";\nskip_rounds = false;\n'
        'TraceSource(path="t.csv") -> AcceptAll -> JobPool -> TickTimes -> FirstFree -> Launch -> JobMetrics;\n'
    )
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    ticks = json.loads(next((tmp_path / "out").glob("*-ticks.json")).read_text())
    assert ticks["at"] == [0, 300, 600, 900, 1200, 1500, 5100, 5400]
    # (job 1 arrives on the 300 s boundary, job 2 a second later: seen at 600 s)
    assert ticks["seen"][:3] == [[0], [0, 1], [1, 2]]
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["rounds"] == 8 and run["end_s"] == 5400


EXPLAINS = '''
import attrs
import numpy as np
from typing import Literal

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.explain import Reason
from roundhouse.runtime.types import Active, Ranking


@element
class {name}(Element):
    """Rank jobs in pool order, saying why the others wait.

    Ports:
        active: admitted jobs.
        ranking: the jobs in pool order.
    Arguments:
        none
    Counters:
        none
    See also: Fifo
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)
    state = ()

    def tick(self, ctx, active):
        if ctx.explaining and len(active.rows) > 1:
            rows = active.rows[1:]
            ctx.explain({call})
        return Ranking(active.rows, active.gpus)
'''


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
    (tmp_path / "mine.py").write_text(EXPLAINS.format(name=name, call=call))
    graph = tmp_path / "g.sched"
    graph.write_text(
        'require "mine.py";\nround = 5min;\ncluster = "1x4:V100";\n'
        f"PoissonSource(rate=8/h, jobs=20, seed=1) -> AcceptAll -> JobPool -> {name} -> FirstFree -> Launch -> JobMetrics;\n"
    )
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"element '{name}@4' ({name}; declared at {graph}:4:" in err
    assert said in err
    assert "mine.py:34 (in tick)" in err


def test_a_good_explanation_is_recorded(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(EXPLAINS.format(name="ExplainsWell", call="Reason.RANKED_BEHIND, rows, 1"))
    graph = tmp_path / "g.sched"
    graph.write_text(
        'require "mine.py";\nround = 5min;\ncluster = "1x4:V100";\n'
        "PoissonSource(rate=8/h, jobs=20, seed=1) -> AcceptAll -> JobPool -> ExplainsWell -> FirstFree -> Launch -> JobMetrics;\n"
    )
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    import polars as pl

    record = pl.read_parquet(tmp_path / "out" / "explain.parquet")
    assert len(record) > 0


QUIET = '''
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking


@element
class {name}(Element):
    """Rank jobs in pool order, declaring when it is quiet.

    Ports:
        active: admitted jobs.
        ranking: the jobs in pool order.
    Arguments:
        none
    Counters:
        none
    See also: Fifo
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)
    state = ()

    def tick(self, ctx, active):
        return Ranking(active.rows, active.gpus)

    def quiet_until(self, ctx):
        return {answer}
'''


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
    (tmp_path / "mine.py").write_text(QUIET.format(name=name, answer=answer))
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,30000\n1,100,1,3000\n")
    graph = tmp_path / "g.sched"
    graph.write_text(
        'require "mine.py";\nround = 5min;\ncluster = "1x1:V100";\n'
        f'TraceSource(path="t.csv") -> AcceptAll -> JobPool -> {name} -> FirstFree -> Launch -> JobMetrics;\n'
    )
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
