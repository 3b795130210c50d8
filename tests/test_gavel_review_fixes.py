"""Gavel's policies on inputs at the edges: forks of space-sharing runs, jobs no type can run,
free GPU types, clusters of one-GPU servers, odd prices and weights, and where errors point."""

from __future__ import annotations

import math
import pickle

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.policies.gavel import solvers
from roundhouse.errors import SchedError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.test_gavel_solvers import EXAMPLE_PROFILE as PROFILE  # (Gavel §4.2's jobs a, b, c)


def _graph(
    tmp_path, solver: str, jobs: list[dict], cluster: str, profile: str | None = PROFILE, extra: str = "", rounds="GavelRounds"
):
    """A graph of `solver` over `jobs` (`profile` None: the shipped profile)."""
    if profile is not None:
        (tmp_path / "profile.csv").write_text(profile)
    pl.DataFrame(jobs).write_csv(tmp_path / "trace.csv")
    path = tmp_path / "g.sched"
    setting = 'profile = "profile.csv";\n' if profile is not None else ""
    path.write_text(
        f'round = 6min;\ncluster = "{cluster}";\n{setting}'
        f'src :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> pool :: JobPool -> solve :: {solver} -> {rounds} -> GavelPlacer -> run :: Launch -> m :: JobMetrics;\n"
        f"{extra}"
    )
    return path


def _run(tmp_path, solver, jobs, cluster, profile=PROFILE, until=1.0, extra="", rounds="GavelRounds"):
    graph = compile_file(_graph(tmp_path, solver, jobs, cluster, profile, extra, rounds))
    return graph, simulate(graph, until=until)


def _jobs(n=3, work=1e6, models=("ja", "jb", "jc"), **more):
    return [dict(job_id=i, arrival_s=0.0, gpus=1, model=models[i % len(models)], iterations=work, **more) for i in range(n)]


# --- a space-sharing run can be forked and saved ---
def test_a_space_sharing_run_with_a_pair_estimator_forks_and_saves(tmp_path):
    from roundhouse import Simulation

    (tmp_path / "ss.sched").write_text(
        'round = 6min;\ncluster = "2:2:2";\n'
        "arrivals :: PoissonSource(rate=6/h, jobs=12, gpus=single, models=blox, seed=0);\n"
        "pool :: JobPool;\nest :: PairEstimator(profiled=0.5);\nsolve :: MaxMinFairness(space_sharing=true);\n"
        "arrivals -> AcceptAll -> pool -> solve -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;\n"
        "pool -> est -> [pairs] solve;\n"
    )
    sim = Simulation(str(tmp_path / "ss.sched"))
    sim.run_until(7200.0)
    assert sim.graph.elements["est"].estimates is not None  # (it has handed estimates to the solver)
    twin = sim.fork()
    sim.save(str(tmp_path / "ss.snap"))
    assert (tmp_path / "ss.snap").stat().st_size > 0
    pickle.dumps(sim.graph.elements["est"].estimates)
    # The fork goes on as the original does.
    sim.run()
    twin.run()
    assert twin.summary()["avg_jct_s"] == sim.summary()["avg_jct_s"]


# --- a job that can run on no GPU type ---
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_finish_time_fairness_leaves_a_job_no_type_can_run_without_dividing_by_zero(tmp_path, monkeypatch):
    # The trace reader turns such jobs away, but a solver still must not divide by their
    # throughput of 0: job 0 is made to run nowhere, as if its model had no row for any type.
    real = solvers.job_throughputs

    def nowhere_for_job_0(ctx, rows, columns):
        T = real(ctx, rows, columns)
        T[rows == 0] = 0.0
        return T

    monkeypatch.setattr(solvers, "job_throughputs", nowhere_for_job_0)
    graph, _ = _run(tmp_path, "MinMaxRho", _jobs(3), "1x1:V100,1x1:K80")
    X = graph.elements["solve"].allocation.fractions
    assert np.all(X[0] == 0.0) and X[1:].sum() > 0.5
    assert math.isfinite(graph.elements["solve"].counters["rho"])


