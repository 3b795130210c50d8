"""Same inputs, same outputs across processes: Python salts the hash of strings per process
(PYTHONHASHSEED), so a set or dict of names walked in hash order would give another run in
another process, as a sweep's workers and a rerun are. Runs of graphs with LP solvers, many
models and lease-based rankings, in two processes of different hash seeds, write the same bytes;
so do a run's snapshot and the snapshot of the run loaded from it, whatever the seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUN = "import sys; from roundhouse.tools.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("graph", ["gavel-las", "themis"])
def test_a_run_writes_the_same_bytes_whatever_the_hash_seed(tmp_path, graph):
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"out-{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        args = [sys.executable, "-c", RUN, "run", str(REPO / "graphs" / f"{graph}.sched"), "--until", "3d", "--out", str(out)]
        done = subprocess.run([*args, "--quiet"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        outs.append(out)
    written = sorted(p.name for p in outs[0].iterdir() if p.name != "run.json")  # (run.json has wall times)
    assert "explain.parquet" in written and any(name.endswith(".csv") for name in written)
    assert written == sorted(p.name for p in outs[1].iterdir() if p.name != "run.json")
    for name in written:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name


SAVE_AND_RELOAD = """
import hashlib, sys
from pathlib import Path
from roundhouse import Simulation
def payload(sim, path):
    sim.save(path)
    return hashlib.sha256(path.read_bytes().partition(b"\\n")[2]).hexdigest()
sim = Simulation(sys.argv[1], overrides=["arrivals.jobs=30"])
sim.run_until(100_000)
print(payload(sim, Path(sys.argv[2]) / "run.snap"), payload(Simulation.load(Path(sys.argv[2]) / "run.snap"), Path(sys.argv[2]) / "loaded.snap"))
"""


def test_a_snapshot_and_its_reloads_are_the_same_bytes_whatever_the_hash_seed(tmp_path):
    # Gandiva's trace names models its profile lacks: a set of them walked in hash order made a
    # loaded run's snapshot differ from the run's under some seeds (5 and 7 among them).
    payloads = set()
    for seed in ("1", "5", "7"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        args = [sys.executable, "-c", SAVE_AND_RELOAD, str(REPO / "graphs" / "gandiva.sched"), str(tmp_path)]
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        payloads.update(done.stdout.split())
    assert len(payloads) == 1
