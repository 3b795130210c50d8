"""Metrics, continued: utilisation counts a GPU two jobs share once; Themis' own fairness
report measures a job ended early over the work it did; the JSON files refuse (reports) or
null (run.json) numbers JSON has none for; `roundhouse run` notes the jobs a cut run left
running or preempted."""

from __future__ import annotations

import copy
import io
import json

import polars as pl
import pytest
from rich.console import Console

from roundhouse.runtime import registry
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Plan
from roundhouse.runtime.world import World
from roundhouse.tools.cli import main
from roundhouse.tools.results import print_summary
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import fails
from tests.own_elements import policy_file

CYCLEGAN_WITH_A3C = 3.1632656249608218  # V100, iterations/s, sharing a GPU with A3C (Gavel's table)


def _strict_json(text: str):
    """JSON as the standard has it: no NaN, no Infinity."""

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


# --- utilisation under space sharing ---


def _pair_world(cyclegan_iterations: float):
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="A3C", iterations=1e6),
        dict(job_id=1, arrival_s=0.0, gpus=1, model="CycleGAN", iterations=cyclegan_iterations),
    ]
    world = World(Cluster.parse("1x1:V100"), ProfileTable.load())
    batch, _ = world.prepare(pl.DataFrame(jobs), "test")
    world.add_jobs(batch)
    return world, Simulator(world, 360.0)


def _round(world, sim, plan: Plan, rounds: int = 1) -> None:
    world.check_plan(plan)
    sim.apply(plan)
    world.apply_plan(plan, sim.now)
    sim.advance()
    events, progress = sim.poll()
    world.apply_progress(progress.rows, progress.done, progress.service, progress.run_s, rounds, progress.block)
    world.apply_finished(events.finished, events.finished_at)


PAIR = Plan(launch_rows=[0, 1], launch_gpus=[0, 0], launch_counts=[1, 1], launch_partner=[1, 0])


def test_a_gpu_two_jobs_share_counts_once_in_the_busy_time():
    # One GPU, A3C and CycleGAN on it; CycleGAN finishes 100 s in. The GPU was held 360 s of
    # the round (A3C all of it), not 460; the next round A3C holds it alone: 720 in all.
    world, sim = _pair_world(CYCLEGAN_WITH_A3C * 100)
    _round(world, sim, PAIR)
    service = world.jobs.column("service")
    assert service.tolist() == pytest.approx([360.0, 100.0])  # (each job's own service: all it held)
    assert world.busy_gpu_s == pytest.approx(360.0)
    _round(world, sim, Plan(keep=[0]))
    assert world.busy_gpu_s == pytest.approx(720.0)
    assert copy.deepcopy(world).busy_gpu_s == world.busy_gpu_s  # (forks and snapshots carry it)
    state = world.__getstate__()
    del state["shared_gpu_s"]  # (a snapshot written before the world kept it)
    older = object.__new__(World)
    older.__setstate__(state)
    assert older.shared_gpu_s == 0.0


def test_rounds_passed_together_count_the_shared_time_each_round():
    # Event skipping adds one round's progress several times over: the shared time too.
    world, sim = _pair_world(1e6)
    _round(world, sim, PAIR, rounds=3)
    assert world.jobs.column("service").tolist() == [3 * 360.0, 3 * 360.0]
    assert world.busy_gpu_s == 3 * 360.0


def test_utilisation_of_a_shared_gpu_stays_within_the_cluster(tmp_path):
    # Gavel's max-min fairness with pair rows on one V100: A3C and CycleGAN share it, then the
    # survivor runs alone. The one GPU is busy from 0 to the last finish: that is the run's busy
    # GPU time (as CostMetrics pays for it), not the two jobs' services summed.
    pl.DataFrame(
        dict(job_id=[0, 1], arrival_s=[0.0, 0.0], gpus=[1, 1], model=["A3C", "CycleGAN"], iterations=[20000.0, 9000.0])
    ).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        'round = 6min;\ncluster = "1x1:V100";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> MaxMinFairness(space_sharing=true, interval=0) -> GavelRounds -> GavelPlacer"
        ' -> run :: Launch -> m :: JobMetrics;\nrun -> cost :: CostMetrics(prices=["V100:3.6"]);\n'
    )
    shared = []
    graph = compile_file(tmp_path / "g.sched")
    result = simulate(graph, on_round=lambda ctx: shared.append(ctx.co_holder is not None and bool((ctx.co_holder >= 0).any())))
    summary, jobs = result.reports["m"]["summary"], result.reports["m"]["jobs"]
    assert sum(shared) >= 5  # (mostly as a pair)
    last = float(jobs["finish_s"].max())
    assert jobs["service_gpu_s"].sum() > last + 1000  # (each job's own service counts the shared time)
    assert result.world.busy_gpu_s == pytest.approx(last, rel=1e-12)
    assert result.reports["cost"]["cost"]["total_cost_usd"] == pytest.approx(0.001 * result.world.busy_gpu_s)
    assert summary["utilization"] == pytest.approx(last / summary["end_s"]) and summary["utilization"] <= 1.0


def test_without_pairs_the_busy_time_is_the_service_summed(tmp_path):
    pl.DataFrame(dict(job_id=[0, 1], arrival_s=[0.0, 50.0], gpus=[1, 2], duration_s=[700.0, 400.0])).write_csv(
        tmp_path / "trace.csv"
    )
    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "1x4:V100";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    world = simulate(compile_file(tmp_path / "g.sched")).world
    assert world.co_holder is None and world.shared_gpu_s == 0.0
    assert world.busy_gpu_s == float(world.jobs.column("service").sum()) == 700.0 + 2 * 400.0


# --- Themis' fairness report ---