# --- a GPU type priced at 0 ---
NOT_CONSERVING = "GavelRounds(work_conserving=false)"  # (so that the bill is the allocation's)


def _cost_of(tmp_path, k80_price: str, jobs, cluster="1x1:V100,1x1:K80"):
    prices = f'prices=["V100:2.48", "K80:{k80_price}"]'
    extra = f"run -> cost :: CostMetrics({prices});\n"
    graph, result = _run(tmp_path, f"MinCost({prices})", jobs, cluster, until=None, extra=extra, rounds=NOT_CONSERVING)
    return graph.elements["solve"], result.reports["cost"]["cost"]


@pytest.mark.parametrize("n", [1, 3])
def test_a_free_gpu_type_never_costs_more_than_a_cheap_one(tmp_path, n):
    # One job fits on the free K80 alone: nothing need be spent. Three jobs (each owed 2/3 of
    # the time of 2 GPUs) do not: the V100 must be paid for, and the ratio decides.
    jobs = _jobs(n, work=2e4)
    free, free_cost = _cost_of(tmp_path, "0", jobs)
    cheap, cheap_cost = _cost_of(tmp_path, "0.01", jobs)
    assert free.counters["unsolved"] == 0 and cheap.counters["unsolved"] == 0
    assert free_cost["total_cost_usd"] <= cheap_cost["total_cost_usd"] + 1e-9
    assert free_cost["V100_cost_usd"] <= cheap_cost["V100_cost_usd"] + 1e-9
    if n == 1:
        assert free_cost["total_cost_usd"] == 0.0


def test_a_free_gpu_type_is_used_first(tmp_path):
    graph, _ = _run(tmp_path, 'MinCost(prices=["V100:2.48", "K80:0"])', _jobs(1), "1x1:V100,1x1:K80")
    solve = graph.elements["solve"]
    assert np.allclose(solve.allocation.fractions, [[0.0, 1.0]], atol=1e-6)
    assert solve.counters["unsolved"] == 0
    # Three jobs do not fit on the free K80: each gets its 2/3 share, the V100 only as needed.
    graph, _ = _run(tmp_path, 'MinCost(prices=["V100:2.48", "K80:0"])', _jobs(3), "1x1:V100,1x1:K80")
    solve = graph.elements["solve"]
    X = solve.allocation.fractions
    assert solve.counters["unsolved"] == 0
    assert np.all(X.sum(axis=1) >= 2 / 3 - 1e-5) and X[:, 1].sum() == pytest.approx(1.0, abs=1e-5)
    assert X[:, 0].sum() == pytest.approx(1.0, abs=1e-5)  # (3 x 2/3 = 2 GPUs of time: the V100 is needed)


# --- prices ---
@pytest.mark.parametrize("bad", ["V100:inf", "V100:1e400", "V100:-1", "V100:nan"])
@pytest.mark.parametrize("element", ["MinCost", "CostMetrics"])
def test_a_price_must_be_a_finite_number(tmp_path, bad, element):
    prices = f'prices=["{bad}", "K80:0.45"]'
    solver, extra = (f"MinCost({prices})", "") if element == "MinCost" else ("MaxMinFairness", f"run -> CostMetrics({prices});\n")
    with pytest.raises(SchedError, match="finite price") as err:
        _run(tmp_path, solver, _jobs(1), "1x1:V100,1x1:K80", extra=extra)
    assert err.value.location is not None and err.value.location.line == (5 if element == "MinCost" else 6)


