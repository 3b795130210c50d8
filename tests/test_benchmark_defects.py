"""Benchmark scripts as a user meets them: an anchor's program given by a path relative to the
working folder, and temporary files removed when a script is stopped with `kill PID`."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

BENCH = REPO / "benchmarks"


def script(name: str):
    """A benchmark script imported as a module (its folder first on the path, as when run)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


# --- gavel_msr.py --gavel ../gavel/scheduler --gavel-python ../gavel-env/bin/python ---

# Gavel's driver, reduced to what gavel_msr.py reads of its output: one job's JCT and the average.
FAKE_GAVEL_DRIVER = """\
print("Job 0: 123.5")
print("Average job completion time: 123.500 seconds")
"""


def test_gavel_python_given_relative_to_the_working_folder_is_found(tmp_path, monkeypatch):
    """The docstring's own example passes the checkout and its Python as paths relative to where
    the user stands; Gavel's simulator runs in its checkout, where that Python path means
    another file (it was "cannot run Gavel's simulator ...: No such file or directory")."""
    gavel_msr = script("gavel_msr")
    drivers = tmp_path / "gavel" / "scheduler" / "scripts" / "drivers"
    drivers.mkdir(parents=True)
    (drivers / "simulate_scheduler_with_trace.py").write_text(FAKE_GAVEL_DRIVER)
    (tmp_path / "gavel-env" / "bin").mkdir(parents=True)
    (tmp_path / "gavel-env" / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "main").mkdir()
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path / "main")
    assert script("bench_common").program_problem("../gavel-env/bin/python") is None  # (as main() checks it)
    done = gavel_msr.run_gavel(
        Path("../gavel/scheduler").resolve(), "../gavel-env/bin/python", "fifo", tmp_path / "data" / "msr.trace"
    )
    assert done["avg_jct_s"] == 123.5
    assert done["per_job"]["gavel_jct_s"].to_list() == [123.5]


def test_a_program_that_is_not_there_is_named_as_the_user_gave_it(tmp_path, monkeypatch):
    anchor_run = script("anchor_run")
    monkeypatch.chdir(tmp_path)
    try:
        anchor_run.run_anchor(["../no-env/bin/python", "-c", "pass"], "Gavel's simulator", cwd=tmp_path)
    except anchor_run.AnchorFailed as err:
        assert str(err) == "cannot run Gavel's simulator with ../no-env/bin/python: No such file or directory"
    else:
        raise AssertionError("a program that is not there ran")


# --- `kill PID`: temporary files removed ---


def _terminate_when(proc: subprocess.Popen, ready, what: str, timeout: float = 15.0) -> tuple[str, str]:
    """Once `ready()`, send `proc` SIGTERM (as `kill PID` does) and wait for it to end; its
    output and errors. Failing before then (it ended, or `what` did not happen in time), it is killed."""
    try:
        deadline = time.time() + timeout
        while not ready():
            assert proc.poll() is None, f"it ended before {what}: {proc.communicate()}"
            assert time.time() < deadline, f"not {what} within {timeout:g} s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        return proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _terminate_once_made(args: list[str], scratch: Path, pattern: str, timeout: float = 15.0) -> subprocess.CompletedProcess:
    """Run `args` with its temporary files in `scratch`; once a file or folder matching
    `pattern` is there, send SIGTERM and wait for the process to end."""
    proc = subprocess.Popen(
        args,
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=scratch.parent,
    )
    _, err = _terminate_when(proc, lambda: bool(list(scratch.glob(pattern))), f"making {pattern} in {scratch}", timeout)
    return subprocess.CompletedProcess(args, proc.returncode, "", err)


# explain_cost.py with the record spilled to disk at once (in the 10,000-job case it spills
# tens of MB within seconds; this makes a small case do so as soon as it starts).
SPILL_AT_ONCE = """\
import runpy, sys
import roundhouse.runtime.explain as explain
explain._SPILL_BYTES = 0
explain._CHUNKS = 8
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_explain_cost_removes_its_spilled_record_when_terminated(tmp_path):
    """The record's spilled blocks (tens of MB in the default case) are removed when the process
    exits; SIGTERM's default action ended it without that, and left them in the temporary folder."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    wrapper = tmp_path / "spill_at_once.py"
    wrapper.write_text(SPILL_AT_ONCE)
    args = [sys.executable, str(wrapper), str(BENCH / "explain_cost.py"), "--jobs", "2000", "--repeat", "50"]
    done = _terminate_once_made(args, scratch, "roundhouse-explain-*")
    assert sorted(p.name for p in scratch.iterdir()) == []
    assert done.returncode == 128 + signal.SIGTERM, done.stderr  # (ended through its cleanup)
    assert "Traceback" not in done.stderr, done.stderr


