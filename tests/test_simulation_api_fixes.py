"""The Simulation API: one round a step, snapshots that record the code their state was made by,
saves after an element file changed, jobs as of the clock, paths in overrides, forks that share
no arguments, errors rebuilding a snapshot's graph, helper modules edited between simulations,
and bad keyword settings."""

from __future__ import annotations

import json
import math
import sys
import threading

import polars as pl
import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from roundhouse.runtime.snapshot import SnapshotError
from roundhouse.runtime.values import Duration
from tests.conftest import REPO
from tests.own_elements import policy_file

FIFO = REPO / "graphs" / "fifo.sched"


def _policy(name: str, imports: str, sign: str) -> str:
    """A policy of the user's: fewest GPUs first, or most first when `sign` (after `imports`)
    says so; it keeps an object of its own class in its state."""
    return policy_file(
        name,
        "Rank jobs, fewest GPUs first.",
        f"""
        self._tally.n += 1
        self.counters["ranked"] = len(active.rows)
        order = np.argsort({sign}active.gpus, kind="stable")
        return Ranking(active.rows[order], active.gpus[order])
        """,
        before=f"import numpy as np\n{imports}\n\n\nclass Tally:\n    def __init__(self):\n        self.n = 0\n",
        declares='state = ("_tally",)',
        counters=(("ranked", "jobs ranked."),),
        after="""
        def start(self, ctx):
            self._tally = Tally()
        """,
    )


def _policy_graph(folder, name, helper: str | None = None):
    """A graph requiring a policy file (which imports `helper`, if given, for its sign)."""
    imports, sign = (f"import {helper}", f"{helper}.SIGN * ") if helper else ("", "")
    (folder / "pol.py").write_text(_policy(name, imports, sign))
    graph = folder / "g.sched"
    graph.write_text(
        'require "pol.py";\ncluster = "4x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=40, seed=1);\n'
        f"src -> AcceptAll -> JobPool -> {name} -> Consolidated -> Launch -> JobMetrics;\n"
    )
    return graph


@pytest.fixture
def helper_module(tmp_path, monkeypatch):
    """A module of the user's, importable from the graph's folder, gone from sys.modules after."""
    name = f"simfix_helper_{tmp_path.name.replace('-', '_')}"
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # (a rewrite within a second is read again)
    (tmp_path / f"{name}.py").write_text("SIGN = 1\n")
    yield name
    sys.modules.pop(name, None)


def timeless(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if not k.endswith("_ms")}


# --- step() runs one round ------------------------------------------------------------------------
def test_a_step_moves_the_clock_one_round_and_stepping_to_the_end_gives_a_straight_runs_result():
    options = dict(cluster="4x4:V100", overrides=["arrivals.jobs=40"], seed=1)
    straight = Simulation(FIFO, **options)
    result = straight.run()
    assert result.skipped_rounds > 0  # (event skipping passes rounds in one go in a straight run)
    stepped = Simulation(FIFO, **options)
    clock = [stepped.now]
    while stepped.step():
        clock.append(stepped.now)
    assert all(b - a == 300.0 for a, b in zip(clock, clock[1:]))
    ended = stepped.run()
    assert (ended.rounds, ended.end_s, ended.stop_reason) == (result.rounds, result.end_s, result.stop_reason)
    assert stepped.jobs().equals(straight.jobs())
    assert timeless(stepped.summary()) == timeless(straight.summary())


def test_steps_through_an_empty_stretch_move_one_round_each_and_tick_none_of_it(tmp_path):
    trace = tmp_path / "gap.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n1,3000,1,100\n")
    graph = (
        f'round = 5min; cluster = "1x4:V100"; a :: TraceSource(path="{trace}"); run :: Launch;'
        " a -> AcceptAll -> JobPool -> Fifo -> FirstFree -> run -> m :: JobMetrics;"
    )
    straight = Simulation(graph).run()
    stepped = Simulation(graph)
    clock = [stepped.now]
    while stepped.step():
        clock.append(stepped.now)
    assert clock == [300.0 * i for i in range(len(clock))] and clock[-1] == 3300.0
    assert (stepped.run().rounds, stepped.result().end_s) == (straight.rounds, straight.end_s) == (4, 3300.0)
    paused = Simulation(graph).run_until(2700).run_until(3000)  # (where the jump would land: no round past it)
    assert (paused.now, paused.rounds) == (3000.0, 2)


