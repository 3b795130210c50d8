"""Loss curves, plans that complete jobs, and loss-based termination (Blox §5.3)."""

import numpy as np
import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.types import Plan
from roundhouse.runtime.world import PlanError, World
from roundhouse.traces.generators import loss_curves
from roundhouse.traces.jobs import FINISHED
from roundhouse.traces.losscurves import fraction_to_converge, loss_at, relative_gap
from tests.conftest import jobs_of


def world_of(cluster: str, jobs: list[dict]) -> World:
    cl = Cluster.parse(cluster)
    world = World(cl, profile=None)
    batch, _ = world.prepare(pl.DataFrame(jobs), "test")
    world.add_jobs(batch)
    return world


def launch(world, row, gpus, now=0.0):
    plan = Plan(launch_rows=[row], launch_gpus=gpus, launch_counts=[len(gpus)], keep=world.running_rows)
    world.check_plan(plan)
    world.apply_plan(plan, now)


def test_a_plan_can_complete_running_and_waiting_jobs():
    world = world_of("1x2:V100", [{"job_id": i, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0} for i in range(4)])
    launch(world, 0, [0])
    launch(world, 1, [1])
    # Complete running job 0 and waiting job 3; job 2 takes job 0's GPU in the same plan.
    plan = Plan(launch_rows=[2], launch_gpus=[0], launch_counts=[1], keep=[1], complete=[0, 3])
    world.check_plan(plan)
    world.apply_plan(plan, 50.0)
    status = world.jobs.column("status")
    assert status[0] == FINISHED and status[3] == FINISHED
    assert world.jobs.column("finish_s")[0] == 50.0
    assert world.jobs.column("done")[0] == 0.0  # the work done so far is kept, not the declared work
    assert list(world.holder) == [2, 1]
    assert list(world.running_rows) == [1, 2]
    assert world.unfinished == 2


@pytest.mark.parametrize(
    "plan, message",
    [
        (dict(keep=[0], complete=[0]), "keeps or suspends"),
        (dict(keep=[], complete=[0, 0]), "twice"),
        (dict(keep=[0], complete=[9]), "row 9, which is not a row of the job table"),
        (dict(keep=[0], launch_rows=[1], launch_gpus=[1], launch_counts=[1], complete=[1]), "which it also completes"),
        (dict(keep=[], complete=[0, 2]), "has finished"),
    ],
)
def test_completions_are_checked(plan, message):
    world = world_of("1x2:V100", [{"job_id": i, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0} for i in range(3)])
    launch(world, 0, [0])
    world.apply_plan(Plan(keep=[0], complete=[2]), 1.0)  # job 2 is finished from here on
    with pytest.raises(PlanError, match=message):
        world.check_plan(Plan(**plan))


def test_the_curve():
    start, final, speed = 5.0, 1.0, loss_curves(1, np.random.default_rng(0))["loss_speed"][0]
    assert loss_at(start, final, speed, 0.0) == start
    assert relative_gap(start, final, 9.0, 1.0) == pytest.approx(0.4)
    rng = np.random.default_rng(3)
    columns = loss_curves(400, rng, share=0.75, fraction=0.4, threshold=0.001)
    frac = fraction_to_converge(columns["loss_start"], columns["loss_final"], columns["loss_speed"], 0.001)
    assert np.count_nonzero(np.isclose(frac, 0.4, atol=1e-4)) == 300
    assert np.count_nonzero(np.isclose(frac, 1.0, atol=1e-4)) == 100
    assert (frac <= np.where(np.isclose(frac, 0.4, atol=1e-3), 0.4, 1.0)).all()  # never a hair late


GRAPH = """
round = 100s;
src :: TraceSource(path="trace.csv");
pool :: JobPool;
stop :: LossTermination(threshold=0.001);
run :: Launch;
src -> AcceptAll -> pool -> stop -> Fifo -> FirstFree -> run -> m :: JobMetrics;
stop [converged] -> [finish] run;
"""


def test_loss_termination_ends_converged_jobs(run_graph):
    # Job 0 comes within 0.1% of its final loss after 40% of its 1000 s; job 1 only at the
    # end; job 2 has no curve. Rounds of 100 s: job 0 is ended at the boundary after 400 s.
    curve = lambda fraction: {"loss_start": 5.0, "loss_final": 1.0, "loss_speed": ((4.0 / 0.001) - 1.0) / fraction}  # noqa: E731
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0, **curve(0.4)},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0, **curve(1.0)},
        {
            "job_id": 2,
            "arrival_s": 0.0,
            "gpus": 1,
            "duration_s": 1000.0,
            "loss_start": None,
            "loss_final": None,
            "loss_speed": None,
        },
        {"job_id": 3, "arrival_s": 0.0, "gpus": 1, "duration_s": 300.0, **curve(1.0)},
    ]
    result = run_graph(GRAPH, jobs, cluster="1x3:V100")
    got = jobs_of(result, "m")
    assert got[0]["finish_s"] == pytest.approx(400.0)
    assert got[0]["run_s"] == pytest.approx(400.0)
    # Job 3 waited for a GPU: it takes job 0's at 400 and finishes normally.
    assert got[3]["first_start_s"] == 400.0 and got[3]["finish_s"] == pytest.approx(700.0)
    assert got[1]["finish_s"] == pytest.approx(1000.0) and got[2]["finish_s"] == pytest.approx(1000.0)
    assert result.counters["stop"]["terminated"] == 1
    assert result.counters["run"]["completed"] == 1
    assert result.counters["m"]["finished"] == 4  # the completion is reported once, next round
    assert got[0]["preemptions"] == 0
    # Without the element every job runs its declared work.
    without = (
        "\n".join(line for line in GRAPH.splitlines() if "stop" not in line)
        + "\nsrc -> AcceptAll -> pool -> Fifo -> FirstFree -> run -> m :: JobMetrics;\n"
    )
    plain = jobs_of(run_graph(without, jobs, cluster="1x3:V100"), "m")
    assert plain[0]["finish_s"] == pytest.approx(1000.0)


def test_loss_column_follows_progress(run_graph):
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0, "loss_start": 5.0, "loss_final": 1.0, "loss_speed": 3.0}
    ]
    result = run_graph(GRAPH, jobs, cluster="1x1:V100", until=500.0)
    assert result.world.jobs.column("loss")[0] == pytest.approx(loss_at(5.0, 1.0, 3.0, 0.5))  # 2.6
    assert result.world.jobs.column("loss")[0] == pytest.approx(2.6)


@pytest.mark.parametrize(
    "columns, message",
    [
        ({"loss_start": 5.0, "loss_final": 1.0}, "loss curve needs all three columns"),
        ({"loss_start": 5.0, "loss_final": 0.0, "loss_speed": 1.0}, "greater than 0"),
        ({"loss_start": 1.0, "loss_final": 2.0, "loss_speed": 1.0}, "greater than loss_final"),
        ({"loss_start": 5.0, "loss_final": 1.0, "loss_speed": -1.0}, "0 or more"),
    ],
)
def test_bad_loss_curves_are_trace_errors(columns, message):
    with pytest.raises(TraceError, match=message):
        world_of("1x1:V100", [{"job_id": 7, "arrival_s": 0.0, "gpus": 1, "duration_s": 10.0, **columns}])
