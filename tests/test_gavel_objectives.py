"""Objective sinks: cost, SLO violations, finish-time fairness, effective throughput."""

from __future__ import annotations

import polars as pl
import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

PROFILE = """model,batch_size,gpu_type,gpus,placement,iters_per_s
ja,1,V100,1,consolidated,2.0
ja,1,K80,1,consolidated,1.0
"""


def _run(tmp_path, jobs, sinks: str, cluster="1x1:V100", policy="Fifo -> Consolidated", profile=PROFILE, until=None):
    (tmp_path / "profile.csv").write_text(profile)
    pl.DataFrame(jobs).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        f'round = 6min;\ncluster = "{cluster}";\nprofile = "profile.csv";\nsrc :: TraceSource(path="trace.csv");\n'
        f"src -> AcceptAll -> JobPool -> {policy} -> run :: Launch -> m :: JobMetrics;\n{sinks}"
    )
    graph = compile_file(tmp_path / "g.sched")
    return simulate(graph, until=until)


def test_cost_is_gpu_hours_times_price(tmp_path):
    # 3600 iterations at 2/s: 1800 s on one V100 at $2.48/h.
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=3600.0)]
    result = _run(tmp_path, jobs, 'run -> cost :: CostMetrics(prices=["V100:2.48"]);\n')
    cost = result.reports["cost"]
    assert cost["cost"]["total_cost_usd"] == pytest.approx(2.48 * 0.5)
    assert cost["costs"]["V100_gpu_h"].to_list() == pytest.approx([0.5])


def test_a_shared_gpu_is_paid_once(tmp_path):
    # A3C and CycleGAN do more together on one V100 than time-sliced, so the max-min policy runs
    # them as a pair; then the survivor alone. The one GPU is busy from 0 to the last finish.
    pl.DataFrame(
        [
            dict(job_id=0, arrival_s=0.0, gpus=1, model="A3C", iterations=20000.0),
            dict(job_id=1, arrival_s=0.0, gpus=1, model="CycleGAN", iterations=9000.0),
        ]
    ).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        'round = 6min;\ncluster = "1x1:V100";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> MaxMinFairness(space_sharing=true, interval=0) -> GavelRounds -> GavelPlacer -> run :: Launch -> m :: JobMetrics;\n"
        'run -> cost :: CostMetrics(prices=["V100:3.6"]);\n'
    )
    graph = compile_file(tmp_path / "g.sched")
    shared = []
    result = simulate(graph, on_round=lambda ctx: shared.append(ctx.co_holder is not None and bool((ctx.co_holder >= 0).any())))
    assert sum(shared) >= 5  # mostly as a pair (X gives the pair about 93% of the time)
    last = float(result.reports["m"]["jobs"]["finish_s"].max())
    assert result.world.busy_gpu_s == pytest.approx(last)  # the one GPU, busy until the last finish, counted once
    assert result.reports["cost"]["cost"]["total_cost_usd"] == pytest.approx(0.001 * last)  # $3.6/h = $0.001/s


def test_slo_violations(tmp_path):
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=3600.0, slo_s=3600.0),  # done at 1800 s
        dict(job_id=1, arrival_s=0.0, gpus=1, model="ja", iterations=3600.0, slo_s=3000.0),  # waits, done at 3600 s
        dict(job_id=2, arrival_s=0.0, gpus=1, model="ja", iterations=360.0),  # no SLO
    ]
    result = _run(tmp_path, jobs, "run -> slo :: SloMetrics;\n")
    slo = result.reports["slo"]
    assert slo["slo"] == {"jobs_with_slo": 2, "violations": 1, "open": 0, "violation_pct": 50.0}
    assert slo["deadlines"]["violated"].to_list() == [False, True]
    assert slo["deadlines"]["status"].to_list() == ["met", "violated"]
    assert result.counters["slo"]["violations"] == 1


