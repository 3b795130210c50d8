"""Gavel's policies as OR-Tools programs: the paper's worked examples and the stated properties."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.elements.policies.gavel.formulation import Columns, Formulation, classes
from roundhouse.elements.policies.gavel.lp import LinearProgram, with_column
from roundhouse.elements.policies.gavel.waterfill import water_fill
from roundhouse.errors import SchedError, TraceError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

# Jobs a, b, c of §4.2's example: 4/3/2 iterations/s on a V100, 1 on a K80.
EXAMPLE_PROFILE = """model,batch_size,gpu_type,gpus,placement,iters_per_s
ja,1,V100,1,consolidated,4.0
ja,1,K80,1,consolidated,1.0
jb,1,V100,1,consolidated,3.0
jb,1,K80,1,consolidated,1.0
jc,1,V100,1,consolidated,2.0
jc,1,K80,1,consolidated,1.0
"""


def _run(tmp_path, solver: str, jobs: list[dict], cluster: str, profile: str = EXAMPLE_PROFILE, until=1.0, extra=""):
    """One round (or until `until`) of pool -> solver -> GavelRounds -> GavelPlacer; returns the
    compiled graph (its elements hold their state) and the run result."""
    import polars as pl

    (tmp_path / "profile.csv").write_text(profile)
    pl.DataFrame(jobs).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        f'round = 6min;\ncluster = "{cluster}";\nprofile = "profile.csv";\n'
        f'src :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> JobPool -> solve :: {solver} -> GavelRounds -> GavelPlacer -> run :: Launch -> m :: JobMetrics;\n{extra}"
    )
    graph = compile_file(tmp_path / "g.sched")
    return graph, simulate(graph, until=until)


def _example_jobs(n=3, work=1e6, **more):
    models = ["ja", "jb", "jc"]
    return [dict(job_id=i, arrival_s=0.0, gpus=1, model=models[i % 3], iterations=work, **more) for i in range(n)]


def test_worked_example_of_section_4_2(tmp_path):
    graph, _ = _run(tmp_path, "MaxMinFairness", _example_jobs(), "1x1:V100,1x1:K80")
    solver = graph.elements["solve"]
    shares = solver.allocation
    assert shares.gpu_types == ("V100", "K80")
    X = shares.fractions
    assert np.allclose(X, [[0.45, 0.0], [0.45, 0.09], [0.09, 0.91]], atol=0.01)
    T = np.array([[4.0, 1.0], [3.0, 1.0], [2.0, 1.0]])
    normalized = (T * X).sum(axis=1) / (T @ [0.5, 0.5])
    assert normalized.min() == pytest.approx(8 / 11, abs=1e-6)
    assert solver.counters["objective"] == pytest.approx(8 / 11, abs=1e-6)
    # "About 10% higher throughput" than the isolated allocation (1/n of each GPU: 2/3).
    assert normalized.min() / (2 / 3) == pytest.approx(12 / 11, abs=1e-6)


def test_agnostic_baseline_ignores_the_speed_difference(tmp_path):
    graph, _ = _run(tmp_path, "MaxMinFairness(aware=false)", _example_jobs(), "1x1:V100,1x1:K80")
    X = graph.elements["solve"].allocation.fractions
    # Every job gets the same total time (2 GPUs over 3 jobs), whichever type it is on.
    assert np.allclose(X.sum(axis=1), 2 / 3, atol=1e-6)


def test_water_filling_example_of_section_4_3():
    columns = Columns(("V100",), np.array([0]), None, np.array([4.0]))
    weights = np.array([3.0, 1.0, 1.0, 1.0])
    for screen in (True, False):  # the MILP alone, and with the LP screens that spare it
        form = Formulation(np.ones((4, 1)), np.ones(4), np.ones(4), columns)
        filled = water_fill(form, np.ones(4), lambda frozen: np.where(frozen, 0.0, weights), screen_first=screen)
        assert np.allclose(filled.levels[0], [1.0, 1 / 3, 1 / 3, 1 / 3], atol=1e-6)
        assert np.allclose(filled.levels[-1], [1.0, 1.0, 1.0, 1.0], atol=1e-6)
        assert list(filled.frozen_at) == [0, 1, 1, 1]  # job 1 is the first bottleneck
        assert np.allclose(form.class_fractions(filled.values).ravel(), 1.0, atol=1e-6)


def test_water_filling_in_the_solver_element(tmp_path):
    profile = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nja,1,V100,1,consolidated,2.0\n"
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="ja", iterations=1e6, weight=w) for i, w in enumerate([3.0, 1, 1, 1])]
    graph, _ = _run(tmp_path, "MaxMinFairness(water_filling=true)", jobs, "4x1:V100", profile)
    solver = graph.elements["solve"]
    assert np.allclose(solver.allocation.fractions.ravel(), 1.0, atol=1e-6)
    assert solver.counters["levels"] == 2
    # The first level: a third of a GPU per unit of weight; the counter's weights are over their
    # mean (1.5), so it reads 1/3 x 1.5.
    assert solver.counters["objective"] == pytest.approx(0.5, abs=1e-6)
    # Without water filling the LP stops at that level: every job at least a third of a GPU per
    # unit of weight, and nothing says the spare GPU time must go anywhere.
    graph, _ = _run(tmp_path, "MaxMinFairness", jobs, "4x1:V100", profile)
    solver = graph.elements["solve"]
    assert solver.counters["objective"] == pytest.approx(0.5, abs=1e-6)
    X = solver.allocation.fractions.ravel()
    assert X[0] == pytest.approx(1.0, abs=1e-6) and (X[1:] >= 1 / 3 - 1e-6).all()


def test_warm_solves_are_bounded_by_work_not_by_the_clock(monkeypatch):
    """A busy machine must get the same shares: no warm solve sets a time limit, and a warm
    re-solve past its iteration bound (here every one) is solved again from scratch, to the
    same optimum."""
    from ortools.linear_solver import pywraplp

    import roundhouse.elements.policies.gavel.lp as lp

    def refuse(self, ms):
        raise AssertionError("a warm solve set a time limit")

    monkeypatch.setattr(pywraplp.Solver, "SetTimeLimit", refuse)
    columns = Columns(("V100",), np.array([0]), None, np.array([4.0]))
    weights = np.array([3.0, 1.0, 1.0, 1.0])
    levels = []
    for per_row_and_column, floor in ((lp._ITERATIONS_PER_ROW_AND_COLUMN, lp._WORK_FLOOR), (0, 1)):
        monkeypatch.setattr(lp, "_ITERATIONS_PER_ROW_AND_COLUMN", per_row_and_column)
        monkeypatch.setattr(lp, "_WORK_FLOOR", floor)  # (then one iteration: every warm re-solve stalls)
        form = Formulation(np.ones((4, 1)), np.ones(4), np.ones(4), columns)
        filled = water_fill(form, np.ones(4), lambda frozen: np.where(frozen, 0.0, weights))
        levels.append(filled.levels[-1])
    assert np.allclose(levels[0], [1.0, 1.0, 1.0, 1.0], atol=1e-6)
    assert np.allclose(levels[1], levels[0], atol=1e-6)


def _random_profile(rng, models: int, types=("V100", "P100", "K80")) -> str:
    lines = ["model,batch_size,gpu_type,gpus,placement,iters_per_s"]
    for m in range(models):
        for t in types:
            lines.append(f"m{m},1,{t},1,consolidated,{rng.uniform(0.2, 10.0):.6f}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sharing_incentive_max_min_is_never_below_the_equal_split(tmp_path, seed):
    """§4.4: giving every job 1/n of each type is feasible, so the LP's objective is at least its."""
    rng = np.random.default_rng(seed)
    n, models = 7, 5
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model=f"m{rng.integers(models)}", iterations=1e6) for i in range(n)]
    graph, _ = _run(tmp_path, "MaxMinFairness", jobs, "2:1:2", _random_profile(rng, models))
    # Each job's share 1/n of every type has normalized throughput N/n (N = 5 GPUs) under
    # Gavel's normalization (X_equal spreads one unit of time over the types by their counts).
    assert graph.elements["solve"].counters["objective"] >= 5 / n - 1e-9


