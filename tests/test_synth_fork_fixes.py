"""The synthesizer's decisions on a clock off its round grid, its look-aheads under an interactive
main, state that cannot be copied, looking at a simulation mid-run whose elements cannot be
forked, and `run_until(None)`."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from roundhouse.runtime import snapshot, whatif
from roundhouse.runtime.compiler import Override, compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.snapshot import ForkError
from tests.conftest import REPO
from tests.own_elements import policy_file

FIFO = REPO / "graphs" / "fifo.sched"
TRACE = REPO / "traces" / "samples" / "philly-single-blox-1000.csv"
OUTCOME = ["job_id", "arrival_s", "first_start_s", "finish_s", "preemptions", "service", "done"]


def _policy(name: str, state: str, held: str) -> str:
    """A policy of the user's, fewest GPUs first, in a file a graph requires: `state` is its
    declaration (or none), and it keeps `held` in `_held`, set in start."""
    return policy_file(
        name,
        "Fewest GPUs first.",
        """
        order = np.argsort(active.gpus, kind="stable")
        return Ranking(active.rows[order], active.gpus[order], backfill=True)
        """,
        before="import threading\n\nimport numpy as np",
        after=f"def start(self, ctx):\n    self._held = {held}",
        declares=state or None,
    )


def _policy_graph(tmp_path, name: str, state: str, held: str, synth: bool = False, jobs: int = 30, workers: int = 1):
    (tmp_path / f"{name.lower()}.py").write_text(_policy(name, state, held))
    policy = f"a :: {name}; b :: Fifo; order :: ChoosePolicy(candidates=[a, b]);" if synth else f"order :: {name};"
    text = (
        f'require "{name.lower()}.py";\nround = 5min; cluster = "2x4:V100";\n'
        f'src :: TraceSource(path="{TRACE}", jobs={jobs});\n'
        + (f"synth :: Synthesizer(switches=[order], workers={workers}, horizon=2h);\n" if synth else "")
        + f"{policy}\nsrc -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;\n"
    )
    path = tmp_path / f"{name.lower()}.sched"
    path.write_text(text)
    return path


def _same(a, b) -> bool:
    a, b = a.sort("job_id"), b.sort("job_id")
    return all(np.array_equal(a[c].to_numpy(), b[c].to_numpy(), equal_nan=True) for c in OUTCOME)


# --- decisions on a clock off the round grid ------------------------------------------------------
def _synthesized_from(world, now: float, skip: bool):
    """blox-synthesizer.sched with 11-minute rounds started afresh on `world` at `now` (as
    `roundhouse whatif` starts it), projected on; its jobs and its synthesizer's decisions."""
    sets = [
        "round=11min",
        "synth.horizon=2h",
        "synth.workers=1",
        "arrivals.jobs=100",
        f"skip_rounds={'true' if skip else 'false'}",
    ]
    graph = compile_file(REPO / "graphs" / "blox-synthesizer.sched", [Override(s) for s in sets])
    engine = whatif._fresh(graph, copy.deepcopy(world), now, now - 300.0, "the world")
    whatif.project(engine, "synth", 3 * 86400.0)
    return engine.world.jobs.frame(columns=OUTCOME), engine.graph.elements["synth"]._decisions


def test_the_synthesizer_decides_in_the_same_rounds_with_and_without_skipping_off_the_round_grid():
    day = Simulation(FIFO, cluster="4x4:V100", overrides=["arrivals.jobs=60"], seed=1).run_until(24 * 3600)
    now, world = day.now, day.world_now()
    assert now % 660.0  # (a day is no whole number of 11-minute rounds)
    skipped_jobs, skipped_decisions = _synthesized_from(world, now, skip=True)
    ticked_jobs, ticked_decisions = _synthesized_from(world, now, skip=False)
    assert len(ticked_decisions) > 0
    assert [(d["round"], d["time_s"]) for d in skipped_decisions] == [(d["round"], d["time_s"]) for d in ticked_decisions]
    assert _same(skipped_jobs, ticked_jobs)