def test_an_unfinished_job_violates_only_once_its_deadline_has_passed(tmp_path):
    # The run stops at 2 h. Job 0 (50,000 s of work, SLO 100 h) is still running, its deadline
    # far ahead: open, not violated. Job 1 waits behind it (FIFO) past its 1 h deadline: violated.
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=1e5, slo_s=360000.0),
        dict(job_id=1, arrival_s=0.0, gpus=1, model="ja", iterations=3600.0, slo_s=3600.0),
    ]
    result = _run(tmp_path, jobs, "run -> slo :: SloMetrics;\n", until=7200.0)
    slo = result.reports["slo"]
    assert slo["slo"] == {"jobs_with_slo": 2, "violations": 1, "open": 1, "violation_pct": 50.0}
    assert slo["deadlines"]["status"].to_list() == ["open", "violated"]
    assert slo["deadlines"]["violated"].to_list() == [False, True]
    assert result.counters["slo"]["violations"] == 1  # the counter agrees with the summary


def test_finish_time_fairness_of_a_job_alone_is_one(tmp_path):
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=3600.0)]
    result = _run(tmp_path, jobs, "run -> f :: FinishTimeFairnessMetrics;\n")
    assert result.reports["f"]["rho"]["avg_rho"] == pytest.approx(1.0)
    # Two jobs one after the other on one GPU (FIFO): the first runs 1800 s while 2 jobs share
    # the cluster, so its fair time is 3600 s (rho 1/2); the second finishes at 3600 s with 1.5
    # jobs on average over its life, a fair time of 2700 s (rho 4/3).
    jobs.append(dict(job_id=1, arrival_s=0.0, gpus=1, model="ja", iterations=3600.0))
    result = _run(tmp_path, jobs, "run -> f :: FinishTimeFairnessMetrics;\n")
    rho = result.reports["f"]["rho_per_job"]["rho"].to_list()
    assert rho == pytest.approx([0.5, 4 / 3])


def test_finish_time_fairness_gives_no_share_on_a_type_too_small_for_the_job(tmp_path):
    # A 2-GPU job alone on 1 V100 + 2 K80 can run only on the two K80s (2 it/s). Its 1/n share
    # (n = 1) holds 1/3 of the V100 type, where it cannot run: that part adds nothing, so its
    # isolated time is 7200 / (2 * 2/3) = 5400 s and rho = 3600 / 5400, as MinMaxRho finds.
    profile = "model,batch_size,gpu_type,gpus,placement,iters_per_s\njb,1,V100,2,consolidated,20.0\njb,1,K80,2,consolidated,2.0\n"
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=2, model="jb", iterations=7200.0)]
    result = _run(
        tmp_path,
        jobs,
        "run -> f :: FinishTimeFairnessMetrics;\n",
        cluster="1x1:V100,1x2:K80",
        policy="solve :: MinMaxRho -> GavelRounds -> GavelPlacer",
        profile=profile,
    )
    row = result.reports["f"]["rho_per_job"].row(0, named=True)
    assert row["jct_s"] == pytest.approx(3600.0)
    assert row["isolated_s"] == pytest.approx(5400.0)
    assert row["rho"] == pytest.approx(2 / 3)
    assert row["rho"] == pytest.approx(result.counters["solve"]["rho"], rel=2e-3)


def test_effective_throughput_in_reference_gpus(tmp_path):
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=3600.0 * 2, user="u")]
    result = _run(tmp_path, jobs, 'run -> w :: EffectiveThroughput(by="user");\n')
    series = result.reports["w"]["throughput_series"]
    assert series["total"].to_list() == pytest.approx([1.0] * 10)  # a V100 job at V100 speed, 10 rounds
    assert series["u"].to_list() == series["total"].to_list()
    # On a K80 the same job does half a V100's work.
    result = _run(tmp_path, jobs, "run -> w :: EffectiveThroughput;\n", cluster="1x1:K80")
    assert result.reports["w"]["throughput"]["avg_effective_throughput"] == pytest.approx(0.5)


def test_prices_must_cover_the_cluster(tmp_path):
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", iterations=360.0)]
    with pytest.raises(SchedError, match="no price for GPU type K80"):
        _run(tmp_path, jobs, 'run -> CostMetrics(prices=["V100:1"]);\n', cluster="1x1:V100,1x1:K80")
