"""Parallel sweeps and the reproduce command's framework."""

import polars as pl
import pytest

from roundhouse.runtime.sweep import RunSpec, run_all, summaries
from roundhouse.tools.cli import main
from roundhouse.tools.reproductions import EXPERIMENTS, Comparison, Report, experiment
from tests.conftest import REPO


def test_sweep_runs_each_combination_in_order(tmp_path, capsys):
    out = tmp_path / "sw"
    graph = str(REPO / "graphs" / "fifo.sched")
    assert main(["sweep", graph, "--vary", "arrivals.jobs=50,100", "--vary", "round=5min,10min", "--out", str(out)]) == 0
    frame = pl.read_csv(out / "summary.csv")
    assert frame.height == 4
    assert frame["arrivals.jobs"].to_list() == [50, 50, 100, 100]
    assert frame["jobs_finished"].to_list() == [50, 50, 100, 100]
    # Longer rounds never make responsiveness better here.
    by = {(r["arrivals.jobs"], r["round"]): r["avg_responsiveness_s"] for r in frame.iter_rows(named=True)}
    assert by[(100, "10min")] >= by[(100, "5min")]


def test_run_all_matches_single_runs():
    graph = str(REPO / "graphs" / "las.sched")
    specs = [RunSpec(graph, (f"arrivals.jobs={n}",), labels={"n": n}) for n in (30, 60)]
    parallel = summaries(run_all(specs, workers=2))
    serial = summaries(run_all(specs, workers=1))
    assert parallel.equals(serial)
    assert parallel["n"].to_list() == [30, 60]


def test_bad_sweep_values_are_reported(tmp_path, capsys):
    graph = str(REPO / "graphs" / "fifo.sched")
    assert main(["sweep", graph, "--vary", "arrivals.jobs=50,many"]) == 2
    assert "expects" in capsys.readouterr().err
    assert main(["sweep", graph, "--vary", "nothing"]) == 2
    assert main(["sweep", graph, "--vary", "round=5min", "--vary", "round=10min"]) == 2
    assert "round is varied twice" in capsys.readouterr().err
    assert main(["sweep", graph, "--vary", "round=5min,10min,5min"]) == 2
    assert "the value 5min is given twice" in capsys.readouterr().err
    assert main(["sweep", graph, "--vary", 'cluster="4x4:V100","4x4:Z999"']) == 2
    assert "error: --vary cluster: bad cluster '4x4:Z999'" in capsys.readouterr().err


def test_reproduce_runs_a_registered_experiment(tmp_path, capsys):
    runs = []

    @experiment("unit-test-experiment", "a check of the framework", "nobody (2026)")
    def run(out, quick):
        runs.append(quick)
        (out / "plot.png").write_bytes(b"\x89PNG")
        return Report(
            comparisons=[Comparison("answer", "42", "42" if quick else "41", "")],
            tables={"runs": pl.DataFrame({"x": [1, 2]})},
            figures=[out / "plot.png"],
        )

    try:
        assert main(["reproduce", "unit-test-experiment", "--quick", "--out", str(tmp_path)]) == 0
        printed = capsys.readouterr().out
        assert "answer" in printed and "42" in printed
        assert pl.read_csv(tmp_path / "unit-test-experiment" / "runs.csv")["x"].to_list() == [1, 2]
        assert main(["reproduce", "unit-test-experiment", "unit-test-experiment", "--quick", "--out", str(tmp_path)]) == 0
        assert runs == [True, True]  # (once more, not twice: a name given twice runs once)
        assert main(["reproduce", "unit-test-experimnt"]) == 2
        assert "did you mean 'unit-test-experiment'" in capsys.readouterr().err
        assert main(["reproduce", "unit-test-experiment", "--out", " "]) == 2
        assert "--out: the folder name is empty" in capsys.readouterr().err
    finally:
        EXPERIMENTS.pop("unit-test-experiment")


def test_a_points_mean_and_interval_over_seeds():
    from roundhouse.tools.sweep_cmd import mean_ci

    value = 119157.01049574852  # (three of it sum to a number whose third is not it, by rounding)
    assert mean_ci([value] * 3) == (value, 0.0)
    mean, half = mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302653 / 3**0.5, rel=1e-6)  # t(0.975, 2) * 1 / sqrt(3)
    assert mean_ci([5.0]) == (5.0, None)
