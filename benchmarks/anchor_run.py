"""Another project's simulator run beside ours (Gavel's, Alibaba's): one process, timed, and a
clear error, naming what was run, when it cannot start or does not report its results."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from bench_common import not_a_script


class AnchorFailed(Exception):
    """The other simulator could not be started, or did not report its results."""


def run_anchor(args: list[str], what: str, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """`args` in a fresh process, its output captured: the finished process and its wall seconds.
    Raises AnchorFailed when the program cannot be started. A program given as a relative path
    (`../gavel-env/bin/python`) is taken from this process's working folder, as the user wrote
    it, not from `cwd` (where the child would look for it)."""
    program = args[0]
    if cwd is not None and os.path.dirname(program) and not os.path.isabs(program):
        # Absolute, not resolved: a virtual environment's python is a link that must stay one.
        args = [os.path.abspath(program), *args[1:]]
    started = time.perf_counter()
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as err:  # no such Python, or not executable
        raise AnchorFailed(f"cannot run {what} with {program}: {err.strerror}") from None
    return done, time.perf_counter() - started


def failure(done: subprocess.CompletedProcess, what: str) -> AnchorFailed:
    """The error for a run of `what` that ended without its results: its status and last lines."""
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:]) or "(it printed nothing)"
    return AnchorFailed(f"{what} exited with status {done.returncode}:\n{tail}")


if __name__ == "__main__":
    not_a_script("benchmarks/scale.py or benchmarks/gavel_msr.py")
