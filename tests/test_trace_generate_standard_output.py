"""`trace generate` and `trace convert` onto standard output: `-o -` is refused (it would write a
file named '-'), and a trace written to /dev/stdout is not followed there by the line saying
what was written (which would read as one more job), which goes to standard error instead."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest

from tests.conftest import fails

GENERATE = ["trace", "generate", "--jobs", "3", "--seed", "1", "--rate", "1/h", "--format", "canonical"]


@pytest.mark.parametrize("command", ["generate", "convert"])
def test_a_dash_for_the_output_is_refused_and_writes_no_file(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n")
    argv = [*GENERATE, "-o", "-"] if command == "generate" else ["trace", "convert", "in.csv", "-", "--to", "canonical"]
    err = fails(capsys, *argv)
    assert "'-': a trace is written to a file" in err and "/dev/stdout" in err, err
    assert not (tmp_path / "-").exists()


def test_a_trace_generated_onto_stdout_is_only_the_trace(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", *GENERATE, "-o", "/dev/stdout"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    (tmp_path / "t.csv").write_text(done.stdout)
    frame = pl.read_csv(tmp_path / "t.csv")
    assert frame.columns == ["job_id", "arrival_s", "gpus", "duration_s"] and frame.height == 3, done.stdout
    assert "wrote 3 jobs to /dev/stdout" in done.stderr, done.stderr
