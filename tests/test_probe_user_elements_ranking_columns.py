"""A Ranking of the user's own element that asks for what a placer cannot give (a GPU type the
cluster lacks, a negative batch size, a partner that is no job, a column that is a list or of the
wrong kind) is an error naming the element and the column, not an IndexError or TypeError inside
the placer it reaches."""

from __future__ import annotations

import re

import pytest

from roundhouse import Simulation
from roundhouse.runtime.element_failures import ElementFailure
from tests.own_elements import policy_file


def _policy(column: str, value: str) -> str:
    """A policy Asks ranking in the pool's order, its Ranking's `column` being `value`."""
    return policy_file(
        "Asks",
        "Rank in the pool's order, asking what it is told to beside the GPU counts.",
        f"n = len(active.rows)\nreturn Ranking(active.rows, active.gpus, {column}={value})",
        before="import numpy as np",
    )


GRAPH = """require "asks.py";
round = 5min;
cluster = "2x4:V100";
src :: PoissonSource(rate=8/h, jobs=10, seed=1);
src -> AcceptAll -> JobPool -> asks :: Asks -> {placer} -> Launch -> JobMetrics;
"""


def _run(tmp_path, column, value, placer="Consolidated"):
    (tmp_path / "asks.py").write_text(_policy(column, value))
    (tmp_path / "g.sched").write_text(GRAPH.format(placer=placer))
    return Simulation(tmp_path / "g.sched").run()


@pytest.mark.parametrize(
    ("column", "value", "says"),
    [
        (
            "gpu_type",
            "np.full(n, 7)",
            r"gpu_type is 7 for job 0 \(row 0\): each must be a GPU type code of the cluster \(0 to 0\)",
        ),
        ("gpu_type", "np.full(n, -2)", r"gpu_type is -2 for job 0"),
        ("gpu_type", "[0] * n", r"gpu_type is list: it must be a numpy array of integers"),
        ("gpu_type", "np.zeros(n)", r"gpu_type is an array of float64: it must be a numpy array of integers"),
        ("batch_size", "np.full(n, -32)", r"batch_size is -32 for job 0 \(row 0\): each must be a batch size, or 0"),
        ("partner", "np.full(n, 999)", r"partner is 999 for job 0 \(row 0\): each must be the row of a job"),
        ("consolidate", "np.ones(n, dtype=np.int64)", r"consolidate is an array of int64: it must be a numpy array of bools"),
    ],
)
def test_a_ranking_column_a_placer_cannot_use_names_the_element(tmp_path, column, value, says):
    with pytest.raises(ElementFailure, match=r"element 'asks' \(Asks; declared at .*g\.sched:5:32.*\) failed in round 0") as err:
        _run(tmp_path, column, value)
    assert "its port 'ranking'" in str(err.value)
    assert re.search(says, str(err.value)), str(err.value)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("gpu_type", "np.full(n, -1)"),
        ("gpu_type", "np.zeros(n, dtype=np.int64)"),
        ("batch_size", "np.zeros(n, dtype=np.int64)"),
        ("consolidate", "np.ones(n, dtype=bool)"),
    ],
)
def test_columns_a_placer_can_use_run_as_before(tmp_path, column, value):
    (tmp_path / "plain").mkdir()
    plain = _run(tmp_path / "plain", "backfill", "True")
    asked = _run(tmp_path, column, value)
    assert asked.rounds > 0
    if column != "consolidate":  # (any type, type 0 of a one-type cluster, each job's own batch: the same run)
        assert asked.rounds == plain.rounds
