"""Event skipping: rounds in which nothing can change are not ticked, and every job's times are
those of ticking every round."""

from pathlib import Path

import attrs
import numpy as np
import polars as pl
import pytest

from roundhouse.elements.policies.base import first_swap_s
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate

GRAPHS = Path(__file__).resolve().parents[1] / "graphs"
COLUMNS = ("arrival_s", "first_start_s", "finish_s", "service", "run_s", "done", "preemptions", "launches")


def run_both(path: Path, until: float | None = None, **settings):
    """The graph run with skipping off and on: (result off, result on)."""
    results = []
    for skip in (False, True):
        graph = compile_file(path)
        graph = attrs.evolve(graph, settings=attrs.evolve(graph.settings, skip_rounds=skip, **settings))
        results.append(simulate(graph, until=until))
    return results


def assert_same(off, on) -> None:
    assert (on.rounds, on.end_s, on.stop_reason) == (off.rounds, off.end_s, off.stop_reason)
    assert len(on.world.jobs) == len(off.world.jobs)
    for name in COLUMNS:  # bit for bit (NaN: not started, not finished)
        np.testing.assert_array_equal(on.world.jobs.column(name), off.world.jobs.column(name), err_msg=name)
    timeless = lambda counters: {el: {k: v for k, v in c.items() if not k.endswith("_ms")} for el, c in counters.items()}  # noqa: E731
    assert timeless(on.counters) == timeless(off.counters)
    assert off.skipped_rounds == 0


def assert_same_reports(off, on, path: str = "") -> None:
    """The sinks' reports, table for table and number for number."""
    if isinstance(off, pl.DataFrame):
        assert off.equals(on), path
    elif isinstance(off, dict):
        assert off.keys() == on.keys(), path
        for key in off:
            assert_same_reports(off[key], on[key], f"{path}/{key}")
    else:
        assert off == on or (off != off and on != on), (path, off, on)  # (NaN: the same)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "hours", "skips"),
    [
        ("las.sched", 600, None),
        ("fifo.sched", 600, None),
        ("srtf.sched", 600, None),
        ("tiresias.sched", 2, None),
        ("gavel-las.sched", 40, None),
        ("dally.sched", 30, None),
        # (Themis: arrivals every 15 minutes on average, and rho's order ends a stretch often)
        ("themis.sched", 150, 4),
        ("themis.sched", 600, 2),
        # (Optimus: most rounds either swap two jobs' order by remaining time or change a choice
        # of its greedy of extra GPUs; it first resizes at hour 61; arrivals end near hour 250)
        ("optimus.sched", 96, 100),
        ("optimus.sched", 600, 4),
        ("blox-accept-1.2x.sched", 300, None),
    ],
)
def test_graphs_give_the_same_times_with_and_without_skipping(name, hours, skips):
    off, on = run_both(GRAPHS / name, until=hours * 3600.0)
    assert_same(off, on)
    assert_same_reports(off.reports, on.reports)
    if skips is not None:  # (at least one round in `skips` passes untouched)
        assert on.skipped_rounds > on.rounds // skips


