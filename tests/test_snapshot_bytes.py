"""Two snapshots of one state are the same bytes: a run's own, a fork's made from it and one
loaded from its snapshot, at the same point and after each runs on; Gavel's solvers save no wall
time; a snapshot header's length that is not a number is refused; a save's partial file is its
own and never left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from roundhouse import Simulation
from roundhouse.runtime import snapshot
from roundhouse.runtime.snapshot import SnapshotError, fork_engine
from tests.conftest import REPO

# Shipped graphs, cut to their first 30 jobs: time slicing with migration (Gandiva), least
# attained service, and Gavel's LP (MaxMinFairness: its shares, last solve and solve time).
GRAPHS = ["gandiva.sched", "las.sched", "gavel-las.sched"]


def small(graph: str) -> Simulation:
    return Simulation(str(REPO / "graphs" / graph), overrides=["arrivals.jobs=30"])


def saved(sim: Simulation, path: Path) -> bytes:
    """The state a save writes (after the header line, which says where and when it was made)."""
    sim.save(path)
    return path.read_bytes().partition(b"\n")[2]


@pytest.mark.parametrize("graph", GRAPHS)
def test_a_fork_and_a_loaded_run_save_the_bytes_the_run_saves(graph, tmp_path):
    sim = small(graph)
    sim.run_until(100_000)
    assert not sim.done  # (mid-run: jobs running and waiting)
    original = saved(sim, tmp_path / "run.snap")
    assert saved(sim, tmp_path / "again.snap") == original
    fork = sim.fork()
    loaded = Simulation.load(tmp_path / "run.snap")
    assert saved(fork, tmp_path / "fork.snap") == original
    assert saved(loaded, tmp_path / "loaded.snap") == original
    # ...and stay so as each runs on.
    for each in (sim, fork, loaded):
        each.run_until(200_000)
    on = saved(sim, tmp_path / "run-on.snap")
    assert saved(fork, tmp_path / "fork-on.snap") == on
    assert saved(loaded, tmp_path / "loaded-on.snap") == on
    assert on != original


def test_a_fork_keeps_the_simulators_running_set_the_worlds():
    # The simulator matches its cached running set against the world's by identity: a fork's
    # must be its own world's array, as the original's is the original world's.
    sim = small("gandiva.sched")
    sim.run_until(100_000)
    engine = sim._engine
    assert engine.backend._full_rows is engine.world.running_rows
    fork = fork_engine(engine)
    assert fork.backend._full_rows is fork.world.running_rows
    assert fork.world.running_rows is not engine.world.running_rows
    assert not fork.world.running_rows.flags.writeable


def test_gavel_saves_the_same_bytes_run_after_run_and_still_reports_its_solve_time(tmp_path):
    states = []
    for i in range(2):
        sim = small("gavel-las.sched")
        sim.run_until(100_000)
        states.append(saved(sim, tmp_path / f"gavel-{i}.snap"))
    assert states[0] == states[1]
    solver = sim.run().counters["solve"]
    assert solver["solves"] > 0 and solver["solve_ms"] > 0
    loaded = Simulation.load(tmp_path / "gavel-0.snap").run().counters["solve"]
    assert loaded["solves"] == solver["solves"] and "solve_ms" in loaded


def test_a_header_length_that_is_not_a_number_is_refused(tmp_path):
    sim = small("gandiva.sched")
    sim.run_until(10_000)
    path = tmp_path / "run.snap"
    sim.save(path)
    line, _, payload = path.read_bytes().partition(b"\n")
    header = json.loads(line)
    for bad in (True, "12", -1, 1.5):
        path.write_bytes(json.dumps({**header, "payload_bytes": bad}).encode() + b"\n" + payload)
        with pytest.raises(SnapshotError) as err:
            Simulation.load(path)
        assert f"'payload_bytes' must be a number of bytes (0 or more), got {bad!r}" in str(err.value)
    del header["payload_bytes"]
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)
    with pytest.raises(SnapshotError, match="the header lacks 'payload_bytes'"):
        Simulation.load(path)


def test_each_save_writes_a_partial_file_of_its_own_and_a_failed_one_leaves_none(tmp_path, monkeypatch):
    sim = small("gandiva.sched")
    sim.run_until(10_000)
    target = tmp_path / "run.snap"
    partials: list[str] = []
    replace = os.replace

    def noting(src, dst):
        partials.append(Path(src).name)
        replace(src, dst)

    monkeypatch.setattr(snapshot.os, "replace", noting)
    sim.save(target)
    sim.save(target)
    assert len(set(partials)) == 2 and all(str(os.getpid()) in name for name in partials)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.snap"]

    def failing(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot.os, "replace", failing)
    before = target.read_bytes()
    with pytest.raises(SnapshotError, match="cannot write it \\(No space left on device\\)"):
        sim.save(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.snap"]
    assert target.read_bytes() == before


def test_a_state_put_after_another_snapshots_header_is_refused(tmp_path):
    sim = small("gandiva.sched")
    sim.run_until(10_000)
    sim.save(tmp_path / "early.snap")
    sim.run_until(50_000)
    sim.save(tmp_path / "late.snap")
    early_header = json.loads((tmp_path / "early.snap").read_bytes().partition(b"\n")[0])
    line, _, payload = (tmp_path / "late.snap").read_bytes().partition(b"\n")
    late_header = json.loads(line)
    mixed = {**early_header, "payload_bytes": late_header["payload_bytes"], "payload_sha256": late_header["payload_sha256"]}
    path = tmp_path / "mixed.snap"
    path.write_bytes(json.dumps(mixed).encode() + b"\n" + payload)
    with pytest.raises(SnapshotError, match="its header and its state disagree: now_s 10"):
        Simulation.load(path)
    assert Simulation.load(tmp_path / "late.snap").now == sim.now