def test_gavel_solvers_removes_its_temporary_folders_when_terminated(tmp_path):
    """Each solve's jobs and graph are written to a temporary folder; SIGTERM during a solve
    left it behind."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = _terminate_once_made([sys.executable, str(BENCH / "gavel_solvers.py"), "--quick"], scratch, "tmp*/g.sched")
    assert sorted(p.name for p in scratch.iterdir()) == []
    assert done.returncode == 128 + signal.SIGTERM, done.stderr  # (ended through its cleanup)
    assert "Traceback" not in done.stderr, done.stderr


# A simulation in the script's own process, its first element sending SIGTERM to the process
# from within its tick: where `kill PID` lands most of the time, in engine_las.py, explain_cost.py,
# fork.py, gavel_solvers.py and scale.py's engine cases.
TERMINATED_IN_A_TICK = """\
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from bench_common import exit_on_terminate
from roundhouse.elements.admission import AcceptAll
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

exit_on_terminate()
original = AcceptAll.tick

def tick(self, ctx, **inputs):
    os.kill(os.getpid(), signal.SIGTERM)
    return original(self, ctx, **inputs)

AcceptAll.tick = tick
graph = '''round = 5min;
cluster = "4x4:V100";
src :: PoissonSource(rate=8/h, jobs=20, seed=0);
src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;
'''
simulate(compile_file("bench.sched", text=graph))
print("the simulation went on")
"""


def test_sigterm_during_a_simulation_ends_the_script_without_a_traceback(tmp_path):
    """The engine takes a SystemExit raised in an element's tick for that element's failure: the
    script printed "element 'AcceptAll@1' ... failed ...: its tick raised SystemExit: 143" with a
    traceback and ended with status 1."""
    done = subprocess.run(
        [sys.executable, "-c", TERMINATED_IN_A_TICK, str(BENCH)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=60,
    )
    assert "the simulation went on" not in done.stdout
    assert "Traceback" not in done.stderr and "failed" not in done.stderr, done.stderr
    assert done.returncode == 128 + signal.SIGTERM, done.stderr


# --- scale.py and gavel_msr.py: a case's process stopped with time to clean up ---

# Stands in for a case's process (`scale.py --child NAME --folder FOLDER`): says it started, and
# on SIGTERM cleans up (here: writes that it did) and ends.
CASE_PROCESS = """\
import pathlib, signal, sys, time
folder = pathlib.Path(sys.argv[sys.argv.index("--folder") + 1])

def stop(signum, frame):
    (folder / "cleaned-up").write_text("")
    sys.exit(143)

signal.signal(signal.SIGTERM, stop)
(folder / "started").write_text("")
time.sleep(60)
"""

# scale.py's run_case, its trace taken as generated and its case's process the one above.
SCALE_INTERRUPTED = """\
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import scale
from bench_common import exit_on_terminate

