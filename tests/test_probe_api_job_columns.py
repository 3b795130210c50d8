"""`Simulation.jobs(columns)`: a list naming no column, or one column twice, is refused naming
the argument (they gave a frame of no rows, and one of fewer columns than asked, without a word)."""

from __future__ import annotations

import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from tests.conftest import REPO

FIFO = REPO / "graphs" / "fifo.sched"


@pytest.fixture(scope="module")
def sim():
    s = Simulation(FIFO, cluster="4x4:V100", overrides=["arrivals.jobs=12"], seed=1)
    s.run_until(12 * 3600)
    assert len(s.jobs()) > 0
    return s


def test_no_columns_is_refused(sim):
    with pytest.raises(UsageError, match=r"^columns: name at least one column"):
        sim.jobs([])


def test_a_column_named_twice_is_refused(sim):
    with pytest.raises(UsageError, match=r"^columns: 'status' is named twice"):
        sim.jobs(["job_id", "status", "status"])


def test_columns_asked_for_are_given_in_order(sim):
    frame = sim.jobs(("status", "job_id"))
    assert frame.columns == ["status", "job_id"]
    assert len(frame) == len(sim.jobs())
