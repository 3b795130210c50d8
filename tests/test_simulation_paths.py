"""Paths the Simulation API writes into `.sched` text as settings and overrides: any name a file
may have (letters beyond ASCII, quotes, a line break) reads back as the same path, also from a
snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundhouse import Simulation
from roundhouse.tools.cli import main
from tests.conftest import REPO

LAS = REPO / "graphs" / "las.sched"


@pytest.mark.parametrize("folder", ["données", 'a "quoted" one', "two\nlines"])
def test_a_trace_anywhere_is_read_by_the_simulation_and_its_snapshot(tmp_path, folder):
    where = tmp_path / folder
    where.mkdir()
    trace = where / "t.csv"
    assert main(["trace", "generate", "-o", str(trace), "--jobs", "12", "--rate", "6/h", "--seed", "2"]) == 0
    sim = Simulation(LAS, cluster="2x4:V100", trace=trace)
    assert Path(sim.graph.elements["arrivals"].path) == trace
    sim.step()
    sim.save(tmp_path / "s.snap")
    again = Simulation.load(tmp_path / "s.snap")
    again.run()
    sim.run()
    assert again.jobs().equals(sim.jobs())


def test_a_path_setting_given_as_a_keyword_is_read_as_that_path(tmp_path):
    where = tmp_path / "données"
    where.mkdir()
    profile = where / "profile.csv"
    profile.write_bytes((REPO / "traces" / "profiles" / "gavel.csv").read_bytes())
    sim = Simulation(LAS, cluster="2x4:V100", profile=profile, overrides=["arrivals.jobs=5"])
    assert Path(sim.graph.settings.profile) == profile
