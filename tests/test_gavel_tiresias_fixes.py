"""Gavel and Tiresias: PDLP solves as GLOP does, a pair estimator never pairs jobs that cannot
be paired, the reasons given for Gavel's skipped entries and for backfilled room, and the
Tiresias-G history and the cost policies' prices checked."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.policies.gavel.estimator import UNMATCHED
from roundhouse.elements.policies.gavel.lp import LinearProgram
from roundhouse.errors import RoundhouseError, SchedError, TraceError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from tests.conftest import fails, write_trace
from tests.test_gavel_solvers import EXAMPLE_PROFILE as PROFILE  # (Gavel's §4.2 example)


def _solve(tmp_path, solver: str, jobs: list[dict], cluster: str, profile: str | None = PROFILE, until: float = 1.0, extra=""):
    """Run pool -> solver -> GavelRounds -> GavelPlacer until `until`; returns the graph and result."""
    if profile is not None:
        (tmp_path / "profile.csv").write_text(profile)
    write_trace(tmp_path / "trace.csv", jobs)
    setting = 'profile = "profile.csv";\n' if profile is not None else ""
    (tmp_path / "g.sched").write_text(
        f'round = 6min;\ncluster = "{cluster}";\n{setting}src :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> pool :: JobPool -> solve :: {solver} -> rounds :: GavelRounds -> GavelPlacer -> Launch -> m :: JobMetrics;\n"
        f"{extra}"
    )
    graph = compile_file(tmp_path / "g.sched")
    return graph, simulate(graph, until=until, explain=True)


def _example(n=3):
    return [dict(job_id=i, arrival_s=0.0, gpus=1, model=("ja", "jb", "jc")[i % 3], iterations=1e5) for i in range(n)]


def _with_lp(solver: str, lp: str) -> str:
    return f'{solver[:-1]}, lp="{lp}")' if solver.endswith(")") else f'{solver}(lp="{lp}")'


# --- PDLP ---

SOLVERS = [
    "MaxMinFairness",
    "MaxMinFairness(water_filling=true)",
    "MinMaxRho",
    "MinMakespan",
    "MaxThroughput",
    'MinCost(prices=["V100:2.48", "K80:0.45"])',
    'MinCostSLO(prices=["V100:2.48", "K80:0.45"])',
    'FifoHet(method="lp")',
    "Hierarchical(entities=[0..2, 2..3], weights=[1, 2])",
]


@pytest.mark.parametrize("solver", SOLVERS)
def test_pdlp_gives_the_allocation_glop_gives(tmp_path, solver, capfd):
    got = {}
    for lp in ("GLOP", "PDLP"):
        here = tmp_path / lp
        here.mkdir()
        graph, _ = _solve(here, _with_lp(solver, lp), _example(), "1x1:V100,1x1:K80")
        got[lp] = graph.elements["solve"].allocation.fractions
    if solver == "MaxThroughput":
        # Its optimum is not unique here (every job does one reference GPU's work on the V100):
        # the total normalized throughput is.
        T = np.array([[4.0, 1.0], [3.0, 1.0], [2.0, 1.0]])
        total = {lp: ((T * X).sum(axis=1) / T[:, 0]).sum() for lp, X in got.items()}
        assert total["PDLP"] == pytest.approx(total["GLOP"], abs=1e-6)
    else:
        assert np.allclose(got["PDLP"], got["GLOP"], atol=1e-5)
    out, _ = capfd.readouterr()
    assert "iteration limit" not in out.lower() and "WARNING" not in out  # PDLP's log stays quiet


def test_pdlp_runs_min_makespan_and_min_max_rho_to_the_end(tmp_path):
    profile = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nMA,1,V100,1,consolidated,4.0\nMA,1,K80,1,consolidated,1.0\nMB,1,V100,1,consolidated,2.0\nMB,1,K80,1,consolidated,1.0\n"
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="MA", batch_size=1, iterations=4000), dict(job_id=1, arrival_s=0.0, gpus=1, model="MB", batch_size=1, iterations=4000)]  # fmt: skip
    for solver in ("MinMakespan", "MinMaxRho"):
        jcts = {}
        for lp in ("GLOP", "PDLP"):
            here = tmp_path / f"{solver}-{lp}"
            here.mkdir()
            _, result = _solve(here, _with_lp(solver, lp), jobs, "1x1:V100,1x1:K80", profile, until=10 * 3600.0)
            frame = result.reports["m"]["jobs"]
            assert frame["jct_s"].is_not_null().all()  # every job finished
            jcts[lp] = frame["jct_s"].to_numpy()
        # (ties at the optimum may go either way: the last finish is what both promise)
        assert jcts["PDLP"].max() == pytest.approx(jcts["GLOP"].max(), rel=0.05)


def _warm_program() -> LinearProgram:
    lp = LinearProgram(warm=True)
    lp.variables(2, lb=0.0, ub=1.0, obj=np.array([1.0, 2.0]))
    lp.constraints(np.ones((1, 2)), ub=1.5)
    lp.constraints(np.array([[1.0, -1.0]]), lb=-np.inf)  # (a row with no bound: a stand-in bound in warm mode)
    lp.build()
    return lp


def test_a_warm_program_solved_by_pdlp_respects_its_rows():
    got, exact = _warm_program().solve("PDLP"), _warm_program().solve("GLOP")
    assert got.optimal and np.allclose(got.values, exact.values, atol=1e-6) and np.allclose(exact.values, [0.5, 1.0])


def test_a_failed_warm_solve_names_its_status_in_words(monkeypatch):
    import roundhouse.elements.policies.gavel.lp as lp_module

    # PDLP stopped after one iteration has no answer: said as MPSolver's status name.
    parameters = getattr(lp_module, "_PDLP_PARAMETERS", "iteration_limit: 200000")
    monkeypatch.setattr(
        lp_module, "_PDLP_PARAMETERS", parameters.replace("iteration_limit: 200000", "iteration_limit: 1"), raising=False
    )
    got = _warm_program().solve("PDLP")
    assert not got.optimal and got.status == "NOT_SOLVED" and np.isnan(got.values).all()


# --- the pair estimator ---

ESTIMATED = "est :: PairEstimator{args};\npool -> est -> [pairs] solve;\n"


def _shared(tmp_path, jobs, args="", until=30 * 3600.0):
    return _solve(
        tmp_path,
        "MaxMinFairness(space_sharing=true)",
        jobs,
        "2:0:0",
        profile=None,
        until=until,
        extra=ESTIMATED.format(args=args),
    )


def test_jobs_without_a_profiled_model_are_never_paired(tmp_path):
    # Jobs known only by duration, and jobs of a model the profile does not know, beside
    # profiled ones: the run ends, and the estimator offers no pair rate for the unprofiled.
    for name, jobs in {
        "duration": [dict(job_id=i, arrival_s=0, gpus=1, duration_s=3600) for i in range(4)],
        "unknown": [
            dict(job_id=i, arrival_s=0, gpus=1, model=m, batch_size=b, duration_s=3600)
            for i, (m, b) in enumerate([("A3C", 4), ("FooNet", 4), ("A3C", 4), ("CycleGAN", 1), ("FooNet", 4)])
        ],
    }.items():
        here = tmp_path / name
        here.mkdir()
        _, result = _shared(here, jobs)
        assert result.reports["m"]["jobs"]["jct_s"].is_not_null().all()
        graph, _ = _shared(here, jobs, until=1.0)  # (the first round's estimates: every job active)
        estimates = graph.elements["est"].estimates
        models = np.array([j.get("model") for j in jobs], dtype=object)
        unprofiled = np.flatnonzero((models == None) | (models == "FooNet"))  # noqa: E711
        assert (estimates.reference_of(unprofiled) == UNMATCHED).all()
        profiled = np.flatnonzero(models == "A3C")
        mates = [unprofiled[::-1]] + ([np.full(len(unprofiled), profiled[0])] if len(profiled) else [])
        for rows_b in mates:  # with one another, and with a profiled job
            ra, rb = estimates.pair_rates(unprofiled, rows_b, "V100", 1)
            assert np.isnan(ra).all() and np.isnan(rb).all()


def test_an_estimate_for_jobs_that_cannot_share_does_not_end_the_run(tmp_path):
    # With nothing profiled, the estimator may guess that A3C and ResNet-50 share well; the
    # cluster's pair table says they cannot share a V100 (0.0): they are not paired.
    jobs = [
        dict(job_id=i, arrival_s=0, gpus=1, model=m, batch_size=b, duration_s=7200)
        for i, (m, b) in enumerate([("A3C", 4), ("ResNet-50", 128), ("A3C", 4), ("ResNet-50", 128)])
    ]
    graph, result = _shared(tmp_path, jobs, "(profiled=0.0)")
    assert result.reports["m"]["jobs"]["jct_s"].is_not_null().all()


def test_profiled_is_a_fraction(tmp_path, capsys):
    write_trace(tmp_path / "trace.csv", [dict(job_id=0, arrival_s=0, gpus=1, duration_s=60)])
    (tmp_path / "g.sched").write_text(
        'round = 6min;\ncluster = "2:0:0";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> pool :: JobPool -> solve :: MaxMinFairness(space_sharing=true) -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;\n"
        "pool -> PairEstimator(profiled=5) -> [pairs] solve;\n"
    )
    assert "profiled" in fails(capsys, "check", str(tmp_path / "g.sched"))


# --- reasons ---


def _reasons(result, job_id: int) -> list[tuple[float, str, int, int, int]]:
    frame = result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))
    frame = frame.filter(pl.col("job_id") == job_id)
    return list(
        zip(frame["t_s"].to_list(), frame["reason"].to_list(), frame["a"].to_list(), frame["b"].to_list(), frame["c"].to_list())
    )


def test_a_job_whose_room_went_to_a_job_ranked_behind_is_not_told_the_jobs_ahead_took_it(tmp_path):
    # Two machines of 2 GPUs. At 700 s jobs 0 and 3 hold one GPU on each machine; job 4
    # (VGG16, 2 GPUs, kept on one machine) is ranked ahead of job 5 (2 GPUs, may spread),
    # which takes the two free GPUs. The jobs ahead of job 4 left 2 GPUs: enough, but not on
    # one machine.
    jobs = [
        dict(job_id=0, arrival_s=0, gpus=1, model="ResNet-50", duration_s=3600),
        dict(job_id=1, arrival_s=0, gpus=1, model="ResNet-50", duration_s=600),
        dict(job_id=2, arrival_s=0, gpus=1, model="ResNet-50", duration_s=600),
        dict(job_id=3, arrival_s=0, gpus=1, model="ResNet-50", duration_s=3600),
        dict(job_id=4, arrival_s=700, gpus=2, model="VGG16", duration_s=600),
        dict(job_id=5, arrival_s=700, gpus=2, model="ResNet-50", duration_s=600),
    ]
    write_trace(tmp_path / "trace.csv", jobs)
    (tmp_path / "g.sched").write_text(
        'round = 10s;\ncluster = "2x2:P100";\nsrc :: TraceSource(path="trace.csv", timing=duration);\n'
        "src -> AcceptAll -> JobPool -> TiresiasLas(queues=2, thresholds=[3200s]) -> SkewAwarePlacer -> Launch -> JobMetrics;\n"
    )
    result = simulate(compile_file(tmp_path / "g.sched"), until=1000.0, explain=True)
    at_arrival = [r for r in _reasons(result, 4) if r[0] == 700.0 and r[1] != "admitted"]
    assert at_arrival == [(700.0, "no_room", 3, 2, 2)]
    assert any(r[0] == 700.0 and r[1] == "launched" for r in _reasons(result, 5))


def test_a_gavel_entry_too_big_for_what_was_left_is_told_so(tmp_path):
    # 4 GPUs; job 0 (weight 3) always goes first and takes one. Job 1 (4 GPUs) comes next in
    # priority once it has fallen behind, but 3 GPUs are left: job 2, behind it, takes one.
    jobs = [
        dict(job_id=0, arrival_s=0, gpus=1, duration_s=7200, weight=3),
        dict(job_id=1, arrival_s=0, gpus=4, duration_s=7200, weight=1),
        dict(job_id=2, arrival_s=0, gpus=1, duration_s=7200, weight=1),
    ]
    _, result = _solve(tmp_path, "MaxMinFairness", jobs, "4:0:0", profile=None, until=3 * 3600.0)
    reasons = _reasons(result, 1)
    skipped = [r for r in reasons if r[1] == "no_free_type"]
    assert skipped and skipped[0][0] == 720.0 and skipped[0][2:] == (2, 0, 3)  # rank 2, type 0, 3 left
    # The rounds it lost its GPUs this way: suspended for the entry ahead, then waiting so.
    lost = [r for r in reasons if r[1] == "preempted"]
    assert lost and all((t, "no_free_type") in {(s[0], s[1]) for s in reasons} for t, *_ in lost)
    # No reason blames entries behind it when it was skipped ahead of them.
    assert not [r for r in reasons if r[1] in ("not_chosen", "lease_end") and r[0] >= 720.0]


# --- Tiresias-G's history and the cost policies' prices ---

GITTINS = """round = 10s;
cluster = "1x4:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> TiresiasGittins(history="HISTORY") -> Consolidated -> Launch -> JobMetrics;
"""


def test_a_missing_gittins_history_is_found_by_check(tmp_path, capsys):
    write_trace(tmp_path / "trace.csv", [dict(job_id=0, arrival_s=0, gpus=1, duration_s=60)])
    (tmp_path / "g.sched").write_text(GITTINS.replace("HISTORY", "nope.csv"))
    with pytest.raises(SchedError, match="history.*names no file: .*nope.csv") as err:
        compile_file(tmp_path / "g.sched")
    assert err.value.location is not None and err.value.location.line == 4
    assert "nope.csv" in fails(capsys, "check", str(tmp_path / "g.sched"))


def test_an_empty_gittins_history_is_refused(tmp_path):
    write_trace(tmp_path / "trace.csv", [dict(job_id=0, arrival_s=0, gpus=1, duration_s=60)])
    (tmp_path / "empty.csv").write_text("job_id,arrival_s,gpus,duration_s\n")
    (tmp_path / "g.sched").write_text(GITTINS.replace("HISTORY", "empty.csv"))
    with pytest.raises(RoundhouseError, match="empty.csv.*at least one job") as err:
        simulate(compile_file(tmp_path / "g.sched"), until=60.0)
    assert isinstance(err.value, TraceError) or "empty.csv" in str(err.value)


def test_prices_for_a_gpu_type_the_cluster_lacks_are_refused(tmp_path):
    with pytest.raises(SchedError, match="A100, which the cluster does not have"):
        _solve(tmp_path, 'MinCost(prices=["V100:2.48", "K80:0.45", "A100:3"])', _example(), "1x1:V100,1x1:K80")
    # The defaults price Gavel's three types, whichever of them the cluster has.
    graph, _ = _solve(tmp_path, "MinCost", _example(), "1x1:V100,1x1:K80")
    assert graph.elements["solve"].allocation is not None
