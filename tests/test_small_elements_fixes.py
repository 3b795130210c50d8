"""LossTermination and EffectiveThroughput as a user meets them: a loose threshold ends no job
before it has run; a breakdown column the job table lacks is said at the sink's line."""

from __future__ import annotations

import polars as pl

from roundhouse.tools.cli import main
from tests.conftest import fails

TRACE = """job_id,arrival_s,gpus,duration_s,model,batch_size,loss_start,loss_final,loss_speed
0,0,1,20000,ResNet-18,16,4.0,0.5,500
1,100,2,9000,ResNet-18,16,4.0,0.7,2000
2,700,1,3000,ResNet-18,16,4.0,0.7,100000
3,900,4,6000,ResNet-18,16,4.0,0.7,10
"""

LOOSE = """round = 5min;
cluster = "1x4:V100";
arrivals :: TraceSource(path="t.csv");
pool :: JobPool; stop :: LossTermination(threshold=5); run :: Launch;
arrivals -> AcceptThreshold(factor=1x) -> pool -> stop -> Fifo -> Consolidated -> run -> JobMetrics;
stop [converged] -> [finish] run;
"""


def test_a_loose_threshold_ends_no_job_before_it_runs(tmp_path, capsys):
    # Every job's loss starts within 5x of its final value: each is ended as soon as it has
    # trained, never while it waits (it had been finished unrun, with a JCT of 0).
    (tmp_path / "t.csv").write_text(TRACE)
    (tmp_path / "g.sched").write_text(LOOSE)
    assert main(["run", str(tmp_path / "g.sched"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    jobs = pl.read_csv(tmp_path / "out" / "jobs.csv")
    assert jobs["first_start_s"].null_count() == 0
    assert (jobs["run_s"] > 0).all() and (jobs["finish_s"] > jobs["first_start_s"]).all()


def test_a_breakdown_column_the_jobs_lack_is_said_at_the_sinks_line(tmp_path, capsys):
    (tmp_path / "t.csv").write_text(TRACE)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "1x4:V100";\nTraceSource(path="t.csv") -> AcceptAll -> JobPool -> Fifo -> '
        "FirstFree -> l :: Launch -> JobMetrics;\nl -> et :: EffectiveThroughput(by=nosuch);\n"
    )
    err = fails(capsys, "run", graph, "--quiet")
    assert f"{graph}:4:" in err and "by='nosuch'" in err and "no column 'nosuch'" in err


def _checked(tmp_path, capsys, cluster: str, chain: str) -> str:
    """What `check` says of a graph of one PoissonSource and `chain` (it must refuse it)."""
    (tmp_path / "t.csv").write_text(TRACE)
    graph = tmp_path / "g.sched"
    graph.write_text(f'round = 5min;\ncluster = "{cluster}";\n{chain};\n')
    return fails(capsys, "check", graph)


def test_a_rate_too_slow_for_a_traces_jobs_is_refused_at_check(tmp_path, capsys):
    err = _checked(
        tmp_path,
        capsys,
        "1x4:V100",
        'TraceSource(path="t.csv", rate=1e-300/h, seed=0) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch',
    )
    assert "argument 'rate' of TraceSource" in err and "their arrivals would span more than a century" in err
    err = _checked(
        tmp_path,
        capsys,
        "1x4:V100",
        "CostWorkload(jobs=100, rate=1e-300/h) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch",
    )
    assert "argument 'rate' of CostWorkload must be at least" in err and "RuntimeWarning" not in err


def test_names_and_ranges_that_can_mean_nothing_are_refused(tmp_path, capsys):
    source = "PoissonSource(rate=8/h, jobs=5, seed=0) -> AcceptAll -> JobPool"
    err = _checked(tmp_path, capsys, "1x4:V100", f"{source} -> Fifo -> FirstFree -> Launch -> JobMetrics(track=5..5)")
    assert "argument 'track' of JobMetrics must hold one job id at least" in err
    err = _checked(
        tmp_path, capsys, "1x4:V100", f'{source} -> Fifo -> FirstFree -> l :: Launch;\nl -> EffectiveThroughput(by="")'
    )
    assert "argument 'by' of EffectiveThroughput must not be empty" in err
    pool = (
        "PoissonSource(rate=8/h, jobs=5, seed=0) -> AcceptAll -> pool :: JobPool -> solve :: MaxMinFairness -> GavelRounds "
        '-> GavelPlacer -> Launch;\npool -> PairEstimator(known="nope.csv") -> [pairs] solve'
    )
    err = _checked(tmp_path, capsys, "36:36:36", pool)
    assert "argument 'known' of PairEstimator names no file" in err
