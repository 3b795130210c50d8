"""An element's error about one of its arguments that only the run can find (against the trace
or the cluster) is said at the argument, as the compiler says its own: at the value the file
writes; for one given with --set, as that option's, at the element's declaration; for one left
at its default, at the declaration."""

from __future__ import annotations

import pytest

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.simulation import Simulation
from tests.conftest import fails

TRACE = "job_id,arrival_s,gpus,duration_s\n1,0,1,600\n2,100,1,600\n3,200,1,600\n"

GRAPH = """round = 5min;
cluster = "1x4:V100";
src :: {source};
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


def _graph(tmp_path, source: str):
    (tmp_path / "t.csv").write_text(TRACE)
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(source=source))
    return path


def _ran(tmp_path, capsys, graph, *more) -> str:
    """What `roundhouse run` says of the graph (it must refuse it, without a traceback)."""
    return fails(capsys, "run", graph, "--out", tmp_path / "out", "--quiet", *more)


def _at(graph, written: str) -> str:
    """`g.sched:LINE:COL` of the first place the graph's text has `written`."""
    lines = graph.read_text().splitlines()
    line = next(i for i, text in enumerate(lines) if written in text)
    return f"{graph}:{line + 1}:{lines[line].index(written) + 1}"


def test_a_trace_source_rate_too_slow_for_the_trace_is_said_at_the_rate(tmp_path, capsys):
    graph = _graph(tmp_path, 'TraceSource(path="t.csv", rate=1e-300/h, seed=0)')
    err = _ran(tmp_path, capsys, graph)
    assert err.startswith(f"{_at(graph, '1e-300/h')}: error: argument 'rate' of TraceSource 'src' must be at least "), err
    assert "their arrivals would span more than a century" in err and "hint: a faster rate or fewer jobs" in err


def test_a_rate_given_with_set_is_said_as_the_option_s_at_the_declaration(tmp_path, capsys):
    graph = _graph(tmp_path, 'TraceSource(path="t.csv")')
    err = _ran(tmp_path, capsys, graph, "--set", "src.rate=1e-300/h")
    said = f"{graph}:3:1: error: --set src.rate=1e-300/h: argument 'rate' of TraceSource 'src' must be at least "
    assert err.startswith(said), err


def test_a_job_drawn_larger_than_the_cluster_is_said_at_gpus(tmp_path, capsys):
    graph = _graph(tmp_path, "PoissonSource(rate=8/h, jobs=200, seed=1, gpus=philly)")
    err = _ran(tmp_path, capsys, graph)
    assert err.startswith(f"{_at(graph, 'philly')}: error: element 'src' (PoissonSource): job "), err
    assert "asks for 8 GPUs but the cluster has 4" in err


def test_a_job_drawn_larger_than_the_cluster_by_default_gpus_is_said_at_the_declaration(tmp_path, capsys):
    graph = _graph(tmp_path, "BurstSource(jobs=50, seed=1)")
    err = _ran(tmp_path, capsys, graph)
    assert err.startswith(f"{graph}:3:1: error: element 'src' (BurstSource): job "), err
    assert "GPUs but the cluster has 4" in err


def test_a_job_drawn_larger_than_the_cluster_by_gpus_given_with_set_names_the_option(tmp_path, capsys):
    graph = _graph(tmp_path, "BurstSource(jobs=50, seed=1, gpus=single)")
    err = _ran(tmp_path, capsys, graph, "--set", "src.gpus=philly")
    assert err.startswith(f"{graph}:3:1: error: --set src.gpus=philly: element 'src' (BurstSource): job "), err


# Two jobs: one gap, whose mean at this rate is just under a century (the slowest rate allowed),
# so some seeds draw it longer.
SLOW = "1.2e-6/h"


@pytest.mark.parametrize(
    "source",
    [f"PoissonSource(jobs=2, rate={SLOW}, seed={{seed}})", f"CostWorkload(jobs=2, rate={SLOW}, seed={{seed}})"]
    + [f'TraceSource(path="t.csv", jobs=2, rate={SLOW}, seed={{seed}})'],
)
def test_arrivals_drawn_past_a_century_are_said_at_the_rate(tmp_path, capsys, source):
    for seed in range(20):
        graph = _graph(tmp_path, source.format(seed=seed))
        try:
            Simulation(graph, until=600)
        except RoundhouseError:
            break
    else:
        pytest.fail("no seed drew past a century")
    err = _ran(tmp_path, capsys, graph)
    assert err.startswith(f"{_at(graph, SLOW)}: error: "), err
    assert "span more than a century" in err and "hint: a faster rate, fewer jobs or another seed" in err
