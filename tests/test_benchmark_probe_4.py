"""Benchmark scripts stopped with Ctrl-C: one line and status 130 after their cleanup, not a
traceback of wherever the interrupt landed; job processes that Ctrl-C reaches too leave their
stopping to the script; a sweep the interrupt stopped is not called failed."""

from __future__ import annotations

import importlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_benchmark_scripts_fixes import SCRIPTS  # (the scripts a user runs; the others are helpers)

BENCH = REPO / "benchmarks"


# The script run as `python SCRIPT`, with Ctrl-C (SIGINT) sent to it as soon as its arguments
# are parsed: the interrupt lands in its main, before anything heavy has started.
INTERRUPTED_AFTER_PARSING = """\
import argparse, os, runpy, signal, sys

parse_args = argparse.ArgumentParser.parse_args

def parsed_then_interrupted(self, *args, **kwargs):
    parsed = parse_args(self, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)
    return parsed

argparse.ArgumentParser.parse_args = parsed_then_interrupted
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def script(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def test_every_script_is_listed():
    helpers = {"alibaba_sim", "anchor_run", "bench_common", "live_common"}
    assert sorted(SCRIPTS) == sorted(p.stem for p in BENCH.glob("*.py") if p.stem not in helpers)


@pytest.mark.parametrize("name", SCRIPTS)
def test_ctrl_c_ends_a_script_with_one_line_and_status_130(name, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AFTER_PARSING, str(BENCH / f"{name}.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (130, "interrupted\n"), done.stderr
    assert done.stdout == ""


def test_run_script_exits_with_main_s_status():
    bench_common = script("bench_common")
    for status, code in ((None, None), (0, 0), (1, 1)):
        with pytest.raises(SystemExit) as ended:
            bench_common.run_script(lambda status=status: status)
        assert ended.value.code == code


def test_run_script_leaves_sigterm_its_own_status(capsys):
    bench_common = script("bench_common")

    def terminated():
        raise bench_common.Terminated(bench_common.TERMINATED_STATUS)

    with pytest.raises(SystemExit) as ended:
        bench_common.run_script(terminated)
    assert ended.value.code == 143
    assert capsys.readouterr().err == ""  # (not "interrupted")


def test_run_script_runs_the_cleanup_before_it_says_interrupted(capsys):
    bench_common = script("bench_common")
    said = []

    def main():
        try:
            raise KeyboardInterrupt
        finally:
            said.append(capsys.readouterr().err)

    with pytest.raises(SystemExit) as ended:
        bench_common.run_script(main)
    assert ended.value.code == 130
    assert said == [""] and capsys.readouterr().err == "interrupted\n"


# A job process of lease_check.py, interrupted as Ctrl-C interrupts every process of the group.
JOB_INTERRUPTED = """\
import os, queue, signal, sys, threading
sys.path.insert(0, sys.argv[1])
import lease_check
from roundhouse.agents.client import Lease

Lease.create(sys.argv[2])
out = queue.Queue()
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
lease_check.job("optimistic", sys.argv[2], 0, 0.01, 0.6, out)
print(len(out.get()) > 0)
"""


def test_a_lease_check_job_leaves_ctrl_c_to_the_script(tmp_path):
    """The script stops its job processes itself on Ctrl-C; each one's own KeyboardInterrupt
    printed "Process SpawnProcess-1:" and a traceback into the script's output."""
    done = subprocess.run(
        [sys.executable, "-c", JOB_INTERRUPTED, str(BENCH), str(tmp_path / "lease")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")


@pytest.mark.parametrize("status", [130, 143])
def test_sweep_local_ends_as_the_stopped_sweep_did(status, monkeypatch, capsys):
    """The command said "interrupted" (or "terminated"); the script exits with its status rather
    than calling it a failure, and reads no results (there may be none yet)."""
    sweep_local = script("sweep_local")
    monkeypatch.setattr(sweep_local, "roundhouse", lambda args: status)
    with pytest.raises(SystemExit) as ended:
        sweep_local.run(4, 1)
    assert ended.value.code == status
    assert capsys.readouterr() == ("", "")


def test_sweep_local_still_calls_a_failed_sweep_failed(monkeypatch):
    sweep_local = script("sweep_local")
    monkeypatch.setattr(sweep_local, "roundhouse", lambda args: 1)
    with pytest.raises(SystemExit) as ended:
        sweep_local.run(4, 1)
    assert ended.value.code == "the sweep failed (exit status 1)"


def test_ones_search_help_gives_the_first_paragraph_as_the_other_scripts_do():
    done = subprocess.run([sys.executable, str(BENCH / "ones_search.py"), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "Wall time of one ONES generation" in text and "A script that prints figures, not a timed test." in text
    assert "kurisusnowdeng" not in text  # (the second paragraph: the docstring's, not --help's)


def test_a_stopped_sweep_local_keeps_the_folder_it_offers_to_resume_in(tmp_path):
    """Ctrl-C in the middle of the sweep: the command says the runs done are kept, to resume,
    in the script's temporary folder, which the script then removed. It is kept, and the
    script's own command resumes there, timing only the runs it does."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # (where the script's temporary folder goes)
    args = [sys.executable, str(BENCH / "sweep_local.py"), "--runs", "6", "--workers", "1"]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path, start_new_session=True
    )
    try:
        deadline = time.time() + 120
        while not list(tmp_path.glob("*/results/*.parquet")):  # (a run done and kept)
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "no run was kept in time"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)  # (as a terminal's Ctrl-C)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    kept = re.search(r"runs kept in (\S+); run the same command to resume", err)
    assert kept is not None, err
    assert Path(kept.group(1)).is_dir() and list(Path(kept.group(1)).glob("*.parquet")), err
    resume = re.search(r"to resume the sweep there: python benchmarks/sweep_local.py (.+)", err)
    assert resume is not None, err
    assert resume.group(1).split() == ["--runs", "6", "--workers", "1", "--out", str(Path(kept.group(1)).parent)]
    before = len(list(Path(kept.group(1)).glob("*.parquet")))
    done = subprocess.run(
        [sys.executable, str(BENCH / "sweep_local.py"), *resume.group(1).split()],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"{before} of 6 runs already in" in done.stderr, done.stderr
    if before < 6:
        assert done.stdout.startswith(f"{6 - before} run"), done.stdout
        assert f"the other {before} run" in done.stdout, done.stdout
    assert len(list(Path(kept.group(1)).glob("*.parquet"))) == 6  # (the --out folder given is the user's: kept)
