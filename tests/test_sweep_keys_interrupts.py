"""Sweeps and reproductions: a run's key made from its values as compiled (two spellings of one
value are one run), a grid too large refused before it is planned, `whatif` given a file that
is neither a journal nor a snapshot, and Ctrl-C during `roundhouse reproduce` stopping at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.compiler import Override, compile_file
from roundhouse.runtime.sweep import RunSpec, compile_spec, keyed_overrides
from roundhouse.tools import sweep_plan
from roundhouse.tools.cli import main
from tests.conftest import REPO, fails

TRACE = REPO / "traces" / "samples" / "philly-1000.csv"


def small_graph(folder: Path) -> Path:
    graph = folder / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "2x4:V100";\narrivals :: TraceSource(path="{TRACE}", jobs=5);\n'
        "arrivals -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
    )
    return graph


# --- a run's key: values as compiled --------------------------------------------------------------


def test_two_spellings_of_one_value_have_one_key_and_other_values_other_keys(tmp_path):
    graph = small_graph(tmp_path)

    def key(*overrides: str) -> str:
        return compile_spec(RunSpec(str(graph), overrides))[1]

    assert key("round=5min") == key("round=300s") == key("round=300") == key("round=0.08333333333333333h")
    assert key("round=1h") == key("round=60min") == key("round=3600s") != key("round=5min")
    assert key("round=300s") != key("round=301s")
    # (Every digit counts: values `describe` would print alike are not taken for one.)
    assert key("round=0.1234567891s") != key("round=0.1234567892s")
    assert key("arrivals.rate=1e-9/s") != key("arrivals.rate=1.0000001e-9/s")
    assert key("arrivals.rate=4/h") == key("arrivals.rate=4.0/h") != key("arrivals.rate=5/h")
    assert key("arrivals.jobs=4") == key("arrivals.jobs=04") != key("arrivals.jobs=3")


def test_a_value_written_the_usual_way_is_keyed_as_it_was_before(tmp_path):
    """A store's runs keyed by their values as written keep their keys: the usual spelling of a
    value is the text its key holds; another spelling is keyed as the usual one."""
    path = str(small_graph(tmp_path))

    def keyed(text: str) -> list[str]:
        return keyed_overrides(compile_file(path, [Override(text)]), [text])

    for usual, other in [
        ("round=5min", "round=300s"),
        ("round=90s", "round=1.5min"),
        ("arrivals.rate=4/h", "arrivals.rate=4.0/h"),
        ("arrivals.jobs=7", "arrivals.jobs=007"),
        ('arrivals.format="auto"', 'arrivals.format = "auto"'),
    ]:
        assert keyed(usual) == [usual]
        assert keyed(other) == [usual], other


def test_a_sweep_of_another_spelling_reuses_the_stored_run(tmp_path, capsys):
    graph = small_graph(tmp_path)
    out = tmp_path / "out"
    assert main(["sweep", str(graph), "--vary", "round=5min", "--workers", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["sweep", str(graph), "--vary", "round=300s", "--workers", "1", "--out", str(out)]) == 0
    assert "1 of 1 runs already in" in capsys.readouterr().err
    assert len(list((out / "results").glob("*.parquet"))) == 1


# --- a grid too large ---------------------------------------------------------------------------------


@pytest.fixture
def never_planned(monkeypatch):
    """A sweep's runs must not be planned (compiled one by one): it would seem to hang."""

    def planned(*args, **kwargs):
        raise AssertionError("the grid was planned")

    monkeypatch.setattr(sweep_plan, "plan_runs", planned)


def test_a_billion_seeds_are_refused_at_once_naming_the_count_and_the_option(tmp_path, capsys, never_planned):
    graph = small_graph(tmp_path)
    started = time.monotonic()
    err = fails(capsys, "sweep", graph, "--seeds", "1000000000")
    assert time.monotonic() - started < 30
    assert "--seeds 1000000000: the sweep would have 1,000,000,000 runs" in err, err
    assert f"more than one sweep may have ({sweep_plan.MAX_RUNS:,})" in err
    assert not (tmp_path / "out").exists()


