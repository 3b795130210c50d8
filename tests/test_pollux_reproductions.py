"""`roundhouse reproduce pollux-interval --quick` (pollux-load's is in
test_pollux_load_reproduction.py): every run finishes every job, the tables and figures are
written, Pollux's published figures are printed beside ours, and the effects the papers describe
have the right sign (not their size)."""

import os
import platform
import subprocess
import sys

import polars as pl
import pytest

from roundhouse.tools.cli import main
from roundhouse.tools.reproductions.pollux import POLLUX, WORKLOAD, first_jobs, graph_text, retimed_workload

pytestmark = pytest.mark.skipif(not WORKLOAD.is_file(), reason="Pollux's reference data is not on this machine")


def test_retimed_workload_keeps_the_jobs_and_scales_the_gaps(tmp_path):
    slow = pl.read_csv(retimed_workload(tmp_path, 2, 20))
    fast = pl.read_csv(retimed_workload(tmp_path, 20, 20))
    original = pl.read_csv(WORKLOAD).head(20)
    for frame in (slow, fast):
        assert frame.drop("time").equals(original.drop("time"))
        assert frame["time"][0] == 0 and (frame["time"].diff().drop_nulls() >= 0).all()
    # Ten times the rate: the same gaps, a tenth as long (up to the whole-second floor).
    assert abs(slow["time"][-1] / 10 - fast["time"][-1]) <= 1
    # 19 gaps at 2 per hour last about 9.5 hours: a seeded Poisson draw, not a fixed spacing.
    assert 3 * 3600 < slow["time"][-1] < 20 * 3600


@pytest.mark.slow
def test_pollux_interval_quick(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["reproduce", "pollux-interval", "--quick", "--out", str(tmp_path)]) == 0
    out = tmp_path / "pollux-interval"
    runs = pl.read_csv(out / "runs.csv").sort("interval_s")
    assert runs["interval_s"].to_list() == [60, 480]
    assert (runs["jobs_finished"] == runs["jobs_tracked"]).all() and (runs["jobs_tracked"] == 40).all()
    # Pollux §5.3.2 and Blox Fig. 3: an 8-minute interval reacts later to arrivals and completions.
    jct = runs["avg_jct_s"].to_list()
    assert jct[1] > jct[0] > 0
    assert (out / "pollux-interval.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "2446 s" in printed  # Pollux's published figure for the 60 s interval, beside ours
    # The graphs name the workload the experiment wrote from their own folder: moved, they still check.
    graph = (out / "graphs" / "pollux-60s.sched").read_text()
    assert 'TraceSource(path="../workloads/workload-6-first-40.csv")' in graph and str(tmp_path) not in graph
    out.rename(tmp_path / "moved")
    assert main(["check", str(tmp_path / "moved" / "graphs" / "pollux-60s.sched")]) == 0


# Another machine's arithmetic on this one: numpy's vector loops for transcendental functions
# (np.log, np.power, np.exp) turned off down to its baseline, and OpenBLAS's oldest x86-64 kernels.
_OTHER_CPU = {"NPY_DISABLE_CPU_FEATURES": "AVX512_SPR AVX512_ICL X86_V4 X86_V3", "OPENBLAS_CORETYPE": "Nehalem"}


@pytest.mark.slow
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="the settings name x86-64 features")
def test_pollux_graphs_give_the_same_jobs_whatever_the_cpu(tmp_path):
    # The reproductions' graphs once refitted Pollux's throughput model from its measurements on
    # every run: L-BFGS-B on numerical gradients stops where ulps of np.log and np.power, and
    # the BLAS kernels, lead it, and Pollux's choices turn a 1e-4 change in the fit into seconds
    # of average JCT. The built-in profile (the fit, transcribed) is the same on every machine.
    graph = tmp_path / "pollux.sched"
    graph.write_text(graph_text(first_jobs(tmp_path, 12), POLLUX, 480, "the same on every machine"))
    jobs = []
    for name, extra in (("here", {}), ("other", _OTHER_CPU)):
        env = {k: v for k, v in os.environ.items() if k not in _OTHER_CPU} | extra
        code = "import sys; from roundhouse.tools.cli import main; sys.exit(main(sys.argv[1:]))"
        out = tmp_path / name
        subprocess.run(
            [sys.executable, "-c", code, "run", str(graph), "--out", str(out)], env=env, check=True, capture_output=True
        )
        jobs.append(pl.read_csv(out / "jobs.csv"))
    assert jobs[0]["status"].to_list() == ["finished"] * 12
    assert jobs[0].equals(jobs[1])