def test_its_next_decision_is_counted_in_rounds_from_the_clock():
    from roundhouse.elements.control import Synthesizer
    from roundhouse.runtime.values import ElementRef

    synth = Synthesizer(switches=[ElementRef("order")], every=10)
    synth._frozen = False
    round_s = 660.0
    for index, now in [(131, 86400.0), (130, 86400.0 - 660.0), (140, 86400.0 + 9 * 660.0)]:
        ctx = types.SimpleNamespace(round_index=index, now=now, round_s=round_s)
        quiet = synth.quiet_until(ctx)
        # Rounds whose start lies before it pass untouched: all up to the next decision round, not it.
        decision = now + (-index % 10 or 10) * round_s
        assert decision - round_s < quiet < decision


# --- look-aheads under an interactive main -------------------------------------------------------
NOTEBOOK = '''
import os

import numpy as np
from roundhouse import Simulation
from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking

@element
class NotebookSmallest(Element):
    """Fewest GPUs first.

    Ports:
        active: jobs.
        ranking: ranking.
    Arguments:
        none
    Counters:
        none
    See also: Fifo
    Paper: none
    """
    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)
    state = ()
    def tick(self, ctx, active):
        order = np.argsort(-active.gpus, kind="stable")
        return Ranking(active.rows[order], active.gpus[order], backfill=True)

G = """round = 5min; cluster = "2x4:V100";
src :: TraceSource(path="TRACE", jobs=40);
synth :: Synthesizer(switches=[order], workers=WORKERS, horizon=2h);
a :: NotebookSmallest; b :: Srtf;
order :: ChoosePolicy(candidates=[a, b]);
src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""
one = Simulation(G.replace("WORKERS", "1"))
two = Simulation(G.replace("WORKERS", "2"))
a, b = one.run(), two.run()
assert a.counters["synth"]["simulated"] > 0
assert a.reports["synth"]["decisions"].equals(b.reports["synth"]["decisions"])
assert one.jobs().equals(two.jobs())
print("same")
'''


@pytest.mark.slow
def test_an_element_class_of_an_interactive_main_is_simulated_in_this_process_with_the_same_choices():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # (two processors seen, on any machine: the synthesizer's pool is at most one per processor)
    code = NOTEBOOK.replace("TRACE", str(TRACE)).replace("import os\n", "import os\nos.cpu_count = lambda: 2\n", 1)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "same"


def test_a_main_module_a_started_process_imports_again(monkeypatch):
    from roundhouse.elements import control

    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert not control.main_importable()  # interactive, `python -c`, a notebook
    main.__file__ = "/somewhere/script.py"
    assert control.main_importable()  # a script: run again as the child's main
    main.__spec__ = types.SimpleNamespace(name="mytool.run", origin="/somewhere/mytool/run.py")
    assert control.main_importable()  # `python -m mytool.run`
    main.__spec__ = types.SimpleNamespace(name="mytool.__main__", origin="/somewhere/mytool/__main__.py")
    assert not control.main_importable()  # a package's __main__: not imported in a child


# --- state that cannot be copied -----------------------------------------------------------------
def test_state_that_cannot_be_copied_is_a_fork_error_naming_the_element_its_class_and_attribute(tmp_path):
    graph = _policy_graph(tmp_path, "LockedPol", 'state = ("_held",)', "threading.Lock()")
    sim = Simulation(graph)
    sim.step()
    with pytest.raises(
        ForkError,
        match=r"element 'order' \(LockedPol; declared at [^)]*lockedpol\.sched:\d+:\d+, class defined at [^)]*lockedpol\.py:\d+\) cannot be forked: its state attribute _held holds what cannot be copied \(TypeError",
    ):
        sim.fork()
    with pytest.raises(ForkError, match=r"element 'order' \(LockedPol; declared at .*_held"):
        sim.summary()
    assert sim.jobs().height > 0  # (the jobs as of the clock copy no element)


def test_a_synthesizer_over_state_that_cannot_be_copied_names_that_element_not_itself(tmp_path):
    graph = _policy_graph(tmp_path, "LockedCand", 'state = ("_held",)', "threading.Lock()", synth=True)
    with pytest.raises(
        ForkError,
        match=r"element 'a' \(LockedCand; declared at [^)]*lockedcand\.sched:\d+:\d+, class defined at [^)]*lockedcand\.py:\d+\) cannot be forked: its state attribute _held",
    ):
        simulate(compile_file(graph), None)