@pytest.mark.parametrize("costs", ["", "checkpoint = 20s;\nrestore = 30s;\n"])
def test_optimus_passes_the_rounds_in_which_its_choices_hold(tmp_path, costs):
    # Two GPU types, jobs resized and moved between them; with a checkpoint and restore, a
    # change of GPU count must save more than its restart (steps near that line end a stretch).
    graph = tmp_path / "optimus.sched"
    graph.write_text(
        f'round = 5min;\n{costs}cluster = "6x4:V100,4x4:K80";\n'
        "src :: PoissonSource(rate=2/h, jobs=150, seed=5);\n"
        "src -> AcceptAll -> JobPool -> order :: Optimus -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    off, on = run_both(graph)
    assert_same(off, on)
    assert on.counters["m"]["suspended"] > 0 and on.counters["order"]["no_room"] > 0
    assert on.skipped_rounds > on.rounds // 2


def test_themis_passes_the_rounds_in_which_its_order_holds(tmp_path):
    # Rounds of a fraction of a second (clock readings and N's integral that are not whole
    # numbers) on two GPU types, under load: the order of rho changes often, and a stretch
    # must end before each change.
    graph = tmp_path / "themis.sched"
    graph.write_text(
        'round = 299.9s;\ncluster = "6x4:V100,4x4:K80";\n'
        "src :: PoissonSource(rate=2/h, jobs=150, seed=5);\n"
        "src -> AcceptAll -> JobPool -> order :: Themis -> Consolidated -> run :: Launch -> m :: JobMetrics;\n"
        "run -> fairness :: FinishTimeFairnessMetrics;\n"
    )
    off, on = run_both(graph)
    assert_same(off, on)
    assert_same_reports(off.reports, on.reports)
    assert on.counters["m"]["suspended"] > 0  # rho's order changed while jobs ran
    assert on.skipped_rounds > on.rounds // 3


def test_las_skips_rounds_and_preempts_as_it_would(tmp_path):
    # Multi-GPU jobs at a load that makes LAS preempt: skipping must stop before each swap.
    # (150 jobs: thousands of preemptions.)
    graph = tmp_path / "las.sched"
    graph.write_text(
        'round = 5min;\ncluster = "8x4:V100";\n'
        "src :: PoissonSource(rate=3/h, jobs=150, seed=3);\n"
        "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    off, on = run_both(graph)
    assert_same(off, on)
    assert on.counters["m"]["suspended"] > 0  # preemptions happened
    assert on.skipped_rounds > on.rounds // 10


@pytest.mark.parametrize("policy", ["Las(service=wall_seconds)", "Srtf", "Srsf", "Fifo(backfill=true)"])
def test_checkpoint_and_restore_costs_are_kept(tmp_path, policy):
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncheckpoint = 20s;\nrestore = 45s;\ncluster = "4x4:V100";\n'
        # (60 jobs: each policy already preempts, LAS over a thousand times.)
        "src :: PoissonSource(rate=2/h, jobs=60, seed=1);\n"
        f"src -> AcceptAll -> JobPool -> {policy} -> FirstFree -> Launch -> m :: JobMetrics;\n"
    )
    off, on = run_both(graph)
    assert_same(off, on)
    assert on.skipped_rounds > 0


def test_single_gpu_ties_and_a_tracked_window(tmp_path):
    # Blox's LAS experiment, smaller: running jobs tie on attained service and stay tied.
    graph = tmp_path / "blox.sched"
    graph.write_text(
        'round = 5min;\ncluster = "8x4:V100";\n'
        "src :: PoissonSource(rate=1/h, jobs=600, gpus=single, seed=0);\n"
        "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics(track=200..400);\n"
    )
    off, on = run_both(graph)
    assert_same(off, on)
    assert on.skipped_rounds > on.rounds // 3


def rounds_with(times: np.ndarray, round_s: float) -> int:
    """How many distinct round boundaries the times are seen at."""
    times = times[np.isfinite(times)]
    return len(np.unique(np.ceil(times / round_s - 1e-9)))


@pytest.mark.parametrize("placer", ["Consolidated", "FirstFree"])
def test_only_arrivals_are_ticked_while_every_job_runs(tmp_path, placer):
    # A cluster that never fills: the round after a launch and the rounds in which jobs only
    # finish are passed (the completions reach the elements at the next ticked round); the
    # run still stops at the round in which the last job finishes.
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "8x4:V100";\n'
        "src :: PoissonSource(rate=1/h, jobs=300, gpus=single, seed=2);\n"
        f"src -> AcceptAll -> JobPool -> Las -> {placer} -> Launch -> m :: JobMetrics;\n"
    )
    off, on = run_both(graph)
    assert_same(off, on)
    jobs = off.world.jobs
    arrivals = rounds_with(jobs.column("arrival_s"), 300.0)
    finishes = rounds_with(jobs.column("finish_s"), 300.0)
    ticked = on.rounds - on.skipped_rounds
    assert ticked <= arrivals + 1 < arrivals + finishes // 2
    # With a tracked window, the round whose completions end it is ticked, and the run stops there.
    graph.write_text(graph.read_text().replace("JobMetrics;", "JobMetrics(track=100..200);"))
    off, on = run_both(graph)
    assert_same(off, on)
    assert on.stop_reason.startswith("m:") and on.skipped_rounds > on.rounds // 2


