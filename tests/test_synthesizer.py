"""Blox's scheduler synthesizer, pinned with hand-computed cases: it simulates each candidate
from the round's start, picks the clearly best one, switches at its decision round, and the run
from then on is that candidate's."""

import os
import re
import sys

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.compiler import compile_file
from tests.conftest import jobs_of

# One GPU, 5-minute rounds; a decision every 3 rounds (rounds 0, 3, 6, ...).
SYNTH = """
round = 300s;
synth :: Synthesizer(switches=[order], every=3, horizon=10h, workers={workers});
src   :: TraceSource(path="trace.csv");
fifo  :: Fifo;
srtf  :: Srtf;
order :: ChoosePolicy(candidates=[fifo, srtf]);
src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""
STATIC = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> {policy} -> FirstFree -> Launch -> m :: JobMetrics;
"""
# L (1800 s) arrives at 0; S1 and S2 (300 s each) at 420 s, visible from round 2 (600 s).
LATE_SHORT = [
    {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1800.0},
    {"job_id": 1, "arrival_s": 420.0, "gpus": 1, "duration_s": 300.0},
    {"job_id": 2, "arrival_s": 420.0, "gpus": 1, "duration_s": 300.0},
]


def finishes(result) -> dict[int, float]:
    return {job_id: row["finish_s"] for job_id, row in jobs_of(result, "m").items()}


def test_switches_at_its_decision_round_to_the_clearly_better_policy(run_graph, tmp_path):
    result = run_graph(SYNTH.format(workers=1), LATE_SHORT, cluster="1x1:V100")
    # Round 0 sees only L (arriving now): both policies do the same, FIFO (the first) stays. Rounds 1-2 run
    # FIFO: L keeps the GPU although S1 and S2 wait from 600 s. At round 3 (900 s), from the
    # same state: FIFO would finish L at 1800, S1 at 2100, S2 at 2400 (mean time in system from
    # 900: (900 + 1200 + 1500) / 3 = 1200 s); SRTF suspends L for S1 (900-1200) and S2
    # (1200-1500), then L (1500-2400): (1500 + 300 + 600) / 3 = 800 s. It switches to SRTF.
    decisions = result.reports["synth"]["decisions"].filter(pl.col("round") == 3)
    assert dict(zip(decisions["combination"], decisions["time_in_system_s"])) == pytest.approx({"fifo": 1200.0, "srtf": 800.0})
    choices = result.reports["synth"]["choices"]
    assert choices.select("round", "combination").rows() == [(0, "fifo"), (3, "srtf")]
    assert finishes(result) == {0: 2400.0, 1: 1200.0, 2: 1500.0}
    # Neither static policy gives this: FIFO throughout, or SRTF from round 2.
    assert finishes(run_graph(STATIC.format(policy="Fifo"), LATE_SHORT, cluster="1x1:V100")) == {0: 1800.0, 1: 2100.0, 2: 2400.0}
    assert finishes(run_graph(STATIC.format(policy="Srtf"), LATE_SHORT, cluster="1x1:V100")) == {0: 2400.0, 1: 900.0, 2: 1200.0}
    counters = result.counters["synth"]
    assert counters["switches"] == 1 and counters["choice"] == 1
    # And the same as running FIFO to round 3, then SRTF from there (selected by hand).
    from roundhouse.runtime.simulation import Simulation

    (tmp_path / "by-hand.sched").write_text(SYNTH.format(workers=1))
    by_hand = Simulation(str(tmp_path / "by-hand.sched"), cluster="1x1:V100", overrides=["synth.every=1000"])
    by_hand.run_until(900)
    by_hand.graph.elements["order"].select(1)
    by_hand.run()
    assert dict(zip(by_hand.jobs()["job_id"], by_hand.jobs()["finish_s"])) == finishes(result)
    # Round 6 (1800 s): only L is left, running; nothing waits, so nothing is simulated.
    assert counters["simulated"] == 2 + 2  # rounds 0 and 3


def test_picks_the_best_at_round_zero_and_then_equals_running_it(run_graph):
    # A long job first, then four short ones, all at 0: SRTF is clearly best from the start.
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 3000.0}] + [
        {"job_id": i, "arrival_s": 0.0, "gpus": 1, "duration_s": 600.0} for i in range(1, 5)
    ]
    synth = run_graph(SYNTH.format(workers=1), jobs, cluster="1x1:V100")
    static = run_graph(STATIC.format(policy="Srtf"), jobs, cluster="1x1:V100")
    assert synth.reports["synth"]["choices"]["combination"].to_list() == ["fifo", "srtf"]
    assert synth.reports["synth"]["choices"]["round"].to_list() == [0, 0]
    assert finishes(synth) == finishes(static) == {1: 600.0, 2: 1200.0, 3: 1800.0, 4: 2400.0, 0: 5400.0}


