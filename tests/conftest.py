"""Shared helpers: write a graph and a trace to a temporary folder and simulate them."""

from __future__ import annotations

import os

# OpenBLAS's threads only spin on the simulator's small arrays (scipy's L-BFGS-B fit of an elastic
# profile, Pollux's search), taking the other core from the neighbouring test worker: one thread
# does the same work, with the same results, in a third of the CPU time. Set before numpy loads
# OpenBLAS (no pytest plugin imports it), and passed on to the processes the tests start.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import logging
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from roundhouse.runtime import registry
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True)
def _roundhouse_logging_as_it_was():
    """A test that runs the command line in process sets up its logging (a handler on stderr,
    records not passed on to the root logger): undone after it, so that a later test in the same
    process sees Roundhouse's records through `caplog` whichever tests ran before."""
    root = logging.getLogger("roundhouse")
    propagate, handlers, level = root.propagate, list(root.handlers), root.level
    yield
    root.propagate, root.handlers[:], root.level = propagate, handlers, level


@pytest.fixture(autouse=True)
def _no_live_cluster_left_running():
    """Whatever a live test left running (it failed before its own close) is stopped after it,
    not left to run into the tests after it."""
    yield
    live = sys.modules.get("tests.livecluster")
    if live is not None:
        live.close_left_open()


# A graph for the live commands: jobs come from `roundhouse submit`.
LIVE_GRAPH = 'round = 1s;\ncluster = "1x2:V100";\nsrc :: LiveSource;\nsrc -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'


@pytest.fixture
def live_graph(tmp_path):
    path = tmp_path / "g.sched"
    path.write_text(LIVE_GRAPH)
    return path


def write_trace(path: Path, rows: list[dict]) -> Path:
    pl.DataFrame(rows).write_csv(path)
    return path


@pytest.fixture
def run_graph(tmp_path):
    """run_graph(sched_text, jobs=[{...}], cluster="1x1:V100") -> RunResult.
    The graph may refer to the trace as "trace.csv"."""

    def run(text: str, jobs: list[dict] | None = None, cluster: str | None = None, until=None, overrides=()):
        if jobs is not None:
            write_trace(tmp_path / "trace.csv", jobs)
        graph_path = tmp_path / "graph.sched"
        graph_path.write_text(textwrap.dedent(text))
        # (In one registry scope, as a command runs: the element files the graph requires are
        # forgotten after it, so that another test may require a file of the same class names.)
        with registry.scope(remember=True):
            graph = compile_file(graph_path, overrides)
            return simulate(graph, cluster, until=until)

    return run


def jobs_of(result, sink: str | None = None) -> dict[int, dict]:
    """The per-job table of the run's (only) metrics sink, by job id."""
    name = sink or next(iter(result.reports))
    return {row["job_id"]: row for row in result.reports[name]["jobs"].iter_rows(named=True)}


def play_round(world, sim, plan) -> None:
    """Apply `plan` at the current boundary, run the simulator one round, fold its results into
    `world` (a round as the engine plays it, without elements)."""
    world.check_plan(plan)
    sim.apply(plan)
    world.apply_plan(plan, sim.now)
    sim.advance()
    events, progress = sim.poll()
    world.apply_progress(progress.rows, progress.done, progress.service, progress.run_s)
    world.apply_finished(events.finished, events.finished_at)


def launch_at_start(world, running: dict[int, list[int]]) -> None:
    """Launch the jobs of `running` (job id -> the GPU ids it holds) in `world` at t=0, through
    the world's own check and books, as a plan would."""
    import numpy as np

    from roundhouse.runtime.types import Plan

    if not running:
        return
    plan = Plan(
        launch_rows=[world.jobs.row_of(j) for j in running],
        launch_gpus=np.concatenate([np.asarray(g) for g in running.values()]),
        launch_counts=[len(g) for g in running.values()],
    )
    world.check_plan(plan)
    world.apply_plan(plan, 0.0)


def fails(capsys, *argv) -> str:
    """Run the command line; it must exit 2 without a traceback. Returns what it printed."""
    from roundhouse.tools.cli import main

    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def refused(capsys, argv, message: str) -> str:
    """`fails` with the command line `argv`, whose message must say `message`."""
    err = fails(capsys, *argv)
    assert message in err, err
    return err


@pytest.fixture(scope="module")
def dask_cluster():
    """A Dask cluster of two worker processes on loopback, for one test module (the sweep tests)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None, silence_logs=40
    )
    client = Client(cluster, set_as_default=False)
    try:
        client.wait_for_workers(2, timeout=120)  # (both up before a test counts on them)
        yield cluster, client
    finally:
        client.close()
        cluster.close()


@pytest.fixture
def logs(caplog):
    """What Roundhouse logs, at INFO and above, each record once (its logger may not propagate:
    the command line's setup, which an earlier test in the process may have run)."""
    root = logging.getLogger("roundhouse")
    added = not root.propagate
    if added:
        root.addHandler(caplog.handler)
    level = root.level
    root.setLevel(logging.INFO)
    yield caplog
    if added:
        root.removeHandler(caplog.handler)
    root.setLevel(level)


def best_fit_job_by_job(cluster, available, sizes):
    """Where best fit puts jobs of these sizes one after another (`choose_consolidated`, each on
    what the ones before left): whether each was placed, their GPUs in order, and the mask left."""
    from roundhouse.elements.placement.packing import choose_consolidated

    left, gpus, placed = available.copy(), [], []
    for size in sizes.tolist():
        got = choose_consolidated(cluster, left, size, [0])
        placed.append(got is not None)
        if got is not None:
            left[got] = False
            gpus.extend(got.tolist())
    return placed, gpus, left


# A small run, two jobs on two nodes, for tests of what reads a run's folder (plot, report, explain).
SMALL_RUN_GRAPH = """\
round = 5min;
cluster = "2x4:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> metrics :: JobMetrics;
"""
SMALL_RUN_TRACE = "job_id,arrival_s,gpus,duration_s\n0,0,2,3600\n1,60,4,1800\n"


def small_run_folder(folder: Path, *options: str) -> Path:
    """The `--out` folder of the small run above, made in `folder` (with `options` given to run)."""
    from roundhouse.tools.cli import main

    (folder / "trace.csv").write_text(SMALL_RUN_TRACE)
    (folder / "g.sched").write_text(SMALL_RUN_GRAPH)
    out = folder / "out"
    assert main(["run", str(folder / "g.sched"), "--quiet", *options, "--out", str(out)]) == 0
    return out
