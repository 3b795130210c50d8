"""Optimus on a cluster of two GPU types whose faster type has GPUs left only scattered over its
nodes: a count the faster type holds in number but has no node room for goes to the slower type
when that has room for it (the type named to the placer, which picks types by count alone),
rather than being cut to a count that fits a node of the faster type.

Two rigid jobs (a model the profile does not know) of 3 GPUs each hold two V100 nodes, leaving
one V100 free on each; a "Lin" job, twice as fast on 2 GPUs as on 1, arrives asking for 2."""

import polars as pl

from tests.test_optimus_types import _launches, run_optimus

RATES = {"V100": 1.0, "P100": 0.7}


def _run(tmp_path, capsys, jobs: list[dict]):
    rows = ["model,batch_size,gpu_type,gpus,placement,iters_per_s"]
    for gpus in (1, 2, 4):
        for placement in ("consolidated", "spread"):
            for gpu_type, factor in RATES.items():
                rows.append(f"Lin,32,{gpu_type},{gpus},{placement},{10 * factor * gpus:.4f}")
    (tmp_path / "profile.csv").write_text("\n".join(rows) + "\n")
    settings = 'profile = "profile.csv";\nreference_gpu = "V100";\n'
    return run_optimus(tmp_path, capsys, jobs, "2x4:V100,1x4:P100", "max_gpus=2", settings)


def _rigid(job_id: int) -> dict:
    return {"job_id": job_id, "arrival_s": 0.0, "gpus": 3, "duration_s": 50000.0, "model": "Rigid", "batch_size": 32}


LIN = {"job_id": 9, "arrival_s": 100.0, "gpus": 2, "duration_s": 2000.0, "model": "Lin", "batch_size": 32}


def test_a_count_the_fastest_type_has_no_node_room_for_goes_to_a_slower_type(tmp_path, capsys):
    # The V100s have 2 GPUs left, one on each node: Optimus cut the Lin job to 1 V100 (its
    # 2 found no room there) and it ran 4000 s. Now it gets 2 P100s at once (machine 2), which
    # run it 1.4x as fast as 1 V100, and no count was cut for want of room.
    records, jobs, counters = _run(tmp_path, capsys, [_rigid(0), _rigid(1), LIN])
    start = _launches(records, 9)
    assert start["t_s"].to_list() == [300.0]
    assert start["a"].to_list() == [2] and start["b"].to_list() == [2]  # the P100 node, 2 GPUs
    lin = jobs.filter(pl.col("job_id") == 9)
    assert lin["finish_s"][0] - lin["first_start_s"][0] < 2000.0 * 2 / (2 * RATES["P100"]) + 1.0
    assert counters["o"]["no_room"] == 0
    assert records.filter(pl.col("reason").is_in(["preempted", "suspended"])).height == 0
    assert (jobs["status"] == "finished").all()


def test_with_no_room_on_the_slower_type_either_the_count_is_cut_to_one_that_fits(tmp_path, capsys):
    # A third rigid job holds 3 of the 4 P100s: no type has node room for 2, so the Lin job
    # gets 1 GPU (the fastest type with one left, a V100) at once, as before.
    third = {**_rigid(2), "arrival_s": 0.0}
    records, jobs, counters = _run(tmp_path, capsys, [_rigid(0), _rigid(1), third, LIN])
    start = _launches(records, 9)
    assert start["t_s"].to_list() == [300.0] and start["b"].to_list() == [1]
    assert start["a"][0] in (0, 1)  # a V100 node
    assert counters["o"]["no_room"] > 0
    assert records.filter(pl.col("reason").is_in(["preempted", "suspended"])).height == 0
    assert (jobs["status"] == "finished").all()