ADMISSION = """
round = 300s;
synth :: Synthesizer(switches=[admit, order], every=3, horizon=10h, workers=1);
src   :: TraceSource(path="trace.csv");
tight :: AcceptThreshold(factor=0.4x);
all   :: AcceptAll;
admit :: ChooseAdmission(candidates=[tight, all]);
srtf  :: Srtf;
order :: ChoosePolicy(candidates=[srtf]);
src -> admit -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_a_gate_switched_off_hands_its_queue_to_the_next(run_graph):
    # Two GPUs, SRTF. A (1 GPU, 3000 s) and B (2 GPUs, 3000 s) at 0: the tight gate admits A and
    # holds B (A's one GPU is already past the limit, 0.4x of 2 GPUs); Accept All admits both, but B
    # does not fit beside A either: the same schedule, so the tight gate stays at round 0.
    # C (1 GPU, 600 s) arrives at 700 s, seen at round 3 (900 s). Tight: C waits behind B:
    # A ends 3000, B 3000-6000, C 6000-6600 (time in system from 900: 2100, 5100, 5700).
    # Accept All: the tight gate hands B over, C is admitted too, and SRTF runs C on the free
    # GPU 900-1500: 2100, 5100, 600. It switches at round 3; B still runs (the handover).
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 3000.0},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 2, "duration_s": 3000.0},
        {"job_id": 2, "arrival_s": 700.0, "gpus": 1, "duration_s": 600.0},
    ]
    result = run_graph(ADMISSION, jobs, cluster="1x2:V100")
    decisions = result.reports["synth"]["decisions"].filter(pl.col("round") == 3)
    assert dict(zip(decisions["combination"], decisions["time_in_system_s"])) == pytest.approx(
        {"tight+srtf": (2100 + 5100 + 5700) / 3, "all+srtf": (2100 + 5100 + 600) / 3}
    )
    assert result.reports["synth"]["choices"].select("round", "combination").rows() == [(0, "tight+srtf"), (3, "all+srtf")]
    assert finishes(result) == {0: 3000.0, 1: 6000.0, 2: 1500.0}
    assert result.counters["admit"]["switches"] == 1
    assert result.counters["tight"]["queued"] == 0


def test_candidates_are_checked_in_the_graph(tmp_path):
    bad = tmp_path / "bad.sched"
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,60\n")
    bad.write_text(
        "round = 300s;\nfifo :: Fifo;\norder :: ChoosePolicy(candidates=[fifo, nope]);\n"
        'TraceSource(path="t.csv") -> AcceptAll -> JobPool -> order -> FirstFree -> Launch;\n'
    )
    with pytest.raises(SchedError, match="names no element 'nope'"):
        compile_file(bad)
    bad.write_text(
        "round = 300s;\nfifo :: Fifo;\norder :: ChoosePolicy(candidates=[fifo]);\n"
        'src :: TraceSource(path="t.csv");\nsrc -> AcceptAll -> pool :: JobPool -> order -> FirstFree -> Launch;\n'
        "pool -> fifo;\n"
    )
    with pytest.raises(SchedError, match="'fifo' is a candidate of 'order', which ticks it"):
        compile_file(bad)
    bad.write_text(
        "round = 300s;\nfifo :: Fifo;\nall :: AcceptAll;\norder :: ChoosePolicy(candidates=[fifo, all]);\n"
        'TraceSource(path="t.csv") -> AcceptAll -> JobPool -> order -> FirstFree -> Launch;\n'
    )
    with pytest.raises(SchedError, match=r"'all' \(AcceptAll\) cannot be a candidate of 'order' \(ChoosePolicy\): it takes jobs"):
        compile_file(bad)


def test_roundhouse_check_reports_a_candidate_that_cannot_be_forked(tmp_path, capsys):
    from roundhouse.tools.cli import main
    from tests.test_fork import USER_ELEMENTS

    # (Class names of their own: the registry already has test_fork's.)
    mine = re.sub(r"^class (?!_)(\w+)\(", r"class Synth\1(", USER_ELEMENTS, flags=re.M)
    (tmp_path / "mine.py").write_text(mine)
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,600\n1,0,1,60\n")
    text = SYNTH.format(workers=1).replace("srtf  :: Srtf;", "srtf  :: {policy};")
    for policy in ("SynthUndeclared", "SynthDeclared"):
        (tmp_path / f"{policy}.sched").write_text(
            'require "mine.py";\n' + text.replace("{policy}", policy).replace("trace.csv", "t.csv")
        )
    bad, good = str(tmp_path / "SynthUndeclared.sched"), str(tmp_path / "SynthDeclared.sched")
    # The synthesizer forks the world: `check` asks every element to be forkable, unasked.
    assert main(["check", bad]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:7:" in err and "error: element 'srtf' (SynthUndeclared; class defined at " in err
    assert "mine.py:" in err and ") cannot be forked: it declares no state" in err
    assert "Traceback" not in err
    assert main(["check", good]) == 0
    # Run anyway, it stops at its first fork with the same message, not a traceback.
    assert main(["run", bad, "--cluster", "1x1:V100"]) == 2
    err = capsys.readouterr().err
    assert f"error: element 'srtf' (SynthUndeclared; declared at {bad}:7:" in err and "Traceback" not in err
    assert "mine.py:" in err and ") cannot be forked: it declares no state" in err
    assert main(["run", good, "--cluster", "1x1:V100"]) == 0


def test_shipped_graph_checks_and_runs_a_while(capsys):
    from roundhouse.runtime.simulate import simulate
    from roundhouse.tools.cli import main
    from tests.conftest import REPO

    path = REPO / "graphs" / "blox-synthesizer.sched"
    assert main(["check", str(path)]) == 0
    graph = compile_file(path, ["synth.workers=1", "synth.horizon=2h"])
    result = simulate(graph, until=12 * 3600.0)
    assert result.counters["synth"]["decisions"] == 12 * 12 // 10 + 1
    assert result.reports["synth"]["choices"]["round"][0] == 0


QUICK_GRAPH = """
round = 5min;
cluster = "2x2:V100";
synth :: Synthesizer(switches=[admit, order], every=4, horizon=1h, workers={workers});
arrivals :: PoissonSource(rate=2/h, jobs=16, gpus=single, models=blox, seed=2);
all :: AcceptAll;
a12 :: AcceptThreshold(factor=1.2x);
admit :: ChooseAdmission(candidates=[all, a12]);
fifo :: Fifo;
srtf :: Srtf;
las :: Las(service=wall_seconds);
order :: ChoosePolicy(candidates=[fifo, srtf, las]);
arrivals -> admit -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""


