"""Sweeps on local worker processes, the results store's safety, and a sweep's bad input."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import polars as pl
import pytest

from roundhouse.runtime.results_store import ResultsStore
from roundhouse.runtime.simulate import load_cluster
from roundhouse.runtime.sweep import RunSpec, compile_spec
from roundhouse.tools.cli import main
from tests.test_sweep_dask import TRACE, assert_each_run_once, executions, probe_graph, stored, sweep_args


def store_bytes(out) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (out / "results").iterdir()}


@pytest.mark.slow
def test_local_runs_that_fail_die_or_overstay_are_recorded_and_the_others_finish(tmp_path, capsys):
    graph, log = probe_graph(tmp_path)
    out = tmp_path / "out"
    more = ["--set", "probe.fail_at=2", "--set", "probe.exit_at=3", "--timeout", "4s", "--workers", "2"]
    # Point 4 sleeps for a minute: its run is stopped at its timeout.
    assert main([*sweep_args(graph, out, [1, 2, 3, 4, 5], *more), "--vary", "probe.delay=0"]) == 1
    assert "2 of 5 runs failed" in capsys.readouterr().err
    slow = ["sweep", str(graph), "--vary", "probe.point=4", "--vary", "probe.delay=60", "--out", str(out), *more]
    started = time.monotonic()
    assert main(slow) == 1
    assert time.monotonic() - started < 30
    frame = stored(out)
    status = {(p, d): s for p, d, s in zip(frame["probe.point"], frame["probe.delay"], frame["status"])}
    assert status == {
        ("1", "0"): "ok",
        ("2", "0"): "error",
        ("3", "0"): "error",
        ("4", "0"): "ok",
        ("5", "0"): "ok",
        ("4", "60"): "timeout",
    }
    errors = dict(zip(frame["probe.point"] + frame["probe.delay"], frame["error"]))
    assert "fails on purpose" in errors["20"]
    assert "worker process died (exit status 3)" in errors["30"]
    assert errors["460"].startswith("timed out after 4 s")
    assert "1 of 1 runs failed" in capsys.readouterr().err
    assert executions(log)[(4, 0)] == 2 and executions(log, "end")[(4, 0)] == 1  # the overdue run never ended


@pytest.mark.slow
def test_a_killed_local_sweep_resumes_without_redoing_finished_runs(tmp_path):
    graph, log = probe_graph(tmp_path, delay=0.7)
    out = tmp_path / "out"
    points = [1, 2, 3, 4, 5, 6, 7, 8]
    args = sweep_args(graph, out, points, "--workers", "2")
    # Its own session, so that the sweep and its worker processes are killed together.
    sweep = subprocess.Popen(
        [sys.executable, "-m", "roundhouse.tools.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while len(ResultsStore(out / "results").files()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
    before = stored(out)
    done = {int(p) for p in before["probe.point"]}
    assert 3 <= len(done) < len(points)
    starts_before = executions(log)
    assert main(args) == 0
    frame = stored(out)
    assert_each_run_once(frame, points, [0])
    resumed = executions(log) - starts_before
    assert set(resumed) == {(p, 0) for p in points if p not in done}
    assert set(resumed.values()) == {1}


def test_a_failed_write_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path / "results")
    store.lock()
    row = {"key": "a" * 64, "status": "ok", "seed": 0, "avg_jct_s": 1.5}
    store.write(row)
    before = {p.name: p.read_bytes() for p in store.folder.iterdir()}

    def full_disk(self, file, *a, **k):
        file.write(b"PAR1 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk)
    with pytest.raises(OSError):
        store.write({**row, "avg_jct_s": 9.9})  # the same key again: must not replace the good file
    with pytest.raises(OSError):
        store.write({**row, "key": "b" * 64})
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in store.folder.iterdir()} == before
    assert store.read()["avg_jct_s"].to_list() == [1.5]
    # A temporary file left by a crash (the process killed mid-write) is ignored, then removed.
    (store.folder / f".{'c' * 64}.0123.tmp").write_bytes(b"PAR1 half")
    assert store.read().height == 1
    store.unlock()
    store.lock()
    assert sorted(p.name for p in store.folder.iterdir()) == [".lock", f"{'a' * 64}.parquet"]
    # One sweep at a time.
    other = ResultsStore(tmp_path / "results")
    with pytest.raises(Exception, match="another sweep is writing"):
        other.lock()
    store.unlock()


def test_a_grid_naming_an_unknown_setting_or_field_runs_nothing_and_keeps_the_store(tmp_path, capsys):
    graph, log = probe_graph(tmp_path)
    out = tmp_path / "out"
    assert main([*sweep_args(graph, out, [1]), "--workers", "1"]) == 0
    kept = store_bytes(out)
    log.unlink()
    capsys.readouterr()
    cases = [
        (["--vary", "rounds=5min,10min"], "unknown setting 'rounds' (--vary rounds)"),
        (["--vary", "probe.pont=1,2"], "--vary probe.pont=1: SweepProbe 'probe' has no argument 'pont'"),
        (["--vary", "prob.point=1,2"], "the graph has no element 'prob'"),
        (["--vary", "probe.point=1,x"], "--vary probe.point"),
        (["--vary", "seed=1,2", "--seeds", "3"], "--seeds: give either --seeds or --vary seed"),
        (["--timeout", "0s"], "--timeout 0s: must be more than 0"),
        (["--timeout", "-5s"], "--timeout -5s: must be more than 0"),
        (
            ["--vary", "probe.point=1,2", "--set", "probe.point=2"],
            "--set probe.point=2 and --vary probe.point=...: probe.point is both fixed and varied",
        ),
    ]
    for extra, message in cases:
        assert main(["sweep", str(graph), "--out", str(out), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err, err
        assert "Traceback" not in err
    assert not log.exists()  # no run started
    assert store_bytes(out) == kept


@pytest.mark.slow
def test_a_dask_address_that_does_not_answer_is_reported_in_bounded_time(tmp_path, capsys, monkeypatch):
    import functools
    import socket

    from roundhouse.runtime.sweep_exec import DaskExecutor
    from roundhouse.tools import sweep_cmd

    graph, log = probe_graph(tmp_path)
    out = tmp_path / "out"
    assert main([*sweep_args(graph, out, [1, 2]), "--workers", "1"]) == 0
    kept = store_bytes(out)
    log.unlink()
    with socket.socket() as s:  # a port on which nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    args = [*sweep_args(graph, out, [1, 2, 3]), "--dask", f"tcp://127.0.0.1:{port}"]
    assert main(args) == 2
    assert time.monotonic() - started < 20
    err = capsys.readouterr().err
    assert f"error: --dask tcp://127.0.0.1:{port}: no Dask scheduler answered within 10 s" in err
    for address, why in (("tcp://127.0.0.1:notaport", ""), ("nonsense", "missing port number")):
        assert main([*args[:-1], address]) == 2
        assert "not a scheduler address" in (err := capsys.readouterr().err) and why in err and "Traceback" not in err
    assert not log.exists() and store_bytes(out) == kept
    # A folder for the sweep is made only once Dask has answered. (The default wait is timed
    # above; here a shorter one fails the same way, sooner.)
    monkeypatch.setattr(sweep_cmd, "DaskExecutor", functools.partial(DaskExecutor, connect_timeout=1.0))
    fresh = tmp_path / "fresh"
    assert main([*sweep_args(graph, fresh, [1]), "--dask", f"tcp://127.0.0.1:{port}"]) == 2
    assert "no Dask scheduler answered within 1 s" in capsys.readouterr().err
    assert not fresh.exists()


def test_a_runs_key_follows_the_contents_of_every_input_not_their_paths(tmp_path):
    first = tmp_path / "a"
    first.mkdir()
    shutil.copy(TRACE, first / "trace.csv")
    (first / "nothing.py").write_text("# required, defines no element\n")
    (first / "common.sched").write_text("round = 5min;\n")
    (first / "cluster.toml").write_text('[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "V100"\n')
    (first / "g.sched").write_text(
        'import "common.sched";\nrequire "nothing.py";\ncluster = "cluster.toml";\n'
        'src :: TraceSource(path="trace.csv", jobs=5);\nsrc -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n'
    )
    second = tmp_path / "b"
    shutil.copytree(first, second)

    def key(folder, overrides=("seed=0",)):
        return compile_spec(RunSpec(str(folder / "g.sched"), tuple(overrides)))[1]

    base = key(first)
    assert load_cluster(compile_spec(RunSpec(str(first / "g.sched")))[0], None).node_gpus.sum() == 8
    assert key(second) == base  # a copy elsewhere: the same run
    assert key(first, ["seed = 0"]) == base  # the same override, spaced otherwise
    assert key(first, ["seed=1"]) != base
    assert key(first, ["seed=0", "src.jobs=6"]) != base
    for name, change in [
        ("common.sched", "// a comment changes the text\n"),
        ("nothing.py", "# so does this\n"),
        ("trace.csv", ""),
        ("cluster.toml", "\n"),
    ]:
        path = second / name
        text = path.read_text()
        path.write_text(text + change if change else text.rsplit("\n", 2)[0] + "\n")  # the trace: one row fewer
        assert key(second) != base, name
        path.write_text(text)
        assert key(second) == base, name


@pytest.mark.slow
def test_the_synthesizer_graph_runs_on_local_sweep_workers(tmp_path, capsys):
    """A local sweep's workers are daemon processes, which may start no pool: the synthesizer's
    look-aheads run in the worker (its default is two processes), with the same results."""
    from tests.conftest import REPO
    from tests.test_sweep_dask import SYNTH_TINY

    graph = REPO / "graphs" / "blox-synthesizer.sched"
    out = tmp_path / "out"
    args = ["sweep", str(graph), "--vary", "synth.workers=1,2", *SYNTH_TINY, "--workers", "2", "--out", str(out)]
    assert main(args) == 0, capsys.readouterr().err
    frame = stored(out).sort("synth.workers")
    assert set(frame["status"]) == {"ok"} and set(frame["jobs_finished"]) == {20}
    one, two = frame.select("rounds", "avg_jct_s", "avg_responsiveness_s", "makespan_s", "preemptions").iter_rows()
    assert one == two


def test_bracketed_values_print_as_given_and_a_pooled_point_lists_its_seeds(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # (one table row a line)
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "2x2:V100";\nsrc :: TraceSource(path="{TRACE}", jobs=6);\n'
        "fifo :: Fifo;\nsrtf :: Srtf;\norder :: ChoosePolicy(candidates=[fifo, srtf]);\n"
        "src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> JobMetrics;\n"
    )
    out = tmp_path / "out"
    args = ["sweep", str(graph), "--vary", "order.candidates=[fifo, srtf],[srtf, fifo]", "--vary", "seed=0,1,2"]
    assert main([*args, "--workers", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if "[fifo, srtf]" in line or "[srtf, fifo]" in line]
    assert len(rows) == 2, printed  # rich would take [brackets] for markup and print blank cells
    assert all("0,1,2" in line for line in rows), printed  # each point pools three seeds
    points = pl.read_csv(out / "points.csv")
    assert points["seed"].to_list() == ["0,1,2", "0,1,2"] and points["runs"].to_list() == [3, 3]
