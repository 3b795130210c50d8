"""The element families as a user meets them: EffectiveThroughput's breakdown by a value spelt
like one of its own columns, a single burst longer than the time between bursts, jobs that fail
for good in the SLO and finish-time-fairness sinks, and Launch completing a job its placer
launches or resizes."""

from __future__ import annotations

import numpy as np

from roundhouse.elements.launch import with_completions
from roundhouse.runtime import rowsets
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.engine import Engine
from roundhouse.runtime.types import Assignment, Events, Plan, Resize
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import jobs_of
from tests.test_live_core import _Scripted

USERS = [
    dict(job_id=0, arrival_s=0.0, gpus=2, duration_s=1000.0, user="total"),
    dict(job_id=1, arrival_s=0.0, gpus=2, duration_s=2000.0, user="time_s"),
    dict(job_id=2, arrival_s=0.0, gpus=1, duration_s=600.0, user="user=total"),
]


def test_values_spelt_like_the_series_columns_get_columns_of_their_own(run_graph):
    # Users named `total` and `time_s` had overwritten the total and the time of each point
    # (and the average made of them).
    result = run_graph(
        """
        round = 5min;
        cluster = "1x5:V100";
        src :: TraceSource(path="trace.csv", timing=duration);
        src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> run :: Launch -> JobMetrics;
        run -> w :: EffectiveThroughput(by="user");
        """,
        USERS,
    )
    series = result.reports["w"]["throughput_series"]
    assert series.columns == ["time_s", "total", "user=time_s", "user=user=total", "user=total"]
    assert series["time_s"].to_list() == [300.0 * k for k in range(series.height)]
    # Each round, the work of every user adds up to the total (job 0 on 2 GPUs for 1000 s, job 1
    # on 2 for 2000 s, job 2 on 1 for 600 s: 5 GPUs busy at first).
    assert series["total"][0] == 5.0
    by_user = series["user=total"] + series["user=time_s"] + series["user=user=total"]
    assert np.allclose(by_user.to_numpy(), series["total"].to_numpy())
    # User `total` is named apart, past user `user=total`, who keeps the name that is its value.
    assert series["user=user=total"][0] == 2.0 and series["user=time_s"][0] == 2.0 and series["user=total"][0] == 1.0
    busy_gpu_s = 2 * 1000.0 + 2 * 2000.0 + 600.0
    assert result.reports["w"]["throughput"]["avg_effective_throughput"] * 300.0 * series.height == busy_gpu_s


def test_a_single_burst_may_last_longer_than_the_time_between_bursts(run_graph):
    # With one burst there is no next one to overlap: a two-day burst was refused because the
    # default `every` (a day) is shorter.
    result = run_graph(
        """
        round = 5min;
        cluster = "1x4:V100";
        b :: BurstSource(jobs=6, length=2d, gpus=single, seed=1, min_duration=10min, max_duration=20min);
        b -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics;
        """
    )
    arrivals = [row["arrival_s"] for row in jobs_of(result).values()]
    assert len(arrivals) == 6 and max(arrivals) <= 2 * 86400.0
    assert max(arrivals) > 86400.0  # (drawn over the whole two days: one of six past the first, with this seed)


def test_several_bursts_longer_than_the_time_between_them_are_still_refused(tmp_path, capsys):
    from tests.conftest import refused

    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "1x4:V100";\nb :: BurstSource(jobs=6, length=2d, bursts=2);\n'
        "b -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
    )
    refused(capsys, ["check", tmp_path / "g.sched"], "cannot last longer than the time between bursts")


def _failing_run(tmp_path):
    """Two jobs with an SLO of 10 s; job 1 fails for good at 3.9 s, job 0 finishes at 3.5 s."""
    (tmp_path / "t.csv").write_text("job_id,arrival_s,gpus,duration_s,slo_s\n0,0,1,100,10\n1,0,1,100,10\n")
    (tmp_path / "g.sched").write_text(
        'round = 1s; cluster = "1x2:V100"; src :: TraceSource(path="t.csv"); '
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> run :: Launch -> m :: JobMetrics; "
        "run -> slo :: SloMetrics; run -> ftf :: FinishTimeFairnessMetrics;"
    )
    graph = compile_file(tmp_path / "g.sched")
    world = World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100")
    script = {4: Events(time=4.0, finished=[0, 1], finished_at=[3.5, 3.9], failed=[1])}
    return Engine(graph, world, _Scripted(world, script)).run()


def test_a_job_that_fails_for_good_violates_its_slo(tmp_path):
    # It had been counted as meeting its SLO: it "finished" before its deadline.
    result = _failing_run(tmp_path)
    table = {row["job_id"]: row for row in result.reports["slo"]["deadlines"].iter_rows(named=True)}
    assert table[0]["status"] == "met" and not table[0]["violated"] and table[0]["finish_s"] == 3.5
    assert table[1]["status"] == "failed" and table[1]["violated"] and table[1]["finish_s"] is None
    assert result.reports["slo"]["slo"] == {"jobs_with_slo": 2, "violations": 1, "open": 0, "violation_pct": 50.0}
    assert result.counters["slo"]["violations"] == 1
    assert jobs_of(result, "m")[1]["status"] == "failed"  # (as JobMetrics lists it)


def test_a_job_that_fails_for_good_has_no_finish_time_fairness(tmp_path):
    # It had been given a rho from its failure time, as if it had completed its work then.
    result = _failing_run(tmp_path)
    assert result.reports["ftf"]["rho_per_job"]["job_id"].to_list() == [0]