# Half a day: it switches after 6 hours (round 72), and the run is forked and saved an hour later.
HALF_DAY_S, FORKED_AT_S = 12 * 3600, 7 * 3600


@pytest.fixture(scope="module")
def half_day_in_one_process(tmp_path_factory):
    """QUICK_GRAPH's first half day in one process, forked and saved at FORKED_AT_S: the run, its
    fork, the snapshot loaded, each run to the end, and the run's result. (Two tests read it: half
    a day of decisions costs seconds of look-aheads.)"""
    from roundhouse.runtime.simulation import Simulation

    sim = Simulation(QUICK_GRAPH.format(workers=1), until=HALF_DAY_S).run_until(FORKED_AT_S)
    fork = sim.fork()
    path = tmp_path_factory.mktemp("synth") / "half.snap"
    sim.save(path)
    loaded = Simulation.load(path)
    done = sim.run()
    fork.run()
    loaded.run()
    return sim, fork, loaded, done


@pytest.mark.slow
def test_a_synthesizer_run_forks_and_saves_like_any_other(half_day_in_one_process):
    from tests.test_fork import outcome, same

    # Forked after it switched, with decisions to come (a synthesizer's decisions cost look-aheads).
    sim, fork, loaded, done = half_day_in_one_process
    assert same(outcome(fork), outcome(sim)) and same(outcome(loaded), outcome(sim))
    assert done.counters["synth"]["switches"] >= 1 and done.counters["synth"]["simulated"] > 0
    choices, decisions = done.reports["synth"]["choices"], done.reports["synth"]["decisions"]
    assert 0 < choices["time_s"][1] < FORKED_AT_S < decisions["time_s"].max()
    # Jobs start and finish after the fork: the runs compared the synthesizer's schedule.
    jobs = outcome(sim)
    assert (jobs["first_start_s"] > FORKED_AT_S).any() and (jobs["finish_s"] > FORKED_AT_S).any()


@pytest.mark.slow
def test_a_process_pool_decides_as_one_process_does(half_day_in_one_process):
    from roundhouse.runtime.simulation import Simulation
    from tests.test_fork import outcome, same

    one, _, _, a = half_day_in_one_process
    two = Simulation(QUICK_GRAPH.format(workers=2), until=HALF_DAY_S)
    b = two.run()
    assert same(outcome(one), outcome(two))
    assert a.reports["synth"]["decisions"].equals(b.reports["synth"]["decisions"])


