"""A trace's text columns (a Gavel trace's commands and folders, users) are prepared as one
Python string per distinct text, shared by the rows that hold it: a million jobs of a few dozen
commands then hold a pointer a row rather than a string each (hundreds of MB)."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.runtime.cluster import Cluster
from roundhouse.traces.prepare import prepare_jobs
from roundhouse.traces.profiles import ProfileTable
from roundhouse.traces.schema import validate
from roundhouse.traces.throughput import ThroughputModel


@pytest.mark.parametrize("n", [10, 5_000])  # (a dictionary splits few rows, polars many)
def test_rows_holding_the_same_text_share_one_string_and_keep_their_values(n):
    commands = [None if i % 7 == 0 else f"python main.py --batch_size {i % 3}" for i in range(n)]
    users = [f"user-{i % 4}" for i in range(n)]
    trace = validate(
        pl.DataFrame(
            {
                "job_id": list(range(n)),
                "arrival_s": [float(i) for i in range(n)],
                "gpus": [1] * n,
                "duration_s": [600.0] * n,
                "command": commands,
                "user": users,
            }
        ),
        "t",
    )
    profile = ProfileTable.load()
    cluster = Cluster.parse("2x4:V100", profile.gpu_types)
    batch, _ = prepare_jobs(trace, ThroughputModel(profile, cluster), "V100", cluster.n_gpus, "t")
    held = batch.columns["command"]
    assert held.tolist() == commands
    assert batch.columns["user"].tolist() == users
    # One object per distinct text: the rows share them.
    assert len({id(x) for x in held if x is not None}) == 3
    assert len({id(x) for x in batch.columns["user"]}) == 4