# --- snapshots record the code their state was made by ---------------------------------------------
def test_a_snapshot_is_refused_after_its_element_file_changed_naming_the_file(tmp_path):
    graph = _policy_graph(tmp_path, "SnapEditedPol")
    path = Simulation(graph).run_until(20000).save(tmp_path / "a.snap")
    code = json.loads(path.read_bytes().partition(b"\n")[0])["code"]
    assert list(code) == [str((tmp_path / "pol.py").resolve())]
    source = (tmp_path / "pol.py").read_text()
    (tmp_path / "pol.py").write_text(source.replace("np.argsort(active.gpus", "np.argsort(-active.gpus"))
    with pytest.raises(SnapshotError, match=r"a\.snap: .*pol\.py has changed since the snapshot was saved"):
        Simulation.load(path)
    (tmp_path / "pol.py").write_text(source)  # (the code it was saved with: it loads)
    assert Simulation.load(path).run().stop_reason


def test_a_snapshot_is_refused_after_a_module_its_element_file_imports_changed(tmp_path, helper_module):
    graph = _policy_graph(tmp_path, "SnapHelperPol", helper=helper_module)
    path = Simulation(graph).run_until(20000).save(tmp_path / "a.snap")
    (tmp_path / f"{helper_module}.py").write_text("SIGN = -1  # most GPUs first\n")
    with pytest.raises(SnapshotError, match=rf"{helper_module}\.py has changed since the snapshot was saved"):
        Simulation.load(path)


# --- saving after the element file is imported again -----------------------------------------------
def test_a_simulation_saves_and_loads_after_its_element_file_was_edited_and_put_back(tmp_path):
    graph = _policy_graph(tmp_path, "SnapTwoVersionsPol")
    first = Simulation(graph).run_until(20000)
    reference = first.fork()
    reference.run()
    source = (tmp_path / "pol.py").read_text()
    (tmp_path / "pol.py").write_text(source + "\n# a comment added\n")
    Simulation(graph).run_until(20000)  # (the file imported again, as it is now)
    (tmp_path / "pol.py").write_text(source)
    again = Simulation.load(first.save(tmp_path / "a.snap"))
    again.run()
    assert again.jobs().equals(reference.jobs())


def test_a_state_pickle_cannot_write_is_a_snapshot_error_naming_the_element(tmp_path):
    graph = _policy_graph(tmp_path, "SnapLockPol")
    sim = Simulation(graph).run_until(3600)
    [policy] = sim.graph.by_class("SnapLockPol")
    policy._tally = threading.Lock()
    with pytest.raises(
        SnapshotError,
        match=r"cannot save state attribute _tally of element 'SnapLockPol@\d+' \(SnapLockPol; declared at [^)]*\.sched:\d+:\d+, class defined at [^)]*\.py:\d+\): TypeError",
    ):
        sim.save(tmp_path / "a.snap")
    assert not (tmp_path / "a.snap").exists()


# --- jobs() as of the clock ------------------------------------------------------------------------
def test_jobs_agree_with_the_summary_and_the_world_now():
    # Up to the end of the round in which a job finishes (the last to finish within 40 hours).
    first = Simulation(FIFO, cluster="4x4:V100", overrides=["arrivals.jobs=60"]).run_until(40 * 3600)
    finished_at = first.jobs().filter(pl.col("finish_s").is_not_nan())["finish_s"].max()
    sim = Simulation(FIFO, cluster="4x4:V100", overrides=["arrivals.jobs=60"]).run_until(math.ceil(finished_at / 300) * 300)
    jobs = sim.jobs()
    finished = jobs.filter(pl.col("finish_s").is_not_nan()).height
    assert finished == sim.summary()["jobs_finished"] > 0
    assert jobs.equals(sim.world_now().jobs.frame(columns=list(jobs.columns)))
    # (the world itself learns the last round's completions only at the next round)
    assert sim.world.jobs.frame(columns=["finish_s"]).filter(pl.col("finish_s").is_not_nan()).height < finished


# --- relative paths in overrides ---------------------------------------------------------------------
def test_a_snapshot_with_a_relative_path_in_its_overrides_loads_from_another_folder(tmp_path, monkeypatch):
    (tmp_path / "made").mkdir()
    (tmp_path / "made" / "t.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,5000\n1,600,2,5000\n")
    monkeypatch.chdir(tmp_path / "made")
    sim = Simulation(FIFO, cluster="4x4:V100", overrides=['arrivals.path="t.csv"']).run_until(1200)
    path = sim.save(tmp_path / "a.snap")
    assert json.loads(path.read_bytes().partition(b"\n")[0])["overrides"] == [
        f"arrivals.path={json.dumps(str(tmp_path / 'made' / 't.csv'))}"
    ]
    monkeypatch.chdir(tmp_path)
    again = Simulation.load(path)
    again.run()
    sim.run()
    assert again.jobs().equals(sim.jobs())


