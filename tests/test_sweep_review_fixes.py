"""Sweeps: what a sweep says of the files of its results store that hold no readable run; a
local run's timeout, counted from when its worker process takes it up; a sweep whose output is
no longer read; the tables written while the sweep holds its results store; quoted values with
escapes; and Dask addresses whose port is no port."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import polars as pl
import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime import sweep_exec
from roundhouse.runtime.results_store import ResultsStore
from roundhouse.tools import sweep_cmd
from roundhouse.tools.cli import main
from roundhouse.tools.sweep_plan import split_values
from tests.conftest import REPO, fails
from tests.test_sweep_keys_interrupts import small_graph

TRACE = REPO / "traces" / "samples" / "philly-1000.csv"


def test_damaged_store_files_are_said_to_be_run_again_only_when_they_are_this_sweeps(tmp_path, capsys):
    graph = small_graph(tmp_path)
    out = tmp_path / "out"
    args = ["sweep", str(graph), "--vary", "round=5min,10min", "--workers", "1", "--out", str(out)]
    assert main(args) == 0
    ours = ResultsStore(out / "results").files()
    assert len(ours) == 2
    capsys.readouterr()
    ours[0].write_bytes(b"not parquet")  # one of this sweep's runs, damaged
    other = out / "results" / ("a" * 64 + ".parquet")  # the damaged file of a run of another sweep
    other.write_bytes(b"not parquet")
    keyless = out / "results" / "notes.parquet"  # a file that reads but holds no run
    pl.DataFrame({"x": [1]}).write_parquet(keyless)
    ours_keyless = ours[1]  # one of this sweep's, written over with no run's row
    pl.DataFrame({"x": [1]}).write_parquet(ours_keyless)
    assert main(args) == 0
    err = capsys.readouterr().err
    warned = [line.removeprefix("warning: ") for line in err.splitlines() if line.startswith("warning: ")]
    lines = {line.split(": ", 1)[0]: line for line in warned}
    assert "cannot be read (damaged?); its run, one of this sweep's, is done again" in lines[str(ours[0])]
    assert "cannot be read (damaged?); not a run of this sweep: left alone" in lines[str(other)]
    assert "holds no run's row" in lines[str(keyless)] and "not a run of this sweep: left alone" in lines[str(keyless)]
    assert "one of this sweep's, is done again" in lines[str(ours_keyless)]
    assert "left alone" not in lines[str(ours_keyless)]
    assert "running 2 runs on" in err
    # As said: this sweep's two runs are in their files again; the others are as they were.
    assert ResultsStore(out / "results").read()["status"].to_list() == ["ok", "ok"]
    assert other.read_bytes() == b"not parquet" and keyless.exists()


@pytest.mark.slow
def test_a_local_runs_timeout_counts_from_when_its_worker_takes_it_up_not_from_its_start(tmp_path, monkeypatch):
    # Worker processes that take 4 s to start (a busy machine, a slow shared file system), runs
    # of a fraction of a second and a 2 s timeout: no run is killed for its worker's start.
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text('import sys, time\nif "--multiprocessing-fork" in sys.argv:\n    time.sleep(4)\n')
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(slow), os.environ.get("PYTHONPATH")])))
    monkeypatch.setattr(sweep_exec, "KILL_GRACE_S", 0.5)
    graph = small_graph(tmp_path)
    out = tmp_path / "out"
    assert main(["sweep", str(graph), "--vary", "round=5min,10min", "--timeout", "2s", "--workers", "1", "--out", str(out)]) == 0
    frame = ResultsStore(out / "results").read()
    assert frame["status"].to_list() == ["ok", "ok"], frame["error"].to_list()


@pytest.mark.slow
def test_a_sweep_whose_reader_goes_away_runs_every_run_and_writes_its_tables(tmp_path):
    # `roundhouse sweep ... 2>&1 | head -1`: the reader goes after the first line; the sweep
    # goes on as if it had been read to the end.
    graph = small_graph(tmp_path)
    out = tmp_path / "out"
    args = ["sweep", str(graph), "--vary", "round=1min,2min,3min,4min", "--workers", "1", "--out", str(out)]
    sweep = subprocess.Popen(
        [sys.executable, "-m", "roundhouse.tools.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert sweep.stdout is not None
    assert sweep.stdout.readline().startswith(b"running 4 runs")
    sweep.stdout.close()
    assert sweep.wait(timeout=120) == 0
    assert len(ResultsStore(out / "results").files()) == 4
    assert pl.read_csv(out / "summary.csv")["status"].to_list() == ["ok"] * 4
    assert pl.read_csv(out / "points.csv").height == 4


def test_a_sweeps_tables_are_written_while_it_holds_the_store(tmp_path, monkeypatch):
    # A sweep started on the folder as this one ends removes the tables of this one: they are
    # written before the store is let go, so that the next sweep never finds them half-way.
    graph = small_graph(tmp_path)
    out = tmp_path / "out"
    held = []
    write = sweep_cmd._write_tables

    def write_tables(folder, tables):
        other = ResultsStore(out / "results")
        try:
            other.lock()
            other.unlock()
            held.append(False)
        except UsageError as err:
            held.append("another sweep is writing" in str(err))
        write(folder, tables)

    monkeypatch.setattr(sweep_cmd, "_write_tables", write_tables)
    assert main(["sweep", str(graph), "--vary", "round=5min", "--workers", "1", "--out", str(out)]) == 0
    assert held == [True]
    assert (out / "summary.csv").exists() and (out / "points.csv").exists()


def test_a_quoted_value_with_an_escaped_quote_and_a_comma_is_one_value(tmp_path):
    # As a .sched file (and `run --set`) read it: "q\"d/a,b.csv" is one path, with a quote in
    # a folder's name and a comma in the file's.
    folder = tmp_path / 'q"d'
    folder.mkdir()
    lines = TRACE.read_text().splitlines()
    (folder / "a,b.csv").write_text("\n".join(lines[:5]) + "\n")
    (tmp_path / "c.csv").write_text("\n".join(lines[:1] + lines[10:13]) + "\n")
    assert split_values(r'"q\"d/a,b.csv","c.csv"') == [r'"q\"d/a,b.csv"', '"c.csv"']
    assert split_values(r'"a\\",b') == [r'"a\\"', "b"]
    graph = small_graph(tmp_path)
    out = tmp_path / "out"
    path = str(folder / "a,b.csv").replace('"', r"\"")
    vary = f'arrivals.path="{path}","{tmp_path / "c.csv"}"'
    assert main(["sweep", str(graph), "--vary", vary, "--workers", "1", "--out", str(out)]) == 0
    assert pl.read_csv(out / "summary.csv")["jobs_tracked"].to_list() == [4, 3]


def test_a_dask_address_whose_port_is_no_port_is_refused_at_once_saying_so(tmp_path, capsys):
    graph = small_graph(tmp_path)
    for address, said in [
        ("tcp://127.0.0.1:99999", "its port 99999 is not one of 1 to 65535"),
        ("tcp://127.0.0.1:0", "its port 0 is not one of 1 to 65535"),
        ("tcp://[::1]:x", "its port 'x' is not a number"),
    ]:
        started = time.monotonic()
        err = fails(capsys, "sweep", graph, "--vary", "round=5min", "--dask", address)
        assert f"--dask {address}: not a scheduler address ({said})" in err
        assert time.monotonic() - started < 5  # (not the 10 s a scheduler is waited for)