def test_a_look_ahead_sees_what_a_fork_between_rounds_run_on_without_arrivals_sees(monkeypatch):
    """The synthesizer's look-ahead (forked inside a round) and `Simulation.fork` (between two
    rounds) are one fork: from the same boundary, each combination's outlook is the same."""
    from roundhouse.elements import control
    from roundhouse.runtime.lookahead import outlook
    from roundhouse.runtime.simulation import Simulation
    from roundhouse.traces.jobs import FINISHED

    forks = []
    real = control._simulate_all
    monkeypatch.setattr(control, "_simulate_all", lambda synth, fork, combos: forks.append(fork) or real(synth, fork, combos))
    sim = Simulation(QUICK_GRAPH.format(workers=1), until=24 * 3600).run_until(6 * 3600)
    before = sim.fork()  # at a boundary before the next decision that simulates
    forks.clear()
    while not forks:
        assert sim.step()
    fork = forks[0]
    horizon = float(sim.graph.elements["synth"].horizon)
    combos = sim.graph.elements["synth"].combinations
    assert len(combos) == 6 and fork.round_index % 4 == 0
    for combo in combos:
        looked = control._simulate(fork, horizon, "synth", ["admit", "order"], combo)
        # The same from the earlier fork: run to the decision's boundary, select the combination
        # in a copy, play on with the engine's public hooks, arrivals stopped after that round.
        copy = before.fork().run_until(fork.now)
        assert copy.now == fork.now
        engine, world = copy._engine, copy.world_now()
        copy.graph.elements["synth"]._frozen = True
        for name, index in zip(["admit", "order"], combo):
            copy.graph.elements[name].select(index)
        present = (world.jobs.column("status") != FINISHED).nonzero()[0]
        engine.look_ahead(fork.now + horizon)
        stop = engine.step()
        engine.stop_arrivals()
        while not stop:
            stop = engine.step()
        arrived = np.arange(len(world.jobs), len(copy.world.jobs))
        unstarted = np.concatenate([present[np.isnan(world.jobs.column("first_start_s")[present])], arrived])
        present = np.concatenate([present, arrived])
        assert looked == outlook(copy.world, present, unstarted, fork.now, fork.now + horizon)
        assert looked.jobs > 0


def test_it_starts_no_pool_in_a_daemon_or_under_a_script_that_would_run_again(tmp_path, monkeypatch):
    import multiprocessing
    import types

    from roundhouse.elements import control

    guarded = tmp_path / "guarded.py"
    guarded.write_text('import sys\n\nif __name__ == "__main__":\n    sys.exit(0)\n')
    bare = tmp_path / "bare.py"
    bare.write_text("import sys\n\nsys.exit(0)\n")
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert control.can_start_processes()  # interactive: no main file a child would run
    main.__file__ = str(guarded)
    assert control.can_start_processes()
    main.__file__ = str(bare)
    assert not control.can_start_processes()
    # A guard is not enough where work is done outside it too: a child would run that again.
    both = tmp_path / "both.py"
    both.write_text('import os\n\nhere = os.getcwd()\nLIMIT = -3\n\nif __name__ == "__main__":\n    pass\n')
    main.__file__ = str(both)
    assert not control.can_start_processes()
    main.__file__ = str(guarded)
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True)
    assert not control.can_start_processes()


def test_a_script_without_a_main_guard_runs_it_as_one_process_would(tmp_path):
    """A spawned pool would run such a script again from its top; the synthesizer simulates in
    the script's process instead, and decides as it does with one worker."""
    import subprocess

    from roundhouse.runtime.simulation import Simulation
    from tests.conftest import REPO

    script = tmp_path / "plain.py"
    script.write_text(
        "from roundhouse import Simulation\n"
        f"sim = Simulation({QUICK_GRAPH.format(workers=2)!r}, until=8 * 3600)\n"
        "result = sim.run()\n"
        f"result.reports['synth']['decisions'].write_csv({str(tmp_path / 'two.csv')!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    one = Simulation(QUICK_GRAPH.format(workers=1), until=8 * 3600).run().reports["synth"]["decisions"]
    two = pl.read_csv(tmp_path / "two.csv", schema=one.schema)
    assert one.height > 0 and two.equals(one)


def test_a_look_ahead_copies_none_of_the_decisions_recorded_so_far(run_graph, monkeypatch):
    """The look-aheads' copies of the synthesizer are frozen and report nothing: the records of
    earlier decisions are not copied into them (copied, a long run's decisions cost the square
    of its length), and the run still reports them all."""
    from roundhouse.elements import control

    seen = []
    simulate = control._simulate

    def recording(fork, horizon_s, synth, switches, combo):
        base = fork.base.graph.elements[synth]
        seen.append((len(base._decisions), len(base._choices)))
        return simulate(fork, horizon_s, synth, switches, combo)

    monkeypatch.setattr(control, "_simulate", recording)
    jobs = [{"job_id": i, "arrival_s": 600.0 * i, "gpus": 1, "duration_s": 900.0 + 300.0 * (i % 3)} for i in range(8)]
    result = run_graph(SYNTH.format(workers=1), jobs=jobs, cluster="1x1:V100")
    assert len(seen) > 4 and set(seen) == {(0, 0)}
    assert result.reports["synth"]["decisions"].height == len(seen)
