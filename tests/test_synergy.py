"""Synergy: CPU and memory with the GPUs. The sensitivity profile, the throughput model's
factor, plan checking of allocations, the world's books, and the allocators Proportional and
SynergyTune, all hand-computed on tiny clusters."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.synergy import Proportional, SynergyOpt, SynergyTune
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.context import Round
from roundhouse.runtime.plans import PlanError
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Events, Plan
from roundhouse.runtime.world import World
from roundhouse.tools.cli import main
from roundhouse.traces.jobs import resource_seconds
from roundhouse.traces.profiles import ProfileTable
from roundhouse.traces.resources import ResourceTable
from tests.conftest import REPO

# One machine like Synergy's: 8 GPUs, 24 cores, 500 GB (3 cores and 62.5 GB per GPU).
SYNERGY_MACHINE = """
name = "one"
[[group]]
nodes = {nodes}
gpus_per_node = 8
cpus = 24
memory_gb = 500
"""


@pytest.fixture
def machine(tmp_path):
    def make(nodes=1, text=SYNERGY_MACHINE):
        path = tmp_path / "cluster.toml"
        path.write_text(text.format(nodes=nodes))
        return Cluster.parse(str(path))

    return make


def world_of(cluster, jobs):
    """jobs: (job_id, model, gpus). All known by duration (1e6 s)."""
    world = World(cluster, ProfileTable.load())
    frame = pl.DataFrame(
        {
            "job_id": [j for j, _, _ in jobs],
            "arrival_s": [0.0] * len(jobs),
            "gpus": [g for _, _, g in jobs],
            "duration_s": [1e6] * len(jobs),
            "model": [m for _, m, _ in jobs],
        }
    )
    batch, _ = world.prepare(frame, "test")
    world.add_jobs(batch)
    return world


def launch(world, gpus_by_job, alloc=None, keep=(), now=0.0):
    """A plan launching job ids on GPU ids, with optional {job id: (cpus, memory)}."""
    rows = [world.jobs.row_of(j) for j in gpus_by_job]
    extra = {}
    if alloc is not None:
        extra = dict(
            alloc_rows=[world.jobs.row_of(j) for j in alloc],
            alloc_cpus=[c for c, _ in alloc.values()],
            alloc_memory_gb=[m for _, m in alloc.values()],
        )
    return Plan(
        launch_rows=rows,
        launch_gpus=np.concatenate([np.asarray(g) for g in gpus_by_job.values()]) if rows else np.zeros(0, np.int64),
        launch_counts=[len(g) for g in gpus_by_job.values()],
        keep=np.array(sorted(world.jobs.row_of(j) for j in keep), dtype=np.int64),
        **extra,
    )


def apply(world, plan, now=0.0):
    world.check_plan(plan)
    world.apply_plan(plan, now)


def column(world, name, job):
    return float(world.jobs.column(name)[world.jobs.row_of(job)])


def speed(world, job):
    """The job's rate over its rate on its own GPU count on one node at the proportional share
    (ResNet18 is in Gavel's profile too, with a rate of its own)."""
    return column(world, "rate", job) / column(world, "reference_rate", job)


# --- the sensitivity profile ---


def test_best_case_demands_are_synergys_per_model_demands():
    table = ResourceTable.load()
    best = {m: (table.best_cpus[i], table.best_memory_gb[i]) for i, m in enumerate(table.models)}
    # simulator/models/<model>_1.py: cpus and mem of each model.
    assert best["AlexNet"] == (12, 125)
    assert best["ResNet18"] == (9, 62.5)
    assert best["ResNet50"] == (4, 62.5)
    assert best["M5"] == (6, 187.5)
    assert best["DeepSpeech"] == (3, 62.5)
    assert best["GNMT"] == (1, 20.83)


def test_speed_is_bilinear_in_the_grid_and_clamped_at_its_edges():
    table = ResourceTable.load()
    res18, alexnet = table.index(["resnet-18", "AlexNet"])
    assert table.index([None, "VGG"]).tolist() == [-1, -1]
    # ResNet18 at 62.5 GB: 1.75 at 6 cores, 2.4 at 9; halfway is 7.5 cores.
    assert table.relative_speed(np.array([res18]), [7.5], [62.5])[0] == pytest.approx((1.75 + 2.4) / 2)
    # AlexNet at 12 cores: 2.0 at 62.5 GB, 2.94 at 125 GB; halfway is 93.75 GB.
    assert table.relative_speed(np.array([alexnet]), [12], [93.75])[0] == pytest.approx((2.0 + 2.94) / 2)
    # Beyond the grid: fewer than 1 core runs as 1 (0.37), more than 250 GB as 250.
    assert table.relative_speed(np.array([res18, res18]), [0.5, 3], [62.5, 400]).tolist() == pytest.approx([0.37, 1.0])


def test_a_bad_profile_is_refused_with_its_row(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("model,also_named,cpus_per_gpu,mem_10,mem_20\nX,,1,0.5,1\nX,,2,-1,1\n")
    with pytest.raises(Exception, match=r"mem_10") as err:
        ResourceTable.load(path)
    assert "3" in str(err.value) and "-1" in str(err.value)


# --- the throughput model and the world's books ---


def test_gpu_proportional_allocation_changes_nothing(machine):
    world = world_of(machine(), [(0, "ResNet18", 2)])
    apply(world, launch(world, {0: [0, 1]}))
    assert speed(world, 0) == pytest.approx(1.0)
    assert (column(world, "cpus_held", 0), column(world, "memory_held_gb", 0)) == (6.0, 125.0)


def test_a_jobs_speed_follows_its_cpu_and_memory(machine):
    world = world_of(machine(), [(0, "ResNet18", 1), (1, "AlexNet", 1), (2, "GNMT", 1), (3, None, 1)])
    plan = launch(world, {0: [0], 1: [1], 2: [2], 3: [3]}, alloc={0: (9, 62.5), 1: (2, 125), 2: (1, 20.83), 3: (1, 20)})
    apply(world, plan)
    assert speed(world, 0) == pytest.approx(2.4)  # best case, over 1.0 at 3 cores
    assert speed(world, 1) == pytest.approx(0.66)  # starved of cores
    assert speed(world, 2) == pytest.approx(1.0)  # GNMT does not care
    assert speed(world, 3) == 1.0  # no model, no sensitivity
    assert column(world, "cpus_held", 0) == 9.0


def test_the_factor_is_relative_to_the_proportional_share_of_the_jobs_machines(machine):
    # 4 cores and 62.5 GB per GPU: ResNet18's proportional speed is 1.3 in Synergy's units.
    text = SYNERGY_MACHINE.replace("cpus = 24", "cpus = 32")
    world = world_of(machine(text=text), [(0, "ResNet18", 2)])
    apply(world, launch(world, {0: [0, 1]}, alloc={0: (18, 125)}))
    assert speed(world, 0) == pytest.approx(2.4 / 1.3)


def test_progress_books_core_seconds_and_a_kept_job_can_be_given_more(machine):
    world = world_of(machine(), [(0, "ResNet18", 1)])
    apply(world, launch(world, {0: [0]}))
    row = np.array([world.jobs.row_of(0)])
    world.apply_progress(row, np.array([100.0]), np.array([100.0]), np.array([100.0]))
    assert resource_seconds(world.jobs.reader) == (300.0, 6250.0)
    apply(world, launch(world, {}, alloc={0: (9, 62.5)}, keep=[0]), 100.0)
    assert speed(world, 0) == pytest.approx(2.4) and column(world, "cpus_held", 0) == 9.0
    world.apply_progress(row, np.array([240.0]), np.array([100.0]), np.array([100.0]))
    assert resource_seconds(world.jobs.reader) == (300.0 + 900.0, 12500.0)
    world.apply_finished(row, np.array([200.0]))
    assert column(world, "cpus_held", 0) == 0.0
    assert resource_seconds(world.jobs.reader) == (1200.0, 12500.0)


# --- plan checking ---


def test_no_machine_gives_more_than_it_has(machine):
    world = world_of(machine(2), [(0, "AlexNet", 1), (1, "AlexNet", 1), (2, "AlexNet", 1)])
    apply(world, launch(world, {0: [0]}, alloc={0: (12, 125)}))
    # 12 + 12 cores, and the third job's proportional 3 (no allocation named): 27 > 24.
    with pytest.raises(PlanError, match=r"machine 0 \(0, 1, 2\) 27 CPU cores, more than its 24"):
        world.check_plan(launch(world, {1: [1], 2: [2]}, alloc={1: (12, 125)}, keep=[0]))
    # On the other machine it fits.
    world.check_plan(launch(world, {1: [8], 2: [2]}, alloc={1: (12, 125)}, keep=[0]))
    with pytest.raises(PlanError, match=r"600 GB of memory, more than its 500"):
        world.check_plan(launch(world, {1: [1]}, alloc={1: (3, 475)}, keep=[0]))


def test_bad_allocations_are_refused_with_the_job_named(machine):
    world = world_of(machine(), [(0, "AlexNet", 1), (1, "AlexNet", 1)])
    with pytest.raises(PlanError, match="job 1, which it neither launches, keeps nor resizes"):
        world.check_plan(launch(world, {0: [0]}, alloc={0: (3, 62.5), 1: (3, 62.5)}))
    with pytest.raises(PlanError, match=r"job 0 -1 CPU cores"):
        world.check_plan(launch(world, {0: [0]}, alloc={0: (-1, 62.5)}))
    with pytest.raises(ValueError, match="come together"):
        Plan(alloc_rows=[0], alloc_cpus=[1.0])


# --- the allocators ---


def tick(element, world, plan, now=300.0, events=None):
    ctx = Round(world, GraphSettings(), now, 1, events or Events(time=now))
    element.start(ctx)
    out = element.tick(ctx, plan)
    world.check_plan(out)
    ids = world.jobs.column("job_id")
    if out.alloc_rows is None or out.alloc_cpus is None or out.alloc_memory_gb is None:
        return out, {}
    return out, {int(ids[r]): (float(c), float(m)) for r, c, m in zip(out.alloc_rows, out.alloc_cpus, out.alloc_memory_gb)}


def test_proportional_gives_each_launch_its_gpus_share(machine):
    world = world_of(machine(), [(0, "AlexNet", 1), (1, "GNMT", 4)])
    _, got = tick(Proportional(), world, launch(world, {0: [0], 1: [2, 3, 4, 5]}))
    assert got == {0: (3.0, 62.5), 1: (12.0, 250.0)}


def test_synergy_tune_by_hand(machine):
    # One machine: 24 cores, 500 GB. AlexNet (1 GPU) wants 12 cores and 125 GB; ResNet18 (2
    # GPUs) 18 and 125; GNMT (4 GPUs) 4 and 83.32, under its share, so that is its fallback.
    # Fallbacks: 3+6+4 = 13 cores, 62.5+125+83.32 GB; spare 11 cores. AlexNet's extra 9 cores
    # fit (2 left); ResNet18's extra 12 do not: it keeps its proportional share.
    world = world_of(machine(), [(0, "AlexNet", 1), (1, "ResNet18", 2), (2, "GNMT", 4)])
    out, got = tick(SynergyTune(), world, launch(world, {0: [0], 1: [1, 2], 2: [3, 4, 5, 6]}))
    assert got == {0: (12.0, 125.0), 1: (6.0, 125.0), 2: pytest.approx((4.0, 4 * 20.83))}
    world.apply_plan(out, 300.0)
    assert speed(world, 0) == pytest.approx(2.94)
    assert speed(world, 1) == pytest.approx(1.0)
    # AlexNet finishes: its cores are spare again, and the kept ResNet18 gets its demand
    # (6 + 4 = 10 cores of fallbacks, 14 spare, 12 needed). GNMT's allocation is unchanged.
    row = world.jobs.row_of(0)
    world.apply_finished(np.array([row]), np.array([400.0]))
    keep = launch(world, {}, keep=[1, 2])
    out, got = tick(SynergyTune(), world, keep, 600.0, Events(time=600.0, finished=[row], finished_at=[400.0]))
    assert got == {1: (18.0, 125.0)}
    world.apply_plan(out, 600.0)
    assert speed(world, 1) == pytest.approx(2.4)
    # A quiet round changes nothing and gives no allocations.
    out, got = tick(SynergyTune(), world, keep, 900.0)
    assert got == {} and not out.changes


def test_synergy_tune_takes_back_spare_for_a_new_jobs_share(machine):
    # AlexNet holds 12 cores; seven 1-GPU ResNet50s (4 cores each wanted, 3 fair) arrive:
    # fallbacks 3 + 7*3 = 24 cores, nothing spare, so AlexNet drops to its 3 cores and no
    # ResNet50 gets its fourth core.
    jobs = [(0, "AlexNet", 1)] + [(k, "ResNet50", 1) for k in range(1, 8)]
    world = world_of(machine(), jobs)
    apply(world, launch(world, {0: [0]}, alloc={0: (12, 125)}))
    _, got = tick(SynergyTune(), world, launch(world, {k: [k] for k in range(1, 8)}, keep=[0]))
    assert got[0] == (3.0, 62.5)
    assert all(got[k] == (3.0, 62.5) for k in range(1, 8))


def test_synergy_tune_caps_a_demand_at_the_machine(machine):
    # An 8-GPU AlexNet wants 96 cores: capped at the machine's 24, its share; it runs as fast.
    world = world_of(machine(), [(0, "AlexNet", 8)])
    _, got = tick(SynergyTune(), world, launch(world, {0: list(range(8))}))
    assert got == {0: (24.0, 500.0)}


def test_synergy_opt_by_hand_beats_the_greedy_order(machine):
    # One machine (24 cores): AlexNet and two ResNet18s, one GPU each; 9 cores are their shares.
    # Tune, in order: AlexNet takes 12 (2.94x), the first ResNet18 9 (2.4x), the second keeps 3
    # (1x): 6.34 in all. The best choice gives AlexNet 6 cores (1.75x) and each ResNet18 9
    # (2.4x): 24 cores, 6.55.
    jobs = [(0, "AlexNet", 1), (1, "ResNet18", 1), (2, "ResNet18", 1)]
    world = world_of(machine(), jobs)
    plan = launch(world, {0: [0], 1: [1], 2: [2]})
    _, tune = tick(SynergyTune(), world, plan)
    assert tune == {0: (12.0, 125.0), 1: (9.0, 62.5), 2: (3.0, 62.5)}
    opt = SynergyOpt()
    out, got = tick(opt, world, plan)
    assert got == {0: (6.0, 62.5), 1: (9.0, 62.5), 2: (9.0, 62.5)}
    assert opt.counters["solves"] == 1 and opt.counters["fallbacks"] == 0
    world.apply_plan(out, 300.0)
    assert [speed(world, j) for j in (0, 1, 2)] == pytest.approx([1.75, 2.4, 2.4])


def test_synergy_opt_never_slows_a_job_below_its_share(machine):
    # Seven ResNet50s and an AlexNet fill a machine: at most one can get more than its share
    # (ResNet50's 4th core), and nobody gets less.
    jobs = [(0, "AlexNet", 1)] + [(k, "ResNet50", 1) for k in range(1, 8)]
    world = world_of(machine(), jobs)
    out, got = tick(SynergyOpt(), world, launch(world, {k: [k] for k in range(8)}))
    world.apply_plan(out, 300.0)
    assert all(speed(world, k) >= 1.0 - 1e-9 for k in range(8))
    assert sum(c for c, _ in got.values()) <= 24.0


# --- graphs, the live backend, the reproduction ---


@pytest.mark.parametrize("name", ["synergy-proportional", "synergy-tune", "synergy-opt"])
def test_shipped_graphs_check_and_run(name, capsys):
    path = REPO / "graphs" / f"{name}.sched"
    assert main(["check", str(path)]) == 0
    # A day already finishes over a hundred jobs, dozens of them image models.
    result = simulate(compile_file(path), until=24 * 3600.0)
    summary = next(r["summary"] for r in result.reports.values() if "summary" in r)
    assert summary["jobs_finished"] > 20
    jobs = result.world.jobs
    alexnet = (jobs.column("task") == "image") & (jobs.column("status") == 2)
    run_s, duration = jobs.column("run_s")[alexnet], jobs.column("duration_s")[alexnet]
    faster = run_s < 0.99 * duration  # an image model given more than its proportional cores
    if name != "synergy-proportional":
        assert faster.any() and summary["cpu_utilization"] > 0
    else:
        assert not faster.any() and summary["cpu_utilization"] == pytest.approx(summary["utilization"], rel=1e-6)


@pytest.mark.slow
def test_reproduce_synergy_philly_quick(tmp_path, capsys):
    assert main(["reproduce", "synergy-philly", "--quick", "--out", str(tmp_path)]) == 0
    folder = tmp_path / "synergy-philly"
    runs = pl.read_csv(folder / "runs.csv")
    jct = dict(zip(runs["allocation"], runs["avg_jct_s"]))
    assert set(jct) == {"Proportional", "Synergy-Tune"}
    assert jct["Synergy-Tune"] < jct["Proportional"]
    assert runs["jobs_finished"].to_list() == [300, 300]
    assert (folder / "jct_cdf.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "21.88 h" in out and "Synergy-Tune" in out
    # Its first note describes the quick run: one seed, named.
    notes = " ".join(out.split()).split("note: ")[1:]
    assert "jobs/h, seed 0; all jobs measured (quick: one seed" in notes[0]


LIVE_CLUSTER = """
name = "two"
[[group]]
nodes = 2
gpus_per_node = 2
cpus = 12
memory_gb = 125
"""

LIVE_GRAPH = """
round = 1s;
cluster = "cluster.toml";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> SynergyTune -> run :: Launch -> m :: JobMetrics;
run -> u :: ResourceUsage;
"""

# ResNet-18 wants 9 cores per GPU (it gets 9 of its machine's 12, 6 being its share); LM needs 1.
LIVE_JOBS = """job_id,arrival_s,gpus,model,iterations,batch_size
0,0,1,ResNet-18,300,16
1,0,1,LM,600,10
2,0,1,ResNet-18,300,16
3,0,1,LM,600,10
"""


@pytest.mark.live
@pytest.mark.slow
def test_synergy_tune_runs_live_on_emulated_agents(tmp_path):
    from tests.livecluster import TEST_PROFILE, LiveCluster

    files = {"cluster.toml": LIVE_CLUSTER, "profile.csv": TEST_PROFILE, "jobs.csv": LIVE_JOBS}
    cluster = LiveCluster(tmp_path, LIVE_GRAPH, files, serve_args=("--checkpoint-every", "0"))
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a")
        cluster.start_agent("node-b")
        assert cluster.wait_exit("scheduler", timeout=120) == 0, cluster.logs()
        out = cluster.folder / "out"
        jobs = pl.read_csv(next(out.glob("*jobs.csv")))
        assert jobs["status"].to_list() == ["finished"] * 4, cluster.logs()
        usage = pl.read_csv(next(out.glob("*usage.csv")))
        # Tune's allocations are not GPU-proportional: while all four run, 9 + 1 cores of 12 are
        # held on each machine, 20 of 24 in all, while all 4 GPUs are.
        busy = usage.filter(pl.col("gpu") == 1.0)
        assert busy.height and busy["cpu"].to_list()[0] == pytest.approx(20 / 24), usage
        summary = json.loads(next(out.glob("*summary.json")).read_text())
        assert 0 < summary["cpu_utilization"] < summary["utilization"]
    finally:
        cluster.close()


def test_proportional_changes_nothing_against_no_allocator(tmp_path):
    text = (REPO / "graphs" / "synergy-proportional.sched").read_text().replace("../", f"{REPO}/")
    with_it = tmp_path / "with.sched"
    with_it.write_text(text)
    without = tmp_path / "without.sched"
    without.write_text(text.replace("-> Proportional ", ""))
    a = simulate(compile_file(with_it), until=48 * 3600.0)
    b = simulate(compile_file(without), until=48 * 3600.0)
    jobs_a = next(r["jobs"] for r in a.reports.values() if "jobs" in r)
    jobs_b = next(r["jobs"] for r in b.reports.values() if "jobs" in r)
    assert jobs_a.height > 50 and jobs_a.equals(jobs_b)


def test_bad_allocator_arguments_are_refused_at_their_place(tmp_path):
    from roundhouse.errors import RoundhouseError

    path = tmp_path / "g.sched"
    path.write_text(
        'round = 5min;\ncluster = "1x4:V100";\nsrc :: PoissonSource(rate=1/h, jobs=5);\n'
        'src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> SynergyOpt(solver="GLOP") -> Launch -> JobMetrics;\n'
    )
    with pytest.raises(RoundhouseError, match=r"g.sched:4:.*argument 'solver' of SynergyOpt must be one of 'SCIP', 'CBC'"):
        compile_file(path)


def test_useful_candidates_compared_for_many_jobs_at_once_are_those_compared_one_by_one():
    # The rule stated plainly, job by job: a candidate is worth a variable when it fits, is no
    # slower than the share (the first), and no other such candidate is as fast with no more of
    # either resource (strictly better somewhere, or equal and earlier). Values on a coarse grid
    # give many ties.
    from roundhouse.elements.placement.synergy import _useful

    rng = np.random.default_rng(7)
    jobs, n = 40, 12
    points = rng.integers(1, 5, size=(jobs, n, 2)).astype(float)
    speed = rng.integers(1, 4, size=(jobs, n)) / 2.0
    fits = rng.random((jobs, n)) < 0.8
    got = _useful(points, speed, fits)
    for j in range(jobs):
        p, v = points[j], speed[j]
        ok = [k == 0 or (fits[j, k] and v[k] >= v[0]) for k in range(n)]
        expected = []
        for k in range(n):
            dominated = False
            for i in range(n):
                covers = (p[i] <= p[k]).all() and v[i] >= v[k]
                better = (p[i] < p[k]).any() or v[i] > v[k]
                dominated |= ok[i] and i != k and covers and (better or i < k)
            expected.append(ok[k] and (k == 0 or not dominated))
        assert got[j].tolist() == expected, j
    assert 0 < got.sum() < got.size


# --- machines of different shapes ---

# Synergy's machine and one with half the GPUs, twice the cores and a fifth of the memory:
# shares of 3 cores and 62.5 GB per GPU on the first, 12 cores and 25 GB on the second.
MIXED_MACHINES = """
[[group]]
nodes = 1
gpus_per_node = 8
cpus = 24
memory_gb = 500
[[group]]
nodes = 1
gpus_per_node = 4
cpus = 48
memory_gb = 100
"""


@pytest.mark.parametrize("allocator", [Proportional, SynergyTune, SynergyOpt])
def test_allocators_fit_a_job_spread_over_machines_of_different_shapes(machine, allocator):
    # A job on all 12 GPUs: its share is 24 + 48 cores and 500 + 100 GB. Split by GPU count it
    # would put 48 cores on the 24-core machine; split by share each machine gives its all.
    world = world_of(machine(text=MIXED_MACHINES), [(0, "GNMT", 12)])
    out, got = tick(allocator(), world, launch(world, {0: list(range(12))}))  # (tick checks the plan)
    cpus, memory = got[0]
    assert cpus <= 72 + 1e-9 and memory <= 600 + 1e-9
    if allocator is Proportional:
        assert got[0] == (72.0, 600.0)
    world.apply_plan(out, 300.0)


def test_a_kept_job_on_mixed_machines_is_checked_by_its_share(machine):
    # The job holds all 12 GPUs at its share; a one-GPU launch on machine 0 that asks for one
    # more core overcommits machine 0 (24 + 1), and one that asks for none fits.
    world = world_of(machine(text=MIXED_MACHINES), [(0, "GNMT", 11), (1, "AlexNet", 1)])
    apply(world, launch(world, {0: list(range(1, 12))}, alloc={0: (21 + 48, 437.5 + 100)}))
    with pytest.raises(PlanError, match=r"machine 0 \(0, 1\) 25 CPU cores, more than its 24"):
        world.check_plan(launch(world, {1: [0]}, alloc={1: (4, 62.5)}, keep=[0]))
    world.check_plan(launch(world, {1: [0]}, alloc={1: (3, 62.5)}, keep=[0]))


def test_machine_weights_split_by_gpu_count_where_machines_are_alike():
    from roundhouse.elements.placement.synergy import machine_weights

    per_node = np.array([[2.0, 1.0, 0.0], [1.0, 0.0, 4.0]])
    share = np.array([[3.0, 62.5], [3.0, 62.5], [12.0, 25.0]])
    w = machine_weights(per_node, share)
    assert np.array_equal(w[0], np.array([[2 / 3, 2 / 3], [1 / 3, 1 / 3], [0, 0]]))  # the same arithmetic
    assert w[1, :, 0] == pytest.approx([3 / 51, 0, 48 / 51]) and w[1, :, 1] == pytest.approx([62.5 / 162.5, 0, 100 / 162.5])


def test_shipped_allocators_run_on_mixed_machines(tmp_path, capsys):
    cluster = tmp_path / "mixed.toml"
    cluster.write_text(MIXED_MACHINES.replace("nodes = 1", "nodes = 8"))
    for name in ("synergy-proportional", "synergy-tune"):
        code = main(["run", str(REPO / "graphs" / f"{name}.sched"), "--cluster", str(cluster), "--until", "24h",
                     "--out", str(tmp_path / name)])  # fmt: skip
        assert code == 0, capsys.readouterr().err
        assert (tmp_path / name / "jobs.csv").is_file()


def test_synergy_opt_bounds_its_solves_by_nodes_not_the_wall_clock(machine, monkeypatch):
    # By default no wall-clock limit is set (where it bites, results depend on the machine);
    # a node limit, the same everywhere, bounds a solve instead.
    from ortools.linear_solver import pywraplp

    def no_clock(self, ms):
        raise AssertionError("a wall-clock limit was set")

    given: list[str] = []
    real = pywraplp.Solver.SetSolverSpecificParametersAsString
    monkeypatch.setattr(pywraplp.Solver, "SetTimeLimit", no_clock)
    monkeypatch.setattr(
        pywraplp.Solver, "SetSolverSpecificParametersAsString", lambda self, text: given.append(text) or real(self, text)
    )
    jobs = [(0, "AlexNet", 1), (1, "ResNet18", 1), (2, "ResNet18", 1)]
    world = world_of(machine(), jobs)
    plan = launch(world, {0: [0], 1: [1], 2: [2]})
    _, got = tick(SynergyOpt(), world, plan)
    assert got == {0: (6.0, 62.5), 1: (9.0, 62.5), 2: (9.0, 62.5)}
    assert given == ["limits/totalnodes = 10000\n"]
    # One node is enough for these programs: the same allocation on any machine.
    _, got = tick(SynergyOpt(node_limit=1), world, plan)
    assert got == {0: (6.0, 62.5), 1: (9.0, 62.5), 2: (9.0, 62.5)} and given[-1] == "limits/totalnodes = 1\n"


def test_synergy_opt_refuses_a_node_limit_for_cbc(tmp_path):
    from roundhouse.errors import RoundhouseError

    path = tmp_path / "g.sched"
    path.write_text(
        'round = 5min;\ncluster = "1x4:V100";\nsrc :: PoissonSource(rate=1/h, jobs=5);\n'
        'src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> SynergyOpt(solver="CBC", node_limit=50) -> Launch -> JobMetrics;\n'
    )
    with pytest.raises(RoundhouseError, match=r"node_limit applies to SCIP only: OR-Tools passes no node limit to CBC"):
        compile_file(path)


def test_jobs_csv_names_models_the_throughput_profile_does_not_know(run_graph):
    # Synergy's M5 and ShuffleNet are only in the CPU and memory profile, and Dally's BERT-large
    # and MobileNetV3 only in the communication profile (with network tiers, where every model
    # must have one); a name no profile knows stays blank.
    from tests.conftest import jobs_of

    graph = 'round = 5min;\nsrc :: TraceSource(path="trace.csv");\nsrc -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n'
    for cluster, models, expected in (
        ("1x8:V100", ["M5", "ShuffleNet", "ResNet-50", "NoSuchNet"], ["M5", "ShuffleNet", "ResNet-50", None]),
        ("dally:1", ["BERT-large", "MobileNetV3", "ResNet-50"], ["BERT-large", "MobileNetV3", "ResNet-50"]),
    ):
        jobs = [{"job_id": k, "arrival_s": 0.0, "gpus": 1, "duration_s": 600.0, "model": m} for k, m in enumerate(models)]
        got = jobs_of(run_graph(graph, jobs, cluster=cluster))
        assert [got[k]["model"] for k in range(len(models))] == expected