@pytest.mark.parametrize("solver", ["MaxMinFairness", "MinMakespan", "MinMaxRho"])
def test_homogeneous_cluster_aware_and_agnostic_agree(tmp_path, solver):
    """§4.4: with one GPU type the heterogeneity-aware policies are the baselines."""
    rng = np.random.default_rng(4)
    lines = ["model,batch_size,gpu_type,gpus,placement,iters_per_s"]
    for m in range(4):
        one = rng.uniform(0.5, 5.0)
        lines += [f"m{m},1,V100,1,consolidated,{one:.6f}", f"m{m},1,V100,2,consolidated,{1.8 * one:.6f}"]
    jobs = [
        dict(
            job_id=i,
            arrival_s=float(60 * i),
            gpus=int(rng.choice([1, 2])),
            model=f"m{rng.integers(4)}",
            iterations=float(rng.integers(2000, 20000)),
        )
        for i in range(9)
    ]
    runs = []
    for aware in ("true", "false"):
        graph, result = _run(tmp_path, f"{solver}(aware={aware})", jobs, "3x1:V100", "\n".join(lines) + "\n", until=None)
        runs.append(result.reports["m"]["jobs"]["jct_s"].to_list())
    assert runs[0] == runs[1]  # the same schedule, job for job


def test_min_makespan_single_lp(tmp_path):
    # ja (4 it/s on the V100, 1 on the K80) and jc (2 and 1), 8000 iterations each: the best
    # split gives ja a quarter of the V100 and jc the rest, with the K80 the other way round:
    # both then run at 1.75 it/s, a makespan of 8000 / 1.75 s.
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=8000.0),
        dict(job_id=1, arrival_s=0.0, gpus=1, model="jc", iterations=8000.0),
    ]
    graph, _ = _run(tmp_path, "MinMakespan", jobs, "1x1:V100,1x1:K80")
    solver = graph.elements["solve"]
    assert solver.counters["makespan_s"] == pytest.approx(8000 / 1.75, rel=1e-6)
    assert np.allclose(solver.allocation.fractions, [[0.25, 0.75], [0.75, 0.25]], atol=1e-6)


