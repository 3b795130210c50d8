"""`roundhouse trace generate` and `convert`: a write that fails or is interrupted leaves no
part-written trace and an existing output as it was; a problem names the output; an empty -o is
refused in words; `describe` shows an elastic trace's epochs; the Philly log says what --jobs
counts and which options it cannot take."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest

from roundhouse.tools.cli import main
from roundhouse.traces import formats, philly
from roundhouse.traces.formats import read_trace
from tests.conftest import fails

ARGS = ["--jobs", "20", "--rate", "8/h", "--seed", "0"]


def _cut_short(path, what):
    """A writer that writes part of a file, then `what` happens (an interruption, a full disk)."""
    Path(path).write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n")
    raise what


@pytest.mark.parametrize("command", ["generate", "convert"])
def test_an_interrupted_write_leaves_the_old_output_and_nothing_else(tmp_path, monkeypatch, command):
    out = tmp_path / "out.csv"
    assert main(["trace", "generate", "-o", str(out), *ARGS]) == 0
    before = out.read_bytes()
    (tmp_path / "in.csv").write_bytes(before)
    monkeypatch.setattr(formats, "write_trace", lambda df, path, fmt="auto": _cut_short(path, KeyboardInterrupt()))
    argv = ["generate", "-o", str(out), *ARGS] if command == "generate" else ["convert", str(tmp_path / "in.csv"), str(out)]
    assert main(["trace", *argv]) == 130
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out.csv", "in.csv"])


def test_an_interrupted_philly_log_leaves_no_file(tmp_path, monkeypatch):
    out = tmp_path / "log.json"
    monkeypatch.setattr(philly, "_write_lines", lambda lines, path: _cut_short(path, KeyboardInterrupt()))
    assert main(["trace", "generate", "-o", str(out), *ARGS]) == 130
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_names_the_output(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out.csv"
    full = OSError(errno.ENOSPC, "No space left on device")  # (as a writer's own write() raises it)
    monkeypatch.setattr(formats, "write_trace", lambda df, path, fmt="auto": _cut_short(path, full))
    err = fails(capsys, "trace", "generate", "-o", out, *ARGS)
    assert f"error: {out}: No space left on device" in err
    assert list(tmp_path.iterdir()) == []


def test_a_writers_complaint_names_the_output_not_the_file_written_through(tmp_path, capsys):
    trace = tmp_path / "in.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,100\n")
    out = tmp_path / "out.trace"
    err = fails(capsys, "trace", "convert", trace, out)
    assert err.startswith(f"{out}: error: column 'model': job 0 has no model")
    assert "partial" not in err and sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def test_a_symlinked_output_replaces_the_file_it_points_at(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    assert main(["trace", "generate", "-o", str(link), *ARGS]) == 0
    assert link.is_symlink() and read_trace(real).height == 20


@pytest.mark.parametrize("argv", [["generate", "-o", "", *ARGS, "--format", "canonical"], ["convert", "in.csv", ""]])
def test_an_empty_output_is_refused_in_words(capsys, argv):
    err = fails(capsys, "trace", *argv)
    label = "-o" if argv[0] == "generate" else "OUTPUT"
    assert err.strip() == f"error: {label} '' names no file: name a file to write"


def test_describe_shows_an_elastic_traces_epochs(tmp_path, capsys):
    from roundhouse.tools.trace_cmd import summary_rows

    out = tmp_path / "pollux.csv"
    assert (
        main(["trace", "generate", "-o", str(out), "--jobs", "50", "--rate", "20/h", "--seed", "0", "--workload", "pollux"]) == 0
    )
    trace = read_trace(out)
    rows = dict(summary_rows(trace, "canonical", trace.columns))
    median = float(np.median(trace["epochs"].to_numpy()))
    assert "epochs" in rows and f"median {median:,.4g}," in rows["epochs"]
    assert "duration" not in rows and "iterations" not in rows


def test_the_philly_log_says_what_it_counts_and_which_options_it_cannot_take(tmp_path, capsys):
    out = tmp_path / "log.json"
    assert main(["trace", "generate", "-o", str(out), *ARGS]) == 0
    said = capsys.readouterr().out
    assert "wrote 20 records" in said and "15% of them jobs that never ran" in said
    err = fails(capsys, "trace", "generate", "-o", out, *ARGS, "--models", "blox")
    assert f"-o '{out}' (by its extension, --format philly) writes a synthetic cluster_job_log" in err
    assert err.rstrip().endswith("leave out --models")
    err = fails(capsys, "trace", "generate", "-o", out, *ARGS, "--format", "philly", "--start-id", "4", "--loss", "blox")
    assert err.startswith("error: --format philly writes") and err.rstrip().endswith("leave out --start-id and --loss")


def test_convert_says_it_cannot_tell_the_output_format_before_reading(tmp_path, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("read the input before checking the output")

    monkeypatch.setattr(formats, "load_trace", never)
    err = fails(capsys, "trace", "convert", tmp_path / "in.csv", tmp_path / "out.txt")
    assert "cannot tell which format to write" in err and err.rstrip().endswith("or name the format with --to")


@pytest.mark.parametrize("durations", [float("inf"), float("nan"), 0.0, -5])
def test_a_fixed_duration_must_be_finite_and_positive(durations):
    from roundhouse.traces.generators import generate

    with pytest.raises(ValueError, match="durations must be 'philly' or a finite number of seconds above 0"):
        generate(3, 1.0, 0, durations=durations)


@pytest.mark.parametrize(
    "name, extra",
    [
        ("a.csv", ["--workload", "tiresias"]),
        ("a.csv", ["--workload", "dally-poisson"]),
        ("a.parquet", ["--workload", "ones"]),
        ("a.csv", ["--workload", "pollux"]),
        ("a.trace", ["--models", "blox"]),
        ("a.csv", ["--format", "tiresias", "--gpus", "single"]),
        ("a.json", []),
    ],
)
def test_same_seed_same_bytes_in_every_workload_and_format(tmp_path, name, extra):
    def made(folder: str, seed: str) -> bytes:
        (tmp_path / folder).mkdir()
        out = tmp_path / folder / name
        assert main(["trace", "generate", "-o", str(out), "--jobs", "60", "--rate", "30/h", "--seed", seed, *extra]) == 0
        return out.read_bytes()

    assert made("a", "3") == made("b", "3") != made("c", "4")
