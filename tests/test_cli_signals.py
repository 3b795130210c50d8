"""A run stopped by SIGTERM (`kill`, `timeout`, a batch scheduler) cleans up as on Ctrl-C."""

import os
import signal
import subprocess
import sys
import time

from tests.conftest import REPO


def test_sigterm_leaves_no_part_of_the_record_and_no_spill_folder(tmp_path):
    out, spill = tmp_path / "run", tmp_path / "tmp"
    spill.mkdir()
    env = {**os.environ, "TMPDIR": str(spill), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "roundhouse.tools.cli", "run", "graphs/blox-accept.sched", "--out", str(out)]
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "explain.parquet.part").exists():  # (the run is under way)
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before it could be stopped"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.strip() == "terminated (SIGTERM)", err
    assert not out.exists() and list(spill.iterdir()) == []  # (the folder the run made, removed with what it held)


def test_a_command_started_with_its_standard_output_closed_ends_as_it_would_otherwise(tmp_path):
    # `roundhouse ... >&-`: Python has no sys.stdout; what the command prints is lost, and its
    # exit status is the command's, without a traceback.
    done = subprocess.run(
        f"{sys.executable} -m roundhouse.tools.cli check {REPO / 'graphs' / 'las.sched'} >&-",
        shell=True,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
