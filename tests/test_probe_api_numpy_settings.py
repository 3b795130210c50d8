"""Keyword settings given as numpy scalars (a value read from an array, a sweep's grid): numbers
and bools like Python's, set as the same value a Python number sets."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse import Simulation
from roundhouse.errors import UsageError
from tests.conftest import REPO

FIFO = REPO / "graphs" / "fifo.sched"
SMALL = dict(cluster="4x4:V100", overrides=["arrivals.jobs=12"])


@pytest.mark.parametrize(
    ("name", "numpy_value", "python_value"),
    [
        ("seed", np.int64(3), 3),
        ("seed", np.uint8(3), 3),
        ("round", np.float64(600.0), 600.0),
        ("round", np.int32(600), 600),
        ("batch_jump_penalty", np.float32(0.5), 0.5),
        ("skip_rounds", np.bool_(False), False),
    ],
)
def test_a_numpy_scalar_keyword_setting_sets_what_the_python_number_sets(name, numpy_value, python_value):
    given = Simulation(FIFO, **SMALL, **{name: numpy_value})
    plain = Simulation(FIFO, **SMALL, **{name: python_value})
    assert getattr(given.graph.settings, name) == getattr(plain.graph.settings, name)
    assert given.graph.key() == plain.graph.key()
    # (the snapshot's header records it as .sched text, which a later load compiles again)
    assert given._header["overrides"] == plain._header["overrides"]


def test_a_numpy_keyword_setting_runs_as_the_python_one():
    given = Simulation(FIFO, **SMALL, round=np.float64(600.0))
    plain = Simulation(FIFO, **SMALL, round=600)
    given.run()
    plain.run()
    assert given.jobs().equals(plain.jobs())


@pytest.mark.parametrize("value", [np.float64("nan"), np.float32("inf"), np.array([1, 2]), np.str_("x").encode()])
def test_a_numpy_value_that_is_no_finite_scalar_is_refused_naming_the_keyword(value):
    with pytest.raises(UsageError, match=r"^seed: a graph setting given as a keyword takes a number, true/false or a str"):
        Simulation(FIFO, cluster="4x4:V100", seed=value)
