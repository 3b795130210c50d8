"""What a sweep says of its counts: their digits grouped (in its messages and in its printed
table), and a large grid announced before the seconds its runs take to be compiled."""

from __future__ import annotations

import io

import polars as pl
import pytest
from rich.console import Console

from roundhouse.runtime import sweep_exec
from roundhouse.runtime.results_store import ResultsStore
from roundhouse.runtime.sweep_exec import LocalExecutor
from roundhouse.tools import sweep_plan
from roundhouse.tools.cli import build_parser, main
from roundhouse.tools.sweep_cmd import _say_interrupted, print_summary
from tests.conftest import REPO

GRAPH = str(REPO / "graphs" / "las.sched")


def test_a_grid_too_large_names_its_factors_with_their_digits_grouped(capsys):
    assert main(["sweep", GRAPH, "--vary", "round=1min,2min,3min", "--seeds", "50000"]) == 2
    err = capsys.readouterr().err
    assert "the sweep would have 3 × 50,000 = 150,000 runs" in err
    assert "Traceback" not in err


def test_the_count_of_local_worker_processes_has_its_digits_grouped():
    assert LocalExecutor(2000).where_for(5000) == "2,000 local worker processes"
    assert LocalExecutor(4).where_for(1) == "1 local worker process"


def test_the_count_of_dask_workers_has_its_digits_grouped(monkeypatch):
    pytest.importorskip("distributed")

    class Client:  # (a scheduler's answer, without a scheduler)
        def scheduler_info(self):
            return {"workers": {f"tcp://127.0.0.1:{port}": {} for port in range(20000, 21500)}}

        def close(self):
            pass

    monkeypatch.setattr(sweep_exec, "_connect", lambda distributed, address, timeout: Client())
    executor = sweep_exec.DaskExecutor("tcp://127.0.0.1:8786")
    assert executor.where_for(3) == "the Dask cluster at tcp://127.0.0.1:8786 (1,500 workers now)"


def test_the_printed_table_writes_thousands_whole_with_their_digits_grouped(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # (one line per row)
    frame = pl.DataFrame({"point": ["a=1"] * 1200})
    points = pl.DataFrame(
        {
            "a": ["1"],
            "runs": [1200],
            "failed": [0],
            "jobs_finished_mean": [12345.25],
            "jobs_finished_ci95": [1234.25],
            "utilization_mean": [0.58361],
            "utilization_ci95": [0.00396],
        }
    )
    print_summary("g.sched", ("a",), frame, points)
    out = capsys.readouterr().out
    assert "12,345 ± 1,234" in out
    assert "1,200 seeds per point" in out and "│ 1,200 " in out
    assert "0.5836 ± 0.00396" in out  # (below a thousand: four significant figures, as before)
    assert "e+" not in out


def _plan_args(*more: str):
    args = build_parser("sweep").parse_args(["sweep", GRAPH, *more])
    args.debug = False
    return args


def test_a_large_grid_is_announced_before_its_runs_are_compiled(capsys, monkeypatch):
    said = []

    def plan_runs(args, grid, until):  # (compiling 1,000 runs takes seconds: what was said by then)
        said.append(capsys.readouterr().err)
        return []

    monkeypatch.setattr(sweep_plan, "plan_runs", plan_runs)
    sweep_plan.plan(_plan_args("--vary", "round=1min,2min", "--seeds", "500"))
    assert "checking the sweep's 1,000 runs before any starts" in said[0]
    sweep_plan.plan(_plan_args("--vary", "round=1min,2min", "--seeds", "3"))
    assert said[1] == ""  # (a small sweep starts at once: nothing to announce)


def test_a_grid_just_below_the_announcement_says_nothing(capsys, monkeypatch):
    monkeypatch.setattr(sweep_plan, "plan_runs", lambda args, grid, until: [])
    sweep_plan.plan(_plan_args("--vary", "round=1min,2min", "--seeds", "499"))
    assert "checking" not in capsys.readouterr().err


def _interrupted(rows: dict, total: int, on_dask: bool) -> str:
    console = Console(file=io.StringIO(), width=400)
    _say_interrupted(console, rows, total, ResultsStore("out/results"), on_dask)
    return console.file.getvalue()


def test_a_dask_sweep_stopped_says_runs_were_told_to_stop_only_when_some_were_under_way():
    rows = {key: {"status": "ok"} for key in ("a", "b")}
    assert "told to stop" in _interrupted(rows, 3, on_dask=True)
    said = _interrupted(rows, 2, on_dask=True)  # (its last run had come back)
    assert said.startswith("2 of 2 runs kept in out/results") and "told to stop" not in said
    assert "told to stop" not in _interrupted(rows, 3, on_dask=False)
