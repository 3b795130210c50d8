"""Corners of Blox's synthesizer and its switches: ties among combinations, gates a
ChooseAdmission cannot switch, and the switch's record across decisions."""

import polars as pl

from roundhouse.runtime.simulation import Simulation
from tests.conftest import write_trace

# One GPU, 5-minute rounds, a decision every 3 rounds. L (1800 s) arrives at 0; S1 and S2
# (300 s each) at 420 s, seen from round 2: at round 3 SRTF is clearly better than FIFO
# (tests/test_synthesizer.py works the numbers out). The gate `big` never holds a job back, so
# under each policy both gates give the same look-ahead.
GRAPH = """
round = 300s;
cluster = "1x1:V100";
synth :: Synthesizer(switches=[admit, order], every=3, horizon=10h, workers=1);
src   :: TraceSource(path="trace.csv");
all   :: AcceptAll;
big   :: AcceptThreshold(factor=100x);
admit :: ChooseAdmission(candidates=[all, big]);
fifo  :: Fifo;
srtf  :: Srtf;
order :: ChoosePolicy(candidates=[fifo, srtf]);
src -> admit -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""
LATE_SHORT = [
    {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1800.0},
    {"job_id": 1, "arrival_s": 420.0, "gpus": 1, "duration_s": 300.0},
    {"job_id": 2, "arrival_s": 420.0, "gpus": 1, "duration_s": 300.0},
]


def test_a_switch_whose_candidates_tie_keeps_the_one_acting(tmp_path):
    write_trace(tmp_path / "trace.csv", LATE_SHORT)
    (tmp_path / "g.sched").write_text(GRAPH)
    sim = Simulation(str(tmp_path / "g.sched"))
    synth, admit = sim.graph.elements["synth"], sim.graph.elements["admit"]
    admit.select(1)  # (start on the second gate: combination big+fifo)
    sim.run()
    decisions = pl.DataFrame(synth._decisions)
    at3 = decisions.filter(pl.col("round") == 3)
    scores = dict(zip(at3["combination"], at3["time_in_system_s"]))
    # Both gates give the same look-ahead under each policy; SRTF is better.
    assert scores["all+srtf"] == scores["big+srtf"] < scores["all+fifo"] == scores["big+fifo"]
    # The policy changes; the gate, tied, stays: no switch without a difference in the metric.
    assert [(r, synth.label(synth.combinations[c])) for r, _, c in synth._choices] == [(0, "big+fifo"), (3, "big+srtf")]
    assert admit.selected == 1 and admit.counters["switches"] == 1  # (the one by hand, at round 0)
    assert synth.counters["switches"] == 1
    assert sim.graph.elements["order"].selected == 1


def test_among_tied_combinations_the_fewest_switches_change():
    sim = Simulation(
        """
round = 5min;
cluster = "1x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=5, gpus=single, models=blox, seed=0);
synth :: Synthesizer(switches=[admit, order], workers=1);
all :: AcceptAll;
a12 :: AcceptThreshold(factor=1.2x);
a14 :: AcceptThreshold(factor=1.4x);
admit :: ChooseAdmission(candidates=[all, a12, a14]);
fifo :: Fifo;
srtf :: Srtf;
las :: Las;
order :: ChoosePolicy(candidates=[fifo, srtf, las]);
arrivals -> admit -> JobPool -> order -> FirstFree -> Launch -> JobMetrics;
"""
    )
    from roundhouse.runtime.lookahead import Outlook

    synth = sim.graph.elements["synth"]
    combos = synth.combinations
    index = {synth.label(c): i for i, c in enumerate(combos)}

    def best(scores: dict[str, float]) -> str:
        outlooks = [
            Outlook(jobs=9, finished=0, time_in_system_s=scores.get(synth.label(c), 9e9), wait_s=0.0, waiting=0) for c in combos
        ]
        return synth.label(combos[synth._best(outlooks, 300.0, combos)])

    synth._choice = index["a14+las"]
    # The running combination among the best stays.
    assert best({"all+fifo": 1.0, "a14+las": 1.0}) == "a14+las"
    # A better policy under every gate alike: the gate acting now stays.
    assert best({"all+srtf": 1.0, "a12+srtf": 1.0, "a14+srtf": 1.0}) == "a14+srtf"
    # A better gate under every policy alike: the policy acting now stays.
    assert best({"all+fifo": 1.0, "all+srtf": 1.0, "all+las": 1.0}) == "all+las"
    # Nothing in common with the running one: the first of the best.
    assert best({"a12+srtf": 1.0, "all+fifo": 1.0}) == "all+fifo"
    # A strictly better combination wins however many switches it changes.
    assert best({"all+fifo": 1.0, "a14+srtf": 1.5}) == "all+fifo"


def test_a_candidate_selected_by_hand_is_the_one_the_synthesizer_weighs_and_records(tmp_path):
    write_trace(tmp_path / "trace.csv", LATE_SHORT)
    (tmp_path / "g.sched").write_text(GRAPH.replace("candidates=[fifo, srtf]", "candidates=[srtf, fifo]"))
    sim = Simulation(str(tmp_path / "g.sched"))
    sim.graph.elements["order"].select(1)  # FIFO from round 0, by hand
    result = sim.run()
    # Round 0 sees only L: a tie, and FIFO, acting, stays. At round 3 SRTF is clearly better:
    # the synthesizer switches to it, from the policy acting (FIFO), not the first candidate.
    choices = result.reports["synth"]["choices"]
    assert choices.select("round", "combination").rows() == [(0, "all+fifo"), (3, "all+srtf")]
    finish = dict(zip(sim.jobs()["job_id"], sim.jobs()["finish_s"]))
    assert finish == {0: 2400.0, 1: 1200.0, 2: 1500.0}  # (FIFO throughout: 1800, 2100, 2400)
