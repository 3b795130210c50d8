"""Defects found using the Simulation API and the render, explain, report, check, elements,
trace and profile commands as a new user meets them."""

from __future__ import annotations

from pathlib import Path

import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from tests.conftest import fails

ROOT = Path(__file__).resolve().parents[1]
FIFO = str(ROOT / "graphs" / "fifo.sched")


@pytest.mark.parametrize(
    "overrides, said",
    [
        (None, "got None"),
        (5, "got 5"),
        (["arrivals.jobs=3", 7], "got an item 7 (int)"),
    ],
)
def test_overrides_that_are_no_list_of_texts_are_a_usage_error(overrides, said):
    """`overrides=None` (the way Python says "none") and an item that is not a text raised a
    TypeError from inside the constructor."""
    with pytest.raises(UsageError, match="overrides: expected a list of --set texts") as err:
        Simulation(FIFO, cluster="4x4:V100", overrides=overrides)
    assert said in str(err.value)


def test_overrides_given_as_a_generator_are_all_applied():
    """A generator of overrides was used up by checking its items, then failed (no len())."""
    texts = (t for t in ["arrivals.jobs=5"])
    sim = Simulation(FIFO, cluster="4x4:V100", overrides=texts, seed=1)
    assert sim.graph.elements["arrivals"].jobs == 5
    assert sim.run().stop_reason == "every job finished"
    assert len(sim.jobs()) == 5


@pytest.mark.parametrize("world", [None, "world", 3])
def test_a_projection_from_what_is_no_world_is_a_usage_error(world):
    """`simulate_ahead(None, ...)` raised an AttributeError from inside ('as_of')."""
    from roundhouse.runtime.whatif import simulate_ahead

    sim = Simulation(FIFO, cluster="4x4:V100", overrides=["arrivals.jobs=3"], seed=1)
    with pytest.raises(UsageError, match=r"world: expected a simulation's world \(sim.world_now\(\)\), got "):
        simulate_ahead(world, sim.graph, 0.0, 3600.0)


@pytest.mark.parametrize("value", ["-5", "-1min"])
def test_profile_says_the_bound_it_keeps_for_a_negative_time(tmp_path, capsys, value):
    """`--seconds -5` said "must be 0 or more", and `--seconds 0` then "1 second or more"."""
    err = fails(capsys, "profile", f"--seconds={value}", "--out", tmp_path / "p.csv")
    assert err.startswith(f"error: --seconds {value}: must be a time from 1 second to 1 day"), err
    assert "0 or more" not in err
    assert not (tmp_path / "p.csv").exists()
