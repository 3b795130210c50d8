"""The utilisation figure of a run whose jobs shared GPUs (space sharing): a GPU two jobs share
is counted once, as the run's busy GPU time and measured utilization count it."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from roundhouse.tools.outputs import open_folder
from roundhouse.tools.plots import utilisation_figure

HEADER = "job_id,arrival_s,first_start_s,finish_s,jct_s,queue_s,responsiveness_s,run_s,gpus,preemptions,launches,service_gpu_s,model,batch_size,duration_s,status"
# Two GPUs, four one-GPU jobs each holding its GPU from its start to its finish: jobs 2 and 3
# share the GPUs of jobs 0 and 1 from 500 s. Their GPU times sum to 6,500 GPU-s; the two GPUs
# were busy 0-2,000 s and one of them to 3,000 s: 5,000 GPU-s.
JOBS = [(0, 0.0, 3000.0), (1, 0.0, 2000.0), (2, 500.0, 1500.0), (3, 500.0, 1000.0)]


def shared_run(folder, busy_gpu_s: float = 5000.0, record: bool = True):
    folder.mkdir()
    rows = [f"{j},{t},{t},{f},{f - t},0.0,0.0,{f - t},1,0,1,{f - t},,,{f - t},finished" for j, t, f in JOBS]
    (folder / "jobs.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    summary = {"jobs_tracked": 4, "jobs_finished": 4, "utilization": busy_gpu_s / (2 * 3600.0)}
    (folder / "summary.json").write_text(json.dumps(summary))
    info = {"graph": "g.sched", "cluster": "2 GPUs on 1 node (1x2:V100)", "rounds": 10, "end_s": 3600.0}
    (folder / "run.json").write_text(json.dumps({**info, "stop_reason": "x", "busy_gpu_s": busy_gpu_s}))
    if record:
        launched = [(t, j, "running", "launched", 1) for j, t, _ in JOBS]
        finished = [(f, j, "finished", "finished", 0) for j, _, f in JOBS]
        pl.DataFrame(sorted(launched + finished), schema=["t_s", "job_id", "state", "reason", "b"], orient="row").with_columns(
            pl.col("state", "reason").cast(pl.Categorical)
        ).write_parquet(folder / "explain.parquet")
    return open_folder(str(folder))


def _curve(fig) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The drawn steps (in minutes) and the notes under the title."""
    [ax] = fig.axes
    [line] = [line for line in ax.get_lines() if line.get_label() == "GPUs held"]
    _, *notes = ax.get_title(loc="left").split("\n")
    return np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float), notes


@pytest.mark.parametrize("record", [True, False], ids=["from the record", "from jobs.csv"])
def test_a_shared_gpu_is_counted_once_and_the_curve_stays_within_the_cluster(tmp_path, record):
    t, busy, notes = _curve(utilisation_figure(shared_run(tmp_path / "run", record=record)))
    assert busy.max() == 2.0  # (the jobs' own GPU times stack to 4)
    area = float(np.sum(np.diff(t) * busy[:-1])) * 60.0
    assert area == pytest.approx(5000.0)  # the run's busy GPU time: the measured average is the curve's
    # Both GPUs busy to 2,000 s (not until 3,000 s, as GPU time moved later would draw), then one.
    at = lambda s: busy[np.searchsorted(t, s / 60.0, side="right") - 1]  # noqa: E731
    assert [at(s) for s in (0, 499, 500, 1200, 1999, 2000, 2999, 3000)] == [2, 2, 2, 2, 2, 1, 1, 0]
    assert notes == ["jobs shared GPUs: a shared GPU counted once"]


def test_jobs_sharing_gpus_the_cluster_had_free_are_said_to_be_counted_more(tmp_path):
    # The run held 4,500 GPU-s: the jobs shared a GPU for 500 s while the other was free, which
    # the record does not show. The curve holds 500 GPU-s more, and says so.
    _, busy, notes = _curve(utilisation_figure(shared_run(tmp_path / "run", busy_gpu_s=4500.0)))
    assert busy.max() == 2.0
    assert " ".join(notes) == (
        "jobs shared GPUs: a shared GPU counted once where the cluster was full, else once for each job "
        "(the curve holds 0.139 GPU-h more than the 1.25 GPU-h the run held)"
    )


def test_a_run_whose_jobs_held_no_more_than_the_run_draws_no_sharing_note(tmp_path):
    run = shared_run(tmp_path / "run", busy_gpu_s=6500.0, record=False)  # (as if the cluster had four GPUs)
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    (tmp_path / "run" / "run.json").write_text(json.dumps({**info, "cluster": "4 GPUs on 1 node (1x4:V100)"}))
    run = open_folder(str(tmp_path / "run"))
    _, busy, notes = _curve(utilisation_figure(run))
    assert busy.max() == 4.0 and notes == []
