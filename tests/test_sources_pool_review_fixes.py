"""Sources whose arrivals are drawn at a rate: a rate slow enough to pass its check (on the average
span) can still draw arrivals past a century, which no trace's arrival times may. Every such
source refuses them in words naming the element, the rate and the seed, and none lets one in."""

from __future__ import annotations

import pytest

from roundhouse.errors import RoundhouseError, SchedError
from roundhouse.runtime.element import MAX_SECONDS
from roundhouse.runtime.simulation import Simulation

GRAPH = """round = 5min;
cluster = "4x4:V100";
a :: {source};
a -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""

# Two jobs: one gap, whose mean at this rate is just under a century (the slowest rate allowed),
# so about a third of the seeds draw it longer.
SLOW = "1.2e-6/h"


def _outcomes(tmp_path, source: str, seeds: range) -> tuple[list[str], list[float]]:
    """Each seed's refusal (its message), or the latest arrival its source would bring."""
    refusals, latest = [], []
    for seed in seeds:
        graph = GRAPH.format(source=source.format(seed=seed))
        try:
            sim = Simulation(graph, until=600)
        except SchedError as err:
            refusals.append(str(err))
            continue
        latest.append(float(sim.graph.elements["a"]._arrivals.max()))
    return refusals, latest


def test_a_trace_redrawn_at_a_slow_rate_never_brings_an_arrival_past_a_century(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n1,0,1,600\n2,100,1,600\n")
    source = f'TraceSource(path="{trace}", rate={SLOW}, seed={{seed}})'
    refusals, latest = _outcomes(tmp_path, source, range(12))
    assert refusals and latest  # (some seeds draw past a century, others not)
    assert max(latest) <= float(MAX_SECONDS)
    for message in refusals:
        assert "TraceSource 'a': the arrivals of its 2 jobs redrawn at 1.2e-06/h (seed " in message
        assert "span more than a century" in message


def test_a_cost_workload_drawn_past_a_century_is_refused_naming_the_element(tmp_path):
    refusals, latest = _outcomes(tmp_path, f"CostWorkload(jobs=2, rate={SLOW}, seed={{seed}})", range(12))
    assert refusals and latest
    assert max(latest) <= float(MAX_SECONDS)
    for message in refusals:
        assert "CostWorkload 'a': the arrivals of its 2 jobs drawn at 1.2e-06/h (seed " in message
        assert "<generated>" not in message


def test_the_refusal_points_at_the_source_on_the_command_line(tmp_path, capsys):
    from roundhouse.tools.cli import main

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n1,0,1,600\n2,100,1,600\n")
    for seed in range(12):
        path = tmp_path / "g.sched"
        path.write_text(GRAPH.format(source=f'TraceSource(path="{trace}", rate={SLOW}, seed={seed})'))
        try:
            Simulation(path, until=600)
        except RoundhouseError:
            break
    else:
        pytest.fail("no seed drew past a century")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    rate = path.read_text().splitlines()[2].index(SLOW) + 1  # (said at the rate that drew them)
    assert f"g.sched:3:{rate}: error: TraceSource 'a'" in err and "Traceback" not in err
    assert "hint: a faster rate, fewer jobs or another seed" in err