# --- forks share no arguments ------------------------------------------------------------------------
def test_a_fork_and_its_original_do_not_share_their_elements_arguments():
    sim = Simulation(REPO / "graphs" / "tiresias.sched", cluster="8x4:V100").run_until(3600)
    fork = sim.fork()
    before = sim.graph.elements["order"].config()
    fork.graph.elements["order"].thresholds[0] = Duration(600.0)
    assert sim.graph.elements["order"].config() == before
    sim.graph.elements["order"].thresholds.append(Duration(7200.0))
    assert fork.graph.elements["order"].config()["thresholds"] == [Duration(600.0)]
    assert "Change the fork, not the original" not in (REPO / "docs" / "simulation-api.md").read_text()


# --- errors rebuilding a snapshot's graph ---------------------------------------------------------------
def _edit_header(path, **fields) -> None:
    head, _, payload = path.read_bytes().partition(b"\n")
    path.write_bytes(json.dumps({**json.loads(head), **fields}).encode() + b"\n" + payload)


def test_a_snapshot_whose_graph_names_an_unknown_class_says_it_must_be_defined_or_required(tmp_path):
    graph = 'cluster = "2x4:V100"; src :: PoissonSource(rate=8/h, jobs=10); src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;'
    path = Simulation(graph).run_until(3600).save(tmp_path / "a.snap")
    _edit_header(path, graph_text=graph.replace("-> Fifo ->", "-> NotebookOrder ->"))
    with pytest.raises(SnapshotError) as err:
        Simulation.load(path)
    assert str(err.value).startswith(f"snapshot {path}: cannot rebuild its graph: ")
    assert "unknown element or class 'NotebookOrder'" in str(err.value)
    assert "element class NotebookOrder must be defined (run the code that defines it) or required" in str(err.value)


def test_a_snapshot_whose_trace_moved_is_a_snapshot_error_naming_it(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,5000\n")
    path = Simulation(FIFO, cluster="2x4:V100", trace=trace).run_until(600).save(tmp_path / "a.snap")
    trace.rename(tmp_path / "moved.csv")
    with pytest.raises(SnapshotError, match=r"^snapshot .*a\.snap: cannot rebuild its graph: trace: .*t\.csv: no such file"):
        Simulation.load(path)


# --- helper modules edited between simulations ----------------------------------------------------------
def test_a_helper_module_edited_between_two_simulations_is_imported_again(tmp_path, helper_module):
    graph = _policy_graph(tmp_path, "HelperEditedPol", helper=helper_module)
    few_first = Simulation(graph).run_until(20000)
    (tmp_path / f"{helper_module}.py").write_text("SIGN = -1  # most GPUs first\n")
    many_first = Simulation(graph)
    many_first.run()
    assert sys.modules[helper_module].SIGN == -1
    ahead = few_first.fork()
    ahead.run()
    assert not many_first.jobs().equals(ahead.jobs())
    assert timeless(many_first.summary()) != timeless(ahead.summary())
    # The earlier simulation's objects are of the element file's classes as first imported, which
    # the file imported again replaced: its save says so, naming the element.
    with pytest.raises(
        SnapshotError, match=r"attribute _tally of element 'HelperEditedPol@\d+' \(HelperEditedPol; .*was imported again"
    ):
        few_first.save(tmp_path / "a.snap")


# --- keyword settings and the graph argument -------------------------------------------------------------
@pytest.mark.parametrize("value", [None, [1, 2], {"a": 1}, float("nan")])
def test_a_keyword_setting_that_is_no_scalar_is_refused_naming_the_keyword(value):
    with pytest.raises(UsageError, match=r"^seed: a graph setting given as a keyword takes a number, true/false or a str"):
        Simulation(FIFO, cluster="4x4:V100", seed=value)


def test_a_keyword_settings_bad_value_is_said_as_the_keywords():
    with pytest.raises(Exception, match=r"keyword setting seed: setting 'seed' expects a whole number") as err:
        Simulation(FIFO, cluster="4x4:V100", seed="many")
    assert "--set" not in str(err.value)


def test_an_empty_graph_is_refused():
    for graph in ("", "  \n"):
        with pytest.raises(UsageError, match=r"^graph: expected a \.sched path or a graph's text, got an empty string"):
            Simulation(graph)
