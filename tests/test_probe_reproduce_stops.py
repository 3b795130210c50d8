"""`roundhouse reproduce` as a new user meets it: what a stopped or failed reproduction says about
its folder and about the experiments named after it, a second Ctrl-C during the cleanup, and
--data given to experiments that read no reference data."""

from __future__ import annotations

import json
import shutil
import signal

import polars as pl

from roundhouse.tools import reproduce_cmd
from roundhouse.tools.cli import main
from roundhouse.tools.reproductions import EXPERIMENTS, ExperimentFailed, Report, experiment
from tests.conftest import fails


def _writes_then(name: str, stop: BaseException):
    """Register experiment `name`: it writes a graph folder and a plot, then raises `stop`."""

    @experiment(name, "writes, then stops", "nobody (2026)")
    def run(out, quick):
        (out / "graphs").mkdir()
        (out / "graphs" / "a.sched").write_text("// a graph\n")
        (out / "half.png").write_bytes(b"png")
        raise stop


def _finishes(name: str, ran: list[str]):
    @experiment(name, "finishes", "nobody (2026)")
    def run(out, quick):
        ran.append(name)
        return Report(tables={"t": pl.DataFrame({"x": [1]})})


def test_a_second_ctrl_c_during_the_cleanup_waits_for_it(tmp_path, monkeypatch, capsys):
    """Ctrl-C pressed twice (the first run stops slowly): the second must not leave half the results
    under a mark that does not say the run was interrupted."""
    real_rmtree = shutil.rmtree
    pressed = []

    def rmtree_with_a_second_ctrl_c(path, *a, **k):
        if not pressed:
            pressed.append(path)
            signal.raise_signal(signal.SIGINT)
        real_rmtree(path, *a, **k)

    monkeypatch.setattr(reproduce_cmd.shutil, "rmtree", rmtree_with_a_second_ctrl_c)
    _writes_then("unit-test-ctrl-c-twice", KeyboardInterrupt())
    try:
        assert main(["reproduce", "unit-test-ctrl-c-twice", "--out", str(tmp_path)]) == 130
    finally:
        EXPERIMENTS.pop("unit-test-ctrl-c-twice")
    assert pressed  # (the second Ctrl-C came during the cleanup)
    folder = tmp_path / "unit-test-ctrl-c-twice"
    assert sorted(p.name for p in folder.iterdir()) == ["reproduction.json"]
    mark = json.loads((folder / "reproduction.json").read_text())
    assert mark["interrupted"] is True and mark["wrote"] == []
    assert "interrupted" in capsys.readouterr().err


def test_ctrl_c_says_what_it_removed_and_which_experiments_did_not_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # (the line names a long folder: unwrapped, it can be compared)
    ran: list[str] = []
    _writes_then("unit-test-stopped-first", KeyboardInterrupt())
    _finishes("unit-test-never-reached", ran)
    try:
        code = main(["reproduce", "unit-test-stopped-first", "unit-test-never-reached", "--out", str(tmp_path)])
    finally:
        EXPERIMENTS.pop("unit-test-stopped-first")
        EXPERIMENTS.pop("unit-test-never-reached")
    printed = capsys.readouterr()
    assert code == 130 and ran == []
    lines = printed.out.splitlines()
    folder = tmp_path / "unit-test-stopped-first"
    assert f"unit-test-stopped-first: stopped; removed what it had written to {folder}/ (reproduction.json says so)" in lines
    assert "not run: unit-test-never-reached" in lines
    assert printed.err.strip() == "interrupted"
    assert not (tmp_path / "unit-test-never-reached").exists()


def test_a_failed_experiment_names_those_after_it_that_did_not_run(tmp_path, capsys):
    ran: list[str] = []
    _finishes("unit-test-finishes-first", ran)
    _writes_then("unit-test-fails-second", ExperimentFailed("a run it started failed"))
    _finishes("unit-test-after-the-failure", ran)
    _finishes("unit-test-last", ran)
    names = ["unit-test-finishes-first", "unit-test-fails-second", "unit-test-after-the-failure", "unit-test-last"]
    try:
        code = main(["reproduce", *names, "--out", str(tmp_path)])
    finally:
        for name in names:
            EXPERIMENTS.pop(name)
    printed = capsys.readouterr()
    assert code == 2
    assert ran == ["unit-test-finishes-first"]
    assert "not run: unit-test-after-the-failure, unit-test-last" in printed.out.splitlines()
    assert "a run it started failed" in printed.err and "Traceback" not in printed.err


def test_data_given_to_experiments_that_read_none_is_refused_before_anything_runs(tmp_path, capsys):
    err = fails(capsys, "reproduce", "tiresias-toy", "--data", tmp_path / "nowhere", "--out", tmp_path / "out")
    assert err.strip().startswith("error: --data has no effect: tiresias-toy reads no reference data (those that do: ")
    readers = [e.name for e in EXPERIMENTS.values() if e.data]
    assert readers and err.strip().endswith(f"(those that do: {', '.join(readers)})")
    assert not (tmp_path / "out").exists()
    err = fails(capsys, "reproduce", "tiresias-toy", "blox-intranode", "--quick", "--data", tmp_path, "--out", tmp_path / "out")
    assert "tiresias-toy, blox-intranode read no reference data" in err
