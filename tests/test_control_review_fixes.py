"""Switches (elements/control.py): what a candidate raises or returns wrongly, in its tick or
when event skipping asks it, is reported naming the candidate, not the switch that ticks it;
selecting a candidate by hand with a bad index says which indices there are."""

from __future__ import annotations

import pytest

from roundhouse.runtime.engine import ElementFailure
from roundhouse.runtime.simulation import Simulation
from tests.conftest import REPO
from tests.own_elements import element_class, element_file

TRACE = REPO / "traces" / "samples" / "philly-single-blox-1000.csv"


def _elements(tick_fails: str = "False", quiet_fails: str = "False") -> str:
    """A policy and a gate of the user's, each failing in one way: the policy's tick raises when
    `tick_fails`, its quiet_until when `quiet_fails`; the gate returns a list, not Jobs."""
    boom = element_class(
        "Boom",
        "In order, failing as told.",
        f"""
        if {tick_fails}:
            raise ValueError("boom in tick")
        return Ranking(active.rows, active.gpus, backfill=True)
        """,
        after=f"""
        def quiet_until(self, ctx):
            if {quiet_fails}:
                raise KeyError("boom in quiet_until")
            return ctx.now + 10 * ctx.round_s
        """,
    )
    leaky = element_class(
        "Leaky",
        "A gate that returns a list, not Jobs.",
        "return list(jobs.rows)",
        category="admission",
        inputs=(("jobs", "Jobs", "arriving jobs."),),
        outputs=(("admitted", "Jobs", "admitted jobs."),),
        multi=True,
        see_also="AcceptAll",
        after="""
        def holding(self):
            return 0

        def hand_over(self):
            return np.zeros(0, dtype=np.int64)

        def take_over(self, admitted):
            pass
        """,
    )
    return element_file(boom, leaky, before="import numpy as np\n")


KINDS = {"b": "Boom", "f": "Fifo", "l": "Leaky", "a": "AcceptAll"}


def _graph(tmp_path, policy: str, gate: str, tick_fails: str = "False", quiet_fails: str = "False"):
    (tmp_path / "mine.py").write_text(_elements(tick_fails, quiet_fails))
    path = tmp_path / "g.sched"
    path.write_text(
        'require "mine.py";\nround = 5min; cluster = "2x4:V100";\n'
        f'src :: TraceSource(path="{TRACE}", jobs=30);\n'
        + " ".join(f"{n} :: {KINDS[n]};" for n in f"{policy}, {gate}".split(", "))
        + "\n"
        f"order :: ChoosePolicy(candidates=[{policy}]);\n"
        f"admit :: ChooseAdmission(candidates=[{gate}]);\n"
        "src -> admit -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;\n"
    )
    return path


def _failure(path) -> str:
    with pytest.raises(ElementFailure) as got:
        Simulation(str(path)).run()
    return str(got.value)


def test_a_candidates_failing_tick_is_reported_naming_the_candidate(tmp_path):
    text = _failure(_graph(tmp_path, "b, f", "a", tick_fails="ctx.now > 3000"))
    assert text.startswith("error: element 'b' (Boom; declared at ")
    assert "g.sched:4:1" in text and "mine.py" in text
    assert "its tick (as a candidate of switch 'order') raised ValueError: boom in tick" in text
    assert "ChoosePolicy" not in text and "control.py" not in text


def test_a_candidates_failing_quiet_until_is_reported_naming_the_candidate(tmp_path):
    text = _failure(_graph(tmp_path, "b, f", "a", quiet_fails="True"))
    assert text.startswith("error: element 'b' (Boom; declared at ")
    assert "its quiet_until (as a candidate of switch 'order') raised KeyError" in text
    assert "control.py" not in text


def test_a_candidates_output_of_the_wrong_type_is_reported_naming_the_candidate(tmp_path):
    text = _failure(_graph(tmp_path, "f", "l, a"))
    assert text.startswith("error: element 'l' (Leaky; declared at ")
    assert "it emitted a list" in text and "on its port 'admitted', where a Jobs belongs" in text
    assert "AttributeError" not in text and "control.py" not in text


def test_a_candidate_works_through_its_switch_as_alone(tmp_path):
    # The checks change nothing for a candidate that behaves: the same jobs as the policy alone.
    through = Simulation(str(_graph(tmp_path, "b, f", "a"))).run()
    assert through.counters["order"]["selected"] == 0
    alone = tmp_path / "alone.sched"
    alone.write_text(
        'require "mine.py";\nround = 5min; cluster = "2x4:V100";\n'
        f'src :: TraceSource(path="{TRACE}", jobs=30);\n'
        "src -> AcceptAll -> JobPool -> Boom -> FirstFree -> Launch -> m :: JobMetrics;\n"
    )
    a, b = Simulation(str(_graph(tmp_path, "b, f", "a"))), Simulation(str(alone))
    a.run()
    b.run()
    assert a.jobs().sort("job_id").equals(b.jobs().sort("job_id"))


@pytest.mark.parametrize("index", [-1, 2, 1.0, True, "1", None])
def test_selecting_a_candidate_that_is_not_there_says_which_there_are(tmp_path, index):
    sim = Simulation(str(_graph(tmp_path, "b, f", "a")))
    order = sim.graph.elements["order"]
    with pytest.raises(IndexError) as got:
        order.select(index)
    assert str(got.value) == (
        f"ChoosePolicy 'order' has 2 candidates (0: b, 1: f): select one by its index, 0 to 1, not {index!r}"
    )
    assert order.selected == 0  # (nothing changed)
    order.select(1)
    assert order.selected == 1