def test_themis_rho_of_a_job_ended_early_is_over_the_work_it_did(tmp_path):
    # Two one-GPU jobs alone on two GPUs, each on its own GPU the whole time: rho 1 each. Job
    # 1's loss converges within its first round, so LossTermination ends it at 300 s, a tenth
    # of its declared work: its ideal time is that of the work it did (300 s), not of all it
    # declared (3000 s, which made its rho 0.1), as FinishTimeFairnessMetrics counts it.
    loss = dict(model="LM", batch_size=40, loss_start=4.46, loss_final=0.7471)
    rows = [
        dict(job_id=i, arrival_s=0.0, gpus=1, duration_s=3000.0, **loss, loss_speed=speed) for i, speed in enumerate((100.0, 1e5))
    ]
    pl.DataFrame(rows).write_csv(tmp_path / "trace.csv")
    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "1x2:V100";\nsrc :: TraceSource(path="trace.csv");\nrun :: Launch;\n'
        "src -> AcceptAll -> JobPool -> stop :: LossTermination(threshold=0.01) -> th :: Themis -> Consolidated -> run"
        " -> m :: JobMetrics;\nstop [converged] -> [finish] run;\nrun -> ftf :: FinishTimeFairnessMetrics;\n"
    )
    result = simulate(compile_file(tmp_path / "g.sched"))
    assert result.reports["m"]["jobs"]["jct_s"].to_list() == [3000.0, 300.0]
    fairness, ftf = result.reports["th"]["fairness"], result.reports["ftf"]["rho"]
    assert fairness["jobs"] == fairness["jobs_finished"] == 2
    assert fairness["avg_rho"] == pytest.approx(1.0) and fairness["max_rho"] == pytest.approx(1.0)
    assert fairness["avg_rho"] == pytest.approx(ftf["avg_rho"], rel=1e-9)


# --- numbers JSON has none for ---


def _element(gauge: str, report: str) -> str:
    """The file of a policy Odd that sets its counter `gauge` each tick and reports `report`."""
    return policy_file(
        "Odd",
        "A policy of one's own.",
        f'self.counters["gauge"] = {gauge}\nreturn Ranking(active.rows, active.gpus)',
        before="import numpy as np",
        inputs=(("active", "Active", "jobs."),),
        outputs=(("ranking", "Ranking", "jobs."),),
        counters=(("gauge", "a number."),),
        see_also="none",
        after=f"def finish(self, ctx):\n    return {report}",
    )


GRAPH = """require "mine.py";
round = 5min;
cluster = "2x4:V100";
src :: PoissonSource(rate=8/h, jobs=4, seed=1);
src -> AcceptAll -> JobPool -> odd :: Odd -> FirstFree -> Launch -> JobMetrics;
"""


@pytest.fixture
def own_element(tmp_path):
    def write(gauge: str, report: str):
        (tmp_path / "mine.py").write_text(_element(gauge, report))
        (tmp_path / "g.sched").write_text(GRAPH)
        return tmp_path / "g.sched"

    with registry.scope():
        yield write


@pytest.mark.parametrize(("value", "said"), [('float("nan")', "JSON: 'each' > item 1 is nan"), ('np.float64("inf")', "is inf")])
def test_a_report_with_nan_or_infinity_is_refused_naming_it(tmp_path, capsys, own_element, value, said):
    graph = own_element("1.0", f'{{"stats": {{"n": 2, "each": [1.0, {value}]}}}}')
    err = fails(capsys, "run", graph, "--out", tmp_path / "out")
    assert "element 'odd' reported 'stats', which cannot be written as JSON" in err
    assert said in err and "report None" in err
    assert not (tmp_path / "out" / "summary.json").exists()  # (nothing of the run written)


def test_a_counter_that_is_not_finite_is_null_in_run_json(tmp_path, capsys, own_element):
    graph = own_element('float("inf")', '{"stats": {"n": 2, "none": None}}')
    assert main(["run", str(graph), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    info = _strict_json((tmp_path / "out" / "run.json").read_text())
    assert info["counters"]["odd"] == {"gauge": None}
    assert _strict_json((tmp_path / "out" / "odd-stats.json").read_text()) == {"n": 2, "none": None}


# --- the note on jobs a cut run left unfinished ---


def test_a_cut_run_notes_the_jobs_it_left_running_or_preempted(tmp_path):
    # One GPU, shortest remaining time first: job 0 (an hour) runs from 0; job 1 (10 min,
    # seen at 300) preempts it; cut at 10 min, job 1 is running and job 0 waits to resume.
    pl.DataFrame(dict(job_id=[0, 1], arrival_s=[0.0, 100.0], gpus=[1, 1], duration_s=[3600.0, 600.0])).write_csv(
        tmp_path / "trace.csv"
    )
    (tmp_path / "g.sched").write_text(
        'round = 5min;\ncluster = "1x1:V100";\nsrc :: TraceSource(path="trace.csv");\n'
        "src -> AcceptAll -> JobPool -> Srtf -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    graph = compile_file(tmp_path / "g.sched")
    result = simulate(graph, until=600.0)
    jobs = result.reports["m"]["jobs"]
    assert jobs["status"].to_list() == ["pending", "running"] and jobs["preemptions"].to_list() == [1, 0]
    out = io.StringIO()
    print_summary(Console(file=out, width=400), graph, result.world.cluster, result)
    assert "note: m: 2 job(s) started but had not finished when the run ended (1 running, 1 preempted" in out.getvalue()
    # A run that finishes every job says nothing of the kind.
    out = io.StringIO()
    print_summary(Console(file=out, width=400), graph, result.world.cluster, simulate(compile_file(tmp_path / "g.sched")))
    assert "had not finished" not in out.getvalue()
