"""Four elements, checked against their papers' notes: EffectiveThroughput groups the jobs
without a value of `by` apart (as Hierarchical takes them to be an entity of their own), not
under a value named "None"; MaxMinFairness' objective counter does not move when every weight
is scaled alike; Gandiva's migration counts the GPUs the move itself frees; and ONES grows a
1-GPU job on a cluster of 2 or 3 GPUs, where its scale-down used to undo every doubling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from roundhouse.elements.placement.gandiva import Gandiva
from roundhouse.elements.policies import ones_search as s
from roundhouse.traces.jobs import FINISHED
from tests.test_dally_baselines import cluster_of, make_world, tick
from tests.test_gavel_objectives import _run as run_objectives
from tests.test_gavel_solvers import _run as run_solver

# --- EffectiveThroughput(by=...) ---


def test_jobs_without_a_value_of_by_are_a_group_of_their_own(tmp_path):
    # Three V100 jobs at V100 speed, one each: a user spelt "None", one with no user, one spelt
    # "(none)". Each is a reference GPU of work every round, in a column of its own.
    users = ["None", None, "(none)"]
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="ja", iterations=7200.0, user=u) for i, u in enumerate(users)]
    result = run_objectives(tmp_path, jobs, 'run -> w :: EffectiveThroughput(by="user");\n', cluster="1x3:V100")
    series = result.reports["w"]["throughput_series"]
    assert series.columns == ["time_s", "total", "user=(none)", "None", "(none)"]  # (values sorted, then "(none)")
    assert series["total"].to_list() == pytest.approx([3.0] * 10)
    for column in ("None", "user=(none)", "(none)"):
        assert series[column].to_list() == pytest.approx([1.0] * 10)


def test_jobs_missing_a_number_value_of_by_are_a_group_of_their_own(tmp_path):
    # (a number column's missing value is NaN: its jobs are "(none)", not a value "nan")
    jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="ja", iterations=7200.0, team=t) for i, t in enumerate([7, None, None])]
    result = run_objectives(tmp_path, jobs, 'run -> w :: EffectiveThroughput(by="team");\n', cluster="1x3:V100")
    series = result.reports["w"]["throughput_series"]
    assert series.columns[-1] == "(none)" and not any(c.lower() in ("nan", "none") for c in series.columns)
    assert series["(none)"].to_list() == pytest.approx([2.0] * 10)
    assert series.drop("time_s", "total", "(none)").to_series().to_list() == pytest.approx([1.0] * 10)


# --- MaxMinFairness' objective counter ---

ONE_MODEL = "model,batch_size,gpu_type,gpus,placement,iters_per_s\nja,1,V100,1,consolidated,2.0\n"


@pytest.mark.parametrize("water_filling", ["false", "true"])
def test_the_objective_does_not_move_when_every_weight_is_scaled_alike(tmp_path, water_filling):
    # Five like jobs on 4 GPUs: each gets 4/5 of a GPU, its normalized throughput 4/5, whatever
    # their common weight. (Before, weight 5 read 4/25.)
    solver = f"MaxMinFairness(water_filling={water_filling})"
    seen = {}
    for weight in (1.0, 5.0, 0.25):
        jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="ja", iterations=1e6, weight=weight) for i in range(5)]
        graph, _ = run_solver(tmp_path, solver, jobs, "4x1:V100", ONE_MODEL)
        seen[weight] = graph.elements["solve"].counters["objective"]
    assert seen == pytest.approx({1.0: 0.8, 5.0: 0.8, 0.25: 0.8}, abs=1e-6)


def test_the_objective_of_unequal_weights_keeps_only_their_ratios(tmp_path):
    # §4.3's jobs (weights 3:1:1:1 on 4 GPUs): the first level gives a third of a GPU per unit of
    # weight; over the mean weight that reads 0.5, for 3:1:1:1 as for 6:2:2:2.
    for weights in ([3.0, 1, 1, 1], [6.0, 2, 2, 2]):
        jobs = [dict(job_id=i, arrival_s=0.0, gpus=1, model="ja", iterations=1e6, weight=w) for i, w in enumerate(weights)]
        graph, _ = run_solver(tmp_path, "MaxMinFairness", jobs, "4x1:V100", ONE_MODEL)
        assert graph.elements["solve"].counters["objective"] == pytest.approx(0.5, abs=1e-6)


# --- Gandiva's migration ---


def test_gandiva_counts_the_gpus_a_move_frees_in_a_rack(tmp_path):
    # Two racks of 8 GPUs (0-7, 8-15). An 8-GPU job holds 4-7 and 8-11; 0-3 and 12-15 are free.
    # No rack has 8 free GPUs, but either holds the job once it gives its own back, as the
    # authors' simulator's job does before it is placed again: it moves into rack 0, keeping
    # 4-7. (Before, it stayed spread over both racks.)
    cluster = cluster_of(tmp_path, 4, 2)
    world = make_world(cluster, [(1, 8, "MobileNetV3")], {1: [4, 5, 6, 7, 8, 9, 10, 11]})
    placer = Gandiva(seed=0)
    assert tick(placer, world, [1]) == ({1: list(range(8))}, [], [1])
    assert placer.counters["migrated"] == 1
    # With another job on GPUs 0-1, rack 0 has room for 6 (2 free, 4 its own): it goes to rack 1.
    world = make_world(cluster, [(1, 8, "MobileNetV3"), (2, 2, "BERT")], {1: [4, 5, 6, 7, 8, 9, 10, 11], 2: [0, 1]})
    assert tick(Gandiva(seed=0), world, [2, 1]) == ({1: list(range(8, 16))}, [2], [1])


def test_gandiva_moves_a_second_job_onto_gpus_the_first_move_freed(tmp_path):
    # Three racks of 8. Job 1 holds 4-7 and 8-11; job 2 holds 12-15 and 16-19. Job 1 moves into
    # rack 0 (its own 4-7 and the free 0-3), which frees 8-11: job 2 then has rack 1 to itself.
    cluster = cluster_of(tmp_path, 6, 3)
    held = {1: [4, 5, 6, 7, 8, 9, 10, 11], 2: [12, 13, 14, 15, 16, 17, 18, 19]}
    world = make_world(cluster, [(1, 8, "MobileNetV3"), (2, 8, "MobileNetV3")], held)
    launched, kept, suspended = tick(Gandiva(seed=0), world, [1, 2])
    assert launched == {1: list(range(8)), 2: list(range(8, 16))} and kept == [] and suspended == [1, 2]


# --- ONES on a cluster of 2 or 3 GPUs ---


def test_the_artifacts_scale_down_does_not_undo_a_1_gpu_jobs_doubling():
    # Two GPUs: a 1-GPU job holds half the cluster, so it is the scale-down's one candidate;
    # run past the median, its shrink leaves it at 1 GPU, which must not undo the doubling.
    got = s.artifact_limits(
        np.array([1]), np.array([2.0]), np.array([True]), np.array([1]), np.array([300.0]), np.array([2]), 2, lambda: 100.0
    )
    assert got.tolist() == [2]
    # A 4-GPU job on 8 GPUs, shrunk by the rule to 2, still shrinks.
    got = s.artifact_limits(
        np.array([4]), np.array([2.0]), np.array([True]), np.array([4]), np.array([300.0]), np.array([8]), 8, lambda: 100.0
    )
    assert got.tolist() == [2]


def _ones_run(tmp_path: Path, cluster: str) -> list[int]:
    """A short CoLA job at 0 and a longer one at 100 s, each asking for 1 GPU: the most GPUs each
    held at once."""
    from roundhouse import Simulation

    (tmp_path / "jobs.csv").write_text(
        "time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus\n"
        "0,bert,cola,3000,5,16,5.00E-06,2.00E-05,0.8,1\n100,bert,cola,8000,5,16,5.00E-06,2.00E-05,0.8,1\n"
    )
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 10s;\ncluster = "{cluster}";\nelastic_profile = "ones";\nresize_in_place = 1s;\nresize_restart = 20s;\n'
        'TraceSource(path="jobs.csv") -> AcceptAll -> JobPool -> Ones(seed=0) -> Launch -> JobMetrics;\n'
    )
    sim = Simulation(str(graph))
    most = [0, 0]
    while sim.step():
        holder = np.asarray(sim.world.holder)
        most = [max(most[j], int((holder == j).sum())) for j in range(2)]
    assert (sim.world.jobs.column("status") == FINISHED).all()
    return most


@pytest.mark.parametrize(("cluster", "grows_to"), [("1x2:V100", 2), ("1x3:V100", 3)])
def test_ones_grows_a_1_gpu_job_on_a_cluster_of_2_or_3_gpus(tmp_path, cluster, grows_to):
    # The second job runs alone for minutes, past the median run time; before, it stayed on 1 GPU.
    assert _ones_run(tmp_path, cluster)[1] == grows_to
