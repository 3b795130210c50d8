"""An output no file can be written to is refused before any work, for root too: whether a file
can be made in its folder is tried (a file made and removed at once), not asked of `os.access`,
which says yes to root for /proc and /sys, where none can be made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.files import check_output_file, file_making_problem, make_folder, write_problem
from tests.conftest import fails
from tests.test_benchmark_scripts_fixes import refused, run

# Folders of the kernel's: writable to root by their mode bits, yet no file can be made in them.
KERNEL_FOLDERS = ("/proc", "/sys")


@pytest.mark.parametrize("folder", KERNEL_FOLDERS)
def test_no_file_can_be_made_in_a_kernel_folder(folder):
    assert file_making_problem(Path(folder)) is not None
    problem = write_problem(Path(folder) / "x.png")
    assert problem is not None and problem.filename == f"{folder}/x.png"


def test_trying_a_folder_leaves_nothing_behind(tmp_path):
    (tmp_path / "kept.csv").write_text("a\n")
    assert file_making_problem(tmp_path) is None
    assert write_problem(tmp_path / "new.csv") is None and write_problem(tmp_path / "kept.csv") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.csv"]
    assert (tmp_path / "kept.csv").read_text() == "a\n"  # (opened to try it, not emptied)


def test_a_device_is_asked_not_opened():
    # (a pipe opened for writing would wait for a reader; a device such as /dev/stdout is written in place)
    assert write_problem(Path(os.devnull)) is None


@pytest.mark.parametrize("folder", KERNEL_FOLDERS)
def test_check_output_file_refuses_a_file_in_a_kernel_folder(folder):
    with pytest.raises(UsageError, match=rf"--plot {folder}/x\.png: cannot write there"):
        check_output_file(f"{folder}/x.png", "--plot")


@pytest.mark.parametrize("folder", KERNEL_FOLDERS)
def test_a_results_folder_in_which_no_file_can_be_made_is_refused(folder):
    with pytest.raises(UsageError, match=rf"--out {folder}: the folder is not writable"):
        make_folder(folder, "--out")


def test_scale_refuses_an_unwritable_plot_before_any_case_runs(tmp_path):
    done = run("scale", "--only", "active-1k", "--plot", "/proc/x.png", cwd=tmp_path, timeout=120)
    refused(done, 2, "--plot /proc/x.png: cannot write there")
    assert done.stdout == ""  # (not a case's row, not even the table's header)


# Each command's input is missing: the output's refusal shows it came before the input was read.
@pytest.mark.parametrize(
    "argv",
    [
        ["render", "{missing}/g.sched", "-o", "/proc/x.svg"],
        ["plot", "{missing}", "-o", "/proc/x.png"],
        ["report", "{missing}", "-o", "/sys/x.html"],
        ["trace", "convert", "{missing}/t.csv", "/proc/t.parquet"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_command_refuses_an_unwritable_output_before_reading_its_input(tmp_path, capsys, argv):
    err = fails(capsys, *(a.format(missing=tmp_path / "missing") for a in argv))
    output = next(a for a in argv if a.startswith(("/proc", "/sys")))
    assert output in err and "missing" not in err, err


def test_trace_generate_refuses_an_unwritable_output_before_drawing(capsys):
    err = fails(capsys, "trace", "generate", "-o", "/proc/t.csv", "--jobs", "10", "--rate", "8/h", "--seed", "0")
    assert "-o '/proc/t.csv': cannot write there" in err, err


def test_profile_refuses_an_unwritable_table_before_measuring(capsys):
    err = fails(capsys, "profile", "--models", "resnet18", "--out", "/sys/profile.csv")
    assert "--out /sys/profile.csv: cannot write there" in err, err
