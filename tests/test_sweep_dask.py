"""Sweeps on a real Dask cluster (a LocalCluster of two worker processes on loopback) and on
local worker processes: the results store gets every run once, whatever happens to workers,
to the sweep itself or to a run."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from roundhouse.runtime.results_store import ResultsStore
from roundhouse.tools.cli import main
from tests.conftest import REPO

pytestmark = pytest.mark.slow

TRACE = REPO / "traces" / "samples" / "philly-1000.csv"
PROBE = REPO / "tests" / "sweep_probe.py"


def probe_graph(folder: Path, delay: float = 0.0) -> tuple[Path, Path]:
    """A tiny graph (10 jobs on 16 GPUs) whose runs note themselves in a log; returns (graph, log)."""
    log = folder / "executions.log"
    graph = folder / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "4x4:V100";\nrequire "{PROBE}";\n'
        f'arrivals :: TraceSource(path="{TRACE}", jobs=10);\n'
        f'probe :: SweepProbe(log="{log}", delay={delay});\n'
        "arrivals -> AcceptAll -> JobPool -> probe -> Consolidated -> Launch -> JobMetrics;\n"
    )
    return graph, log


def executions(log: Path, what: str = "start") -> collections.Counter:
    """How many times each (point, seed) did `what` (start or end), from the probe's log."""
    lines = log.read_text().splitlines() if log.exists() else []
    return collections.Counter((int(p), int(s)) for w, p, s, _ in (ln.split() for ln in lines) if w == what)


def wait_until_quiet(client, log: Path, quiet_s: float = 2.0, limit_s: float = 60.0) -> None:
    """Wait until the Dask scheduler holds no task and every run in the log has ended, with no
    new line for `quiet_s` (longer than a worker takes to pick its next task)."""
    deadline = time.monotonic() + limit_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if text != last:
            last, since = text, time.monotonic()
        idle = not client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
        if idle and executions(log) == executions(log, "end") and time.monotonic() - since > quiet_s:
            return
        time.sleep(0.1)
    raise AssertionError("the workers did not go quiet")


def stored(out: Path) -> pl.DataFrame:
    return ResultsStore(out / "results").read()


def assert_each_run_once(frame: pl.DataFrame, points: list[int], seeds: list[int]) -> None:
    assert frame["key"].n_unique() == frame.height
    pairs = sorted(zip(frame["probe.point"].cast(pl.Int64).to_list(), frame["seed"].to_list()))
    assert pairs == sorted((p, s) for p in points for s in seeds)


def sweep_args(graph: Path, out: Path, points, *more: str) -> list[str]:
    return ["sweep", str(graph), "--vary", "probe.point=" + ",".join(map(str, points)), "--out", str(out), *more]


def test_every_run_lands_in_the_store_once_and_a_repeat_runs_nothing(dask_cluster, tmp_path, capsys):
    cluster, _ = dask_cluster
    graph, log = probe_graph(tmp_path, delay=0.3)
    out = tmp_path / "out"
    args = sweep_args(graph, out, [1, 2, 3], "--seeds", "2", "--dask", cluster.scheduler_address)
    assert main(args) == 0
    frame = stored(out)
    assert_each_run_once(frame, [1, 2, 3], [0, 1])
    assert set(frame["status"]) == {"ok"} and set(frame["jobs_finished"]) == {10}
    assert len(set(frame["worker"])) == 2  # both Dask workers ran some
    assert set(executions(log).values()) == {1}
    printed = capsys.readouterr()
    assert "mean ± 95% CI" in printed.out
    assert "[6 done, 0 failed, 0 remaining]" in printed.err
    # The same sweep again: everything is in the store, nothing runs.
    assert main(args) == 0
    assert "6 of 6 runs already in" in capsys.readouterr().err
    assert set(executions(log).values()) == {1}
    assert stored(out).height == 6
    summary = pl.read_csv(out / "summary.csv")
    assert summary.height == 6 and summary["probe.point"].to_list() == [1, 1, 2, 2, 3, 3]


def test_a_run_that_raises_is_recorded_and_the_others_finish(dask_cluster, tmp_path, capsys):
    cluster, _ = dask_cluster
    graph, log = probe_graph(tmp_path)
    out = tmp_path / "out"
    args = sweep_args(graph, out, [1, 2, 3, 4], "--set", "probe.fail_at=2", "--dask", cluster.scheduler_address)
    assert main(args) == 1
    frame = stored(out)
    assert_each_run_once(frame, [1, 2, 3, 4], [0])
    status = dict(zip(frame["probe.point"].to_list(), frame["status"].to_list()))
    assert status == {"1": "ok", "2": "error", "3": "ok", "4": "ok"}
    (error,) = frame.filter(pl.col("status") == "error")["error"].to_list()
    assert "probe" in error and "point 2 fails on purpose" in error
    assert "1 of 4 runs failed" in capsys.readouterr().err
    # Run again: the failed run is tried again, the finished ones are not.
    assert main(args) == 1
    assert executions(log) == {(1, 0): 1, (2, 0): 2, (3, 0): 1, (4, 0): 1}


