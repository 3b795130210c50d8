"""The benchmark scripts as a new contributor runs them: an option that would not do what it says
is refused naming it (`--quick` beside `--only`, an empty path, an unknown case named as given),
`lease_check.py --max N` measures N jobs, and each anchor a script prints beside ours is the
figure the docs quote for it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.test_benchmark_scripts_fixes import BENCH, script

COST_MODEL = REPO / "docs" / "cost-model.md"
REPRODUCTIONS = REPO / "docs" / "reproductions.md"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _scale_without_runs(monkeypatch, argv: list[str]) -> list[str]:
    """scale.py's main with `argv`, its cases recorded instead of run (a case takes seconds to
    minutes, the million-job ones many)."""
    scale = script("scale")
    ran: list[str] = []

    def run_case(name, folder, skip):
        ran.append(name)
        figures = dict(wall_s=1.0, rounds=100, skipped=10, passed=1, in_system=5.0, peak_rss_mb=90.0, avg_jct_h=1.0)
        return dict(figures, name=name, phases_s={}, phases_peak_mb={})

    monkeypatch.setattr(scale, "run_case", run_case)
    monkeypatch.setattr(scale, "print_gavel_rows", lambda skip: ran.append(scale.GAVEL_CASE))
    monkeypatch.setattr(scale, "exit_on_terminate", lambda: None)  # (this process's SIGTERM left as it is)
    monkeypatch.setattr(scale, "compile_bytecode", lambda: None)
    monkeypatch.setattr(sys, "argv", ["scale.py", *argv])
    scale.main()
    return ran


def test_scale_refuses_quick_beside_only_rather_than_run_a_long_case(monkeypatch, capsys):
    """`--quick --only million-160` ran the million-job case: --only took over in silence."""
    with pytest.raises(SystemExit) as stopped:
        _scale_without_runs(monkeypatch, ["--quick", "--only", "million-160"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "--quick has no effect with --only" in err, err


def test_scale_quick_alone_runs_only_the_small_cases(monkeypatch, capsys):
    scale = script("scale")
    ran = _scale_without_runs(monkeypatch, ["--quick"])
    assert ran[-1] == scale.GAVEL_CASE
    assert ran[:-1] and all(scale.CASES[name][8] for name in ran[:-1]), ran
    assert "million-160" not in ran


def test_scale_names_an_empty_case_name_as_given(monkeypatch, capsys):
    """`--only ''` said "unknown case(s) ;", naming nothing."""
    with pytest.raises(SystemExit):
        _scale_without_runs(monkeypatch, ["--only", "active-1k", "--only", ""])
    err = capsys.readouterr().err
    assert "--only: unknown case(s) ''" in err, err


# Each script's path options: an empty value (an unset shell variable's) was the working folder,
# where sweep_local.py wrote its sweep and scale.py's --plot was said to be ".".
EMPTY_PATHS = [
    ("scale", "--plot"),
    ("scale", "--alibaba"),
    ("sweep_local", "--out"),
    ("dally_batch", "--out"),
    ("derive_communication", "--out"),
    ("derive_communication", "--workloads"),
    ("gavel_msr", "--data"),
    ("gavel_msr", "--gavel"),
    ("pollux_search", "--pollux"),
]


@pytest.mark.parametrize(("name", "option"), EMPTY_PATHS)
def test_an_empty_path_is_refused_naming_the_option(name, option, tmp_path):
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), option, ""],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"argument {option}: expected a path, got ''" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # (nothing read or written in the working folder)


def test_path_option_keeps_a_path_as_given():
    bench_common = script("bench_common")
    assert str(bench_common.path_option("out/plot.png")) == "out/plot.png"


@pytest.mark.parametrize(
    ("most", "counts"),
    [(1, [1]), (2, [1, 2]), (64, [1, 4, 16, 32, 64]), (100, [1, 4, 16, 32, 64, 100]), (1000, [1, 4, 16, 32, 64, 128, 256, 1000])],
)
def test_lease_check_measures_the_most_jobs_asked_for(most, counts):
    """`--max 2` measured 1 job alone, and `--max 1000` no more than 256."""
    assert script("lease_check").job_counts(most) == counts


def test_blox_s_time_printed_is_the_one_the_docs_quote():
    engine_las = script("engine_las")
    quoted = {float(s) for s in re.findall(r"Blox's (\d+) s", _flat(COST_MODEL.read_text()))}
    assert quoted == {engine_las.BLOX_SECONDS}, quoted
    assert f"Blox's {engine_las.BLOX_SECONDS:.0f} s" in _flat((REPO / "README.md").read_text())


def test_gavel_s_simulator_times_printed_are_the_ones_the_cost_model_quotes():
    gavel_msr = script("gavel_msr")
    text = _flat(COST_MODEL.read_text())
    found = re.search(r"takes \((\d+\.?\d*) s for LAS and (\d+\.?\d*) s for FIFO.*?and (\d+\.?\d*) s for the aware FIFO", text)
    assert found, "the cost model's scaling benchmark no longer quotes Gavel's times"
    las, fifo, aware = map(float, found.groups())
    assert gavel_msr.GAVEL_SECONDS == {"LAS": las, "FIFO": fifo, "FIFO, aware": aware}
    # gavel_solvers.py's whole simulation is Gavel's FIFO on the same trace: the same figure.
    assert script("gavel_solvers").GAVEL_FIFO_SIMULATION_S == fifo


def test_alibaba_s_figures_printed_are_the_ones_the_cost_model_quotes():
    alibaba_sim = script("alibaba_sim")
    text = _flat(COST_MODEL.read_text())
    for policy, row in (("FIFO", "FIFO"), ("SJF", r"shortest job first \(ours `Srtf`\)")):
        found = re.search(rf"\| {row} \| [\d.]+ s \| ([\d.]+) s \| \d+x \| [\d.]+ h \| ([\d.]+) h \|", text)
        assert found, f"the cost model's table of Alibaba's shape has no row for {policy}"
        seconds, jct_h = map(float, found.groups())
        theirs_s, theirs_jct_s = alibaba_sim.MEASURED_SAME_JOBS[policy]
        assert theirs_s == seconds
        assert round(theirs_jct_s / 3600, 2) == jct_h
    found = re.search(r"gives ([\d.]+) s for FIFO and ([\d.]+) s for SJF", text)
    assert found, "the cost model no longer quotes the README's figures"
    assert [alibaba_sim.README_FIGURES[p][0] for p in ("FIFO", "SJF")] == list(map(float, found.groups()))


def test_gavel_s_solver_times_printed_are_the_ones_reproductions_quotes():
    gavel_solvers = script("gavel_solvers")
    text = REPRODUCTIONS.read_text()
    table = text[text.index("### Solver and simulation speed") :]
    table = table[: table.index("\n\n", table.index("| policy |"))]
    quoted: dict[str, dict[int, float | None]] = {"max-min": {}, "hierarchical": {}}
    policy = ""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 5 or not cells[1].isdigit():
            continue
        policy = ("hierarchical" if cells[0].startswith("hierarchical") else "max-min") if cells[0] else policy
        quoted[policy][int(cells[1])] = None if cells[4].startswith("no result") else float(cells[4].removesuffix(" s"))
    for policy, figures in (("max-min", gavel_solvers.GAVEL_MAX_MIN), ("hierarchical", gavel_solvers.GAVEL_WATER_FILLING)):
        assert quoted[policy], f"no row of {policy} in the table"
        for jobs, seconds in quoted[policy].items():
            assert figures.get(jobs, "absent") == seconds, (policy, jobs)
