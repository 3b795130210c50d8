"""`roundhouse whatif`'s bad inputs: clear messages, exit status 2 (the live runs are in
test_whatif_live.py)."""

from __future__ import annotations

from roundhouse.runtime.journal import Journal
from tests.conftest import fails


def test_bad_journals_and_values_are_refused_clearly(tmp_path, capsys):
    assert "no such journal file" in fails(capsys, "whatif", tmp_path / "missing.sqlite")
    text = tmp_path / "graph.sched"
    text.write_text("round = 5min;\n")
    assert f"{text}: not a live scheduler's journal" in fails(capsys, "whatif", text)
    empty = tmp_path / "empty.sqlite"
    Journal(empty).close()
    assert "not a live scheduler's journal (it has no run recorded)" in fails(capsys, "whatif", empty)
    begun = tmp_path / "begun.sqlite"
    journal = Journal(begun)
    journal.begin({"graph": str(text), "graph_digest": "x", "cluster": "1x1:V100", "round_s": 60.0})
    journal.close()
    assert "the run has not journaled a round yet" in fails(capsys, "whatif", begun)
    assert "--horizon: 'soon' is not a duration" in fails(capsys, "whatif", begun, "--horizon", "soon")
    assert "--horizon 0s: must be a positive duration" in fails(capsys, "whatif", begun, "--horizon", "0s")