def test_a_run_past_its_timeout_is_recorded_and_the_others_finish(dask_cluster, tmp_path):
    cluster, _ = dask_cluster
    graph, _ = probe_graph(tmp_path)
    out = tmp_path / "out"
    started = time.monotonic()
    args = ["sweep", str(graph), "--vary", "probe.delay=0,60", "--timeout", "3s", "--dask", cluster.scheduler_address]
    assert main([*args, "--out", str(out)]) == 1
    assert time.monotonic() - started < 30
    frame = stored(out)
    status = dict(zip(frame["probe.delay"].to_list(), frame["status"].to_list()))
    assert status == {"0": "ok", "60": "timeout"}
    assert frame.filter(pl.col("status") == "timeout")["error"].to_list() == ["timed out after 3 s"]


def test_a_worker_killed_mid_sweep_loses_and_duplicates_no_run(dask_cluster, tmp_path):
    cluster, client = dask_cluster
    worker_pids = set(client.run(os.getpid).values())
    graph, log = probe_graph(tmp_path, delay=1.5)
    out = tmp_path / "out"
    points = [1, 2, 3, 4, 5, 6]
    command = [sys.executable, "-m", "roundhouse.tools.cli", *sweep_args(graph, out, points, "--dask", cluster.scheduler_address)]
    sweep = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        victim = None
        deadline = time.monotonic() + 60
        while victim is None and time.monotonic() < deadline:  # a worker with a run in flight
            lines = log.read_text().splitlines() if log.exists() else []
            ended = {tuple(ln.split()[1:]) for ln in lines if ln.startswith("end")}
            flying = [ln.split() for ln in lines if ln.startswith("start") and tuple(ln.split()[1:]) not in ended]
            victim = next((fl for fl in flying if int(fl[3]) in worker_pids), None)
            time.sleep(0.05)
        assert victim is not None, "no run was seen in flight"
        os.kill(int(victim[3]), signal.SIGKILL)
        _, err = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 0, err
    frame = stored(out)
    assert_each_run_once(frame, points, [0])
    assert set(frame["status"]) == {"ok"}
    killed_point = int(victim[1])
    assert executions(log)[(killed_point, 0)] == 2  # started on the killed worker, done again elsewhere
    assert set(executions(log, "end").values()) == {1}


def test_an_interrupted_sweep_resumes_without_redoing_finished_runs(dask_cluster, tmp_path):
    cluster, client = dask_cluster
    graph, log = probe_graph(tmp_path, delay=1.0)
    out = tmp_path / "out"
    points = [1, 2, 3, 4, 5, 6, 7, 8]
    args = sweep_args(graph, out, points, "--dask", cluster.scheduler_address)
    sweep = subprocess.Popen(
        [sys.executable, "-m", "roundhouse.tools.cli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while len(ResultsStore(out / "results").files()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        sweep.kill()  # no chance to tidy up
        sweep.wait()
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    before = stored(out)
    done = {int(p) for p in before["probe.point"]}
    assert 3 <= len(done) < len(points)
    # Runs of the dead sweep already on the workers go on (a task running in a worker cannot be
    # stopped); wait until the scheduler has dropped its tasks and the workers are quiet.
    wait_until_quiet(client, log)
    starts_before = executions(log)
    assert main(args) == 0
    frame = stored(out)
    assert_each_run_once(frame, points, [0])
    assert set(frame["status"]) == {"ok"}
    resumed = executions(log) - starts_before
    assert set(resumed) == {(p, 0) for p in points if p not in done}  # the rest, once each
    assert set(resumed.values()) == {1}
    # Finished runs kept their rows (same key, same finishing time).
    kept = frame.filter(pl.col("key").is_in(before["key"].to_list())).sort("key")
    assert kept["finished_at"].to_list() == before.sort("key")["finished_at"].to_list()


SYNTH_TINY = ["--set", "arrivals.jobs=20", "--set", "synth.horizon=1h", "--cluster", "4x4:V100"]


def test_the_synthesizer_graph_runs_on_dask_workers(dask_cluster, tmp_path, capsys):
    """Dask's worker processes are daemons, which may start no pool: the synthesizer's look-aheads
    run in the worker, and decide as a pool would."""
    cluster, _ = dask_cluster
    out = tmp_path / "out"
    graph = REPO / "graphs" / "blox-synthesizer.sched"
    args = ["sweep", str(graph), "--vary", "synth.metric=jct,both", *SYNTH_TINY, "--dask", cluster.scheduler_address]
    assert main([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    frame = stored(out)
    assert set(frame["status"]) == {"ok"} and set(frame["jobs_finished"]) == {20}