def test_finish_time_fairness_identical_jobs_get_their_share(tmp_path):
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="ja", iterations=1e5) for i in range(2)]
    graph, _ = _run(tmp_path, "MinMaxRho", jobs, "2x1:V100")
    solver = graph.elements["solve"]
    assert solver.counters["rho"] == pytest.approx(1.0, rel=2e-3)  # each has exactly its 1/2 of the cluster
    assert np.allclose(solver.allocation.fractions, 1.0, atol=1e-6)


COST_PROFILE = """model,batch_size,gpu_type,gpus,placement,iters_per_s
cheap,1,V100,1,consolidated,2.0
cheap,1,K80,1,consolidated,1.0
fast,1,V100,1,consolidated,10.0
fast,1,K80,1,consolidated,1.0
"""
PRICES = 'prices=["V100:2.48", "K80:0.45"]'


def test_min_cost_prefers_the_cheaper_throughput(tmp_path):
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="cheap", iterations=1e5)]
    graph, _ = _run(tmp_path, f"MinCost({PRICES})", jobs, "1x1:V100,1x1:K80", COST_PROFILE)
    X = graph.elements["solve"].allocation.fractions
    assert np.allclose(X, [[0.0, 1.0]], atol=1e-6)  # 1 it/s for $0.45/h beats 2 it/s for $2.48/h
    graph, _ = _run(tmp_path, "MaxThroughput", jobs, "1x1:V100,1x1:K80", COST_PROFILE)
    assert np.allclose(graph.elements["solve"].allocation.fractions, [[1.0, 0.0]], atol=1e-6)


def test_min_cost_slo_meets_deadlines_and_falls_back_when_it_cannot(tmp_path):
    # 1e5 iterations in 60,000 s needs 1.67 it/s: more than a K80 gives, so part of the V100.
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="cheap", iterations=1e5, slo_s=60000.0)]
    graph, _ = _run(tmp_path, f"MinCostSLO({PRICES})", jobs, "1x1:V100,1x1:K80", COST_PROFILE)
    solver = graph.elements["solve"]
    X = solver.allocation.fractions
    assert 2.0 * X[0, 0] + 1.0 * X[0, 1] >= 1e5 / 60000.0 - 1e-6
    assert X[0, 0] > 0 and solver.counters["slo_fallbacks"] == 0
    # Two jobs that each need the whole V100: not both can meet their SLO; the SLOs are dropped.
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="fast", iterations=1e5, slo_s=1.1e4) for i in range(2)]
    graph, _ = _run(tmp_path, f"MinCostSLO({PRICES})", jobs, "1x1:V100,1x1:K80", COST_PROFILE)
    assert graph.elements["solve"].counters["slo_fallbacks"] == 1
    # A deadline no type can meet asks for the fastest type's throughput and is counted.
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="cheap", iterations=1e5, slo_s=100.0)]
    graph, _ = _run(tmp_path, f"MinCostSLO({PRICES})", jobs, "1x1:V100,1x1:K80", COST_PROFILE)
    solver = graph.elements["solve"]
    assert solver.counters["slo_unattainable"] == 1 and solver.counters["slo_fallbacks"] == 0
    assert solver.allocation.fractions[0, 0] == pytest.approx(1.0, abs=1e-5)