exit_on_terminate()
scale.generate_trace = lambda folder, jobs, rate, profiled=False: 0.0
scale.__file__ = sys.argv[2]
scale.run_case("active-1k", Path(sys.argv[3]), True)
"""


def _interrupt_when_started(args: list[str], folder: Path) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = _terminate_when(proc, (folder / "started").exists, "the case's process started")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_scale_asks_a_case_s_process_to_stop_rather_than_killing_it(tmp_path):
    """`kill PID` on scale.py killed the running case's process at once (subprocess.run's SIGKILL),
    leaving what it was writing: a million-job command-line run spills its explanation record,
    tens of MB, to /tmp. It is now sent SIGTERM, on which a run removes its files."""
    child = tmp_path / "case_process.py"
    child.write_text(CASE_PROCESS)
    folder = tmp_path / "cases"
    folder.mkdir()
    done = _interrupt_when_started([sys.executable, "-c", SCALE_INTERRUPTED, str(BENCH), str(child), str(folder)], folder)
    assert (folder / "cleaned-up").exists(), done.stderr
    assert done.returncode == 128 + signal.SIGTERM, done.stderr


def test_run_child_returns_what_subprocess_run_returns(tmp_path):
    bench_common = script("bench_common")
    args = [sys.executable, "-c", "import os, sys; print(os.getcwd()); print('oops', file=sys.stderr); sys.exit(3)"]
    done = bench_common.run_child(args, cwd=tmp_path)
    assert (done.args, done.returncode, done.stdout, done.stderr) == (args, 3, f"{tmp_path}\n", "oops\n")


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def test_run_child_kills_a_child_that_does_not_stop_when_asked(tmp_path, monkeypatch):
    """A child that ignores SIGTERM is killed after the grace period, and the interrupt goes on."""
    bench_common = script("bench_common")
    monkeypatch.setattr(bench_common, "STOP_GRACE_S", 0.5)
    started = tmp_path / "started"
    ignoring = (
        "import os, pathlib, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"pathlib.Path({str(started)!r}).write_text(str(os.getpid())); time.sleep(60)"
    )

    def interrupt():  # (Ctrl-C's KeyboardInterrupt, raised in the main thread once the child runs)
        deadline = time.time() + 15
        while not (started.exists() and started.read_text()) and time.time() < deadline:
            time.sleep(0.05)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, _raise_interrupt)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        began = time.time()
        with pytest.raises(KeyboardInterrupt):
            bench_common.run_child([sys.executable, "-c", ignoring])
        assert time.time() - began < 15
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert not Path(f"/proc/{started.read_text()}").exists()  # (killed, and reaped)


# --- what a table says it measured ---


def test_sweep_local_names_the_workers_the_sweep_started(tmp_path):
    """Its wall / summed ratio is read against the number of workers; it printed the number asked
    for ("1 runs ... on 3 worker(s)") where the sweep starts no more workers than runs."""
    done = subprocess.run(
        [sys.executable, str(BENCH / "sweep_local.py"), "--runs", "1", "--workers", "3"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "1 run of graphs/las.sched on 1 local worker process", done.stdout


def test_scale_prints_no_empty_table_for_gavel_s_case_alone(monkeypatch, capsys):
    """`--only gavel-msr` printed the first table's header over no row, then Gavel's table."""
    scale = script("scale")
    gavel_msr = script("gavel_msr")
    row = dict(case="Gavel msr 0e4a51, LAS", wall_s=2.0, cpu_s=1.9, rounds=10, skipped=1, gavel_s=64.5, times_faster=32.25)
    monkeypatch.setattr(gavel_msr, "rows", lambda skip: [row])
    monkeypatch.setattr(scale, "exit_on_terminate", lambda: None)  # (this process's SIGTERM left as it is)
    monkeypatch.setattr(scale, "compile_bytecode", lambda: None)
    monkeypatch.setattr(sys, "argv", ["scale.py", "--only", "gavel-msr"])
    scale.main()
    lines = [line for line in capsys.readouterr().out.splitlines() if line]
    assert lines[0].startswith("Gavel's msr 0e4a51"), lines
    assert not any("peak RSS" in line for line in lines), lines
    assert lines[-1].startswith("Gavel msr 0e4a51, LAS") and "32.2x" in lines[-1], lines


# Stands in for a case's process on Ctrl-C: its cleanup takes a moment, during which a SIGTERM
# (its default action) would end it.
SLOW_CLEANUP = """\
import pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
try:
    (folder / "started").write_text("")
    time.sleep(60)
except KeyboardInterrupt:
    time.sleep(1.0)
    (folder / "cleaned-up").write_text("")
"""

RUN_CHILD = """\
import sys
sys.path.insert(0, sys.argv[1])
from bench_common import exit_on_terminate, run_child
exit_on_terminate()
run_child([sys.executable, "-c", sys.argv[2], sys.argv[3]])
"""


def test_run_child_on_ctrl_c_lets_the_child_finish_its_own_cleanup(tmp_path):
    """Ctrl-C reaches the whole process group: the child is already stopping when this script
    is, and is not sent SIGTERM in the middle of its cleanup."""
    args = [sys.executable, "-c", RUN_CHILD, str(BENCH), SLOW_CLEANUP, str(tmp_path)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 15
        while not (tmp_path / "started").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the child did not start"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # (as a terminal's Ctrl-C)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (tmp_path / "cleaned-up").exists()


def test_gavel_msr_refuses_gavel_without_its_throughputs_before_any_run(tmp_path):
    """`--data FOLDER --gavel CHECKOUT` where FOLDER lacks simulation_throughputs.json: Gavel's
    simulator, given that file, failed only once our runs of the first case were done."""
    from tests.test_benchmark_scripts_fixes import gavel_folder

    data = gavel_folder(tmp_path / "data", None)
    drivers = tmp_path / "scheduler" / "scripts" / "drivers"
    drivers.mkdir(parents=True)
    (drivers / "simulate_scheduler_with_trace.py").write_text(FAKE_GAVEL_DRIVER)
    done = subprocess.run(
        [sys.executable, str(BENCH / "gavel_msr.py"), "--data", str(data), "--gavel", str(tmp_path / "scheduler")],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"Gavel's simulator needs {data / 'simulation_throughputs.json'}, which is not there" in done.stderr
    assert "Traceback" not in done.stderr and "LAS" not in done.stdout, done.stdout
