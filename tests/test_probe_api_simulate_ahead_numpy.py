"""`simulate_ahead` takes its times as the rest of the Simulation API does: numpy's numbers as
Python's (a value read from an array or a sweep's grid), with the same projection; bools and
texts are still refused, naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from roundhouse.runtime.whatif import simulate_ahead
from tests.conftest import REPO

FIFO = REPO / "graphs" / "fifo.sched"


@pytest.fixture(scope="module")
def sim():
    sim = Simulation(FIFO, cluster="4x4:V100", overrides=["arrivals.jobs=12"], seed=1)
    sim.run_until(20000)
    return sim


@pytest.mark.parametrize(
    "numpy_times",
    [
        dict(horizon_s=np.int64(86400)),
        dict(horizon_s=np.float32(86400.0)),
        dict(now=np.int64(20100)),
        dict(seen_s=np.int32(19800)),
    ],
)
def test_numpy_times_project_as_python_numbers(sim, numpy_times):
    assert sim.now == 20100  # (the next round boundary after 20000 s, rounds of 5 min)
    plain = dict(now=sim.now, horizon_s=86400.0, seen_s=19800.0)
    given = {**plain, **numpy_times}
    expected = simulate_ahead(sim.world_now(), sim.graph, **plain)
    projection = simulate_ahead(sim.world_now(), sim.graph, **given)
    assert projection == expected
    assert projection.metrics["jobs"] > 0


@pytest.mark.parametrize(
    ("name", "value"),
    [("horizon_s", np.bool_(True)), ("horizon_s", True), ("now", "20100"), ("seen_s", np.float64("nan")), ("horizon_s", 10**400)],
)
def test_times_that_are_no_numbers_are_still_refused(sim, name, value):
    given = {"now": sim.now, "horizon_s": 86400.0, name: value}
    with pytest.raises(UsageError, match=rf"^{name}: expected seconds"):
        simulate_ahead(sim.world_now(), sim.graph, **given)