# Two jobs that run only on the V100 (no K80 row: too little memory) and one that runs on both.
SMALL_TYPE_PROFILE = """model,batch_size,gpu_type,gpus,placement,iters_per_s
big,1,V100,1,consolidated,4.0
ja,1,V100,1,consolidated,4.0
ja,1,K80,1,consolidated,1.0
"""


@pytest.mark.parametrize("solver", ["MinCost", "MinCostSLO"])
def test_min_cost_relaxes_an_equal_share_that_does_not_fit_the_types(tmp_path, solver):
    # 3 GPUs for 3 jobs: the equal share is all of each job's time, but the two V100-only jobs
    # cannot both have all of the one V100. The largest share all can have is 1/2.
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="big", iterations=1e6) for i in range(2)]
    jobs.append(dict(job_id=2, arrival_s=0.0, gpus=1, model="ja", iterations=1e6))
    graph, _ = _run(tmp_path, solver, jobs, "1x1:V100,1x2:K80", SMALL_TYPE_PROFILE)
    solve = graph.elements["solve"]
    X = solve.allocation.fractions
    assert np.allclose(X[:2], [[0.5, 0.0], [0.5, 0.0]], atol=1e-5)
    assert X[2].sum() >= 0.5 - 1e-5 and X[:, 0].sum() <= 1.0 + 1e-6 and X[:, 1].sum() <= 2.0 + 1e-6
    assert solve.counters["floor_relaxed"] == 1 and solve.counters["unsolved"] == 0
    if solver == "MinCostSLO":
        assert solve.counters["slo_fallbacks"] == 0  # no job has an SLO


def test_min_cost_slo_keeps_slos_the_equal_share_conflicts_with(tmp_path):
    # Job 0 must do 90,000 iterations in 10,000 s: 9 it/s, 0.9 of the V100. The equal share
    # (2/3 of the time for each of 3 jobs on 2 GPUs) does not fit with that, but the SLO can be
    # met: the share is lowered, the SLO kept, and job 0 finishes in time.
    profile = COST_PROFILE + "jb,1,V100,1,consolidated,4.0\njb,1,K80,1,consolidated,1.0\n"
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="fast", iterations=9e4, slo_s=1e4)]
    jobs += [dict(job_id=i, arrival_s=0.0, gpus=1, model="jb", iterations=1e5, slo_s=None) for i in (1, 2)]
    graph, _ = _run(tmp_path, f"MinCostSLO({PRICES})", jobs, "1x1:V100,1x1:K80", profile)
    solve = graph.elements["solve"]
    X = solve.allocation.fractions
    assert 10.0 * X[0, 0] + 1.0 * X[0, 1] >= 9.0 - 1e-5
    assert solve.counters["slo_fallbacks"] == 0 and solve.counters["floor_relaxed"] == 1
    graph, result = _run(
        tmp_path, f"MinCostSLO({PRICES})", jobs, "1x1:V100,1x1:K80", profile, until=None, extra="run -> slo :: SloMetrics;\n"
    )
    assert result.reports["slo"]["slo"]["violations"] == 0
    assert graph.elements["solve"].counters["slo_fallbacks"] == 0


def test_min_cost_without_a_solution_says_so_and_still_allocates(tmp_path):
    # With every GPU free, no allocation spends exactly one unit: the cost program has no
    # optimum. The jobs get the largest common share of time instead of nothing, and it is counted.
    graph, _ = _run(tmp_path, 'MinCost(prices=["V100:0", "K80:0"])', _example_jobs(), "1x1:V100,1x1:K80")
    solve = graph.elements["solve"]
    assert solve.counters["unsolved"] == 1
    assert np.allclose(solve.allocation.fractions.sum(axis=1), 2 / 3, atol=1e-5)


