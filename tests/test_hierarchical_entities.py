"""Which entity a Hierarchical job belongs to: a listed range holding its id, a listed name, or
(not listed) its own entity column's value, weight 1. Jobs with no entity at all (their column
empty and no listed range holding them) are one unlisted entity of their own: they were grouped
as an entity called "None" (or "nan"), with any real entity of that name. The entity column may
be any of the trace's: it is looked for once jobs have come (a trace's own columns join the job
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


def test_jobs_without_an_entity_are_an_entity_of_their_own(tmp_path):
    # One GPU: a real user "None" and the jobs with no user are two entities, half each.
    graph = _run(tmp_path, "Hierarchical()", ["None", None, ""], cluster="1x1:V100")
    shares = graph.elements["solve"].allocation.fractions.ravel()
    assert shares == pytest.approx([0.5, 0.25, 0.25], abs=1e-6)


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


def test_jobs_missing_a_number_entity_are_an_entity_of_their_own(tmp_path):
    # (a number column's missing value is NaN: with the other jobs missing theirs, not an entity "nan")
    (tmp_path / "jobs.csv").write_text(
        "job_id,arrival_s,gpus,model,batch_size,duration_s,team\n"
        "0,0,1,ResNet-18,32,3600,1\n1,0,1,ResNet-18,32,3600,\n2,0,1,ResNet-18,32,3600,1\n3,0,1,ResNet-18,32,3600,\n"
    )
    (tmp_path / "g.sched").write_text(GRAPH.format(solver='Hierarchical(entity_column="team")', cluster="1x1:V100"))
    graph = compile_file(tmp_path / "g.sched")
    simulate(graph, until=720.0)
    assert graph.elements["solve"].allocation.fractions.ravel() == pytest.approx([0.25] * 4, abs=1e-6)