def test_a_huge_grid_is_refused_naming_each_option_and_the_product(tmp_path, capsys, never_planned):
    graph = small_graph(tmp_path)
    jobs = ",".join(map(str, range(1, 401)))
    rates = ",".join(f"{r}/h" for r in range(1, 401))
    err = fails(capsys, "sweep", graph, "--vary", f"arrivals.jobs={jobs}", "--vary", f"arrivals.rate={rates}", "--seeds", "2")
    assert "--vary arrivals.jobs: 400 values, --vary arrivals.rate: 400 values, --seeds 2:" in err, err
    assert "400 × 400 × 2 = 320,000 runs" in err


def test_a_grid_at_the_bound_is_planned_and_one_past_it_is_not():
    sweep_plan._refuse_too_many_runs([("round", ["1min", "2min"])], sweep_plan.MAX_RUNS // 2)
    with pytest.raises(UsageError, match="--seeds"):
        sweep_plan._refuse_too_many_runs([("round", ["1min", "2min"])], sweep_plan.MAX_RUNS // 2 + 1)


def test_a_long_list_of_values_is_read_at_once():
    """(Each value was looked for among all those before it: 60,000 values took minutes.)"""
    values = ",".join(map(str, range(60_000)))
    started = time.monotonic()
    assert len(sweep_plan.read_grid([f"arrivals.jobs={values}"], 1)[0][1]) == 60_000
    with pytest.raises(UsageError, match="the value 5 is given twice"):
        sweep_plan.read_grid([f"arrivals.jobs={values},5"], 1)
    assert time.monotonic() - started < 5


# --- whatif given a file that is neither a journal nor a snapshot ------------------------------------

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f0005000201a5f6e3b70000000049454e44ae426082"
)


@pytest.mark.parametrize(
    ("name", "content", "what"),
    [
        ("jobs.csv", b"job_id,arrival_s\n1,0\n", "it is text, whose first line is 'job_id,arrival_s'"),
        ("empty.sqlite", b"", "it is empty"),
        ("plot.png", PNG, "it holds binary data, not a SQLite database"),
        ("noise.bin", bytes(range(256)) * 8, "it holds binary data, not a SQLite database"),
        ("notes.sqlite", None, "it is a SQLite database with none of a journal's tables"),
    ],
)
def test_whatif_says_a_file_is_neither_a_journal_nor_a_snapshot(tmp_path, capsys, name, content, what):
    path = tmp_path / name
    if content is None:
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE notes (text TEXT)")
        db.commit()
        db.close()
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    err = fails(capsys, "whatif", path, "--graph", small_graph(tmp_path))
    assert err.strip() == (
        f"error: {path}: not a live scheduler's journal, nor a simulation's snapshot ({what}); "
        "whatif reads a simulation's snapshot (Simulation.save) or a live scheduler's journal (its --journal file)"
    ), err
    assert path.read_bytes() == before


# --- Ctrl-C during a reproduction ---------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("to", ["group", "process"])
def test_ctrl_c_stops_a_reproduction_at_once_leaving_no_results(tmp_path, to):
    """Its runs under way in worker processes are ended, not waited for; no traceback; exit
    status 130, as every command on Ctrl-C; nothing it wrote is left to pass for results.
    `to`: the signal goes to the process group (Ctrl-C at a terminal), or to the command alone."""
    out = tmp_path / "out"
    command = [sys.executable, "-m", "roundhouse.tools.cli", "reproduce", "blox-policies", "--quick", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while len(workers) < 2:  # (its runs are under way in its worker processes)
            assert proc.poll() is None and time.monotonic() < deadline, "the reproduction ended before it could be stopped"
            time.sleep(0.1)
            workers = [p for p in _children(proc.pid) if "spawn_main" in (Path("/proc") / str(p) / "cmdline").read_text()]
        time.sleep(1.5)
        assert proc.poll() is None
        signalled = time.monotonic()
        if to == "group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted", err
    assert took < 3.0, f"it took {took:.1f} s to stop"
    time.sleep(0.5)
    assert not [p for p in workers if _alive(p)]
    folder = out / "blox-policies"
    assert sorted(p.name for p in folder.iterdir()) == ["reproduction.json"]
    mark = json.loads((folder / "reproduction.json").read_text())
    assert mark["interrupted"] is True and mark["wrote"] == []
