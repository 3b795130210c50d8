"""`roundhouse reproduce --list`'s table is the command's one result: standard output that cannot
take it (a full disk) is an error saying so, with status 2, not a status of 0 with nothing written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROUNDHOUSE = [sys.executable, "-m", "roundhouse.tools.cli"]


@pytest.mark.parametrize("argv", [["--list"], [], ["--list", "tiresias-toy"]])
def test_list_to_a_full_disk_is_an_error(argv):
    with open("/dev/full", "w") as full:
        done = subprocess.run([*ROUNDHOUSE, "reproduce", *argv], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "standard output: cannot write the list of experiments" in done.stderr
    assert "Traceback" not in done.stderr


def test_list_is_written_whole():
    done = subprocess.run(
        [*ROUNDHOUSE, "reproduce", "--list", "tiresias-toy", "gavel-las"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "tiresias-toy" in done.stdout and "gavel-las" in done.stdout
    assert "dally-batch" not in done.stdout


def test_comparison_to_a_full_disk_is_an_error_before_the_experiment_runs(tmp_path):
    # (the heading and the paper-vs-ours table are kept in no file: lost to a full disk, the
    # run would seem to have answered; the heading finds it before the experiment runs)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*ROUNDHOUSE, "reproduce", "--quick", "tiresias-toy", "--out", str(tmp_path)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert done.returncode == 2, done.stderr
    assert "standard output: cannot write tiresias-toy's comparison with the paper" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "tiresias-toy" / "toy.csv").exists()
    # (the folder is left as a rerun takes it: a rerun to a terminal answers in full)
    again = subprocess.run(
        [*ROUNDHOUSE, "reproduce", "--quick", "tiresias-toy", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert "paper vs Roundhouse" in again.stdout
    assert (tmp_path / "tiresias-toy" / "toy.csv").is_file()


def test_a_reader_that_left_stops_no_experiment(tmp_path):
    # (`reproduce A B | head -1`: the reader has what it wanted; the experiments still run and
    # write their results, as with their other output)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [*ROUNDHOUSE, "reproduce", "--quick", "tiresias-toy", "gavel-hierarchical", "--out", str(tmp_path)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert (tmp_path / "tiresias-toy" / "toy.csv").is_file()
    assert any(p.suffix == ".csv" for p in (tmp_path / "gavel-hierarchical").iterdir())


def test_quick_heading_says_quick(tmp_path):
    # (the heading's "[quick]" was taken by Rich as a markup tag, and never shown)
    done = subprocess.run(
        [*ROUNDHOUSE, "reproduce", "--quick", "tiresias-toy", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    heading = done.stdout[: done.stdout.index("paper vs Roundhouse")]
    assert "[quick]" in heading, heading
