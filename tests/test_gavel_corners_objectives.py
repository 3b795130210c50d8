"""Corners of Gavel's objectives: prices for GPU types the cluster lacks, and LP solvers that find
no allocation (the run stops with the element and the solver's status, never runs nothing)."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.elements.policies.gavel import lp as lp_module
from roundhouse.errors import RoundhouseError, SchedError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

GRAPH = """round = 6min;
cluster = "1:1:1";
arrivals :: PoissonSource(rate=6/h, jobs=4, gpus=single, models=blox, seed=0);
pool :: JobPool;
solve :: {solver};
arrivals -> AcceptAll -> pool -> solve -> GavelRounds -> GavelPlacer -> run :: Launch -> JobMetrics;
{extra}"""


def _run(tmp_path, solver: str, extra: str = "", until: float = 7200.0):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(solver=solver, extra=extra))
    return simulate(compile_file(path), until=until)


@pytest.mark.parametrize("solver", ["MaxMinFairness", 'MinCost(prices=["V100:2.48", "P100:1.46", "K80:0.45"])'])
def test_cost_metrics_refuses_a_price_for_a_gpu_type_the_cluster_lacks(tmp_path, solver):
    # A misspelt type ("K8O" for "K80") beside the cluster's own is refused, as the cost
    # solvers refuse it, naming the element and the type; it was silently ignored.
    prices = 'prices=["V100:2.48", "P100:1.46", "K80:0.45", "K8O:0.3"]'
    with pytest.raises(
        SchedError, match=r"cost \(CostMetrics\): prices name GPU type K8O, which the cluster does not have"
    ) as err:
        _run(tmp_path, solver, f"run -> cost :: CostMetrics({prices});\n")
    assert err.value.location is not None and err.value.location.line == 7


def test_cost_metrics_default_prices_still_fit_a_one_type_cluster(tmp_path):
    # The defaults price Gavel's three types for any of its clusters: no complaint on a V100 one.
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.replace('"1:1:1"', '"2x1:V100"').format(solver="MaxMinFairness", extra="run -> cost :: CostMetrics;\n"))
    result = simulate(compile_file(path), until=3600.0)
    assert result.reports["cost"]["cost"]["total_cost_usd"] > 0


@pytest.fixture
def failing_lp(monkeypatch):
    """Every LP and MILP solve ends in numerical trouble (status ABNORMAL, no values)."""

    def abnormal(self, solver="GLOP", time_limit_s=None):
        return lp_module.Solution(False, "ABNORMAL", float("nan"), np.full(self.n_vars, np.nan))

    monkeypatch.setattr(lp_module.LinearProgram, "solve", abnormal)


@pytest.mark.parametrize("solver", ["MaxMinFairness(water_filling=true)", "Hierarchical(entities=[0..2], weights=[2])"])
def test_water_filling_without_an_allocation_says_so(tmp_path, failing_lp, solver):
    # It used to hand on an empty allocation: the run went on and no job ever ran.
    with pytest.raises(RoundhouseError, match=r"solve: the water-filling LP solver returned ABNORMAL, so there is no allocation"):
        _run(tmp_path, solver)


def test_finish_time_fairness_without_an_allocation_names_the_solvers_status(tmp_path, failing_lp):
    # Numerical trouble was reported as "no feasible finish-time fairness found".
    with pytest.raises(RoundhouseError, match=r"solve: no allocation met even rho = 1e12 \(the LP solver returned ABNORMAL\)"):
        _run(tmp_path, "MinMaxRho")


def test_min_cost_slo_does_not_take_solver_trouble_for_missed_slos(tmp_path, monkeypatch):
    # A solve that ended in numerical trouble was read as "the SLOs cannot all be met": the SLO
    # rows were dropped, counted as a fallback, and the run went on. Only an infeasible program
    # means that. (The first two programs fail: the ratio's, then the largest share's with the
    # SLO rows, which is asked when the ratio has no optimum; every later one solves.)
    solve = lp_module.LinearProgram.solve
    calls = []

    def abnormal_at_first(self, solver="GLOP", time_limit_s=None):
        calls.append(1)
        if len(calls) <= 2:
            return lp_module.Solution(False, "ABNORMAL", float("nan"), np.full(self.n_vars, np.nan))
        return solve(self, solver, time_limit_s)

    monkeypatch.setattr(lp_module.LinearProgram, "solve", abnormal_at_first)
    path = tmp_path / "g.sched"
    text = GRAPH.replace(
        "PoissonSource(rate=6/h, jobs=4, gpus=single, models=blox, seed=0)", "CostWorkload(jobs=4, rate=6/h, seed=0)"
    )
    path.write_text(text.format(solver='MinCostSLO(prices=["V100:2.48", "P100:1.46", "K80:0.45"])', extra=""))
    with pytest.raises(RoundhouseError, match=r"solve: the LP solver returned ABNORMAL"):
        simulate(compile_file(path), until=7200.0)
