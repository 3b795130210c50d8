"""Optimus keeps what running jobs hold unless a change pays: no flipping of jobs between GPU
counts on near-tied gains, and a restart's cost weighed against what a change saves."""

import polars as pl
import pytest

from roundhouse.errors import RoundhouseError
from roundhouse.runtime.compiler import compile_file
from roundhouse.tools.cli import main
from tests.conftest import write_trace

# Three identical jobs on one 4-GPU node: each gets a GPU and one more GPU is free. Whoever
# holds it runs faster, so its remaining time (and its gain from the extra GPU) soon falls
# below the others': a greedy that ignores what jobs hold hands it round after round.
JOBS = [
    {"job_id": i, "arrival_s": 0.0, "gpus": 1, "duration_s": 40000.0, "model": "ResNet-18", "batch_size": 32} for i in range(3)
]


def _run(tmp_path, name: str, optimus: str, settings: str = "") -> tuple[pl.DataFrame, pl.DataFrame]:
    folder = tmp_path / name
    folder.mkdir()
    write_trace(folder / "trace.csv", JOBS)
    graph = folder / "graph.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "1x4:V100";\n{settings}'
        'src :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> JobPool -> {optimus} -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    assert main(["run", str(graph), "--out", str(folder / "out")]) == 0
    records = pl.read_parquet(folder / "out" / "explain.parquet")
    return records.filter(pl.col("reason") == "resized"), pl.read_csv(folder / "out" / "jobs.csv")


def _undone_within_two_rounds(resized: pl.DataFrame) -> int:
    """Resizes of a job back to the count it had before, at most two rounds (600 s) later."""
    undone = 0
    for _, job in resized.sort("t_s").group_by("job_id"):
        t, now, before = job["t_s"].to_numpy(), job["b"].to_numpy(), job["c"].to_numpy()
        for i in range(len(t)):
            undone += bool(((t > t[i]) & (t <= t[i] + 600.0) & (now == before[i])).any())
    return undone


def test_near_tied_gains_keep_the_gpus_jobs_hold(tmp_path, capsys):
    greedy, greedy_jobs = _run(tmp_path, "greedy", "Optimus(hysteresis=0)")
    kept, kept_jobs = _run(tmp_path, "kept", "Optimus")
    capsys.readouterr()
    # Without the hysteresis (and no restart cost in this graph) nearly every resize is undone
    # within two rounds; with the default, few resizes are and most of them are not.
    assert len(greedy) > 100 and _undone_within_two_rounds(greedy) > 0.9 * len(greedy)
    assert len(kept) < len(greedy) / 3
    assert _undone_within_two_rounds(kept) <= 0.1 * _undone_within_two_rounds(greedy)
    # The free GPU is still used: every job finishes well within its 1-GPU duration, and the
    # average completion time is that of the flipping run (the GPU goes to one job or another).
    assert kept_jobs["status"].to_list() == ["finished"] * 3
    assert (kept_jobs["jct_s"] < 0.7 * 40000.0).all()
    assert kept_jobs["jct_s"].mean() == pytest.approx(greedy_jobs["jct_s"].mean(), rel=0.01)


def test_a_restart_cost_is_weighed_against_what_a_resize_saves(tmp_path, capsys):
    # No hysteresis, but suspending and relaunching a job costs 4 minutes: a resize is made only
    # when it saves more than that, so none is undone a round or two later.
    free, _ = _run(tmp_path, "free", "Optimus(hysteresis=0)")
    costly, jobs = _run(tmp_path, "costly", "Optimus(hysteresis=0)", "checkpoint = 2min;\nrestore = 2min;\n")
    capsys.readouterr()
    assert _undone_within_two_rounds(free) > 100
    assert _undone_within_two_rounds(costly) == 0
    assert 0 < len(costly) < len(free) / 2
    assert jobs["status"].to_list() == ["finished"] * 3


@pytest.mark.parametrize("value", ["-0.1", "0.9"])
def test_hysteresis_out_of_range_is_a_clear_error(tmp_path, value):
    graph = tmp_path / "graph.sched"
    graph.write_text(
        "src :: PoissonSource(rate=1/h, jobs=5);\n"
        f"src -> AcceptAll -> JobPool -> Optimus(hysteresis={value}) -> Consolidated -> Launch -> JobMetrics;\n"
    )
    with pytest.raises(RoundhouseError, match="argument 'hysteresis' of Optimus must be"):
        compile_file(graph)