def test_fifo_het_greedy_gives_earlier_jobs_the_fastest_type(tmp_path):
    jobs = [dict(job_id=i, arrival_s=float(i), gpus=1, model="ja", iterations=1e6) for i in range(3)]
    graph, _ = _run(tmp_path, "FifoHet(interval=0)", jobs, "1x1:V100,1x1:K80", until=400.0)
    X = graph.elements["solve"].allocation.fractions
    assert X.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    # (Jobs 1 and 2 arrive during the first round; interval=0 re-solves as soon as they are seen.)
    # Strict FIFO: a 2-GPU job at the head blocks the 1-GPU job behind it.
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=1e6),
        dict(job_id=1, arrival_s=1.0, gpus=2, model="ja", iterations=1e6),
        dict(job_id=2, arrival_s=2.0, gpus=1, model="ja", iterations=1e6),
    ]
    profile = EXAMPLE_PROFILE + "ja,1,V100,2,consolidated,7.0\nja,1,K80,2,consolidated,1.8\n"
    graph, _ = _run(tmp_path, "FifoHet(interval=0)", jobs, "2x1:V100,1x1:K80", profile, until=400.0)
    X = graph.elements["solve"].allocation.fractions
    assert X[0].sum() == 1.0 and X[1].sum() == 0.0 and X[2].sum() == 0.0


def test_fifo_het_passes_over_a_job_that_only_fits_where_it_cannot_run(tmp_path):
    # Job 1 cannot run on a K80 (no K80 throughput), and the V100 is taken by job 0: the K80 has
    # room, so Gavel's fifo_perf passes over job 1 and gives the K80 to job 2, which is behind it.
    profile = EXAMPLE_PROFILE + "v100only,1,V100,1,consolidated,3.0\n"
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=1e6),
        dict(job_id=1, arrival_s=1.0, gpus=1, model="v100only", iterations=1e6),
        dict(job_id=2, arrival_s=2.0, gpus=1, model="jb", iterations=1e6),
    ]
    graph, _ = _run(tmp_path, "FifoHet(interval=0)", jobs, "1x1:V100,1x1:K80", profile, until=400.0)
    X = graph.elements["solve"].allocation.fractions
    assert X.tolist() == [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]
    # A job larger than every GPU type could never run (and would block a strict queue for
    # good): the trace check refuses it before the run.
    profile += "v100only,1,V100,2,consolidated,5.0\n"
    jobs[1]["gpus"] = 2
    with pytest.raises(TraceError, match="job 1 asks for 2 GPUs but the largest GPU type of the cluster, V100, has 1"):
        _run(tmp_path, "FifoHet(interval=0)", jobs, "1x1:V100,1x1:K80", profile, until=400.0)


def test_a_solve_at_time_zero_does_not_hold_back_the_next_one(tmp_path):
    # Gavel's simulator: the allocation made at time zero does not start the 1,920 s interval, so
    # job 1 (arrived at 100 s) gets one at the next round; the one made then does, so job 2
    # (arrived at 400 s) waits for the first round at least 1,920 s after 360 s.
    jobs = [dict(job_id=i, arrival_s=t, gpus=1, model="ja", iterations=1e7) for i, t in enumerate([0.0, 100.0, 400.0])]
    _, result = _run(tmp_path, "FifoHet", jobs, "3x1:V100", until=3000.0)
    started = result.reports["m"]["jobs"].sort("job_id")["first_start_s"].to_list()
    assert started == [0.0, 360.0, 2520.0]


def test_fifo_het_lp_weights_earlier_jobs(tmp_path):
    jobs = [dict(job_id=i, arrival_s=float(i), gpus=1, model="ja", iterations=1e6) for i in range(3)]
    graph, _ = _run(tmp_path, 'FifoHet(method="lp", interval=0)', jobs, "1x1:V100,1x1:K80", until=400.0)
    X = graph.elements["solve"].allocation.fractions
    assert np.allclose(X, [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], atol=1e-6)


def test_hierarchical_weights_and_inner_policies(tmp_path):
    profile = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nja,1,V100,1,consolidated,2.0\n"
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="ja", iterations=1e6, user="a" if i < 4 else "b") for i in range(8)]
    graph, _ = _run(tmp_path, 'Hierarchical(entities=["a", "b"], weights=[1, 2])', jobs, "6x1:V100", profile)
    X = graph.elements["solve"].allocation.fractions.ravel()
    # Entity b (weight 2) saturates at one GPU per job; entity a shares the remaining two.
    assert np.allclose(X[:4], 0.5, atol=1e-6) and np.allclose(X[4:], 1.0, atol=1e-6)
    # FIFO inside entity a (job-id ranges as entities): its earliest jobs take whole GPUs.
    jobs = [dict(job_id=i, arrival_s=float(i), gpus=1, model="ja", iterations=1e6) for i in range(8)]
    graph, _ = _run(
        tmp_path,
        'Hierarchical(entities=[0..4, 4..8], weights=[1, 2], policies=["fifo", "fairness"], interval=0)',
        jobs,
        "6x1:V100",
        profile,
        until=400.0,
    )
    X = graph.elements["solve"].allocation.fractions.ravel()
    assert np.allclose(X[4:], 1.0, atol=1e-6)
    assert np.allclose(X[:4], [1.0, 1.0, 0.0, 0.0], atol=1e-6)