def test_prices_match_gpu_types_in_any_case_and_once(tmp_path):
    prices = 'prices=["v100:2.48", "k80:0.45"]'
    graph, result = _run(tmp_path, f"MinCost({prices})", _jobs(1, work=2e4), "1x1:V100,1x1:K80", until=None,
                         extra=f"run -> cost :: CostMetrics({prices});\n")  # fmt: skip
    assert graph.elements["solve"]._price.tolist() == [2.48, 0.45]
    assert result.reports["cost"]["cost"]["total_cost_usd"] > 0
    for element in ("MinCost", "CostMetrics"):
        twice = 'prices=["V100:2.48", "K80:0.45", "v100:3"]'
        solver, extra = (
            (f"MinCost({twice})", "") if element == "MinCost" else ("MaxMinFairness", f"run -> CostMetrics({twice});\n")
        )
        with pytest.raises(SchedError, match="'v100' is priced twice: 'V100:2.48' and 'v100:3'"):
            _run(tmp_path, solver, _jobs(1), "1x1:V100,1x1:K80", extra=extra)


# --- weights are relative ---
def _weighted(weights, models=("ja", "jb", "jc")):
    return [
        dict(job_id=i, arrival_s=0.0, gpus=1, model=models[i % len(models)], iterations=1e6, user=f"u{i}", weight=w)
        for i, w in enumerate(weights)
    ]


@pytest.mark.parametrize("solver", ["MaxMinFairness", "MaxMinFairness(water_filling=true)"])
@pytest.mark.parametrize("tiny", [1e-10, 1e-300])
def test_a_tiny_weight_gets_next_to_nothing_without_breaking_the_program(tmp_path, solver, tiny):
    graph, _ = _run(tmp_path, solver, _weighted([tiny, 1.0, 1.0]), "1x1:V100,1x1:K80")
    X = graph.elements["solve"].allocation.fractions
    assert X[0].sum() < 1e-5 and X[1:].sum() == pytest.approx(2.0, abs=1e-5)


@pytest.mark.parametrize("solver", ["MaxMinFairness", "MaxMinFairness(water_filling=true)"])
def test_a_tiny_weight_among_gavel_models(tmp_path, solver):
    # (Here a weight of 1e-10 left the max-min LP ABNORMAL in the first round.)
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="ResNet-50", batch_size=64, iterations=2e4, weight=1e-10),
        dict(job_id=1, arrival_s=0.0, gpus=1, model="A3C", batch_size=4, iterations=2e4, weight=1.0),
    ]
    graph, _ = _run(tmp_path, solver, jobs, "2:2:2", profile=None)
    X = graph.elements["solve"].allocation.fractions
    # (6 GPUs for 2 jobs: the light job may have what is left.)
    assert X[1].sum() == pytest.approx(1.0, abs=1e-5) and np.all(X.sum(axis=1) <= 1.0 + 1e-6)


@pytest.mark.parametrize("solver", ["MaxMinFairness", "MaxMinFairness(water_filling=true)"])
def test_weights_are_relative(tmp_path, solver):
    # Any common factor gives the same allocation, to the last bit when the weights are all alike.
    base, _ = _run(tmp_path, solver, _weighted([1.0, 1.0, 1.0]), "1x1:V100,1x1:K80")
    for scale in (1e300, 1e-300, 1e12):
        graph, _ = _run(tmp_path, solver, _weighted([scale] * 3), "1x1:V100,1x1:K80")
        assert np.array_equal(graph.elements["solve"].allocation.fractions, base.elements["solve"].allocation.fractions)
    graph, _ = _run(tmp_path, solver, _weighted([1e300, 1.0, 1.0]), "1x1:V100,1x1:K80")
    X = graph.elements["solve"].allocation.fractions
    assert X[0].sum() == pytest.approx(1.0, abs=1e-5)  # the heavy job gets all the time it can use


def test_ordinary_weights_are_used_as_they_are():
    from roundhouse.elements.policies.gavel.formulation import relative_weights

    for weights in ([1.0, 1.0], [1.0, 2.0, 3.0], [1e-6, 1.0], [1e6, 1.0]):
        w = np.array(weights)
        assert relative_weights(w) is w or np.array_equal(relative_weights(w), w)
    assert relative_weights(np.array([4e300, 1e300])).tolist() == [1.0, 0.25]
    assert relative_weights(np.array([1.0, 1e-10])).tolist() == [1.0, 1e-6]


