"""Errors about an element's plan, its state (a fork, a snapshot) and the job rows or GPU counts it
emits name it as element failures do: graph name, class, where the graph declares it and where
its class is defined. A Ranking or Plan of fractional (or NaN, infinite) rows or GPU counts is
refused, not truncated."""

from __future__ import annotations

import re

import numpy as np
import pytest

from roundhouse import Simulation
from roundhouse.runtime.element_failures import ElementFailure
from roundhouse.runtime.plans import PlanError
from roundhouse.runtime.snapshot import ForkError, SnapshotError
from roundhouse.runtime.types import Plan, Ranking
from roundhouse.tools.cli import main
from roundhouse.traces.jobs import frozen_rows
from tests.own_elements import RANKING, element_class, element_file


def _mine(gpus: str, state: str, held: str) -> str:
    """The user's elements, in a file a graph requires: a placer launching its first two jobs on
    GPU 0 (a plan that cannot be carried out), a policy asking for `gpus` GPUs per job, and a
    policy keeping `held` in a state it declares as `state`."""
    placer = element_class(
        "OneGpuPlacer",
        "Launches the first two ranked jobs, both on GPU 0.",
        """
        rows = ranking.rows[:2]
        ones = np.ones(len(rows), dtype=np.int64)
        return Plan(launch_rows=rows, launch_gpus=ones * 0, launch_counts=ones)
        """,
        category="placement",
        inputs=(RANKING,),
        outputs=(("plan", "Plan", "the jobs launched."),),
        see_also="FirstFree",
    )
    asks = element_class("Asks", "Ranks in the pool's order, asking for what it is told.", f"return Ranking(active.rows, {gpus})")
    keeps = element_class(
        "Keeps",
        "Ranks in the pool's order, keeping something in its state.",
        "return Ranking(active.rows, active.gpus)",
        declares=state or None,
        after=f"def start(self, ctx):\n    self._held = {held}",
    )
    return element_file(placer, asks, keeps, before="import threading\n\nimport numpy as np")


HEAD = 'require "mine.py";\nround = 5min;\ncluster = "2x4:V100";\n'
SOURCE = "PoissonSource(rate=8/h, jobs=10, seed=1) -> AcceptAll -> pool :: JobPool"


def _graph(tmp_path, tail: str, gpus: str = "active.gpus", state: str = "state = ('_held',)", held: str = "0") -> str:
    (tmp_path / "mine.py").write_text(_mine(gpus, state, held))
    path = tmp_path / "g.sched"
    path.write_text(HEAD + tail)
    return str(path)


def _named(name: str, cls: str, graph: str) -> str:
    """The pattern of an element named as element failures name it (declared where `name ::`
    first stands in the graph)."""
    lines = open(graph).read().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if f"{name} ::" in text)
    col = lines[line - 1].index(f"{name} ::") + 1
    return (
        rf"'{name}' \({cls}; declared at {re.escape(graph)}:{line}:{col}, "
        rf"class defined at {re.escape(str(graph).rsplit('/', 1)[0])}/mine\.py:\d+\)"
    )


# --- a plan that cannot be carried out --------------------------------------------------------
def test_a_plan_that_cannot_be_carried_out_names_where_its_placer_is_declared_and_defined(tmp_path):
    graph = _graph(tmp_path, f"{SOURCE} -> Fifo -> bad :: OneGpuPlacer -> Launch -> JobMetrics;\n")
    with pytest.raises(PlanError, match=r"round \d+ \(t=\d+s\): plan from " + _named("bad", "OneGpuPlacer", graph)):
        Simulation(graph).run()


