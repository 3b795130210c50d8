"""A Synthesizer's `horizon` must cover at least one round: a shorter look-ahead sees only the
round it decides in, where every combination scores alike (the choice is never informed). It
is refused, said at the argument, against the round the run has (a graph's or --set's)."""

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.simulation import Simulation
from roundhouse.tools.cli import main
from tests.conftest import fails

GRAPH = """round = 5min;
cluster = "2x2:V100";
synth :: Synthesizer(switches=[admit, order], every=4, horizon={horizon}, workers=1);
arrivals :: PoissonSource(rate=8/h, jobs=12, gpus=single, models=blox, seed=0);
all :: AcceptAll;
a12 :: AcceptThreshold(factor=1.2x);
admit :: ChooseAdmission(candidates=[all, a12]);
fifo :: Fifo;
srtf :: Srtf;
order :: ChoosePolicy(candidates=[fifo, srtf]);
arrivals -> admit -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_a_horizon_shorter_than_a_round_is_refused_at_the_argument():
    with pytest.raises(SchedError) as caught:
        Simulation(GRAPH.format(horizon="4min"), until=3600).run()
    message = str(caught.value)
    assert "horizon" in message and "synth" in message
    assert "5min" in message and "4min" in message
    # said where the file writes the argument (line 3, at its value)
    assert ":3:" in message


def test_a_horizon_of_one_round_runs():
    sim = Simulation(GRAPH.format(horizon="5min"), until=3600).run()
    assert sim.reports["synth"]["decisions"].height > 0


def test_the_bound_follows_the_round_set_on_the_command_line(tmp_path, capsys):
    graph = tmp_path / "synth.sched"
    graph.write_text(GRAPH.format(horizon="5min"))
    err = fails(capsys, "run", graph, "--until", "1h", "--quiet", "--set", "round=10min")
    assert "horizon" in err and "10min" in err and "5min" in err
    assert main(["run", str(graph), "--until", "1h", "--quiet"]) == 0
