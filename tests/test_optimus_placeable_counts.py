"""Optimus asks only for GPU counts a node has room for: a running job keeps what it holds
rather than being taken down for a resize no node can hold, a waiting job gets the largest
count that finds room, and no GPU stays idle while a job that could use it waits.

Jobs without a model run only on the GPUs they ask for (they hold nodes partly); a ResNet-18
job asks for one GPU and Optimus gives it more where the profile says it speeds up."""

import json

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.conftest import REPO, write_trace


def rigid(job_id: int, gpus: int, duration_s: float) -> dict:
    return {"job_id": job_id, "arrival_s": 0.0, "gpus": gpus, "duration_s": duration_s}


def elastic(job_id: int, duration_s: float) -> dict:
    return {"job_id": job_id, "arrival_s": 0.0, "gpus": 1, "duration_s": duration_s, "model": "ResNet-18", "batch_size": 32}


def _run(tmp_path, jobs: list[dict], cluster: str) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    write_trace(tmp_path / "trace.csv", jobs)
    graph = tmp_path / "graph.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "{cluster}";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> o :: Optimus -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    assert main(["run", str(graph), "--out", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    counters = json.loads((out / "run.json").read_text())["counters"]
    return pl.read_parquet(out / "explain.parquet"), pl.read_csv(out / "jobs.csv").sort("job_id"), counters


def _nobody_waits_beside_free_gpus(records: pl.DataFrame, jobs: pl.DataFrame) -> None:
    # No job waits with enough GPUs free but scattered, none is preempted, and every job starts
    # when it arrives and is launched once (a resize is recorded as one, not as a launch).
    assert records.filter(pl.col("reason").is_in(["no_room", "preempted"])).height == 0
    assert (jobs["first_start_s"] == jobs["arrival_s"]).all()
    launched = records.filter(pl.col("reason") == "launched")["job_id"]
    assert sorted(launched.to_list()) == jobs["job_id"].to_list()


def test_a_waiting_job_gets_the_largest_count_that_finds_room(tmp_path, capsys):
    # Two 3-GPU jobs take a node each of 2 x 4, leaving one GPU free on each. Optimus would
    # give the ResNet-18 job 2 GPUs (its first and the free one more), which no node holds:
    # it got nothing until a 3-GPU job finished, 8 h later. Now it starts on 1 GPU at once.
    records, jobs, _ = _run(tmp_path, [rigid(0, 3, 30000.0), rigid(1, 3, 30000.0), elastic(2, 60000.0)], "2x4:V100")
    capsys.readouterr()
    _nobody_waits_beside_free_gpus(records, jobs)
    start = records.filter((pl.col("job_id") == 2) & (pl.col("reason") == "launched"))
    assert start["t_s"].to_list() == [0.0] and start["b"].to_list() == [1]  # b: GPUs
    assert jobs.filter(pl.col("job_id") < 2)["preemptions"].to_list() == [0, 0]  # (a resize counts as one)


def test_a_high_ranked_job_does_not_take_down_a_running_one_for_a_count_no_node_holds(tmp_path, capsys):
    # The same, with the ResNet-18 job short (ranked first): it was given 2 GPUs, found no
    # node with room, then preempted a 3-GPU job for its node, which waited 20 minutes with
    # 3 GPUs free, scattered. Now it runs on 1 GPU and nobody is preempted.
    records, jobs, _ = _run(tmp_path, [rigid(0, 3, 30000.0), rigid(1, 3, 30000.0), elastic(2, 3000.0)], "2x4:V100")
    capsys.readouterr()
    _nobody_waits_beside_free_gpus(records, jobs)
    assert jobs.filter(pl.col("job_id") < 2)["preemptions"].to_list() == [0, 0]
    assert jobs.filter(pl.col("job_id") < 2)["finish_s"].to_list() == pytest.approx([30000.0, 30000.0])


def test_a_running_job_keeps_its_gpus_when_its_new_count_finds_no_room(tmp_path, capsys):
    # 3 x 4 GPUs: two 3-GPU jobs, a 2-GPU job and the ResNet-18 job. Every round Optimus would
    # move the ResNet-18 job to 4 GPUs (two are free, one on each of two nodes), which no node
    # holds while the 3-GPU jobs run: it keeps the 2 it holds beside the 2-GPU job. Before, it
    # started on 4, the 2-GPU job (ranked ahead) preempted it for its node, and it waited 8 h
    # with 4 GPUs free, scattered.
    jobs = [rigid(0, 3, 30000.0), rigid(1, 3, 30000.0), rigid(2, 2, 40000.0), elastic(3, 60000.0)]
    records, done, counters = _run(tmp_path, jobs, "3x4:V100")
    capsys.readouterr()
    _nobody_waits_beside_free_gpus(records, done)
    mine = records.filter(pl.col("job_id") == 3)
    assert mine.filter(pl.col("reason") == "launched")["b"].to_list() == [2]
    # Never resized while the 3-GPU jobs run (no node has room for 4 till then).
    assert mine.filter((pl.col("reason") == "resized") & (pl.col("t_s") < 30000.0)).height == 0
    # Optimus did ask for a count no node held (the policy counts those job rounds).
    assert counters["o"]["no_room"] > 0
    assert (done["status"] == "finished").all()
    # The idle pair of GPUs was never what kept a job waiting: it finishes well within its
    # 1-GPU duration.
    assert done.filter(pl.col("job_id") == 3)["jct_s"][0] < 0.6 * 60000.0


def test_the_shipped_graph_has_no_job_waiting_beside_free_gpus(tmp_path, capsys):
    # graphs/optimus.sched's first three days: before, jobs were preempted for counts no node
    # held (job 173, among others) and waited with GPUs free, scattered.
    assert main(["run", str(REPO / "graphs" / "optimus.sched"), "--until", "3d", "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    records = pl.read_parquet(tmp_path / "out" / "explain.parquet")
    assert records.filter(pl.col("reason") == "launched").height > 200
    assert records.filter(pl.col("reason").is_in(["no_room", "preempted"])).height == 0
