"""`roundhouse whatif` and `roundhouse explain` used as a new user would, and got wrong: a
running journal copied without its write-ahead log, a snapshot given where a graph goes."""

from __future__ import annotations

import errno
import io
import json
import shutil
import sys

import pytest

from roundhouse.runtime.journal import Journal
from tests.conftest import fails

FIFO = 'round = 5min;\ncluster = "1x2:V100";\nPoissonSource(rate=4/h, jobs=6, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'


@pytest.fixture
def snapshot(tmp_path):
    from roundhouse import Simulation

    graph = tmp_path / "fifo.sched"
    graph.write_text(FIFO)
    return Simulation(graph).run_until(3600).save(tmp_path / "hour.snap")


def test_a_running_journal_copied_without_its_log_is_said_to_be_one(tmp_path, capsys):
    """Copied while its scheduler runs, a journal's own file holds little more than its header:
    its tables and rounds are in the write-ahead log beside it, which the copy left behind."""
    live = tmp_path / "journal.sqlite"
    journal = Journal(live)
    try:
        journal.begin({"graph": str(tmp_path / "g.sched"), "graph_digest": "x", "cluster": "1x1:V100", "round_s": 60.0})
        copy = tmp_path / "copy.sqlite"
        shutil.copy(live, copy)
    finally:
        journal.close()
    err = fails(capsys, "whatif", copy)
    assert f"{copy}: a SQLite database with no tables, written through a write-ahead log that is not beside it" in err, err
    assert f"({copy}-wal is missing or empty)" in err and "Copy the journal with its -wal file" in err, err
    # The journal itself, its scheduler stopped, reads (its log folded into its file).
    assert "the run has not journaled a round yet" in fails(capsys, "whatif", live)


def test_a_snapshot_or_a_journal_given_as_the_graph_is_named_as_such(tmp_path, capsys, snapshot):
    """Two snapshots to compare, or the arguments swapped: `--graph` names a .sched file."""
    err = fails(capsys, "whatif", snapshot, "--graph", snapshot)
    assert f"--graph {snapshot}: a simulation's snapshot, not a .sched file" in err, err
    assert "not UTF-8" not in err
    journal = tmp_path / "journal.sqlite"
    Journal(journal).close()
    err = fails(capsys, "whatif", snapshot, "--graph", journal)
    assert f"--graph {journal}: a SQLite database (a live scheduler's journal?), not a .sched file" in err, err
    err = fails(capsys, "whatif", journal, "--run-graph", snapshot)
    assert f"--run-graph {snapshot}: a simulation's snapshot, not a .sched file" in err, err


class _FullDisk(io.TextIOBase):
    """Standard output on a full disk: every write fails, as to /dev/full."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_result_that_cannot_be_written_is_an_error_naming_standard_output(tmp_path, capsys, monkeypatch, snapshot):
    """The table whatif prints is its one result: lost to a full disk, the command fails (it
    said nothing and exited 0), as explain's timeline and whatif's JSON do, naming where."""
    from roundhouse.tools.cli import main

    graph = tmp_path / "fifo.sched"
    assert main(["run", str(graph), "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    for argv, what in (
        (["whatif", str(snapshot)], "the comparison"),
        (["whatif", str(snapshot), "--json"], "the comparison"),
        (["explain", str(tmp_path / "run"), "0"], "job 0's timeline"),
    ):
        monkeypatch.setattr(sys, "stdout", _FullDisk())
        status = main(argv)
        monkeypatch.undo()
        err = capsys.readouterr().err
        assert status == 2 and f"error: standard output: cannot write {what} (No space left on device)" in err, (argv, err)
        # Written where it can be, the same result.
        assert main(argv) == 0 and capsys.readouterr().out


def test_a_side_stopped_before_its_last_job_finished_has_no_makespan(tmp_path, capsys, snapshot):
    """Stopped at the horizon, a side's last finish so far is not its makespan (it was given as
    one, less than the horizon): JSON says null, the table that it is more than the span run."""
    from roundhouse.tools.cli import main

    capsys.readouterr()
    assert main(["whatif", str(snapshot), "--set", "seed=1", "--horizon", "6h", "--json"]) == 0
    sides = json.loads(capsys.readouterr().out)["projections"]
    for side in sides:
        assert side["stop"] == "reached the horizon (6h)", side
        assert 0 < side["metrics"]["jobs_finished"] < side["metrics"]["jobs"], side
        assert side["metrics"]["makespan_s"] is None, side
    assert main(["whatif", str(snapshot), "--horizon", "6h"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "makespan" in line)
    assert [cell.strip() for cell in row.split("│")[2:3]] == ["> 6.00 h"], row
    # Given room to finish, the same side has one: its last job's end, from the fork point.
    assert main(["whatif", str(snapshot), "--json"]) == 0
    (side,) = json.loads(capsys.readouterr().out)["projections"]
    assert side["stop"] == "every job finished" and side["metrics"]["makespan_s"] > 3600, side
