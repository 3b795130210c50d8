"""Claims of docs/semantics.md about who pays which cost, checked by hand: a move's restore and
checkpoint, the GPUs a resize gives up, a resize's wait against a launch's, a space-sharing
partner that finishes inside a round, and the end of a run whose last job finishes on a
boundary. Each graph runs with event skipping off and on."""

from __future__ import annotations

import pytest

from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.types import Assignment, Plan, Resize
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import jobs_of, play_round

# Jobs known by duration: one unit of work per second wherever they run.
ELASTIC = dict(arrival_s=0.0, gpus=1, duration_s=1000.0, batch_size=32, max_gpus=2, max_batch_size=128)


def _world(jobs: list[dict], cluster: str, **costs) -> tuple[World, Simulator]:
    import polars as pl

    world = World(Cluster.parse(cluster), ProfileTable.load())
    batch, _ = world.prepare(pl.DataFrame(jobs), "test")
    world.add_jobs(batch)
    return world, Simulator(world, 100.0, **costs)


def _done(world: World) -> list[float]:
    return world.jobs.column("done").tolist()


def test_a_moved_job_pays_its_restore_and_leaves_its_checkpoint_to_the_gpu_it_left():
    world, sim = _world([dict(ELASTIC, job_id=10), dict(ELASTIC, job_id=11)], "1x2:V100", checkpoint_s=30.0, restore_s=10.0)
    play_round(world, sim, Plan.of([Assignment(0, [0])]))
    assert _done(world) == [90.0, 0.0]  # a first launch restores too
    # Job 10 moves from GPU 0 to GPU 1 (suspended and launched at once); job 11 takes GPU 0.
    play_round(world, sim, Plan.of([Assignment(0, [1]), Assignment(1, [0])], suspend=[0]))
    # Job 10 restores 10 s on the free GPU 1; job 11 waits for job 10's checkpoint (30 s), then restores.
    assert _done(world) == [90.0 + 90.0, 100.0 - 30.0 - 10.0]
    assert world.jobs.column("preemptions").tolist() == [1, 0]
    assert world.jobs.column("launches").tolist() == [2, 1]
    assert world.jobs.column("run_s").tolist() == [200.0, 100.0]  # held from the launching boundary


def test_the_gpus_a_resize_gives_up_are_free_at_the_boundary():
    jobs = [dict(ELASTIC, job_id=10), dict(ELASTIC, job_id=11), dict(ELASTIC, job_id=12)]
    world, sim = _world(jobs, "2x2:V100", checkpoint_s=30.0, restore_s=10.0)
    play_round(world, sim, Plan.of([Assignment(0, [0, 1], 64), Assignment(1, [2])]))
    # Job 10 shrinks by checkpoint and restart (20 s); job 12 takes the GPU it gives up at once.
    play_round(world, sim, Plan.of([Assignment(2, [1])], keep=[1], resizes=[Resize(0, [0], 32, in_place=False)]))
    assert _done(world) == [90.0 + 80.0, 190.0, 90.0]


def test_a_resize_waits_out_a_checkpoint_past_the_round_where_a_launch_does_not():
    # Checkpoints of 150 s a GPU outlast the 100 s round.
    world, sim = _world([dict(ELASTIC, job_id=10), dict(ELASTIC, job_id=11)], "1x2:V100", checkpoint_per_gpu_s=150.0)
    play_round(world, sim, Plan.of([Assignment(0, [0]), Assignment(1, [1])]))
    play_round(world, sim, Plan.of(suspend=[1], resizes=[Resize(0, [0, 1], 64)]))
    assert _done(world) == [100.0, 100.0]  # job 10 paused all round: GPU 1 is free at 250
    play_round(world, sim, Plan(keep=[0]))
    assert _done(world) == [100.0 + 49.0, 100.0]  # then its 1 s in-place pause, to 251
    # A launch onto a GPU a checkpoint holds past the round waits only to the round's end.
    world, sim = _world(
        [dict(ELASTIC, job_id=10), dict(ELASTIC, job_id=11)], "1x1:V100", checkpoint_per_gpu_s=150.0, restore_s=10.0
    )
    play_round(world, sim, Plan.of([Assignment(0, [0])]))
    play_round(world, sim, Plan.of([Assignment(1, [0])], suspend=[0]))
    assert _done(world) == [90.0, 0.0]
    play_round(world, sim, Plan(keep=[1]))
    assert _done(world) == [90.0, 100.0]  # from the boundary, without the restore