# Six machines of 4 GPUs with network tiers, two machines to a rack: racks of GPUs 0-7, 8-15, 16-23.
TIERED = 'name = "tiered"\n[[group]]\nnodes = 6\ngpus_per_node = 4\nmachines_per_rack = 2\n[tiers]\n'


def tiered_graph(tmp_path, trace: str, chain: str) -> Path:
    (tmp_path / "cluster.toml").write_text(TIERED)
    (tmp_path / "jobs.csv").write_text("job_id,arrival_s,gpus,duration_s,model\n" + trace)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncheckpoint_per_gpu = 1s;\ncluster = "cluster.toml";\n'
        f'TraceSource(path="jobs.csv") -> AcceptAll -> JobPool -> {chain} -> Launch -> m :: JobMetrics;\n'
    )
    return graph


def test_gandiva_passes_the_rounds_between_events_through_a_spread_and_a_migration(tmp_path):
    # Four-GPU jobs take machines 0 to 5 in order; those on machines 1 and 3 finish first, so the
    # 8-GPU job arriving at one hour takes their GPUs (spread at random over racks 0 and 1), and
    # moves to rack 2 when the jobs on machines 4 and 5 have finished.
    trace = "0,0,4,108000,BERT\n1,0,4,1800,BERT\n2,0,4,108000,BERT\n3,0,4,1800,BERT\n4,0,4,5400,BERT\n5,0,4,7200,BERT\n"
    off, on = run_both(tiered_graph(tmp_path, trace + "6,3600,8,108000,BERT\n", "Fifo(backfill=true) -> place :: Gandiva"))
    assert_same(off, on)
    assert (on.counters["place"]["spread"], on.counters["place"]["migrated"]) == (1, 1)
    assert on.skipped_rounds > on.rounds // 2


@pytest.mark.parametrize("placer", ["TiresiasDally", "SkewAwarePlacer"])
def test_tiresias_placers_pass_the_rounds_between_swaps(tmp_path, placer):
    # More GPUs asked for than the 24 there are: LAS rotates the jobs, and the placer's plan
    # changes only where the ranking does.
    trace = "0,0,8,20000,BERT\n1,600,4,30000,VGG11\n2,1200,8,40000,BERT\n3,1800,4,25000,VGG11\n"
    trace += "4,7200,8,9000,BERT\n5,9000,2,15000,VGG11\n6,30000,8,20000,BERT\n"
    off, on = run_both(tiered_graph(tmp_path, trace, f"Las -> place :: {placer}"))
    assert_same(off, on)
    assert on.counters["place"]["preempted"] > 0
    assert on.skipped_rounds > on.rounds // 3


@pytest.mark.parametrize("name", ["synergy-tune.sched", "synergy-proportional.sched", "yarn-cs.sched"])
def test_allocators_and_yarn_pass_the_rounds_in_which_nothing_starts_or_stops(name):
    off, on = run_both(GRAPHS / name, until=100 * 3600.0)
    assert_same(off, on)
    # (About a third of these 100 hours' rounds have no start or stop: Synergy's queue, which
    # skips jobs that do not fit, starts some in rounds a strict queue would not.)
    assert on.skipped_rounds > on.rounds // 4