# --- look-aheads past a sink's goal -------------------------------------------------------------
# One GPU. Job 0 (900 s) and job 1 (300 s) arrive together; only job 1 is measured. FIFO runs
# job 0 first (both finish by 1200 s: a mean of 1050 s in the system); SRTF runs job 1 first
# (300 s and 1200 s: 750 s), so SRTF is better for both jobs, and for the measured one.
GOAL_GRAPH = """
round = 300s;
cluster = "1x1:V100";
synth :: Synthesizer(switches=[order], every=3, horizon=10h, workers=1);
src   :: TraceSource(path="trace.csv");
fifo  :: Fifo;
srtf  :: Srtf;
order :: ChoosePolicy(candidates=[fifo, srtf]);
src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics(track=1..2);
"""


def test_a_look_ahead_goes_on_past_the_goal_of_a_sink_that_measures_some_jobs(tmp_path):
    import polars as pl

    from tests.conftest import write_trace

    write_trace(
        tmp_path / "trace.csv",
        [
            {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 900.0},
            {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 300.0},
        ],
    )
    (tmp_path / "g.sched").write_text(GOAL_GRAPH)
    sim = Simulation(str(tmp_path / "g.sched"))
    result = sim.run()
    decisions = result.reports["synth"]["decisions"].filter(pl.col("round") == 0)
    got = dict(zip(decisions["combination"], decisions.select("finished", "time_in_system_s").rows()))
    # Each look-ahead runs until both jobs have finished, not until the measured one has (which
    # counted job 0 as in the system for the whole horizon under SRTF, and chose FIFO).
    assert got == {"fifo": (2, 1050.0), "srtf": (2, 750.0)}
    assert result.reports["synth"]["choices"].select("round", "combination").rows() == [(0, "fifo"), (0, "srtf")]
    finish = dict(zip(sim.jobs()["job_id"], sim.jobs()["finish_s"]))
    assert finish[1] == 300.0


# --- look-aheads of candidates from a file the graph requires ----------------------------------
SYNTH = """require "mine.py";
round = 5min; cluster = "1x2:V100";
src :: TraceSource(path="TRACE", jobs=12);
synth :: Synthesizer(switches=[order], every=3, horizon=2h, workers=WORKERS);
b :: Boom; f :: Srtf;
order :: ChoosePolicy(candidates=[b, f]);
src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""


def _synth_graph(tmp_path, workers: int, tick_fails: str = "False"):
    (tmp_path / "mine.py").write_text(_elements(tick_fails))
    path = tmp_path / f"synth{workers}.sched"
    path.write_text(SYNTH.replace("TRACE", str(TRACE)).replace("WORKERS", str(workers)))
    return path


@pytest.mark.slow
def test_a_pool_simulates_candidates_of_a_file_the_graph_requires(tmp_path, monkeypatch):
    from roundhouse.elements import control

    monkeypatch.setattr(control.os, "cpu_count", lambda: 2)  # (a pool is at most one per processor)
    started = []
    start_pool = control._start_pool
    monkeypatch.setattr(control, "_start_pool", lambda *args: started.append(args[3]) or start_pool(*args))
    one = Simulation(str(_synth_graph(tmp_path, 1)))
    two = Simulation(str(_synth_graph(tmp_path, 2)))
    a, b = one.run(), two.run()
    # Its processes imported mine.py as the run did (under the same module name), and decided alike.
    assert len(started) == 1 and [name for name, _ in started[0]] == [type(two.graph.elements["b"]).__module__]
    assert b.counters["synth"]["simulated"] > 0
    assert a.reports["synth"]["decisions"].equals(b.reports["synth"]["decisions"])
    assert one.jobs().equals(two.jobs())


def test_a_required_file_changed_since_the_run_read_it_is_simulated_in_this_process(tmp_path, monkeypatch):
    from roundhouse.elements import control

    monkeypatch.setattr(control.os, "cpu_count", lambda: 2)

    def no_pool(*args):
        raise AssertionError("a pool was started")

    monkeypatch.setattr(control, "_start_pool", no_pool)
    sim = Simulation(str(_synth_graph(tmp_path, 2)))
    (tmp_path / "mine.py").write_text((tmp_path / "mine.py").read_text() + "\n# changed\n")
    result = sim.run()
    assert result.counters["synth"]["simulated"] > 0


def test_a_failure_in_a_look_ahead_says_it_was_one(tmp_path):
    text = _failure(_synth_graph(tmp_path, 1, tick_fails="ctx.now > 3000"))
    assert text.startswith("error: element 'b' (Boom; declared at ")
    # The look-ahead from round 0 reached round 11; the run itself had not.
    assert "failed in round 11 (t=55min)" in text
    assert text.endswith("[in a look-ahead of synthesizer 'synth' from round 0 (t=0s), simulating b]")


def test_a_gate_failing_to_hand_over_its_jobs_is_reported_naming_the_gate(tmp_path):
    path = _graph(tmp_path, "f", "l, a")
    (tmp_path / "mine.py").write_text(
        (tmp_path / "mine.py")
        .read_text()
        .replace("return list(jobs.rows)", "return jobs")
        .replace("def hand_over(self):", 'def hand_over(self):\n        raise RuntimeError("cannot hand over")')
    )
    sim = Simulation(str(path))
    sim.step()
    sim.graph.elements["admit"].select(1)
    with pytest.raises(ElementFailure) as got:
        sim.run()
    text = str(got.value)
    assert text.startswith("error: element 'l' (Leaky; declared at ")
    assert "its hand_over (as a candidate of switch 'admit') raised RuntimeError: cannot hand over" in text
