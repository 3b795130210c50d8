"""`roundhouse whatif` reads a running scheduler's journal as of one moment: what `serve`
commits while whatif reads (a job accepted and the round that delivers it) is either wholly
seen or not at all, never half, which would read as a damaged journal."""

from __future__ import annotations

import json
import sqlite3

from roundhouse.runtime import journal as journal_module
from tests.test_journal_reading import make_journal


def _serve_writes_a_round(path) -> int:
    """Commit, as serve does from another connection, a job accepted and a next round that
    delivers it (the last round's record otherwise). Returns the new round's number."""
    db = sqlite3.connect(path)
    k, now, text = db.execute("SELECT k, now, record FROM rounds ORDER BY k DESC LIMIT 1").fetchone()
    record = dict(json.loads(text), submitted=[99], finished=[])
    spec = {"job_id": "99", "gpus": "1", "duration_s": "30", "command": "sleep 1"}
    with db:
        db.execute("INSERT INTO submissions VALUES (?, ?, ?, ?)", (99, json.dumps(spec), now, k + 1))
        db.execute("INSERT INTO rounds VALUES (?, ?, ?)", (k + 1, now + 10.0, json.dumps(record)))
    db.close()
    return k


def test_what_serve_commits_while_whatif_reads_is_not_half_read(tmp_path, capsys, monkeypatch):
    from roundhouse.tools.cli import main

    path = make_journal(tmp_path, stop_s=60.0)
    read_rounds = journal_module._round_rows
    last = []

    def rounds_read_after_serve_wrote(journal):
        # (whatif has read the submissions' ids by now: serve commits between the two reads)
        if not last:
            last.append(_serve_writes_a_round(path))
        return read_rounds(journal)

    monkeypatch.setattr(journal_module, "_round_rows", rounds_read_after_serve_wrote)
    assert main(["whatif", str(path), "--json"]) == 0, capsys.readouterr().err
    point = json.loads(capsys.readouterr().out)["from"]
    assert last and point["round"] == last[0]  # (as of when whatif opened the journal)
    assert point["jobs"] == 6
