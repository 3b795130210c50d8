"""A trace read with timing=duration runs every job for its duration by choice: the run's end
note on models the profile does not know (which progress at one unit per second) is not given
for its jobs, whose models the profile may well know (ResNet-50 in Tiresias' trace)."""

from __future__ import annotations

from roundhouse.tools.cli import main
from tests.conftest import REPO

NOTE = "models not in the profile"


def test_a_graph_timed_by_duration_names_no_model_as_unknown(capsys):
    graph = REPO / "graphs" / "tiresias.sched"
    assert "timing=duration" in graph.read_text()
    assert main(["run", str(graph), "--until", "10min"]) == 0
    assert NOTE not in capsys.readouterr().out
    # (Under timing=profile the note names them: tests/test_small_fixes_unknown_model_note.py.)
