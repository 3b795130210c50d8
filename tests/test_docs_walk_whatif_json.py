"""docs/whatif.md's account of how `whatif --json` names its two sides, checked against a what-if
from a snapshot of the run's own graph with other arguments (one file on both sides)."""

from __future__ import annotations

import json

from roundhouse import Simulation
from roundhouse.tools.cli import main
from tests.conftest import REPO


def said(page: str) -> str:
    """A page's text with its lines joined, as a sentence across a line break reads."""
    return " ".join((REPO / page).read_text().split())


def test_one_file_on_both_sides_is_named_alone_in_the_json_and_told_apart_by_given(tmp_path, capsys):
    assert "each projection's `graph` is that name (of one file on both sides, the file's name alone" in said("docs/whatif.md")
    sim = Simulation(REPO / "graphs" / "fifo.sched", cluster="4x4:V100", overrides=["arrivals.jobs=20"], seed=1)
    sim.run_until(6 * 3600)
    snap = tmp_path / "fifo.snap"
    sim.save(snap)
    assert main(["whatif", str(snap), "--set", "arrivals.jobs=30", "--horizon", "1d", "--json"]) == 0
    sides = json.loads(capsys.readouterr().out)["projections"]
    assert [(s["graph"], s["given"]) for s in sides] == [("fifo.sched", "as run"), ("fifo.sched", "with --set")]
    assert {s["file"] for s in sides} == {str(REPO / "graphs" / "fifo.sched")}
