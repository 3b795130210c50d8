"""docs/simulation-api.md's example, run as written, and the Simulation API's bad inputs."""

from __future__ import annotations

import os
import re

import pytest

from roundhouse import Simulation
from roundhouse.errors import RoundhouseError, UsageError
from tests.conftest import REPO


def test_the_documented_example_runs_as_written(tmp_path, capsys):
    text = (REPO / "docs" / "simulation-api.md").read_text()
    [example] = re.findall(r"```python\n(.*?)```", text, re.S)
    example = example.replace("/tmp/fifo-day1.snap", str(tmp_path / "fifo-day1.snap"))
    here = os.getcwd()
    os.chdir(REPO)
    try:
        exec(compile(example, "docs/simulation-api.md", "exec"), {})  # noqa: S102
    finally:
        os.chdir(here)
    out = capsys.readouterr().out
    assert re.search(r"Simulation\(fifo\.sched, t=86400s, 288 rounds, 60 jobs, running\)", out)
    assert "every job finished" in out and "average JCT" in out
    assert (tmp_path / "fifo-day1.snap").stat().st_size > 0


def test_a_simulation_ends_once(tmp_path):
    sim = Simulation("graphs/fifo.sched", cluster="2x4:V100", overrides=["arrivals.jobs=10"])
    result = sim.run()
    assert sim.done and not sim.step() and sim.run() is result
    with pytest.raises(UsageError, match="has ended"):
        sim.fork()
    with pytest.raises(UsageError, match="has ended"):
        sim.save(tmp_path / "x.snap")


def test_bad_graph_and_settings_are_located_errors(tmp_path):
    with pytest.raises(RoundhouseError, match="no such file"):
        Simulation(tmp_path / "missing.sched")
    with pytest.raises(RoundhouseError, match="round"):
        Simulation("graphs/fifo.sched", round="soon")
    with pytest.raises(UsageError, match="no TraceSource"):
        Simulation("graphs/gavel-fifo.sched", trace="traces/samples/philly-1000.csv")
