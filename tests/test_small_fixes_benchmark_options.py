"""Benchmark scripts' options: policies.py has a short form (--quick), as the other benchmarks
do, and lease_check.py refuses a zero-second iteration as it refuses its other bad arguments."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO

BENCH = REPO / "benchmarks"


def _script(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / name), *args], capture_output=True, text=True, cwd=REPO, timeout=timeout)


def test_policies_quick_times_every_policy_on_an_eighth_of_the_workload_and_they_differ():
    sys.path.insert(0, str(BENCH))
    import policies

    done = _script("policies.py", "--quick")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{policies.QUICK_JOBS:,} Philly jobs (Blox models)") and policies.QUICK_JOBS < policies.JOBS
    row = re.compile(r"^  (.+?)\s+(\d+) rounds\s+([\d.]+) s\s+(\d+) rounds/s\s+avg JCT\s+([\d.]+) h$")
    timed = [row.match(line) for line in lines[1:]]
    assert all(timed), lines
    assert [m.group(1) for m in timed if m] == list(policies.POLICIES)
    for m in timed:
        assert m is not None and int(m.group(2)) > 0 and float(m.group(5)) > 0
    assert "testbed" not in done.stdout  # (the quick form leaves out the fixed-size testbed graphs)
    # The quick case queues as the full one does (benchmarks/policies.py's docstring): Fifo's
    # head-of-line blocking costs it several times Las' JCT (the full case: 221 h against 40 h);
    # with no queue both would run every job at once, with the same JCT.
    jct = {m.group(1): float(m.group(5)) for m in timed if m}
    assert jct["Fifo + Consolidated (reference)"] > 3 * jct["Las + Consolidated (reference)"]
    assert len(set(jct.values())) >= len(jct) - 2  # (two policies may choose alike)


def test_policies_help_names_the_quick_form_and_other_options_are_refused():
    done = _script("policies.py", "--help")
    assert done.returncode == 0 and "--quick" in done.stdout
    done = _script("policies.py", "--jobs", "5")
    assert done.returncode == 2 and "unrecognized arguments: --jobs 5" in done.stderr


def test_lease_check_refuses_an_iteration_of_zero_seconds_before_starting_anything():
    # (Before, a zero-second iteration was taken: each job checked its lease in a busy loop,
    # and the run printed "before every 0 ms iteration".)
    for given in ("0", "0.0", "-0.5"):
        done = _script("lease_check.py", "--iteration", given, "--max", "1", "--seconds", "0.2")
        assert done.returncode == 2, (given, done.stdout, done.stderr)
        assert f"error: argument --iteration: must be greater than 0, got {given}" in done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr
