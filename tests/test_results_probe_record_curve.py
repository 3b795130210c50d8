"""The utilisation curve drawn from a run's record (explain.parquet) is worked out with each
job's changes put side by side rather than a window per job (a long record's millions of
changes): checked against the plain reading, job by job in the order recorded, of a seeded
record of launches, moves, suspensions, notes and finishes, its words as a run writes them
(categories) and as text."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from roundhouse.tools.plots import recorded_busy_gpus

END_S = 10_000.0


def a_record(seed: int) -> pl.DataFrame:
    """Changes of 200 jobs at whole times, in time order as a run records them."""
    draw = random.Random(seed)
    rows = []
    for job in range(200):
        t = float(draw.randrange(0, 2_000))
        rows.append((t, job, "waiting", "admitted", 0))
        for _ in range(draw.randrange(0, 6)):
            t += draw.randrange(0, 300)  # (0: a change at the same time as the one before)
            state, reason = draw.choice(
                [
                    ("running", "launched"),
                    ("running", "moved"),
                    ("suspended", "preempted"),
                    ("waiting", "ranked_behind"),
                    ("note", "demoted"),
                ]
            )
            gpus = draw.choice([1, 2, 4]) if reason in ("launched", "moved") else draw.randrange(0, 9)
            rows.append((t, job, state, reason, gpus))
        if draw.random() < 0.7:
            rows.append((t + draw.randrange(1, 500), job, "finished", "finished", 0))
    rows.sort(key=lambda r: r[0])  # (stable: a job's changes at one time stay in their order)
    return pl.DataFrame(rows, schema=["t_s", "job_id", "state", "reason", "b"], orient="row")


def read_plainly(record: pl.DataFrame) -> tuple[dict[int, float], dict[float, int]]:
    """Each job's GPU time, and the change of GPUs held at each time: a job holds the GPUs of
    its launch until a change that leaves it not running (a move keeps them; a note is none)."""
    held_by: dict[int, int] = {}
    since: dict[int, float] = {}
    gpu_s: dict[int, float] = {}
    change: dict[float, int] = {}
    for t, job, state, reason, b in record.iter_rows():
        if state == "note":
            continue
        before = held_by.get(job, 0)
        now = b if reason == "launched" else before if state == "running" else 0
        gpu_s[job] = gpu_s.get(job, 0.0) + before * (t - since.get(job, t))
        held_by[job], since[job] = now, t
        if now != before:  # (a time at which jobs' changes cancel out is still a step)
            change[t] = change.get(t, 0) + now - before
    for job, held in held_by.items():
        gpu_s[job] += held * (END_S - since[job])
    return gpu_s, change


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("words", [pl.Categorical, pl.String])
def test_the_curve_from_a_record_is_its_plain_reading(seed, words):
    record = a_record(seed)
    gpu_s, change = read_plainly(record)
    jobs = pl.DataFrame({"job_id": list(gpu_s), "gpus": [1.0] * len(gpu_s), "run_s": list(gpu_s.values())})
    typed = record.with_columns(pl.col("state", "reason").cast(words))
    times, busy = recorded_busy_gpus(typed, jobs, END_S)
    assert times.tolist() == sorted(change)
    assert busy.tolist() == np.cumsum([change[t] for t in sorted(change)]).tolist()