@pytest.mark.parametrize("policy", ["fairness", "fifo"])
def test_hierarchical_entity_weights_are_relative(tmp_path, policy):
    jobs = _weighted([1.0] * 4)
    for i, job in enumerate(jobs):
        job["user"] = "heavy" if i < 2 else "light"
    solver = f'Hierarchical(entities=["heavy", "light"], weights=[1e300, 1], policies=["{policy}"])'
    graph, _ = _run(tmp_path, solver, jobs, "1x1:V100,1x1:K80")
    X = graph.elements["solve"].allocation.fractions
    assert X[:2].sum() == pytest.approx(2.0, abs=1e-4)  # the heavy entity's jobs fill the cluster
    # (A graph cannot write an infinite weight; Python can.)
    with pytest.raises(ValueError, match="finite and greater than 0"):
        solvers.Hierarchical(entities=["heavy", "light"], weights=[math.inf, 1.0])


# --- arguments that do not fit together are found with the arguments, at their line ---
@pytest.mark.parametrize(
    ("solver", "complaint"),
    [
        ("MaxMinFairness(aware=false, space_sharing=true)", "space_sharing=true needs the heterogeneity-aware mode"),
        ("FifoHet(space_sharing=true)", "space sharing needs method=lp"),
        ('Hierarchical(entities=["a", "b"], weights=[1])', "2 entities but 1 weights"),
        ('Hierarchical(entities=["a"], weights=[1], policies=["fifo", "fairness"])', "one inner policy for all entities"),
        ('Hierarchical(entities=["a", "b", "a"], weights=[1, 2, 3])', "entity 'a' is listed twice"),
        ("Hierarchical(entities=[0..5, 0..5], weights=[1, 2])", "entity 0..5 is listed twice"),
    ],
)
def test_arguments_that_do_not_fit_together_are_found_before_the_run(tmp_path, solver, complaint):
    # (compiling is what `roundhouse check` does: it finds them too)
    path = _graph(tmp_path, solver, _jobs(1), "1x1:V100,1x1:K80")
    with pytest.raises(SchedError, match=complaint) as err:
        compile_file(path)
    assert err.value.location is not None and err.value.location.path == str(path) and err.value.location.line == 5


# --- a cluster of one-GPU servers runs multi-GPU jobs spread ---
SPREAD_PROFILE = PROFILE + "ja,1,V100,2,consolidated,7.0\nja,1,V100,2,spread,4.0\nja,1,K80,2,consolidated,1.8\n"


def test_solvers_plan_with_the_spread_rate_where_no_node_holds_the_job(tmp_path):
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=2, model="ja", iterations=8000.0)]
    # Two one-GPU V100 servers: the job runs spread on the V100s, at 4 it/s (its K80 rate has
    # no spread entry: the consolidated one stands).
    graph, result = _run(tmp_path, "MinMakespan", jobs, "2x1:V100,2x1:K80", SPREAD_PROFILE, until=None)
    solver = graph.elements["solve"]
    assert solver.counters["makespan_s"] == pytest.approx(8000.0 / 4.0, rel=1e-6)
    assert result.reports["m"]["jobs"]["jct_s"][0] == pytest.approx(8000.0 / 4.0, rel=0.2)
    # A two-GPU V100 server holds it: the consolidated rate.
    graph, _ = _run(tmp_path, "MinMakespan", jobs, "1x2:V100,2x1:K80", SPREAD_PROFILE)
    assert graph.elements["solve"].counters["makespan_s"] == pytest.approx(8000.0 / 7.0, rel=1e-6)


# --- the shipped hierarchical graph says what it reports ---
def test_the_hierarchical_graph_reports_what_its_comment_says():
    from tests.conftest import REPO

    path = REPO / "graphs" / "gavel-hierarchical.sched"
    comment = " ".join(line[2:].strip() for line in path.read_text().splitlines() if line.startswith("//"))
    assert "total effective throughput" in comment and "of each entity over time" not in comment
    result = simulate(compile_file(path), until=4 * 3600.0)
    series = result.reports["work"]["throughput_series"]
    assert series.columns == ["time_s", "total"] and series.height > 0  # the total only, as it says
