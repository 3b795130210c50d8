"""Dally's lease-based gang release, the per-GPU checkpoint cost, and the baselines of Dally's
evaluation (TiresiasDally, Gandiva), on hand-computed cases on tiny clusters."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.dally import DelayPlacer
from roundhouse.elements.placement.gandiva import Gandiva
from roundhouse.elements.placement.tiresias import TiresiasDally
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Events, Plan, Ranking
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import fails, jobs_of, launch_at_start

REPO = Path(__file__).resolve().parents[1]


def cluster_of(tmp_path, nodes: int, racks: int) -> Cluster:
    """`nodes` machines of 4 GPUs in `racks` racks (machines 2k, 2k+1 in rack k), with Dally's
    network tiers."""
    path = tmp_path / "c.toml"
    per_rack = nodes // racks
    path.write_text(f'name = "tiny"\n[[group]]\nnodes = {nodes}\ngpus_per_node = 4\nmachines_per_rack = {per_rack}\n[tiers]\n')
    return Cluster.parse(str(path))


@pytest.fixture
def tiny(tmp_path):
    return cluster_of(tmp_path, 4, 2)  # GPUs 0-7 rack 0 (machines 0, 1), 8-15 rack 1 (2, 3)


def make_world(cluster, jobs, running=None):
    """jobs: (job_id, gpus, model); running: job id -> GPU ids it holds (launched at 0)."""
    world = World(cluster, ProfileTable.load())
    frame = pl.DataFrame(
        {
            "job_id": [j for j, _, _ in jobs],
            "arrival_s": [0.0] * len(jobs),
            "gpus": [g for _, g, _ in jobs],
            "duration_s": [1e6] * len(jobs),
            "model": [m for _, _, m in jobs],
        }
    )
    batch, _ = world.prepare(frame, "test")
    world.add_jobs(batch)
    launch_at_start(world, running or {})
    return world


def round_plan(placer, world, order, now=300.0, start=True) -> Plan:
    """One round of `placer` over the jobs `order` (job ids, in ranking order): its plan."""
    ctx = Round(world, GraphSettings(), now, 1, Events(time=now))
    ctx.element = placer  # (who gives reasons, when the world keeps a record of them)
    if start:
        placer.start(ctx)
    rows = np.array([world.jobs.row_of(j) for j in order], dtype=np.int64)
    return placer.tick(ctx, Ranking(rows, world.jobs.column("gpus")[rows], backfill=True))


def tick(placer, world, order, now=300.0, start=True, apply=False):
    """One round of `placer` over the jobs `order` (job ids, in ranking order): the plan, as
    ({job id: GPU ids launched}, kept job ids, suspended job ids)."""
    plan = round_plan(placer, world, order, now, start)
    world.check_plan(plan)
    ids = world.jobs.column("job_id")
    launched = {int(ids[a.row]): sorted(int(g) for g in a.gpus) for a in plan.launch}
    kept = sorted(int(ids[r]) for r in plan.keep)
    suspended = sorted(int(ids[r]) for r in plan.suspend)
    if apply:
        world.apply_plan(plan, now)
    return launched, kept, suspended


# --- lease-based gang release (DelayPlacer(release=true)) ---

FULL = {1: [0, 1, 2, 3], 2: [4, 5, 6, 7], 3: [8, 9, 10, 11], 4: [12, 13, 14, 15]}


def leased(**args):
    return DelayPlacer(machine_wait=100.0, rack_wait=200.0, release=True, **args)


def test_a_gang_offered_its_own_gpus_again_keeps_them_at_no_cost(tiny):
    world = make_world(tiny, [(j, 4, "ResNet-50") for j in FULL], FULL)
    placer = leased()
    assert tick(placer, world, [3, 1, 4, 2]) == ({}, [1, 2, 3, 4], [])
    assert placer.counters["preempted"] == 0 and placer.counters["moved"] == 0


def test_at_lease_end_a_higher_ranked_job_takes_the_lowest_ranked_gang(tiny):
    # The cluster is full; job 9 (never ran) ranks first. Every lease ends: it takes the machine
    # of the lowest-ranked gang (job 2, last in the ranking), not the first machine, and the
    # others keep theirs. Job 2 has lost its GPUs; with no machine free and starvation 0 < T_Mc
    # it declines and is suspended (a preemption, paying the checkpoint).
    world = make_world(tiny, [(j, 4, "ResNet-50") for j in FULL] + [(9, 4, "ResNet-50")], FULL)
    placer = leased()
    launched, kept, suspended = tick(placer, world, [9, 1, 3, 4, 2])
    assert launched == {9: [4, 5, 6, 7]}
    assert kept == [1, 3, 4] and suspended == [2]
    assert placer.counters["preempted"] == 1 and placer.counters["declined"] == 0  # nothing left to offer it
    assert placer._clock.since[world.jobs.row_of(2)] == 300.0  # its starvation clock restarts


def test_a_gang_that_lost_part_of_its_gpus_decides_again_as_a_waiting_job(tiny):
    # Jobs 5 and 6 (2 GPUs each) share machine 0, ranked last; job 9 (4 GPUs) ranks first and
    # takes machine 0, the cheapest. Both lost their gangs and nothing is left to offer them:
    # they are suspended.
    running = {1: [4, 5, 6, 7], 3: [8, 9, 10, 11], 4: [12, 13, 14, 15], 5: [0, 1], 6: [2, 3]}
    jobs = [(1, 4, "BERT"), (3, 4, "BERT"), (4, 4, "BERT"), (5, 2, "BERT"), (6, 2, "BERT"), (9, 4, "BERT")]
    world = make_world(tiny, jobs, running)
    placer = leased()
    launched, kept, suspended = tick(placer, world, [9, 1, 3, 4, 5, 6])
    assert launched == {9: [0, 1, 2, 3]}
    assert kept == [1, 3, 4] and suspended == [5, 6]
    assert placer.counters["preempted"] == 2 and placer.counters["declined"] == 0  # nothing left to offer


def test_a_gang_that_lost_part_of_its_gpus_and_declines_has_one_reason_its_timer(tiny):
    # Job 5 (4 GPUs, ranked last) spans machines 0 and 1 (GPUs 2-5); jobs 1 and 2 hold GPUs 1
    # and 7, jobs 3 and 4 machines 2 and 3; GPUs 0 and 6 are idle. Job 9 (2 GPUs) ranks first
    # and takes an idle GPU and one of job 5's (the cheapest gang) on one machine. Job 5 lost
    # part of its gang: starved 0 s, it is offered 1 GPU on that machine and 3 on the other,
    # under its 100 s machine timer it declines and is suspended. Its reason is the timer, and
    # only that: it was offered GPUs, so it was not preempted for the jobs ranked ahead, and
    # the engine adds no plain suspension to it.
    from roundhouse.runtime.explain import Reason, Recorder

    running = {1: [1], 2: [7], 3: [8, 9, 10, 11], 4: [12, 13, 14, 15], 5: [2, 3, 4, 5]}
    jobs = [(1, 1, "BERT"), (2, 1, "BERT"), (3, 4, "BERT"), (4, 4, "BERT"), (5, 4, "BERT"), (9, 2, "BERT")]
    world = make_world(tiny, jobs, running)
    world.explain = record = Recorder(["place", "launch"], ["DelayPlacer", "Launch"], ["", ""])
    record.reserve(len(world.jobs))
    placer = leased()
    placer.name = "place"
    plan = round_plan(placer, world, [9, 1, 2, 3, 4, 5])
    ids = world.jobs.column("job_id")
    assert sorted(int(ids[r]) for r in plan.suspend) == [5] and placer.counters["declined"] == 1
    record.plan(plan, world, 0, 1, 300.0)
    cols = record.arrays()
    five = cols["row"] == world.jobs.row_of(5)
    assert cols["code"][five].tolist() == [Reason.DELAY_MACHINE]
    assert (cols["element"][five].tolist(), cols["a"][five].tolist(), cols["b"][five].tolist()) == ([0], [0], [100])


def test_a_gang_that_lost_part_of_its_gpus_takes_a_machine_that_has_room(tiny):
    # Job 5 (4 GPUs, ranked last) spans machines 0 and 1 (GPUs 2-5); GPUs 0, 1, 6, 7 are idle.
    # Job 9 (4 GPUs) takes machine 0 (its dearest GPU is one of job 5's, the cheapest gang, and
    # machine 0 comes first); job 5 lost half its gang, but machine 1 now has room (its own two
    # GPUs and two idle ones): Algorithm 1 takes a machine at once, whatever the timers.
    running = {5: [2, 3, 4, 5], 3: [8, 9, 10, 11], 4: [12, 13, 14, 15]}
    world = make_world(tiny, [(5, 4, "BERT"), (3, 4, "BERT"), (4, 4, "BERT"), (9, 4, "BERT")], running)
    placer = leased()
    launched, kept, suspended = tick(placer, world, [9, 3, 4, 5])
    assert launched == {9: [0, 1, 2, 3], 5: [4, 5, 6, 7]}
    assert kept == [3, 4] and suspended == [5]
    assert placer.counters["moved"] == 1 and placer.counters["preempted"] == 0


def test_a_spread_gang_moves_to_one_machine_when_one_has_room(tiny):
    # Job 7 (4 GPUs) runs across machines 0 and 1; machine 3 is idle: at the lease's end it
    # moves there (suspended and launched again), as Algorithm 1 takes a machine at once.
    world = make_world(tiny, [(7, 4, "ResNet18"), (8, 4, "ResNet18")], {7: [2, 3, 4, 5], 8: [8, 9, 10, 11]})
    placer = leased()
    launched, kept, suspended = tick(placer, world, [7, 8])
    assert launched == {7: [12, 13, 14, 15]} and kept == [8] and suspended == [7]
    assert placer.counters["moved"] == 1 and placer.counters["preempted"] == 0
    assert placer.counters["machine"] == 1


def test_without_release_running_jobs_keep_their_gpus_whatever_the_ranking(tiny):
    world = make_world(tiny, [(j, 4, "ResNet-50") for j in FULL] + [(9, 4, "ResNet-50")], FULL)
    assert tick(DelayPlacer(machine_wait=100.0, rack_wait=200.0), world, [9, 1, 3, 4, 2]) == ({}, [1, 2, 3, 4], [])


def test_a_checkpoint_cost_per_gpu_delays_the_gpus_of_a_suspended_gang(run_graph):
    # LAS on one machine of 4 GPUs, 300 s rounds, checkpoint 10 s + 2 s per GPU. Job 0 (4 GPUs,
    # 1000 s) runs from 0; job 1 (4 GPUs, 200 s) arrives at 100 and, with less service, takes
    # the GPUs at 300. Job 0 held 4 GPUs: they are free at 300 + 10 + 4 x 2 = 318, when job 1
    # starts; it ends at 518. Job 0 resumes at 600 with 700 s to go (no restore) and ends at
    # 1300 (a job launched on idle GPUs pays nothing).
    graph = """
    round = 300s;
    checkpoint = 10s;
    checkpoint_per_gpu = 2s;
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> m :: JobMetrics;
    """
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 1000.0},
        {"job_id": 1, "arrival_s": 100.0, "gpus": 4, "duration_s": 200.0},
    ]
    got = jobs_of(run_graph(graph, jobs, cluster="1x4:V100"))
    assert got[1]["finish_s"] == pytest.approx(518.0)
    assert got[0]["finish_s"] == pytest.approx(1300.0)
    # Without the per-GPU part only the fixed 10 s: job 1 ends at 510.
    got = jobs_of(run_graph(graph.replace("checkpoint_per_gpu = 2s;", ""), jobs, cluster="1x4:V100"))
    assert got[1]["finish_s"] == pytest.approx(510.0)


# --- TiresiasDally ---


def test_tiresias_dally_consolidates_high_skew_models_on_the_best_fit_machine_only(tmp_path, tiny):
    # Machine 0 has 3 GPUs free, machine 1 has 2, machines 2-3 have 4.
    running = {100: [0], 101: [4, 5]}
    jobs = [(100, 1, "ResNet-50"), (101, 2, "ResNet-50"), (1, 2, "VGG11"), (2, 2, "ResNet-50")]
    # A high-skew model (VGG11) takes the machine with the fewest free GPUs that holds it.
    world = make_world(tiny, jobs, running)
    assert tick(TiresiasDally(), world, [100, 101, 1])[0] == {1: [6, 7]}
    # A low-skew one (ResNet-50) the first machine with room.
    world = make_world(tiny, jobs, running)
    assert tick(TiresiasDally(), world, [100, 101, 2])[0] == {2: [1, 2]}


def test_tiresias_dally_high_skew_jobs_never_relax_while_the_others_take_any_tier(tiny):
    # Two GPUs free on each machine, four on each rack.
    half = {100: [0, 1], 101: [4, 5], 102: [8, 9], 103: [12, 13]}
    base = [(j, 2, "ResNet-50") for j in half]
    world = make_world(tiny, base + [(1, 4, "MobileNetV3"), (2, 4, "BERT-large"), (3, 8, "ResNet18")], half)
    placer = TiresiasDally()
    launched, kept, _ = tick(placer, world, [100, 101, 102, 103, 1, 2, 3])
    # MobileNetV3 (high skew) waits for a machine however long; BERT takes the first rack with
    # room at once; the 8-GPU ResNet18 finds only 4 GPUs left.
    assert launched == {2: [2, 3, 6, 7]} and kept == [100, 101, 102, 103]
    assert placer.counters["consolidated"] == 1
    # With two more GPUs free on rack 1, ResNet18 (low skew, 8 GPUs, no rack has 8) takes the
    # lowest-numbered free GPUs across both racks at once.
    world = make_world(tiny, base[:3] + [(3, 8, "ResNet18")], {100: [0, 1], 101: [4, 5], 102: [8, 9]})
    assert tick(TiresiasDally(), world, [100, 101, 102, 3])[0] == {3: [2, 3, 6, 7, 10, 11, 12, 13]}


def test_tiresias_dally_spreads_low_skew_jobs_across_racks_but_not_high_skew_ones(tmp_path):
    cluster = cluster_of(tmp_path, 6, 3)  # racks of 8 GPUs: 0-7, 8-15, 16-23
    half = {100: [0, 1, 2, 3], 101: [8, 9, 10, 11], 102: [16, 17, 18, 19]}  # 4 free per rack
    base = [(j, 4, "ResNet-50") for j in half]
    world = make_world(cluster, base + [(1, 8, "AlexNet"), (2, 8, "ResNet-50")], half)
    launched, _, _ = tick(TiresiasDally(), world, [100, 101, 102, 1, 2])
    assert launched == {2: [4, 5, 6, 7, 12, 13, 14, 15]}  # the AlexNet job waits for a rack
    world = make_world(cluster, base[:2] + [(1, 8, "AlexNet")], {100: [0, 1, 2, 3], 101: [8, 9, 10, 11]})
    assert tick(TiresiasDally(), world, [100, 101, 1])[0] == {1: list(range(16, 24))}  # the free rack


# --- Gandiva ---


def test_gandiva_places_small_jobs_by_affinity_to_their_gpu_demand(tiny):
    world = make_world(tiny, [(1, 2, "BERT"), (2, 2, "BERT"), (3, 1, "BERT")])
    placer = Gandiva(seed=0)
    # Round 1: job 1 (2 GPUs) on the first unclaimed machine with the most free GPUs: machine 0,
    # which now has affinity 2.
    assert tick(placer, world, [1], apply=True)[0] == {1: [0, 1]}
    # Round 2: job 2 (2 GPUs) goes to machine 0 (affinity 2), not to an empty machine; job 3
    # (1 GPU) to an unclaimed machine (machine 1).
    launched, kept, _ = tick(placer, world, [2, 3], now=600.0, start=False)
    assert launched == {2: [2, 3], 3: [4]} and kept == [1]
    assert placer.counters["affinity"] == 1


def test_gandiva_never_spreads_a_job_that_fits_one_machine(tiny):
    # One GPU free on each machine: a 2-GPU job waits, a 1-GPU job behind it runs (backfill).
    running = {100: [0, 1, 2], 101: [4, 5, 6], 102: [8, 9, 10], 103: [12, 13, 14]}
    world = make_world(tiny, [(j, 3, "BERT") for j in running] + [(1, 2, "BERT"), (2, 1, "BERT")], running)
    launched, kept, suspended = tick(Gandiva(seed=0), world, [1, 2])
    assert launched == {2: [3]} and suspended == [] and kept == sorted(running)


def test_gandiva_spreads_large_jobs_at_random_and_reproducibly(tiny):
    world = make_world(tiny, [(1, 6, "BERT")])
    first = tick(Gandiva(seed=3), world, [1])[0][1]
    assert len(set(first)) == 6 and first == tick(Gandiva(seed=3), world, [1])[0][1]
    others = {tuple(tick(Gandiva(seed=s), world, [1])[0][1]) for s in range(8)}
    assert len(others) > 1  # random, not the lowest-numbered GPUs


def test_gandiva_migrates_a_job_spread_over_racks_when_a_rack_frees_up(tmp_path):
    cluster = cluster_of(tmp_path, 6, 3)  # racks of 8 GPUs: 0-7, 8-15, 16-23
    # (job 3 fills the rest of rack 1: with its own GPUs there, rack 1 would hold job 1 too)
    held = {1: [4, 5, 6, 7, 8, 9, 10, 11], 2: [0, 1, 2, 3], 3: [12, 13, 14, 15]}
    world = make_world(cluster, [(1, 8, "BERT"), (2, 4, "BERT"), (3, 4, "BERT")], held)
    placer = Gandiva(seed=0)
    launched, kept, suspended = tick(placer, world, [2, 3, 1])
    assert launched == {1: list(range(16, 24))} and suspended == [1] and kept == [2, 3]
    assert placer.counters["migrated"] == 1
    # A job already on one rack stays.
    world = make_world(cluster, [(1, 8, "BERT")], {1: list(range(8, 16))})
    assert tick(Gandiva(seed=0), world, [1]) == ({}, [1], [])


# --- the graphs ---

GRAPHS = ["dally", "dally-manual", "dally-nowait", "dally-consolidated", "tiresias-dally", "gandiva"]


@pytest.mark.parametrize("name", GRAPHS)
def test_each_dally_graph_runs_in_the_simulator(name):
    graph = compile_file(REPO / "graphs" / f"{name}.sched")
    assert graph.settings.cluster == "dally:2" and graph.settings.checkpoint_per_gpu == 1.0
    result = simulate(graph, None, until=6 * 3600.0)
    assert result.counters["place"]["launched"] > 0
    started = result.reports["report"]["jobs"].filter(
        pl.col("first_start_s").is_not_null() & pl.col("first_start_s").is_not_nan()
    )
    assert len(started) > 0


# --- bad input on Dally's graphs: located errors, never a traceback ---

BAD_ROWS = [
    ("1,0,200,100,BERT,,", "job 1 asks for 200 GPUs but the cluster has 128"),
    ("3,0,2,100,LM,,", "job 3: model 'LM' has no communication profile, which a cluster with network tiers needs"),
]


@pytest.mark.parametrize("row, message", BAD_ROWS)
@pytest.mark.parametrize("name", ["dally", "gandiva"])
def test_a_bad_trace_row_on_a_dally_graph_is_a_located_error(tmp_path, capsys, name, row, message):
    trace = tmp_path / "bad.csv"
    trace.write_text(f"job_id,arrival_s,gpus,duration_s,model,cpus,memory_gb\n0,0,8,100,VGG11,,\n{row}\n")
    err = fails(capsys, "run", REPO / "graphs" / f"{name}.sched", "--trace", trace, "--quiet")
    assert err.startswith(f"error: {trace}: error: ") or err.startswith(f"{trace}: error: ")
    assert message in err


def test_a_cluster_whose_racks_do_not_add_up_is_located_by_check(tmp_path, capsys):
    spec = tmp_path / "racks.toml"
    spec.write_text('name = "bad"\n[[group]]\nnodes = 10\ngpus_per_node = 8\nmachines_per_rack = 4\n[tiers]\n')
    graph = tmp_path / "g.sched"
    text = (REPO / "graphs" / "dally-manual.sched").read_text().replace('"dally:2"', f'"{spec}"')
    graph.write_text(text.replace("../traces/samples", str(REPO / "traces" / "samples")))
    err = fails(capsys, "check", graph)
    assert f"{graph}:" in err and "setting 'cluster'" in err
    assert "'machines_per_rack' (4) does not divide 'nodes' (10) into whole racks" in err


def test_tiresias_dally_refuses_a_high_skew_model_it_cannot_look_up(capsys):
    err = fails(
        capsys,
        "run",
        REPO / "graphs" / "tiresias-dally.sched",
        "--set",
        'place.high_skew=["VGG11", "Inception9"]',
        "--until",
        "1h",
    )
    assert "place (TiresiasDally): high_skew names models with no communication profile: Inception9" in err