def test_the_command_line_prints_the_placers_place(tmp_path, capsys):
    graph = _graph(tmp_path, f"{SOURCE} -> Fifo -> bad :: OneGpuPlacer -> Launch -> JobMetrics;\n")
    assert main(["run", graph, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert re.search(r"plan from " + _named("bad", "OneGpuPlacer", graph) + ": ", err), err
    assert "Traceback" not in err


# --- state a fork or a snapshot cannot take ---------------------------------------------------
def test_forking_an_element_that_declares_no_state_names_where_it_is_declared_and_defined(tmp_path):
    graph = _graph(tmp_path, f"{SOURCE} -> keeps :: Keeps -> FirstFree -> Launch -> JobMetrics;\n", state="")
    sim = Simulation(graph).run_until(3600)
    with pytest.raises(ForkError, match=_named("keeps", "Keeps", graph) + " cannot be forked: it declares no state"):
        sim.fork()


def test_state_that_cannot_be_copied_names_where_its_element_is_declared_and_defined(tmp_path):
    graph = _graph(tmp_path, f"{SOURCE} -> keeps :: Keeps -> FirstFree -> Launch -> JobMetrics;\n", held="threading.Lock()")
    sim = Simulation(graph).run_until(3600)
    with pytest.raises(ForkError, match=_named("keeps", "Keeps", graph) + " cannot be forked: its state attribute _held"):
        sim.fork()


def test_state_that_cannot_be_saved_names_where_its_element_is_declared_and_defined(tmp_path):
    graph = _graph(tmp_path, f"{SOURCE} -> keeps :: Keeps -> FirstFree -> Launch -> JobMetrics;\n")
    sim = Simulation(graph).run_until(3600)
    [keeps] = sim.graph.by_class("Keeps")
    keeps._held = (lambda: 0,)  # (copies, as a fork copies it; pickle cannot write it)
    with pytest.raises(SnapshotError, match="cannot save state attribute _held of element " + _named("keeps", "Keeps", graph)):
        sim.save(tmp_path / "a.snap")


def test_a_look_ahead_over_an_unforkable_candidate_names_where_it_is_declared_and_defined(tmp_path):
    graph = _graph(
        tmp_path,
        "keeps :: Keeps; fifo :: Fifo; order :: ChoosePolicy(candidates=[keeps, fifo]);\n"
        "synth :: Synthesizer(switches=[order], workers=1, horizon=1h);\n"
        f"{SOURCE} -> order -> FirstFree -> Launch -> JobMetrics;\n",
        state="",
    )
    with pytest.raises(ForkError, match=_named("keeps", "Keeps", graph) + " cannot be forked: it declares no state"):
        Simulation(graph).run()


# --- fractional rows and GPU counts -----------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "says"),
    [
        (np.array([1.0, 1.5]), r"float64 holding 1\.5 at index 1 \(1 of 2 not whole\)"),
        (np.array([np.nan, 2.0, 0.25]), r"float64 holding nan at index 0 \(2 of 3 not whole\)"),
        (np.array([-np.inf]), r"float64 holding -inf at index 0"),
        (np.float32([2.0, 0.5]), r"float32 holding 0\.5 at index 1"),
        ([3, 4.5], r"float64 holding 4\.5 at index 1"),
        (np.array([1e19]), r"float64 holding 1e\+19 at index 0"),
    ],
)
def test_rows_and_counts_that_are_not_whole_are_refused_naming_what_was_given(given, says):
    with pytest.raises(
        ValueError, match=r"job rows, GPU ids and GPU counts must be whole numbers within int64: got an array of " + says
    ):
        frozen_rows(given)
    with pytest.raises(ValueError, match=says):
        Ranking(np.arange(len(given)), given)
    with pytest.raises(ValueError, match=says):
        Plan(launch_rows=given, launch_gpus=np.arange(len(given)), launch_counts=np.ones(len(given), dtype=np.int64))


def test_whole_floats_and_integers_are_taken_as_before():
    got = frozen_rows(np.array([0.0, 3.0, -1.0]))
    assert got.dtype == np.int64 and got.tolist() == [0, 3, -1] and not got.flags.writeable
    assert frozen_rows([]).dtype == np.int64
    assert frozen_rows(np.array([2, 5], dtype=np.int32)).tolist() == [2, 5]
    rows = np.array([4, 7], dtype=np.int64)
    got = frozen_rows(rows)
    assert got.base is rows and not got.flags.writeable and rows.flags.writeable  # (a view: no copy)
    rows.setflags(write=False)
    assert frozen_rows(rows) is rows


def test_a_users_ranking_of_fractional_gpus_is_an_element_failure_naming_it(tmp_path, capsys):
    graph = _graph(tmp_path, f"{SOURCE} -> asks :: Asks -> FirstFree -> Launch -> JobMetrics;\n", gpus="active.gpus * 1.5")
    with pytest.raises(ElementFailure, match=r"element " + _named("asks", "Asks", graph) + r" failed in round 0") as err:
        Simulation(graph).run()
    message = str(err.value)
    assert "ValueError: job rows, GPU ids and GPU counts must be whole numbers" in message
    assert re.search(r"holding \d+\.5 at index 0", message) and re.search(r"mine\.py:\d+ \(in tick\)", message), message
    assert main(["run", graph, "--out", str(tmp_path / "out")]) == 2
    printed = capsys.readouterr().err
    assert "error: element 'asks' (Asks; declared at" in printed and "must be whole numbers" in printed
    assert "Traceback" not in printed


def test_a_users_ranking_of_whole_float_gpus_runs_as_its_integers_do(tmp_path):
    runs = []
    for gpus in ("active.gpus", "active.gpus * 1.0"):
        graph = _graph(tmp_path, f"{SOURCE} -> asks :: Asks -> FirstFree -> Launch -> JobMetrics;\n", gpus=gpus)
        sim = Simulation(graph)
        sim.run()
        runs.append(sim.jobs())
    assert runs[0].height == 10 and runs[0].equals(runs[1])
