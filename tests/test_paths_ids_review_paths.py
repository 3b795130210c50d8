"""A source's jobs reach the pool by one path: a graph that gives them to it by two (a port
connected to two elements that each lead to the pool) is refused when compiled, naming the
source, the pool and both paths; graphs that merge sources, choose a gate with a switch or
give jobs to an element that does not lead to the pool still compile."""

from __future__ import annotations

import pytest

from roundhouse.errors import SchedError, SchedErrors
from roundhouse.runtime.compiler import compile_file
from tests.conftest import REPO
from tests.own_elements import element_class, element_file

HEAD = 'round = 5min;\ncluster = "32x4:V100";\n'
REST = "pool -> Las -> Consolidated -> Launch;\n"


def _write(tmp_path, body: str, name: str = "g.sched"):
    path = tmp_path / name
    path.write_text(HEAD + body)
    return path


def _only_error(path) -> SchedError:
    with pytest.raises((SchedError, SchedErrors)) as got:
        compile_file(path)
    assert isinstance(got.value, SchedError), got.value
    return got.value


def test_a_source_given_to_two_gates_that_lead_to_the_pool_is_refused(tmp_path):
    path = _write(
        tmp_path,
        "a :: PoissonSource(jobs=10, rate=6/h);\npool :: JobPool;\na -> AcceptAll -> pool;\na -> AcceptAll -> pool;\n" + REST,
    )
    err = _only_error(path)
    assert (err.location.line, err.location.column) == (6, 3)
    assert "'a' gives its jobs to the pool 'pool' by two paths" in err.message
    first, second = err.message.split(": ", 1)[1].split(" and ")
    assert first.startswith("a -> AcceptAll@") and first.endswith(f"-> pool (at {path}:5:3)")
    assert second.startswith("a -> AcceptAll@") and second.endswith(f"-> pool (at {path}:6:3)")
    assert first.split(" (")[0] != second.split(" (")[0]
    assert "'a' [jobs]" in (err.hint or "")


def test_a_gate_given_to_the_pool_and_to_another_gate_is_refused(tmp_path):
    path = _write(
        tmp_path,
        "a :: PoissonSource(jobs=10, rate=6/h);\nb :: PoissonSource(jobs=10, rate=6/h, start_id=100);\n"
        "pool :: JobPool;\ng :: AcceptAll;\n"
        "a -> g;\nb -> g;\ng -> pool;\ng -> h :: AcceptThreshold(factor=1.2x) -> pool;\n" + REST,
    )
    err = _only_error(path)  # said once, at the gate, though two sources reach it
    assert "'a' gives its jobs to the pool 'pool' by two paths" in err.message
    assert "a -> g -> pool" in err.message and "a -> g -> h -> pool" in err.message
    assert (err.location.line, err.location.column) == (10, 3)


def test_two_paths_inside_a_compound_are_refused(tmp_path):
    path = _write(
        tmp_path,
        "elementclass Twice { input -> AcceptAll -> output; input -> AcceptAll -> output; }\n"
        "a :: PoissonSource(jobs=10, rate=6/h);\npool :: JobPool;\na -> Twice -> pool;\n" + REST,
    )
    err = _only_error(path)
    assert "'a' gives its jobs to the pool 'pool' by two paths" in err.message
    # (a connection into a compound is said where the instance is connected)
    assert (err.location.line, err.location.column) == (6, 3)
    assert "a -> Twice@1/AcceptAll@2 -> pool" in err.message and "a -> Twice@1/AcceptAll@3 -> pool" in err.message


def test_sources_merged_switched_and_watched_still_compile(tmp_path):
    tap = element_class(
        "PathsReviewTap",
        "Watches arriving jobs and gives nothing on.",
        "return None",
        category="sink",
        inputs=(("jobs", "Jobs", "arriving jobs."),),
        outputs=(),
        multi=True,
        see_also="AcceptAll",
    )
    (tmp_path / "tap.py").write_text(element_file(tap))
    path = _write(
        tmp_path,
        'require "tap.py";\n'
        "a :: PoissonSource(jobs=10, rate=6/h);\nb :: PoissonSource(jobs=10, rate=6/h, start_id=100);\n"
        "c :: PoissonSource(jobs=10, rate=6/h, start_id=200);\n"
        "one :: AcceptAll; two :: AcceptThreshold(factor=1.2x);\n"
        "admit :: ChooseAdmission(candidates=[one, two]);\n"
        "elementclass Gate { input -> AcceptAll -> output; }\n"
        "pool :: JobPool;\n"
        "a -> admit -> pool;\nb -> admit;\na -> PathsReviewTap;\nc -> Gate -> pool;\n" + REST,
    )
    graph = compile_file(path)
    assert {"a", "b", "c", "admit", "pool"} <= set(graph.elements)


@pytest.mark.parametrize("name", ["blox-synthesizer.sched", "gavel-hierarchical.sched", "las.sched"])
def test_the_shipped_graphs_still_compile(name):
    compile_file(REPO / "graphs" / name)