def test_classes_group_only_jobs_no_policy_can_tell_apart():
    T = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, 1.0], [1.0, 2.0]])
    class_of, reps, counts = classes(T, np.array([1, 1, 1, 2]))
    assert class_of.tolist() == [0, 0, 1, 2] and reps.tolist() == [0, 2, 3] and counts.tolist() == [2, 1, 1]


def test_grouped_and_per_job_programs_agree():
    """The max-min LP over classes has the optimum of the LP over jobs (symmetry)."""
    rng = np.random.default_rng(7)
    types = rng.uniform(0.5, 5.0, size=(4, 3))
    jobs = rng.integers(0, 4, size=30)
    T, sf = types[jobs], np.ones(30)
    columns = Columns(("V100", "P100", "K80"), np.arange(3), None, np.array([4.0, 3.0, 5.0]))

    def optimum(T, sf, counts):
        form = Formulation(T, sf, counts, columns)
        lp = LinearProgram()
        form.add_variables(lp)
        z = int(lp.variables(1, lb=-np.inf, obj=1.0)[0])
        eq = T @ (columns.capacity / columns.capacity.sum())
        lp.constraints(with_column(form.throughput(1.0 / eq), z, -1.0), lb=0.0)
        form.validity(lp)
        return lp.solve().objective

    class_of, reps, counts = classes(T, sf)
    assert optimum(T[reps], sf[reps], counts) == pytest.approx(optimum(T, sf, np.ones(30)), rel=1e-7)


def test_bad_arguments_are_reported(tmp_path):
    with pytest.raises(SchedError, match="space_sharing=true needs"):
        _run(tmp_path, "MaxMinFairness(aware=false, space_sharing=true)", _example_jobs(), "1x1:V100,1x1:K80")
    with pytest.raises(SchedError, match="2 entities but 1 weights"):
        _run(tmp_path, 'Hierarchical(entities=["a", "b"], weights=[1])', _example_jobs(), "1x1:V100,1x1:K80")
    with pytest.raises(SchedError, match="TYPE:DOLLARS"):
        _run(tmp_path, 'MinCost(prices=["V100=2"])', _example_jobs(), "1x1:V100,1x1:K80")
    with pytest.raises(SchedError, match="no price for GPU type K80"):
        _run(tmp_path, 'MinCost(prices=["V100:2"])', _example_jobs(), "1x1:V100,1x1:K80")


def test_placement_sensitive_columns(tmp_path):
    """§3.1: each type twice, consolidated and spread, sharing the type's GPUs; the mechanism
    passes the layout to the placer."""
    profile = EXAMPLE_PROFILE + "ja,1,V100,2,consolidated,7.0\nja,1,V100,2,spread,4.0\n"
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=2, model="ja", iterations=1e6)]
    # One 2-GPU server and two 1-GPU servers: the job can run consolidated or spread.
    graph, result = _run(tmp_path, "MaxMinFairness(placement_sensitive=true)", jobs, "1x2:V100,2x1:V100", profile)
    shares = graph.elements["solve"].allocation
    assert shares.gpu_types == ("V100", "V100") and shares.placement == ("consolidated", "spread")
    assert np.allclose(shares.fractions, [[1.0, 0.0]], atol=1e-6)  # the faster layout
    assert result.world.jobs.column("rate")[0] == 7.0  # placed on the 2-GPU server
    # Without a 2-GPU server only the spread column can be used.
    graph, result = _run(tmp_path, "MaxMinFairness(placement_sensitive=true)", jobs, "4x1:V100", profile)
    assert np.allclose(graph.elements["solve"].allocation.fractions, [[0.0, 1.0]], atol=1e-6)
    assert result.world.jobs.column("rate")[0] == 4.0
