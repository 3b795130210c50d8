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
