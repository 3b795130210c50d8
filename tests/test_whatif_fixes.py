"""`roundhouse whatif` and forking, on the journals and worlds that used to trip them: a replayed
journal forked by a look-ahead, a graph given by a relative path, a run with a LiveSource, an
outage, two graphs of one file name, a journal whose run has not begun or has ended, a run's
trace given to serve with --trace; and a synthesizer's pool outliving its process. (The live
runs are in test_whatif_live.py.)"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import attrs
import numpy as np

from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.journal import Journal
from tests.conftest import REPO, fails
from tests.livecluster import TEST_PROFILE
from tests.test_journal_reading import live_journal, make_journal

JOBS = "job_id,arrival_s,gpus,duration_s\n0,0,1,1800\n1,0,2,3600\n2,300,1,900\n3,600,1,2400\n"


def whatif_json(capsys, *argv) -> dict:
    from roundhouse.tools.cli import main

    capsys.readouterr()
    assert main(["whatif", *map(str, argv), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


# --- forking an engine whose backend is not the simulator ----------------------------------
class _Replaying:
    """A backend that is not the simulator (as a replayed journal is), holding what cannot be
    copied (the journal's connection), its rounds run by a simulator it wraps."""

    def __init__(self, sim):
        self.sim = sim
        self.db = sqlite3.connect(":memory:")

    @property
    def now(self) -> float:
        return self.sim.now

    def poll(self):
        return self.sim.poll()

    def apply(self, plan) -> None:
        self.sim.apply(plan)

    def advance(self) -> None:
        self.sim.advance()


def test_a_fork_of_an_engine_on_another_backend_simulates_from_its_clock(tmp_path):
    from roundhouse import Simulation
    from roundhouse.runtime.backends.sim import Simulator
    from roundhouse.runtime.snapshot import fork_engine

    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x2:V100";\n'
        "PoissonSource(rate=4/h, jobs=5, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    sim = Simulation(graph).run_until(3600)
    engine = sim._engine
    engine.backend = _Replaying(engine.backend)
    fork = fork_engine(engine, 3000.0)
    assert type(fork.backend) is Simulator and fork.backend.now == 3000.0
    assert fork.world is not engine.world and len(fork.world.jobs) == len(engine.world.jobs)
    assert fork_engine(engine).backend.now == engine.backend.now  # (the original's clock by default)


# --- the graph's key, however its path is spelled ------------------------------------------
def test_a_graph_has_one_key_whether_given_by_a_relative_or_an_absolute_path(tmp_path, monkeypatch):
    import hashlib

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "jobs.csv").write_text(JOBS)
    (folder / "profile.csv").write_text(TEST_PROFILE)
    (folder / "graph.sched").write_text(
        'round = 1min;\ncluster = "1x4:V100";\nprofile = "profile.csv";\nsrc :: TraceSource(path="jobs.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    whole = compile_file(folder / "graph.sched")
    monkeypatch.chdir(folder)
    assert compile_file("graph.sched").key() == whole.key()
    monkeypatch.chdir(tmp_path)
    assert compile_file("run/graph.sched").key() == compile_file("run/../run/graph.sched").key() == whole.key()
    # A graph given by its absolute path keeps the key it had (journals and snapshots that hold one;
    # settings added since, such as gpu_types, count only when set).
    settings = {k: v for k, v in attrs.asdict(whole.settings).items() if k != "gpu_types"}
    text = json.dumps(
        {
            "settings": settings,
            "elements": {name: [type(el).__name__, el.config()] for name, el in whole.elements.items()},
            "connections": [[c.src, c.src_port, c.dst, c.dst_port] for c in whole.connections],
        },
        sort_keys=True,
        default=str,
    )
    assert whole.key() == hashlib.sha256(text.encode()).hexdigest()[:16]
    # Another file is another graph, however named.
    (folder / "other.csv").write_text(JOBS)
    assert compile_file("run/graph.sched", ['src.path="run/other.csv"']).key() != whole.key()


# --- a run with a LiveSource still open: the same graph on both sides ----------------------
LIVE = """round = 10s;
cluster = "1x2:V100";
submitted :: LiveSource;
submitted -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;
"""


def open_journal(folder: Path, graph_text: str = LIVE, stop_s: float = 40.0) -> Path:
    """A journal of a run still open to submissions (its LiveSource has no `jobs`), cut while
    its jobs run."""
    return live_journal(folder, graph_text, [(1, 35 + 20 * i) for i in range(5)], stop_s)[0]


def test_the_run_s_graph_on_both_sides_gives_the_same_figures_with_a_live_source(tmp_path, capsys):
    path = open_journal(tmp_path)
    got = whatif_json(capsys, path, "--graph", tmp_path / "g.sched")
    assert got["from"]["unfinished"] > 0
    as_run, again = got["projections"]
    assert as_run["stop"] == again["stop"] == "every job finished"
    assert as_run["end_s"] == again["end_s"] and as_run["metrics"] == again["metrics"], (as_run, again)
    assert as_run["metrics"]["utilization"] > 0
    # The sides are told apart by what gave them: the same file, as run and with --graph.
    assert (as_run["given"], again["given"]) == ("as run", "--graph")
    assert as_run["graph"] == again["graph"] == "g.sched"


# --- an outage: no GPU, or too few, online -------------------------------------------------
def _world_with_online(tmp_path, online: list[bool]):
    from roundhouse import Simulation

    (tmp_path / "jobs.csv").write_text(JOBS)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 1min;\ncluster = "1x4:V100";\nsrc :: TraceSource(path="jobs.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    sim = Simulation(graph)
    world = sim.world_now()
    world.set_online(np.array(online))
    return world, compile_file(graph), sim.now


def test_a_projection_with_no_gpu_online_stops_saying_so(tmp_path):
    from roundhouse.runtime.whatif import simulate_ahead

    world, graph, now = _world_with_online(tmp_path, [False] * 4)
    got = simulate_ahead(world, graph, now, 30 * 86400.0)
    assert got.stop == "no GPU is online (0 of 4): no job can run, and a simulation brings no node back"
    assert got.end_s == now and got.metrics["utilization"] is None


def test_a_projection_that_stalls_stops_saying_so_with_the_gpus_online(tmp_path):
    from roundhouse.runtime.engine import STALL_ROUNDS
    from roundhouse.runtime.whatif import simulate_ahead

    world, graph, now = _world_with_online(tmp_path, [True, False, False, False])  # job 1 wants 2 GPUs
    got = simulate_ahead(world, graph, now, 30 * 86400.0)
    assert got.stop.startswith("stalled at t=") and got.stop.endswith(
        f"3 job(s) wait and none has run for {STALL_ROUNDS} rounds, with 1 of 4 GPUs online"
    ), got.stop  # (Fifo: the jobs behind it wait too)
    assert got.metrics["jobs_finished"] == 1 and got.metrics["jobs"] == 4 and got.end_s < 30 * 86400


# --- two graphs of one file name -----------------------------------------------------------
def test_two_graphs_of_one_name_are_told_apart_by_their_folders(tmp_path, capsys, monkeypatch):
    from roundhouse import Simulation
    from roundhouse.tools.cli import main

    text = (
        'round = 15min;\ncluster = "4x2:V100";\nsrc :: PoissonSource(rate=6/h, jobs=20, seed=2);\n'
        "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "graph.sched").write_text(text.replace("Las", "Las" if name == "a" else "Fifo"))
    snap = Simulation(tmp_path / "a" / "graph.sched").run_until(2 * 3600).save(tmp_path / "a.snap")
    monkeypatch.chdir(tmp_path / "b")
    monkeypatch.setenv("COLUMNS", "200")  # (the table's headers on one line each)
    got = whatif_json(capsys, snap, "--graph", "graph.sched")
    assert [(p["graph"], p["given"]) for p in got["projections"]] == [("a/graph.sched", "as run"), ("b/graph.sched", "--graph")]
    assert [p["file"] for p in got["projections"]] == [str(tmp_path / n / "graph.sched") for n in ("a", "b")]
    assert main(["whatif", str(snap), "--graph", "graph.sched"]) == 0
    out = capsys.readouterr().out
    assert "a/graph.sched" in out and "b/graph.sched" in out and "--set" not in out, out
    # The same file on both sides: what gave each.
    assert main(["whatif", str(snap), "--graph", str(tmp_path / "a" / "graph.sched")]) == 0
    out = capsys.readouterr().out
    assert "(as run)" in out and "(--graph)" in out and "--set" not in out, out
    # The run's own graph with --set, as before.
    assert main(["whatif", str(snap), "--set", "src.seed=3"]) == 0
    out = capsys.readouterr().out
    assert "(as run)" in out and "(with --set)" in out and "(--graph)" not in out, out


def test_the_sides_named_by_what_gave_them():
    from roundhouse.tools.whatif_cmd import _sides

    run = Path("/x/run/graph.sched")
    assert [s.header for s in _sides(run, None, False, False)] == ["graph.sched"]
    assert [s.header for s in _sides(run, run, False, True)] == ["graph.sched (as run)", "graph.sched (with --set)"]
    assert [s.header for s in _sides(run, run, True, True)] == ["graph.sched (as run)", "graph.sched (--graph with --set)"]
    assert [s.header for s in _sides(run, Path("/x/fifo.sched"), True, False)] == ["graph.sched", "fifo.sched"]
    assert [s.graph for s in _sides(run, Path("/y/run/graph.sched"), True, False)] == ["x/run/graph.sched", "y/run/graph.sched"]
    assert [s.graph for s in _sides(run, Path("/run/graph.sched"), True, False)] == ["x/run/graph.sched", "/run/graph.sched"]


# --- journals of a run not begun, and of a run that has ended ------------------------------
def test_a_journal_whose_scheduler_waits_for_its_agents_says_the_run_has_not_begun(tmp_path, capsys):
    empty = tmp_path / "j.sqlite"
    Journal(empty).close()  # (what serve --wait-for-agents has written before its agents come)
    err = fails(capsys, "whatif", empty)
    assert "the run has not begun: its scheduler is waiting for its agents" in err
    assert "not a live scheduler's journal" not in err


def test_a_finished_run_s_journal_is_refused_with_the_reason(tmp_path, capsys):
    finished = make_journal(tmp_path, jobs=3)
    err = fails(capsys, "whatif", finished, "--graph", tmp_path / "g.sched")
    assert f"{finished}: its run had already stopped at t=" in err and "(every job finished)" in err, err
    assert "nothing is left to simulate" in err
    # A run cut while its jobs run is not refused.
    (tmp_path / "cut").mkdir()
    cut = open_journal(tmp_path / "cut", LIVE.replace("LiveSource", "LiveSource(jobs=5)"))
    assert whatif_json(capsys, cut)["from"]["unfinished"] > 0


# --- a run's trace given to serve with --trace ---------------------------------------------
def test_a_run_graph_whose_trace_is_missing_hints_at_run_trace(tmp_path, capsys):
    (tmp_path / "jobs.csv").write_text(JOBS)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 1min;\ncluster = "1x4:V100";\nsrc :: TraceSource(path="none.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    journal.begin({"graph": str(graph), "graph_digest": "x", "cluster": "4 GPUs on 1 node (1x4:V100)", "round_s": 60.0})
    journal.add_round(0, 0.0, {})
    journal.commit()
    journal.close()
    err = fails(capsys, "whatif", path)
    assert "argument 'path' of TraceSource names no file" in err
    assert "hint: if the scheduler was given --trace, give the same with --run-trace" in err
    # Given --run-trace, the graph compiles (and the journal is then found not to be its run's).
    err = fails(capsys, "whatif", path, "--run-trace", tmp_path / "jobs.csv")
    assert "is not the run's" in err and "hint: if the scheduler" not in err
    # A problem that is not the trace's gets no such hint.
    graph.write_text(graph.read_text().replace('path="none.csv"', 'path="jobs.csv"').replace("Fifo", "Nope"))
    err = fails(capsys, "whatif", path)
    assert "Nope" in err and "hint: if the scheduler" not in err


# --- a synthesizer's pool does not outlive its process --------------------------------------
POOL_STARTER = """
import os, sys, time
from roundhouse.elements.control import _start_pool
from roundhouse.runtime.snapshot import Shared


class Owner:  # (stands for the synthesizer: the pool is freed with it)
    pass


if __name__ == "__main__":
    owner = Owner()
    pool = _start_pool(owner, Shared([], "test"), 2)
    # Two tasks at once: each of the two processes starts.
    list(pool.executor.map(time.sleep, [0.5, 0.5]))
    from multiprocessing import resource_tracker

    pids = [p.pid for p in pool.executor._processes.values()]
    print(" ".join(map(str, pids + [resource_tracker._resource_tracker._pid or 0])), flush=True)
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie, ended but not yet reaped by its new parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_synthesizer_s_pool_ends_when_its_process_is_killed(tmp_path):
    script = tmp_path / "starter.py"
    script.write_text(textwrap.dedent(POOL_STARTER))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        pids = [int(p) for p in line.split() if int(p)]
        assert len(pids) == 3 and all(_alive(p) for p in pids), line  # two processes and the resource tracker
        parent.send_signal(signal.SIGKILL)  # (it cannot shut its pool down)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in pids if _alive(p)], "the pool's processes outlived their parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        for pid in pids:  # (left by a failure above)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