@pytest.mark.parametrize("promotion", ["", ", promote_knob=2"])
def test_tiresias_queues_pass_the_rounds_before_a_job_changes_queue(tmp_path, promotion):
    # Three queues: running jobs are demoted as their service reaches each limit, and with the
    # knob waiting jobs are promoted back once they have waited twice as long as they ran.
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "4x4:V100";\nsrc :: PoissonSource(rate=2/h, jobs=80, seed=4);\n'
        f"src -> AcceptAll -> JobPool -> order :: TiresiasLas(queues=3, thresholds=[1h, 8h]{promotion}) "
        "-> Consolidated -> Launch -> m :: JobMetrics;\n"
    )
    off, on = run_both(graph)
    assert_same(off, on)
    assert on.counters["order"]["demoted"] > 0 and on.counters["m"]["suspended"] > 0
    assert (on.counters["order"]["promoted"] > 0) == bool(promotion)
    assert on.skipped_rounds > on.rounds // 4


def test_the_setting_turns_skipping_off(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\nskip_rounds = false;\ncluster = "2x4:V100";\n'
        "src :: PoissonSource(rate=1/h, jobs=30, seed=0);\n"
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;\n"
    )
    assert simulate(compile_file(graph)).skipped_rounds == 0
    graph.write_text(graph.read_text().replace("skip_rounds = false", "skip_rounds = true"))
    assert simulate(compile_file(graph)).skipped_rounds > 0


def test_an_undeclared_element_is_ticked_every_round(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 5min;\ncluster = "2x4:V100";\n'
        "src :: PoissonSource(rate=1/h, jobs=30, seed=0);\n"
        "src -> AcceptAll -> JobPool -> TiresiasGittins -> FirstFree -> Launch -> m :: JobMetrics;\n"
    )
    assert simulate(compile_file(graph)).skipped_rounds == 0


def test_first_swap_of_neighbours():
    # 0 then 100: the first closes at 2/s on the second, swapping in 50 s (less a margin).
    assert first_swap_s(np.array([0.0, 100.0]), np.array([2.0, 0.0]), False) == pytest.approx(50.0)
    # Moving apart, or together at the same speed: never.
    assert first_swap_s(np.array([0.0, 100.0]), np.array([0.0, 1.0]), False) == np.inf
    assert first_swap_s(np.array([0.0, 100.0]), np.array([1.0, 1.0]), False) == np.inf
    # Equal keys at equal speed: exact ties stay; otherwise rounding could part them.
    assert first_swap_s(np.array([5.0, 5.0]), np.array([1.0, 1.0]), True) == np.inf
    assert first_swap_s(np.array([5.0, 5.0]), np.array([1.0, 1.0]), False) == 0.0
    # Equal keys, the first faster: now.
    assert first_swap_s(np.array([5.0, 5.0]), np.array([2.0, 1.0]), True) == 0.0
    # Only neighbours matter: the earliest of the pairs.
    keys, speed = np.array([0.0, 10.0, 11.0]), np.array([0.0, 1.0, 0.0])
    assert first_swap_s(keys, speed, False) == pytest.approx(1.0)


LAS_FAIRNESS = """
round = 299.9s;
cluster = "32x4:V100";
arrivals :: TraceSource(path="{trace}", jobs=300);
arrivals -> AcceptAll -> JobPool -> Las(service=wall_seconds) -> FirstFree -> run :: Launch -> JobMetrics;
run -> fairness :: FinishTimeFairnessMetrics;
"""


@pytest.mark.parametrize("name", ["gavel-cost-slo.sched", "las-fairness"])
def test_objective_sinks_settle_the_rounds_passed_as_their_ticks_would_have(tmp_path, name):
    """Cost, SLO violations and the jobs in the system over time, settled at the next tick for
    the rounds not ticked: every report as when every round is ticked. (LAS in rounds of a
    fraction of a second: clock readings that are not whole numbers, where the points' times
    must be added as the clock adds them.)"""
    path = GRAPHS / name
    if name == "las-fairness":
        path = tmp_path / "g.sched"
        path.write_text(LAS_FAIRNESS.format(trace=GRAPHS.parent / "traces" / "samples" / "philly-1000.csv"))
    off, on = run_both(path, until=250 * 3600.0)
    assert_same(off, on)
    assert_same_reports(off.reports, on.reports)
    assert on.skipped_rounds > 200