PAIR_GRAPH = """
round = 100s;
profile = "profile.csv";
pair_profile = "pairs.csv";
skip_rounds = {skip};
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> MaxMinFairness(space_sharing=true, interval=0) -> GavelRounds -> GavelPlacer -> Launch -> m :: JobMetrics;
"""


@pytest.mark.parametrize("skip", ["false", "true"])
def test_a_partner_finishing_inside_a_round_leaves_the_other_at_the_pair_rate_until_the_round_ends(run_graph, tmp_path, skip):
    # Alone, ja does 10 it/s and jb 12; together, 8 and 9.6 (0.8 of each alone): max-min
    # fairness pairs them all the time.
    (tmp_path / "profile.csv").write_text(
        "model,batch_size,gpu_type,gpus,placement,iters_per_s\nja,1,V100,1,consolidated,10.0\njb,1,V100,1,consolidated,12.0\n"
    )
    (tmp_path / "pairs.csv").write_text(
        "model_a,batch_a,model_b,batch_b,gpu_type,gpus,iters_a,iters_b\n"
        "ja,1,jb,1,V100,1,8.0,9.6\nja,1,ja,1,V100,1,0.0,0.0\njb,1,jb,1,V100,1,0.0,0.0\n"
    )
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, model="ja", batch_size=1, iterations=4040.0),
        dict(job_id=1, arrival_s=0.0, gpus=1, model="jb", batch_size=1, iterations=8640.0),
    ]
    result = run_graph(PAIR_GRAPH.format(skip=skip), jobs, cluster="1x1:V100")
    got = jobs_of(result)
    # ja: 4040 / 8 = 505 s. jb: 4800 by 500, 960 more at the pair rate to 600 (not 9.6 x 5 +
    # 12 x 95), then 2880 alone at 12 it/s: 240 s, to 840.
    assert got[0]["finish_s"] == pytest.approx(505.0) and got[0]["preemptions"] == 0
    assert got[1]["finish_s"] == pytest.approx(840.0) and got[1]["preemptions"] == 0
    # The one GPU is busy from 0 to 840, counted once; the run ends at the 900 boundary.
    assert result.world.busy_gpu_s == pytest.approx(840.0)
    summary = result.reports["m"]["summary"]
    assert summary["end_s"] == 900.0 and summary["utilization"] == pytest.approx(840.0 / 900.0)


@pytest.mark.parametrize("skip", ["false", "true"])
def test_a_run_whose_last_job_finishes_on_a_boundary_ends_at_that_boundary(run_graph, skip):
    graph = f"""
    round = 100s;
    skip_rounds = {skip};
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
    """
    # Arrives at 250, visible at 300, works 100 s: done at 400, the boundary that folds it in.
    jobs = [dict(job_id=0, arrival_s=250.0, gpus=1, duration_s=100.0)]
    result = run_graph(graph, jobs, cluster="1x1:V100")
    summary = result.reports["m"]["summary"]
    assert jobs_of(result)[0]["finish_s"] == 400.0
    assert summary["end_s"] == 400.0 and result.rounds == 3  # 0, then (empty until) 300 and 400
    assert summary["utilization"] == pytest.approx(100.0 / (400.0 - 250.0))  # from the first arrival
    assert summary["makespan_s"] == 150.0


@pytest.mark.parametrize("skip", ["false", "true"])
def test_a_job_a_plan_ends_early_finishes_at_the_boundary_and_frees_its_gpu_without_a_checkpoint(run_graph, skip):
    graph = f"""
    round = 100s;
    checkpoint = 20s;
    skip_rounds = {skip};
    src :: TraceSource(path="trace.csv");
    stop :: LossTermination(threshold=0.26);
    run :: Launch;
    src -> AcceptAll -> JobPool -> stop -> Fifo -> Consolidated -> run -> m :: JobMetrics;
    stop [converged] -> [finish] run;
    """
    # Job 0's loss gap is 1 / (1 + 10 p) after a fraction p of its work: within 0.26 from
    # p = 0.285 (285 s), seen at the 300 boundary. Job 1 waits behind it (a strict queue).
    jobs = [
        dict(job_id=0, arrival_s=0.0, gpus=1, duration_s=1000.0, loss_start=2.0, loss_final=1.0, loss_speed=10.0),
        dict(job_id=1, arrival_s=0.0, gpus=1, duration_s=50.0),
    ]
    got = jobs_of(run_graph(graph, jobs, cluster="1x1:V100"))
    assert (got[0]["finish_s"], got[0]["run_s"], got[0]["status"]) == (300.0, 300.0, "finished")
    # Job 1 starts on the GPU at once: no checkpoint of job 0 holds it.
    assert (got[1]["first_start_s"], got[1]["finish_s"]) == (300.0, 350.0)
