"""Gavel solver arguments that used to hang or crash: bounded tolerance; only a PairEstimator feeds a solver its pair estimates."""

from __future__ import annotations

import pytest

from roundhouse.errors import RoundhouseError, SchedError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

GRAPH = """round = 6min;
cluster = "2x2:V100";
arrivals :: PoissonSource(rate=6/h, jobs=6, gpus=single, models=blox, seed=0);
pool :: JobPool;
solve :: {solver};
arrivals -> AcceptAll -> pool -> solve -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;
"""


def _compile(tmp_path, solver):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(solver=solver))
    return compile_file(path)


@pytest.mark.parametrize("tolerance, words", [("1e-17", "at least 1e-09"), ("0", "at least 1e-09"), ("2", "at most 0.5")])
def test_finish_time_fairness_tolerance_is_bounded(tmp_path, tolerance, words):
    with pytest.raises(RoundhouseError) as caught:
        _compile(tmp_path, f"MinMaxRho(tolerance={tolerance})")
    assert f"argument 'tolerance' of MinMaxRho must be {words}" in str(caught.value)
    assert "g.sched:5:" in str(caught.value)


def test_finish_time_fairness_at_the_smallest_tolerance_ends(tmp_path):
    graph = _compile(tmp_path, "MinMaxRho(tolerance=1e-9)")
    simulate(graph, until=1800.0)
    assert graph.elements["solve"].counters["bisection_steps"] > 0


def test_only_a_pair_estimator_feeds_a_solvers_pairs(tmp_path):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(solver="MaxMinFairness(space_sharing=true)") + "pool -> [pairs] solve;\n")
    with pytest.raises(
        SchedError, match=r"type mismatch: 'pool' \[active\] gives Active, but 'solve' \[pairs\] takes PairEstimates"
    ):
        compile_file(path)
