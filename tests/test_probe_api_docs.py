"""What a new user of the Simulation API meets following docs/simulation-api.md: a time before the
clock is refused rather than run to silently; a trace path the system cannot take, or an empty
one, is named as the `trace` argument; and the doc says what the job table's `status` codes
mean, how to give a TraceSource its own path in `overrides`, and that arguments are fixed."""

from __future__ import annotations

import re

import polars as pl
import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from roundhouse.runtime.element import FrozenArgumentError
from roundhouse.traces.jobs import STATUS_NAMES
from tests.conftest import REPO, write_trace

DOC = (REPO / "docs" / "simulation-api.md").read_text()
GRAPH = """round = 5min;
cluster = "2x4:V100";
src :: TraceSource(path="{trace}");
src -> AcceptAll -> JobPool -> order :: Las -> FirstFree -> Launch -> m :: JobMetrics;
"""


@pytest.fixture
def trace(tmp_path):
    rows = [{"job_id": i, "arrival_s": 700.0 * i, "gpus": 1 + i % 2, "duration_s": 3000.0 + 500 * i} for i in range(8)]
    return write_trace(tmp_path / "t.csv", rows)


def test_run_until_a_time_before_the_clock_is_refused(trace):
    sim = Simulation(GRAPH.format(trace=trace)).run_until(7200)
    with pytest.raises(UsageError, match=r"^t: 3600 is before the clock \(7200 s\)"):
        sim.run_until(3600)
    assert sim.now == 7200
    sim.run_until(7200)  # (the clock itself: nothing to run, as ever)
    assert sim.now == 7200 and sim.run_until(9000).now == 9000


@pytest.mark.parametrize("path", ["", "   ", "x" * 5000], ids=["empty", "blank", "too-long"])
def test_a_trace_path_that_names_no_file_is_said_as_the_trace_argument(trace, path):
    with pytest.raises(UsageError, match=r"^trace: "):
        Simulation(GRAPH.format(trace=trace), trace=path)


def test_a_graph_with_no_cluster_asks_for_the_cluster_argument_not_a_flag(tmp_path, trace):
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(trace=trace).replace('cluster = "2x4:V100";\n', ""))
    with pytest.raises(UsageError, match=rf'^cluster: {re.escape(str(graph))} sets no cluster: give one, such as cluster="'):
        Simulation(graph)
    assert Simulation(graph, cluster="2x4:V100").world.cluster.n_gpus == 8


def test_the_doc_says_what_each_status_code_means(trace):
    # (the doc's sample keeps the waiting jobs with `filter(status=0)`: the codes must be told)
    for code, name in enumerate(STATUS_NAMES):
        assert f"{code} {name}" in DOC, name
    sim = Simulation(GRAPH.format(trace=trace))
    sim.run()
    assert sim.jobs().filter(pl.col("status") == STATUS_NAMES.index("finished")).height == 8


def test_the_docs_path_override_for_a_graph_of_several_sources_is_taken(tmp_path, trace):
    example = re.search(r"`'name\.path=\"([^\"`]+)\"'`", DOC)
    assert example, "the doc shows a TraceSource's path given in overrides, quoted as .sched text"
    graph = tmp_path / "two.sched"
    graph.write_text(
        f'a :: TraceSource(path="{trace}");\nb :: TraceSource(path="{trace}");\n'
        "a -> AcceptAll -> pool :: JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\nb -> pool;\n"
    )
    other = write_trace(tmp_path / "other.csv", [{"job_id": 100, "arrival_s": 60.0, "gpus": 1, "duration_s": 600.0}])
    text = example.group(0).strip("`'").replace("name", "b").replace(example.group(1), str(other))
    sim = Simulation(graph, cluster="2x4:V100", overrides=[text])
    assert sim.graph.elements["b"].path == str(other)


def test_the_doc_says_arguments_are_fixed_and_how_to_try_another_value(trace):
    assert "FrozenArgumentError" in DOC
    sim = Simulation(GRAPH.format(trace=trace))
    with pytest.raises(FrozenArgumentError):
        sim.graph.elements["order"].backfill = True
    other = Simulation(GRAPH.format(trace=trace), overrides=["order.backfill=true"])
    assert other.graph.elements["order"].backfill is True
