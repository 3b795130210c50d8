"""A sink of the user's whose tick returns a value (a report meant for `finish`, say) has it
dropped without a word unless refused: it is an error naming the element and what it returned."""

from __future__ import annotations

import pytest

from roundhouse import Simulation
from roundhouse.runtime.element_failures import ElementFailure

SINK = '''from roundhouse.runtime.element import Element, In, element
from roundhouse.runtime.types import Events


@element
class Tally(Element):
    """Count the jobs launched.

    Ports:
        events: what happened in the round.
    Arguments:
        none
    Counters:
        launched: jobs launched so far.
    See also: JobMetrics
    Paper: none.
    """

    category = "sink"
    inputs = (In("events", Events),)
    state = ()

    def start(self, ctx):
        self.counters["launched"] = 0

    def tick(self, ctx, events):
        self.counters["launched"] += len(events.launched)
        {returns}
'''

GRAPH = """require "tally.py";
round = 5min;
cluster = "2x4:V100";
src :: PoissonSource(rate=8/h, jobs=10, seed=1);
run :: Launch;
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> run -> JobMetrics;
run -> tally :: Tally;
"""


def _sim(tmp_path, returns):
    (tmp_path / "tally.py").write_text(SINK.format(returns=returns))
    (tmp_path / "g.sched").write_text(GRAPH)
    return Simulation(tmp_path / "g.sched")


def test_a_sink_returning_a_value_is_named(tmp_path):
    with pytest.raises(
        ElementFailure,
        match=r"element 'tally' \(Tally; declared at .*g\.sched:7:8.*failed in round 0.*its tick returned a dict "
        r"\(\{'launched': \d+\}\), but it has no output ports",
    ):
        _sim(tmp_path, "return dict(self.counters)").run()


def test_a_sink_returning_none_runs(tmp_path):
    result = _sim(tmp_path, "return None").run()
    assert result.counters["tally"]["launched"] == result.counters["run"]["launched"] > 0


def _with_goal(tmp_path, goal: str):
    (tmp_path / "tally.py").write_text(
        SINK.format(returns="return None")
        + f"\n    def goal_met(self, ctx):\n        if self.counters['launched'] >= 3:\n            {goal}\n        return False\n"
    )
    (tmp_path / "g.sched").write_text(GRAPH)
    return Simulation(tmp_path / "g.sched")


def test_a_goal_met_that_raises_is_the_sinks_failure(tmp_path):
    # (The engine asks goal_met after the round, outside the tick: what it raised came out as a
    # traceback through `roundhouse run`, naming no element.)
    with pytest.raises(
        ElementFailure,
        match=r"element 'tally' \(Tally; .*its goal_met raised KeyError: 'total', at .*tally\.py:\d+ \(in goal_met\)",
    ):
        _with_goal(tmp_path, "return self.counters['total'] > 3").run()


def test_a_goal_met_answering_other_than_true_or_false_is_named(tmp_path):
    # (A string was taken as its truth: the run stopped, said as every tracked job finished.)
    with pytest.raises(ElementFailure, match=r"element 'tally' .*its goal_met returned a str \('yes'\), not True or False"):
        _with_goal(tmp_path, "return 'yes'").run()


def test_a_goal_met_of_numpys_bool_stops_the_run(tmp_path):
    result = _with_goal(tmp_path, "return __import__('numpy').bool_(True)").run()
    assert result.stop_reason.startswith("tally: ") and result.counters["tally"]["launched"] >= 3


def test_a_sinks_goal_stopping_the_run_is_said_as_its_own(tmp_path):
    # (Every sink's goal was said as JobMetrics', "every tracked job finished", though this one
    # counts launches and tracks no job.)
    result = _with_goal(tmp_path, "return True").run()
    assert result.stop_reason == "tally: its goal is met"
    (tmp_path / "tally.py").write_text((tmp_path / "tally.py").read_text() + '\n    goal = "three jobs launched"\n')
    assert Simulation(tmp_path / "g.sched").run().stop_reason == "tally: three jobs launched"
