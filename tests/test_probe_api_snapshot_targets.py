"""Where a snapshot is saved to and loaded from: a save writes the file whole and renames it
over the path, so a path that is not a regular file (a named pipe, a device) is refused rather
than replaced; a symbolic link is followed (the file it names gets the snapshot, the link stays);
a path the system cannot take (a NUL in it, a name too long) is a SnapshotError naming it. A
refused call leaves the simulation as it was: it runs on to the same results."""

from __future__ import annotations

import os
import stat

import pytest

from roundhouse import Simulation
from roundhouse.runtime.snapshot import SnapshotError
from tests.conftest import REPO

FIFO = REPO / "graphs" / "fifo.sched"
SMALL = dict(cluster="4x4:V100", overrides=["arrivals.jobs=12"], seed=1)


def _sim() -> Simulation:
    sim = Simulation(FIFO, **SMALL)
    sim.run_until(20000)
    return sim


def test_a_named_pipe_is_refused_and_stays_a_pipe(tmp_path):
    pipe = tmp_path / "run.snap"
    os.mkfifo(pipe)
    sim = _sim()
    with pytest.raises(SnapshotError, match=rf"^snapshot {pipe}: is a named pipe, not a regular file"):
        sim.save(pipe)
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.snap"]  # (no partial file left)
    # (loading one would wait for a writer for ever)
    with pytest.raises(SnapshotError, match=rf"^snapshot {pipe}: cannot read it: is a named pipe, not a snapshot file"):
        Simulation.load(pipe)
    # the refused save changed nothing
    sim.run()
    plain = Simulation(FIFO, **SMALL)
    plain.run()
    assert sim.jobs().equals(plain.jobs())


def test_a_symbolic_link_is_followed(tmp_path):
    real = tmp_path / "day1.snap"
    earlier = Simulation(FIFO, **SMALL)
    earlier.save(real)  # (an earlier snapshot: a save replaces no other file)
    link = tmp_path / "latest.snap"
    link.symlink_to(real.name)
    sim = _sim()
    sim.save(link)
    assert link.is_symlink() and os.readlink(link) == real.name
    assert real.read_bytes().startswith(b'{"format": "roundhouse-snapshot"')
    assert Simulation.load(link).jobs().equals(sim.jobs()) and Simulation.load(real).now == sim.now > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["day1.snap", "latest.snap"]


@pytest.mark.parametrize(("name", "why"), [("a\0b.snap", "NUL"), ("x" * 300 + ".snap", "too long")])
def test_a_path_the_system_cannot_take_is_named(tmp_path, name, why):
    path = str(tmp_path / name)
    sim = _sim()
    with pytest.raises(SnapshotError, match=r"^snapshot .*: cannot write it \(.*" + why):
        sim.save(path)
    with pytest.raises(SnapshotError, match=r"^snapshot .*: cannot read it \(.*" + why):
        Simulation.load(path)
    assert list(tmp_path.iterdir()) == []


def test_a_loop_of_symbolic_links_is_named(tmp_path):
    (tmp_path / "a.snap").symlink_to("b.snap")
    (tmp_path / "b.snap").symlink_to("a.snap")
    sim = _sim()
    with pytest.raises(SnapshotError, match=r"^snapshot .*a\.snap: cannot write it \(its symbolic links name each other"):
        sim.save(tmp_path / "a.snap")
    with pytest.raises(SnapshotError, match=r"^snapshot .*a\.snap: cannot read it \("):
        Simulation.load(tmp_path / "a.snap")
