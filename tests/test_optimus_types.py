"""Optimus' room check on a cluster of several GPU types: a job runs on GPUs of one type (the
placers never mix them), and only on the types its throughput profile has, so a count is one
the placer can hold only if nodes of one type the job can use have room for it. GPUs a cut
count leaves go out again, also to counts larger than a node.

The profile written here has "Lin" and "Half" on every type (speeding up with more GPUs, on
one node or several) and "Konly" on K80s alone (a job that asks for a type, in effect)."""

import json

import polars as pl

from roundhouse.tools.cli import main
from tests.conftest import write_trace

RATES = {"V100": 1.0, "P100": 0.7, "K80": 0.4}


def _profile(path) -> None:
    rows = ["model,batch_size,gpu_type,gpus,placement,iters_per_s"]
    for gpus in (1, 2, 4, 8):
        for placement in ("consolidated", "spread"):
            for gpu_type, factor in RATES.items():
                rows.append(f"Lin,32,{gpu_type},{gpus},{placement},{10 * factor * gpus:.4f}")
                rows.append(f"Half,32,{gpu_type},{gpus},{placement},{10 * factor * gpus**0.8:.4f}")
            rows.append(f"Konly,32,K80,{gpus},{placement},{4.0 * gpus:.4f}")
    path.write_text("\n".join(rows) + "\n")


def _run(tmp_path, capsys, jobs: list[dict], cluster: str, optimus: str = "", profile: bool = True):
    settings = ""
    if profile:
        _profile(tmp_path / "profile.csv")
        settings = 'profile = "profile.csv";\nreference_gpu = "K80";\n'
    return run_optimus(tmp_path, capsys, jobs, cluster, optimus, settings)


def run_optimus(tmp_path, capsys, jobs: list[dict], cluster: str, optimus: str, settings: str):
    """`roundhouse run` of Optimus before Consolidated on `cluster`, with graph `settings`:
    (the explanation record, jobs.csv by job id, the counters)."""
    write_trace(tmp_path / "trace.csv", jobs)
    graph = tmp_path / "graph.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "{cluster}";\n{settings}src :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> JobPool -> o :: Optimus({optimus}) -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    code = main(["run", str(graph), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 0, err
    out = tmp_path / "out"
    counters = json.loads((out / "run.json").read_text())["counters"]
    return pl.read_parquet(out / "explain.parquet"), pl.read_csv(out / "jobs.csv").sort("job_id"), counters


def _launches(records: pl.DataFrame, job_id: int) -> pl.DataFrame:
    return records.filter((pl.col("job_id") == job_id) & (pl.col("reason") == "launched"))


def test_a_count_that_fits_only_across_gpu_types_is_not_asked_for(tmp_path, capsys):
    # 4 V100s and 4 K80s, one Transformer job that runs faster on 8 GPUs. Optimus gave it 8,
    # which fit on the two nodes together (4 + 4) but on no one type: the job never ran and the
    # run stalled. Now it gets the 4 a node of one type holds, at once.
    job = {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 60000.0, "model": "Transformer", "batch_size": 256}
    records, jobs, counters = _run(tmp_path, capsys, [job], "1x4:V100,1x4:K80", "max_gpus=8", profile=False)
    start = _launches(records, 0)
    assert start["t_s"].to_list() == [0.0] and start["b"].to_list() == [4]
    assert jobs["status"].to_list() == ["finished"]
    assert counters["o"]["no_room"] > 0  # it did want the 8


def test_a_node_of_a_type_the_job_cannot_use_is_not_room(tmp_path, capsys):
    # Two jobs that run on K80s only, on 4 V100s and 4 K80s. Optimus gave each 4 GPUs, taking
    # the V100 node for room: the second waited 95 minutes for the first to finish. Now the
    # K80 node's 4 GPUs are shared between them and both start at once.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 2, "duration_s": 40000.0, "model": "Konly", "batch_size": 32},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 20000.0, "model": "Konly", "batch_size": 32},
    ]
    records, done, _ = _run(tmp_path, capsys, jobs, "1x4:V100,1x4:K80")
    assert (done["first_start_s"] == 0.0).all()
    assert records.filter(pl.col("reason").is_in(["no_room", "preempted"])).height == 0
    for job_id in (0, 1):
        launch = _launches(records, job_id)
        assert launch["a"].to_list() == [1]  # machine 1: the K80 node
    assert sum(_launches(records, j)["b"][0] for j in (0, 1)) <= 4


def test_gpus_handed_out_again_may_grow_a_job_beyond_a_node(tmp_path, capsys):
    # 8 V100s and 8 K80s (4 per node). At 15 minutes a K80-only job arrives; Optimus' first
    # hand-out gives GPUs to counts no node of their type holds, and the ones it cuts back go out
    # again. The K80-only job then could take both K80 nodes (8 GPUs), but the hand-out stopped
    # at a node's worth: it got 4 and the other 4 K80s stayed idle. Now it gets 8.
    jobs = [
        {"job_id": 0, "arrival_s": 900.0, "gpus": 1, "duration_s": 8000.0, "model": "Lin", "batch_size": 32},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 2, "duration_s": 8000.0, "model": "Half", "batch_size": 32},
        {"job_id": 2, "arrival_s": 300.0, "gpus": 2, "duration_s": 30000.0},
        {"job_id": 3, "arrival_s": 900.0, "gpus": 4, "duration_s": 1000.0, "model": "Konly", "batch_size": 32},
        {"job_id": 8, "arrival_s": 0.0, "gpus": 4, "duration_s": 30000.0, "model": "Lin", "batch_size": 32},
    ]
    records, done, _ = _run(tmp_path, capsys, jobs, "2x4:V100,2x4:K80", "max_gpus=8, hysteresis=0")
    start = _launches(records, 3)
    assert start["t_s"].to_list() == [900.0] and start["b"].to_list() == [8]
    assert start["a"].to_list() == [2]  # its first GPU on machine 2, the first K80 node
    assert (done["status"] == "finished").all()
