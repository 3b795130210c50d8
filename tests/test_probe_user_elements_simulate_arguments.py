"""`simulate` called from Python with arguments of the wrong kind (docs/explain.md shows it): each
is a UsageError naming the argument, before a round runs, not an AttributeError or TypeError
from inside the engine."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from roundhouse.errors import UsageError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.conftest import REPO

FIFO = REPO / "graphs" / "fifo.sched"
SMALL = ["arrivals.jobs=10"]


def _graph():
    return compile_file(FIFO, overrides=SMALL)


@pytest.mark.parametrize("graph", [str(FIFO), FIFO, 3])
def test_a_graph_that_is_not_compiled_is_refused_with_the_way_to_compile_it(graph):
    with pytest.raises(UsageError, match=r"graph: expected a compiled graph, got (str|PosixPath|int)") as err:
        simulate(graph)
    if isinstance(graph, (str, Path)):
        assert "compile_file" in str(err.value) and "Simulation" in str(err.value)


@pytest.mark.parametrize("until", ["1h", -5, math.nan, True, [3600]])
def test_a_time_limit_that_is_not_seconds_is_refused(until):
    with pytest.raises(UsageError, match=r"until: expected seconds, a number of 0 or more"):
        simulate(_graph(), until=until)


def test_a_numpy_time_limit_is_taken_as_the_same_number():
    assert simulate(_graph(), until=np.int64(3600)).rounds == simulate(_graph(), until=3600).rounds


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("cluster", 16, "cluster: expected a spec"),
        ("on_round", 3, "on_round: expected a function"),
        ("explain", "yes", "explain: expected True or False"),
        ("explain_to", 7, "explain_to: expected the path of a file"),
    ],
)
def test_other_arguments_of_the_wrong_kind_are_refused_naming_them(name, value, says):
    kwargs = {name: value}
    if name == "explain_to":
        kwargs["explain"] = True
    with pytest.raises(UsageError, match=says):
        simulate(_graph(), **kwargs)


def test_a_cluster_given_as_a_path_is_read_as_its_text():
    spec = REPO / "clusters" / "gavel-simulated.toml"
    assert simulate(_graph(), cluster=spec).rounds == simulate(_graph(), cluster=str(spec)).rounds