def _plan_on_two_nodes() -> Plan:
    """Launches of jobs 0 (GPUs 0-1), 1 and 2 (sharing GPU 2), a resize of job 3 to GPUs 4-5 and
    one of job 4 to GPU 6, keeping job 5 and suspending job 6."""
    plan = Plan.of(
        launches=[Assignment(0, (0, 1), 8), Assignment(1, (2,), 16), Assignment(2, (2,), 32)],
        keep=[5],
        suspend=[6],
        resizes=[Resize(3, (4, 5), 64), Resize(4, (6,), 128)],
    )
    import attrs

    return attrs.evolve(plan, launch_partner=np.array([-1, 2, 1]))


def test_launch_completes_jobs_its_placer_launches_or_resizes():
    # Launch's finish port completes jobs "whatever the placer decided for them"; a job the
    # placer launched or resized in the same plan made the run fail, blaming the placer.
    rowsets.reserve(16)
    plan = with_completions(_plan_on_two_nodes(), np.array([0, 2, 4, 6]))
    assert plan.complete.tolist() == [0, 2, 4, 6]
    assert [(a.row, a.gpus, a.batch_size) for a in plan.launch] == [(1, (2,), 16)]
    assert plan.launch_partner is not None and plan.launch_partner.tolist() == [-1]  # (its partner is gone)
    assert [(r.row, r.gpus, r.batch_size) for r in plan.resizes] == [(3, (4, 5), 64)]
    assert plan.keep.tolist() == [5] and plan.suspend.tolist() == []


def test_launch_leaves_a_plan_whose_completions_it_does_not_touch_as_it_was():
    rowsets.reserve(16)
    before = _plan_on_two_nodes()
    plan = with_completions(before, np.array([5]))
    assert plan.launch == before.launch and plan.resizes == before.resizes
    assert plan.keep.tolist() == [] and plan.complete.tolist() == [5]


def test_a_job_both_launched_and_completed_is_completed(run_graph):
    # The admitted jobs go to the pool and, straight away, to Launch's finish port: the placer
    # launches them, Launch completes them without running.
    result = run_graph(
        """
        round = 5min;
        cluster = "1x4:V100";
        src :: TraceSource(path="trace.csv", timing=duration);
        a :: AcceptAll;
        src -> a -> JobPool -> Fifo -> Consolidated -> run :: Launch -> m :: JobMetrics;
        a -> [finish] run;
        """,
        [dict(job_id=0, arrival_s=0.0, gpus=2, duration_s=1000.0), dict(job_id=1, arrival_s=100.0, gpus=1, duration_s=50.0)],
    )
    jobs = jobs_of(result, "m")
    assert [jobs[j]["status"] for j in (0, 1)] == ["finished", "finished"]
    assert jobs[0]["finish_s"] == 0.0 and jobs[1]["finish_s"] == 300.0
    assert jobs[0]["run_s"] == 0.0 and jobs[0]["first_start_s"] is None
    assert result.counters["run"] == {"launched": 0, "suspended": 0, "completed": 2}


def test_finish_time_fairness_counts_the_jobs_in_the_system_as_the_scheduler_sees_them(run_graph):
    # The docstring said "the average number of jobs in the system over the job's lifetime";
    # the count is the scheduler's, at each round's boundary (as Themis' own rho counts it): job
    # 2, arriving at 100 s, counts from 300 s, job 3 (700 s) from 900 s. Over job 0's life (0 to
    # 1000 s): 2 jobs for 300 s, 3 for 600 s, 4 for 100 s, 2.8 on average (3.2 by arrival times).
    result = run_graph(
        """
        round = 5min;
        cluster = "1x4:V100";
        src :: TraceSource(path="trace.csv", timing=duration);
        src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> run :: Launch -> JobMetrics;
        run -> ftf :: FinishTimeFairnessMetrics;
        """,
        [
            dict(job_id=0, arrival_s=0.0, gpus=2, duration_s=1000.0),
            dict(job_id=1, arrival_s=0.0, gpus=2, duration_s=2000.0),
            dict(job_id=2, arrival_s=100.0, gpus=4, duration_s=500.0),
            dict(job_id=3, arrival_s=700.0, gpus=1, duration_s=300.0),
        ],
    )
    row = result.reports["ftf"]["rho_per_job"].row(0, named=True)
    assert row["job_id"] == 0 and row["jct_s"] == 1000.0
    assert abs(row["avg_jobs"] - (2 * 300 + 3 * 600 + 4 * 100) / 1000) < 1e-12
    # Its fair share: 4 GPUs / 2.8 jobs = 1.43 GPUs of the 2 it asks for, its 1000 s in 1400 s.
    assert abs(row["isolated_s"] - 1400.0) < 1e-9


def test_a_throughput_series_saved_as_dicts_still_reads():
    # A state saved before the series kept each value's work apart: one dict per point.
    from roundhouse.elements.objectives import EffectiveThroughput

    sink = EffectiveThroughput(by="user")
    sink._series = [{"time_s": 0.0, "total": 3.0, "a": 1.0, "b": 2.0}, (300.0, 1.0, {"a": 1.0})]
    frame = sink._frame()
    assert frame.columns == ["time_s", "total", "a", "b"]
    assert frame.rows() == [(0.0, 3.0, 1.0, 2.0), (300.0, 1.0, 1.0, 0.0)]
