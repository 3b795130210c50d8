"""The benchmark scripts as a user runs them: a script that keeps files says where, the target of
a case run alone is judged, and an anchor the cost model gives is printed beside ours."""

from __future__ import annotations

import re
import sys

import pytest

from tests.conftest import REPO
from tests.test_benchmark_scripts_fixes import gavel_folder, script

COST_MODEL = REPO / "docs" / "cost-model.md"


# --- dally_batch.py: where --out's tables and figures went ---


class _Experiment:
    """Stands in for the Dally sweep (which takes minutes): writes one table and one figure
    into the folder it is given, as the experiment does, and reports one run."""

    def run(self, out, quick):
        import polars as pl

        (out / "dally-batch-jct.png").write_bytes(b"figure")
        runs = pl.DataFrame({"scheme": ["Dally"], "racks": [2], "wall_s": [0.5], "rounds": [100]})
        return type("Report", (), {"tables": {"runs": runs}})()


def test_dally_batch_says_where_it_kept_the_tables_and_figures(monkeypatch, capsys, tmp_path):
    dally_batch = script("dally_batch")
    monkeypatch.setattr(dally_batch, "load_all", lambda: {"dally-batch": _Experiment()})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["dally_batch.py", "--quick", "--out", "kept"])
    dally_batch.main()
    lines = capsys.readouterr().out.splitlines()
    said = [line for line in lines if str(tmp_path / "kept") in line]
    assert said, lines
    assert (tmp_path / "kept" / "dally-batch-jct.png").is_file() and (tmp_path / "kept" / "runs.csv").is_file()


def test_dally_batch_without_out_names_no_folder(monkeypatch, capsys, tmp_path):
    dally_batch = script("dally_batch")
    monkeypatch.setattr(dally_batch, "load_all", lambda: {"dally-batch": _Experiment()})
    monkeypatch.setattr(sys, "argv", ["dally_batch.py", "--quick"])
    dally_batch.main()
    assert "written to" not in capsys.readouterr().out  # (they went with the temporary folder)


# --- engine_las.py: the target's case run alone ---


@pytest.mark.parametrize(
    "argv, wall, line",
    [
        (["--jobs", "10000"], 1.5, "target: 10,000 jobs under 2 s: Consolidated 1.50 s (met)"),
        (["--jobs", "10000", "--placer", "FirstFree"], 3.0, "target: 10,000 jobs under 2 s: FirstFree 3.00 s (MISSED)"),
        (["--jobs", "100000"], 20.0, "target: 100,000 jobs under 15 s: Consolidated 20.00 s (MISSED)"),
        (["--jobs", "3000"], 1.0, None),
    ],
    ids=["10k-met", "10k-firstfree-missed", "100k-missed", "no-target"],
)
def test_engine_las_judges_the_target_of_a_case_run_alone(monkeypatch, capsys, argv, wall, line):
    engine_las = script("engine_las")
    monkeypatch.setattr(engine_las, "measure", lambda label, text, repeat=1: wall)
    monkeypatch.setattr(sys, "argv", ["engine_las.py", *argv])
    engine_las.main()
    targets = [t for t in capsys.readouterr().out.splitlines() if t.startswith("target:")]
    assert targets == ([line] if line else [])


# --- gavel_msr.py: the aware FIFO's anchor ---


