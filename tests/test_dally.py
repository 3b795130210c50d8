"""Dally's elements on hand-computed cases: Algorithm 1 (DelayPlacer), Algorithm 2 (DelayTuner),
Nw_sens and its tie-breaks (NetworkSensitive), and the graph on Dally's batch workload."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.dally import DelayPlacer, DelayTuner
from roundhouse.elements.policies.dally import NetworkSensitive, network_sensitivity
from roundhouse.errors import RoundhouseError
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.context import Round
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Active, Events, Ranking
from roundhouse.runtime.world import World
from tests.conftest import launch_at_start

REPO = Path(__file__).resolve().parents[1]

# 4 machines of 4 GPUs in 2 racks: machines 0-1 (GPUs 0-7) in rack 0, 2-3 (GPUs 8-15) in rack 1.
TINY = 'name = "tiny"\n[[group]]\nnodes = 4\ngpus_per_node = 4\nracks = 2\n'


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return Cluster.parse(str(path))


def make_world(cluster, jobs, running=None):
    """jobs: (job_id, gpus, arrival_s); running: job_id -> GPU ids it holds (launched at 0)."""
    world = World(cluster, profile=None)
    frame = pl.DataFrame(
        {
            "job_id": [j for j, _, _ in jobs],
            "arrival_s": [float(a) for _, _, a in jobs],
            "gpus": [g for _, g, _ in jobs],
            "duration_s": [1e6] * len(jobs),
        }
    )
    batch, _ = world.prepare(frame, "test")
    world.add_jobs(batch)
    launch_at_start(world, running or {})
    return world


def offer(placer, world, order, now, started=True):
    """One round of `placer` at `now` over the jobs `order` (job ids): {job id: GPU ids}."""
    ctx = Round(world, GraphSettings(), now, 1, Events(time=now))
    if started:
        placer.start(ctx)
    rows = np.array([world.jobs.row_of(j) for j in order])
    plan = placer.tick(ctx, Ranking(rows, world.jobs.column("gpus")[rows]))
    world.check_plan(plan)
    ids = world.jobs.column("job_id")
    return {int(ids[a.row]): sorted(a.gpus) for a in plan.launch}


# Running jobs hold GPUs 0-1, 4-5, 8-9 and 12-13: 2 free GPUs on each machine, 4 on each rack.
HALF = {100: [0, 1], 101: [4, 5], 102: [8, 9], 103: [12, 13]}


def fragmented(tiny, waiting):
    jobs = [(j, 2, 0.0) for j in HALF] + waiting
    return make_world(tiny, jobs, HALF)


def manual():
    return DelayPlacer(machine_wait=100.0, rack_wait=200.0)


def test_a_job_that_fits_one_machine_takes_the_first_such_machine_at_once(tiny):
    world = fragmented(tiny, [(1, 2, 0.0)])
    placer = manual()
    assert offer(placer, world, [1], now=0.0) == {1: [2, 3]}
    assert placer.counters["machine"] == 1 and placer.counters["declined"] == 0


def test_before_the_machine_timer_a_job_declines_and_the_offer_passes_to_the_next_job(tiny):
    # Job 1 wants 4 GPUs: no machine has 4 free; it has starved 50 s < T_Mc = 100 s.
    world = fragmented(tiny, [(1, 4, 0.0), (2, 2, 0.0)])
    placer = manual()
    assert offer(placer, world, [1, 2], now=50.0) == {2: [2, 3]}
    assert placer.counters["declined"] == 1 and placer.counters["machine"] == 1


def test_after_the_machine_timer_a_job_takes_the_first_rack_with_room(tiny):
    world = fragmented(tiny, [(1, 4, 0.0)])
    placer = manual()
    assert offer(placer, world, [1], now=150.0) == {1: [2, 3, 6, 7]}
    assert placer.counters["rack"] == 1


def test_before_the_rack_timer_a_job_that_fits_no_rack_declines(tiny):
    # 6 GPUs: no machine (2 free each), no rack (4 free each); 150 s >= T_Mc but < T_Rk = 200 s.
    world = fragmented(tiny, [(1, 6, 0.0)])
    placer = manual()
    assert offer(placer, world, [1], now=150.0) == {}
    assert placer.counters["declined"] == 1


def test_after_the_rack_timer_a_job_takes_free_gpus_anywhere(tiny):
    world = fragmented(tiny, [(1, 6, 0.0)])
    placer = manual()
    assert offer(placer, world, [1], now=200.0) == {1: [2, 3, 6, 7, 10, 11]}
    assert placer.counters["network"] == 1


def test_the_starvation_clock_starts_at_arrival(tiny):
    # Arrived at 100 s: at 150 s it has starved 50 s, less than T_Mc.
    world = fragmented(tiny, [(1, 4, 100.0)])
    assert offer(manual(), world, [1], now=150.0) == {}
    world = fragmented(tiny, [(1, 4, 100.0)])
    assert offer(manual(), world, [1], now=200.0) == {1: [2, 3, 6, 7]}


def test_timers_are_zero_for_jobs_larger_than_a_machine_or_a_rack(tiny):
    placer = manual()
    world = make_world(tiny, [(1, 6, 0.0), (2, 9, 0.0)])
    ctx = Round(world, GraphSettings(), 0.0, 0, Events(time=0.0))
    placer.start(ctx)
    assert placer.timers(4, 0.0) == (100.0, 200.0)
    assert placer.timers(6, 0.0) == (0.0, 200.0)  # more than a machine (4): no machine timer
    assert placer.timers(9, 0.0) == (0.0, 0.0)  # more than a rack (8): neither
    # On an empty cluster at starvation 0: 6 GPUs go on the first rack, 9 anywhere.
    world = make_world(tiny, [(1, 6, 0.0)])
    assert offer(manual(), world, [1], now=0.0) == {1: [0, 1, 2, 3, 4, 5]}
    world = make_world(tiny, [(2, 9, 0.0)])
    assert offer(manual(), world, [2], now=0.0) == {2: list(range(9))}


def test_no_wait_and_fully_consolidated_modes(tiny):
    world = fragmented(tiny, [(1, 4, 0.0)])
    assert offer(DelayPlacer(mode="no_wait"), world, [1], now=0.0) == {1: [2, 3, 6, 7]}
    placer = DelayPlacer(mode="fully_consolidated")
    world = fragmented(tiny, [(1, 4, 0.0)])
    assert offer(placer, world, [1], now=1e9) == {}  # waits for one machine, however long
    assert placer.timers(4, 0.0) == (np.inf, np.inf) and placer.timers(6, 0.0) == (0.0, np.inf)
    assert placer.timers(9, 0.0) == (0.0, 0.0)


def test_a_start_restarts_the_clock_and_tuned_timers_learn_from_accepted_waits(tiny):
    world = fragmented(tiny, [(1, 4, 0.0)])
    placer = DelayPlacer(tuned=True, history=1000.0)
    # No history: tuned timers are 0, so the job takes a rack at once, and its wait is recorded.
    assert offer(placer, world, [1], now=30.0) == {1: [2, 3, 6, 7]}
    assert placer._tuner.waits("rack", 4, 30.0) == [30.0]
    assert placer.timers(4, 30.0) == (0.0, 30.0)  # one entry: sample sigma 0
    assert placer._clock.since[world.jobs.row_of(1)] == 30.0


def test_bad_arguments_are_refused(run_graph):
    graph = 'round = 1min;\nsrc :: TraceSource(path="trace.csv");\nsrc -> AcceptAll -> JobPool -> NetworkSensitive -> DelayPlacer{} -> Launch -> JobMetrics;\n'
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 60.0}]
    for args, words in (
        ("(machine_wait=2h, rack_wait=1h)", "rack_wait"),
        ("(mode=no_wait, tuned=true)", "tuned"),
        ("(sigma=median)", "'sample', 'population'"),
    ):
        with pytest.raises(RoundhouseError) as caught:
            run_graph(graph.format(args), jobs, cluster="2x4:V100")
        assert words in str(caught.value)
    with pytest.raises(RoundhouseError) as caught:
        run_graph(graph.format(""), jobs, cluster="1x4:V100,1x4:K80")
    assert "DelayPlacer" in str(caught.value) and "one GPU type" in str(caught.value)


# --- Algorithm 2 ---


def test_the_tuner_window_drops_old_waits():
    tuner = DelayTuner(window=100.0)
    tuner.record("machine", 2, 10.0, now=0.0)
    tuner.record("machine", 2, 20.0, now=50.0)
    tuner.record("machine", 2, 30.0, now=120.0)
    tuner.record("machine", 4, 99.0, now=120.0)  # another demand: another list
    assert tuner.waits("machine", 2, 120.0) == [20.0, 30.0]  # recorded at 0 < 120 - 100
    assert tuner.waits("machine", 2, 151.0) == [30.0]
    assert tuner.waits("rack", 2, 151.0) == []


def test_the_tuner_timer_is_mean_plus_two_sigma_sample_or_population():
    for sigma, expected in (("sample", 20.0 + 2 * 10.0), ("population", 20.0 + 2 * np.sqrt(200.0 / 3.0))):
        tuner = DelayTuner(window=1000.0, sigma=sigma)
        for w in (10.0, 20.0, 30.0):
            tuner.record("rack", 8, w, now=0.0)
        tuner.record("machine", 8, 5.0, now=0.0)
        t_mc, t_rk = tuner.timers(8, now=0.0)
        assert t_rk == pytest.approx(expected) and t_mc == 5.0


def test_the_tuner_clamps_and_drops_short_waits():
    tuner = DelayTuner(window=100.0, machine_floor=50.0, rack_floor=60.0, capped=True, min_wait=5.0)
    assert tuner.timers(2, 0.0) == (50.0, 60.0)  # no history: the floors
    tuner.record("machine", 2, 4.0, now=0.0)  # shorter than min_wait: not kept
    assert tuner.waits("machine", 2, 0.0) == []
    tuner.record("machine", 2, 90.0, now=0.0)
    tuner.record("rack", 2, 150.0, now=0.0)
    assert tuner.timers(2, 0.0) == (80.0, 100.0)  # capped at 0.8 x window and window
    uncapped = DelayTuner(window=100.0)
    uncapped.record("rack", 2, 150.0, now=0.0)
    assert uncapped.timers(2, 0.0) == (0.0, 150.0)


# --- Nw_sens ---


def test_nw_sens_is_the_work_weighted_harmonic_mean_placement_efficiency():
    # Each history: (work, efficiency) segments; a segment at efficiency s takes work / (rate s).
    histories = {0: [(100.0, 1.0), (100.0, 0.5)], 1: [(300.0, 0.8)], 2: [], 3: [(50.0, 0.25), (150.0, 1.0)]}
    world = make_world(Cluster.parse("1x4:V100"), [(j, 1, 0.0) for j in histories])
    rate = world.jobs.column("reference_rate")
    for job, segments in histories.items():
        row = world.jobs.row_of(job)
        for work, s in segments:
            world.apply_progress(
                np.array([row]), np.array([work]), np.array([work / (rate[row] * s)]), np.array([work / (rate[row] * s)])
            )
    expected = {0: 200.0 / 300.0, 1: 0.8, 2: 0.0, 3: 200.0 / 350.0}
    rows = np.array([world.jobs.row_of(j) for j in histories])
    got = network_sensitivity(world.jobs.column("done")[rows], world.jobs.column("run_s")[rows], rate[rows])
    assert got.tolist() == pytest.approx([expected[j] for j in histories])
    policy = NetworkSensitive()
    ctx = Round(world, GraphSettings(), 1000.0, 1, Events(time=1000.0))
    policy.start(ctx)
    ranking = policy.tick(ctx, _active(world, rows))
    ids = world.jobs.column("job_id")[ranking.rows].tolist()
    assert ids == [2, 3, 0, 1]  # never ran first, then lowest Nw_sens
    assert policy.counters["never_ran"] == 1


def _active(world, rows):
    return Active(world.jobs.reader, rows)


def test_ties_go_to_fewer_gpus_held_then_earlier_clock_then_lower_job_id(tiny):
    # None has run, so all have Nw_sens 0. Jobs 0 and 7 were just launched (on 2 GPUs and 1);
    # 5 and 3 arrived at 0 and 1 at 10, all waiting.
    world = make_world(tiny, [(0, 2, 0.0), (7, 1, 0.0), (5, 1, 0.0), (3, 1, 0.0), (1, 1, 10.0)], {0: [0, 1], 7: [2]})
    rows = np.array([world.jobs.row_of(j) for j in (0, 7, 5, 3, 1)])
    policy = NetworkSensitive()
    ctx = Round(world, GraphSettings(), 20.0, 1, Events(time=20.0))
    policy.start(ctx)
    ranking = policy.tick(ctx, _active(world, rows))
    assert world.jobs.column("job_id")[ranking.rows].tolist() == [3, 5, 1, 7, 0]


# --- the graph ---


def test_the_dally_graph_checks_and_runs():
    graph = compile_file(REPO / "graphs" / "dally.sched")
    assert graph.settings.cluster == "dally:2"
    result = simulate(graph, None, until=2 * 86400.0)
    place = result.counters["place"]
    assert place["launched"] > 0 and place["launched"] == place["machine"] + place["rack"] + place["network"]
    finished = result.reports["report"]["jobs"].filter(pl.col("finish_s").is_not_nan() & pl.col("finish_s").is_not_null())
    assert 0 < len(finished) < 500


def test_arguments_that_would_have_no_effect_are_refused(run_graph, tiny):
    graph = 'round = 1min;\nsrc :: TraceSource(path="trace.csv");\nsrc -> AcceptAll -> JobPool -> NetworkSensitive -> DelayPlacer{} -> Launch -> JobMetrics;\n'
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 60.0}]
    for args, words in (
        ("(tuned=true, machine_wait=30h)", "machine_wait has no effect with tuned=true"),
        ("(tuned=true, rack_wait=1h)", "rack_wait has no effect with tuned=true"),
        ("(mode=no_wait, machine_wait=1h)", "machine_wait has no effect with mode=no_wait"),
        ("(mode=fully_consolidated, rack_wait=1h)", "rack_wait has no effect with mode=fully_consolidated"),
        ("(sigma=population)", "sigma is an auto-tuner argument and has no effect without tuned=true"),
        ("(machine_wait=1h, capped=true)", "capped is an auto-tuner argument"),
        ("(history=6h)", "history is an auto-tuner argument"),
        ("(machine_wait=30h)", "the default rack_wait (24h) is shorter than machine_wait (30h)"),
    ):
        with pytest.raises(RoundhouseError) as caught:
            run_graph(graph.format(args), jobs, cluster="2x4:V100")
        assert words in str(caught.value)
    # What does have an effect is accepted, and the defaults are Dally-manual's and the paper's.
    assert (DelayPlacer().machine_timer, DelayPlacer().rack_timer) == (12 * 3600.0, 24 * 3600.0)
    placer = DelayPlacer(tuned=True, sigma="population", capped=True, machine_floor=60.0)
    placer.start(Round(make_world(tiny, [(1, 1, 0.0)]), GraphSettings(), 0.0, 1, Events(time=0.0)))
    assert (placer._tuner.ddof, placer._tuner.capped, placer._tuner.machine_floor, placer._tuner.window) == (
        0,
        True,
        60.0,
        86400.0,
    )
