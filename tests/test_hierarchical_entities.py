"""Which entity a Hierarchical job belongs to: a listed range holding its id, a listed name, or
(not listed) its own entity column's value, weight 1. A job with no entity at all (its column
empty and no listed range holding it) is refused, named; it was grouped with every other such
job as an entity called "None", beside any real entity of that name. The entity column may be
any of the trace's: it is looked for once jobs have come (a trace's own columns join the job
table with its first job), not at the start, where only the standard ones are known."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

GRAPH = """round = 6min;
cluster = "{cluster}";
arrivals :: TraceSource(path="jobs.csv");
solve :: {solver};
arrivals -> AcceptAll -> JobPool -> solve -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;
"""


def _run(tmp_path, solver: str, users: list[str | None], column: str = "user", cluster: str = "1:1:1"):
    n = len(users)
    pl.DataFrame(
        {
            "job_id": list(range(n)),
            "arrival_s": [0.0] * n,
            "gpus": [1] * n,
            "model": ["ResNet-18"] * n,
            "batch_size": [32] * n,
            "duration_s": [36000.0] * n,
            column: pl.Series(users, dtype=pl.String),
        }
    ).write_csv(tmp_path / "jobs.csv")
    (tmp_path / "g.sched").write_text(GRAPH.format(solver=solver, cluster=cluster))
    graph = compile_file(tmp_path / "g.sched")
    simulate(graph, until=720.0)
    return graph


def test_a_job_without_an_entity_is_refused_naming_it(tmp_path):
    with pytest.raises(RoundhouseError) as err:
        _run(tmp_path, 'Hierarchical(entities=["a"], weights=[1])', ["a", None, "a"])
    message = str(err.value)
    assert "job 1" in message and "solve" in message and "'user'" in message
    assert "Traceback" not in message
    assert err.value.location is not None and err.value.location.line == 4


def test_a_range_holds_a_job_whose_column_is_empty(tmp_path):
    graph = _run(tmp_path, "Hierarchical(entities=[0..2], weights=[1])", [None, None])
    assert len(graph.elements["solve"].allocation.rows) == 2


def test_the_entity_column_may_be_one_of_the_trace_s_own(tmp_path):
    solver = 'Hierarchical(entities=["red", "blue"], weights=[1, 3], entity_column="team")'
    graph = _run(tmp_path, solver, ["red", "blue"], "team", cluster="1x1:V100")
    # One GPU, split 1 : 3 by the teams' weights.
    assert graph.elements["solve"].allocation.fractions.ravel() == pytest.approx([0.25, 0.75], abs=1e-6)


def test_an_entity_column_no_job_has_is_refused_at_the_element(tmp_path):
    with pytest.raises(RoundhouseError) as err:
        _run(tmp_path, 'Hierarchical(entity_column="teem")', ["red", "blue"], "team")
    message = str(err.value)
    assert "no column 'teem'" in message and "team" in message and "solve" in message
    assert err.value.location is not None and err.value.location.line == 4


def test_a_job_missing_a_number_entity_is_refused_too(tmp_path):
    # (a number column's missing value is NaN, which would have grouped as an entity "nan")
    (tmp_path / "jobs.csv").write_text(
        "job_id,arrival_s,gpus,model,batch_size,duration_s,team\n"
        "0,0,1,ResNet-18,32,3600,1\n1,0,1,ResNet-18,32,3600,\n2,0,1,ResNet-18,32,3600,2\n"
    )
    (tmp_path / "g.sched").write_text(GRAPH.format(solver='Hierarchical(entity_column="team")', cluster="1:1:1"))
    with pytest.raises(RoundhouseError, match=r"job 1 has no entity: its 'team' is empty"):
        simulate(compile_file(tmp_path / "g.sched"), until=720.0)