def _aware_fifo_in_the_cost_model() -> tuple[float, float]:
    """Gavel's simulator's seconds and average JCT for `fifo_perf`, from the cost model's table
    of the sitting that ran Gavel's simulator beside ours."""
    row = next(line for line in COST_MODEL.read_text().splitlines() if line.startswith("| aware FIFO (`fifo_perf`)"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    seconds = float(re.fullmatch(r"([\d.]+) s", cells[2]).group(1))
    jct = float(re.fullmatch(r"([\d,]+) s", cells[4]).group(1).replace(",", ""))
    return seconds, jct


def test_gavel_msr_s_aware_fifo_anchor_is_the_cost_model_s():
    gavel_msr = script("gavel_msr")
    seconds, jct = _aware_fifo_in_the_cost_model()
    assert gavel_msr.GAVEL_SECONDS["FIFO, aware"] == seconds
    assert gavel_msr.GAVEL_AVG_JCT_S["FIFO, aware"] == jct


def test_gavel_msr_prints_gavel_s_figures_beside_the_aware_fifo(monkeypatch, capsys, tmp_path):
    """Our runs stand in for by fixed figures (the runs take tens of seconds); the row printed
    holds Gavel's seconds, the ratio and Gavel's average JCT for the aware FIFO."""
    gavel_msr = script("gavel_msr")
    data = gavel_folder(tmp_path / "gavel", None)
    ours = dict(wall_s=2.0, cpu_s=1.5, rounds=17534, skipped=15615, jobs=984, avg_jct_s=505714.0, out=tmp_path)
    monkeypatch.setattr(gavel_msr, "run_once", lambda graph, out: dict(ours, out=out))
    monkeypatch.setattr(gavel_msr, "compile_bytecode", lambda: None)
    monkeypatch.setattr(sys, "argv", ["gavel_msr.py", "--data", str(data)])
    gavel_msr.main()
    seconds, jct = _aware_fifo_in_the_cost_model()
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Gavel msr 0e4a51, FIFO, aware"))
    cells = row.removeprefix("Gavel msr 0e4a51, FIFO, aware").split()
    assert cells[5:9] == [f"{seconds:.1f}", f"{seconds / 2.0:.1f}x", f"{jct:.0f}", "all"], row


# --- pollux_search.py: the anchor not run is said ---


@pytest.mark.parametrize("given", [False, True], ids=["without-pollux", "with-pollux"])
def test_pollux_search_says_when_pollux_s_own_search_is_not_run(monkeypatch, capsys, tmp_path, given):
    """Our searches stand in for by a fixed time (each takes up to a second); with --pollux, a
    folder whose pollux.py cannot be imported (pymoo missing is reported on each line)."""
    pollux_search = script("pollux_search")
    monkeypatch.setattr(pollux_search, "ours", lambda *args, **kwargs: (0.1, 0.1))
    monkeypatch.setattr(sys, "path", list(sys.path))  # (the script puts Pollux's folder first on it)
    argv = ["pollux_search.py", "--repeat", "1"]
    if given:
        for name in pollux_search.POLLUX_FILES:
            (tmp_path / name).write_text("import no_such_module_for_this_test\n")
        argv += ["--pollux", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", argv)
    pollux_search.main()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines
    said = "Pollux's own search cannot run here" if given else "Pollux's own search: not run (--pollux runs it"
    assert all(said in line for line in lines), lines


# --- scale.py: a case named twice ---


def test_scale_runs_a_case_named_twice_once(monkeypatch, capsys):
    """The case's process stands in for by fixed figures (a case takes seconds to minutes)."""
    scale = script("scale")
    ran = []

    def run_case(name, folder, skip):
        ran.append(name)
        return dict(name=name, wall_s=1.0, rounds=100, skipped=10, passed=1, in_system=5.0, peak_rss_mb=90.0, avg_jct_h=1.0)

    monkeypatch.setattr(scale, "run_case", run_case)
    monkeypatch.setattr(scale, "exit_on_terminate", lambda: None)  # (this process's SIGTERM left as it is)
    monkeypatch.setattr(scale, "compile_bytecode", lambda: None)
    monkeypatch.setattr(sys, "argv", ["scale.py", "--only", "size-128", "--only", "active-1k", "--only", "size-128"])
    scale.main()
    assert ran == ["size-128", "active-1k"]
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("128 GPUs", "1,000 jobs"))]
    assert len(rows) == 2, rows


def test_gavel_msr_says_where_the_aware_fifo_s_jct_comes_from(monkeypatch, capsys, tmp_path):
    gavel_msr = script("gavel_msr")
    data = gavel_folder(tmp_path / "gavel", None)
    ours = dict(wall_s=2.0, cpu_s=1.5, rounds=17534, skipped=15615, jobs=984, avg_jct_s=505714.0, out=tmp_path)
    monkeypatch.setattr(gavel_msr, "run_once", lambda graph, out: dict(ours, out=out))
    monkeypatch.setattr(gavel_msr, "compile_bytecode", lambda: None)
    monkeypatch.setattr(sys, "argv", ["gavel_msr.py", "--data", str(data)])
    gavel_msr.main()
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Gavel's average JCT:"))
    assert "for FIFO, aware: as its simulator printed it on 2026-12-04" in header, header