@pytest.mark.slow
def test_state_that_copies_but_cannot_be_sent_to_a_pool_is_simulated_in_this_process(tmp_path, monkeypatch):
    from roundhouse.elements import control

    def no_pool(*args):
        raise AssertionError("a pool was started")

    monkeypatch.setattr(control, "_start_pool", no_pool)
    monkeypatch.setattr(control.os, "cpu_count", lambda: 2)  # (a pool is at most one per processor)
    runs = {}
    for workers in (1, 2):
        graph = _policy_graph(tmp_path, f"FunctionPol{workers}", 'state = ("_held",)', "lambda x: x", synth=True, workers=workers)
        runs[workers] = simulate(compile_file(graph), None)
    assert runs[2].counters["synth"]["simulated"] > 0
    assert runs[1].reports["synth"]["decisions"].equals(runs[2].reports["synth"]["decisions"])
    assert _same(runs[1].world.jobs.frame(columns=OUTCOME), runs[2].world.jobs.frame(columns=OUTCOME))


# --- looking at a simulation mid-run whose elements cannot be forked -------------------------------
def test_jobs_and_the_world_now_mid_run_need_no_forkable_element(tmp_path):
    plain = _policy_graph(tmp_path, "PlainPol", "", "0", jobs=40)
    declared = _policy_graph(tmp_path, "DeclaredPol", 'state = ("_held",)', "0", jobs=40)
    sim, reference = Simulation(plain), Simulation(declared)
    for t in (3600.0, 5 * 3600.0, 9 * 3600.0 + 60.0):
        sim.run_until(t)
        reference.run_until(t)
        assert sim.jobs().equals(reference.jobs())
        assert sim.world_now().jobs.frame().equals(reference.world_now().jobs.frame())
    with pytest.raises(
        ForkError,
        match=r"element 'order' \(PlainPol; declared at [^)]*plainpol\.sched:\d+:\d+, class defined at [^)]*plainpol\.py:\d+\) cannot be forked: it declares no state",
    ):
        sim.fork()
    with pytest.raises(ForkError, match=r"before the run ends.*element 'order' \(PlainPol; declared at .*plainpol\.sched"):
        sim.summary()
    # Looking changed nothing: each runs on to what the other gives.
    sim.run()
    reference.run()
    assert sim.jobs().equals(reference.jobs())


@pytest.mark.parametrize(
    ("graph", "t"),
    [
        ("fifo.sched", 7 * 3600.0),
        ("fifo.sched", 40 * 3600.0 + 100.0),
        ("las.sched", 24 * 3600.0),
        ("gavel-las.sched", 30 * 3600.0),
    ],
)
def test_the_world_now_is_what_a_fork_folding_in_the_last_round_gives(graph, t):
    options = {"cluster": "4x4:V100"} if graph != "gavel-las.sched" else {}
    sim = Simulation(REPO / "graphs" / graph, overrides=["arrivals.jobs=50"], **options).run_until(t)
    fork = snapshot.fork_engine(sim._engine)
    fork.fold_in()
    now = sim.world_now()
    assert now.jobs.frame().equals(fork.world.jobs.frame())
    assert now.unfinished == fork.world.unfinished and np.array_equal(now.running_rows, fork.world.running_rows)
    # The simulation itself is as it was: run on, it gives what a straight run gives.
    straight = Simulation(REPO / "graphs" / graph, overrides=["arrivals.jobs=50"], **options)
    sim.run()
    straight.run()
    assert sim.jobs().equals(straight.jobs())


# --- run_until(None) --------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [None, -1, float("nan"), "1h"])
def test_run_until_without_a_time_is_a_usage_error(t):
    sim = Simulation(FIFO, cluster="4x4:V100", overrides=["arrivals.jobs=5"])
    with pytest.raises(UsageError, match=r"^t: expected seconds, a number of 0 or more, got "):
        sim.run_until(t)
    assert sim.rounds == 0
    assert Simulation(FIFO, cluster="4x4:V100", overrides=["arrivals.jobs=5"], until=None).run().stop_reason
