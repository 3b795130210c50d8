"""Elastic jobs: resizing as a plan decision (checks, costs, progress kept), the batch-size-aware
throughput model and statistical efficiency (goodput), hand-computed."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.types import LR_LINEAR, LR_SQRT, Assignment, Plan, Resize
from roundhouse.runtime.world import PlanError, World
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import SHARED, play_round


def _world(jobs: list[dict], cluster: str = "2x2:V100", **costs):
    world = World(Cluster.parse(cluster), ProfileTable.load())
    batch, _ = world.prepare(pl.DataFrame(jobs), "test")
    world.add_jobs(batch)
    return world, Simulator(world, 100.0, **costs)


def _col(world, name):
    return world.jobs.column(name)


# Two jobs known by duration (one unit of work per second on any placement).
TWO = [
    dict(job_id=10, arrival_s=0.0, gpus=1, duration_s=1000.0, batch_size=32, max_gpus=2, max_batch_size=128),
    dict(job_id=11, arrival_s=0.0, gpus=1, duration_s=1000.0),
]


@pytest.mark.parametrize(("in_place", "cost"), [(True, 1.0), (False, 20.0)])
def test_resize_cost_and_progress(in_place, cost):
    world, sim = _world(TWO)
    play_round(world, sim, Plan.of([Assignment(0, [0]), Assignment(1, [2])]))
    assert _col(world, "done").tolist() == [100.0, 100.0]
    # Job 10 grows from GPU 0 to GPUs 0-1 with batch 64 (linear rule); job 11 is kept.
    plan = Plan.of(keep=[1], resizes=[Resize(0, [0, 1], 64, LR_LINEAR, in_place)])
    play_round(world, sim, plan)
    # It keeps its identity and progress: 100 done before, then it pauses `cost` seconds.
    assert _col(world, "done")[0] == pytest.approx(100.0 + 100.0 - cost)
    assert _col(world, "done")[1] == pytest.approx(200.0)
    assert _col(world, "held").tolist() == [2, 1]
    assert _col(world, "batch_used")[0] == 64 and _col(world, "lr_scale")[0] == 2.0
    assert _col(world, "resizes").tolist() == [1, 0]
    assert _col(world, "preemptions").tolist() == [0, 0] and _col(world, "launches").tolist() == [1, 1]
    assert world.gpus_of(0).tolist() == [0, 1]
    # Service counts the pause (GPUs held): 100 s on 1 GPU, then 100 s on 2.
    assert _col(world, "service")[0] == pytest.approx(100.0 + 200.0)
    # Shrink back with the sqrt rule; the pause is charged again.
    play_round(world, sim, Plan.of(keep=[1], resizes=[Resize(0, [1], 32, LR_SQRT, in_place)]))
    assert _col(world, "done")[0] == pytest.approx(300.0 - 2 * cost)
    assert world.gpus_of(0).tolist() == [1] and _col(world, "lr_scale")[0] == 1.0


def test_a_pause_longer_than_the_round_goes_on():
    world, sim = _world(TWO, resize_restart_s=150.0)
    play_round(world, sim, Plan.of([Assignment(0, [0]), Assignment(1, [2])]))
    play_round(world, sim, Plan.of(keep=[1], resizes=[Resize(0, [0, 1], in_place=False)]))
    assert _col(world, "done")[0] == pytest.approx(100.0)  # paused the whole round
    play_round(world, sim, Plan(keep=[0, 1]))
    assert _col(world, "done")[0] == pytest.approx(150.0)  # 50 s left of the pause


def test_resize_onto_gpus_a_suspended_job_gives_up():
    world, sim = _world(TWO, cluster="1x2:V100")
    play_round(world, sim, Plan.of([Assignment(0, [0]), Assignment(1, [1])]))
    play_round(world, sim, Plan.of(suspend=[1], resizes=[Resize(0, [0, 1], 64)]))
    assert world.gpus_of(0).tolist() == [0, 1] and _col(world, "status")[1] == 0


def test_bad_resizes_are_located_and_change_nothing():
    world, sim = _world(TWO + [dict(job_id=12, arrival_s=0.0, gpus=1, duration_s=10.0)])
    play_round(world, sim, Plan.of([Assignment(0, [0]), Assignment(1, [2])]))
    before = {name: _col(world, name).copy() for name in ("held", "batch_used", "rate", "resizes", "status")}
    holder = world.holder.copy()
    cases = [
        (Plan.of(keep=[1], resizes=[Resize(0, [0, 1, 3])]), "job 10 to 3 GPUs, past its limit of 2"),
        (Plan.of(keep=[1], resizes=[Resize(0, [0], 256)]), "job 10 to batch size 256, past its limit of 128"),
        (Plan.of(keep=[1], resizes=[Resize(0, [0, 2])]), "job 10 onto GPU 2, which job 11 holds"),
        (Plan.of(keep=[0, 1], resizes=[Resize(2, [1])]), "resizes job 12, which is not running"),
        (Plan.of(keep=[0, 1], resizes=[Resize(1, [3])]), "resizes job 11 and also keeps"),
        (Plan.of([Assignment(2, [1])], keep=[1], resizes=[Resize(0, [0, 1])]), "two jobs"),
        (Plan.of(keep=[1], resizes=[Resize(0, [0, 9])]), "GPU 9, which does not exist"),
        (Plan.of(keep=[1], resizes=[Resize(0, [0, 1], 1)]), "batch size 1 on 2 GPUs"),
        (Plan(keep=[0]), "job 11 is neither kept nor suspended"),
        (Plan.of(resizes=[Resize(0, [0, 1]), Resize(1, [1, 2])]), "job 11 onto GPU 1, which it gives another job too"),
        (Plan.of(resizes=[Resize(0, [0]), Resize(0, [1])], keep=[1]), "resizes job 10 twice"),
    ]
    for plan, message in cases:
        with pytest.raises(PlanError, match=message):
            world.check_plan(plan)
            world.apply_plan(plan, sim.now)
    for name, values in before.items():
        assert np.array_equal(_col(world, name), values), name
    assert np.array_equal(world.holder, holder)
    with pytest.raises(ValueError, match="resize_lr"):
        Plan(resize_rows=[0], resize_gpus=[0], resize_counts=[1], resize_lr=[7])


def test_launch_onto_gpus_a_resized_job_gives_up():
    world, sim = _world(TWO + [dict(job_id=12, arrival_s=0.0, gpus=1, duration_s=1000.0)])
    play_round(world, sim, Plan.of([Assignment(0, [0, 1], 64), Assignment(1, [2])]))
    plan = Plan.of([Assignment(2, [1])], keep=[1], resizes=[Resize(0, [0], 32)])
    play_round(world, sim, plan)
    assert world.gpus_of(0).tolist() == [0] and world.gpus_of(2).tolist() == [1]
    assert world.running_rows.tolist() == [0, 1, 2]
    assert _col(world, "done").tolist() == pytest.approx([199.0, 200.0, 100.0])


# --- throughput from GPU count, placement and batch size; efficiency; goodput ---

ALPHA_C, BETA_C, PHI, M0 = 0.1, 0.001, 300.0, 100


def _app_folder(root, name="toy"):
    """An application measured exactly: step time 0.1 + 0.001 x local batch on one GPU (no
    sync), and validation curves at batch 100, 200 and 400 made with noise scale 300."""
    folder = root / name
    folder.mkdir(parents=True)
    lines = ["placement,local_bsz,step_time,sync_time"]
    lines += [f"1,{m},{ALPHA_C + BETA_C * m},0.0" for m in (50, 100, 200, 400, 800)]
    (folder / "placements.csv").write_text("\n".join(lines) + "\n")
    for m in (100, 200, 400):
        eff = (PHI + M0) / (PHI + m)
        rows = ["progress,iteration,metric,grad_sqr,grad_var"]
        rows += [f"{e * 500.0},{e * 500.0 / (eff * m / M0)},0.5,1.0,1.0" for e in range(1, 4)]
        (folder / f"validation-{m}.csv").write_text("\n".join(rows) + "\n")
    return root


def test_fitted_efficiency_and_goodput_at_two_batch_sizes(tmp_path):
    from roundhouse.traces.goodput import ElasticProfile

    profile = ElasticProfile.load_pollux(_app_folder(tmp_path), epochs={"toy": 3})
    app = profile.apps[0]
    assert app.noise_scale == pytest.approx(PHI, rel=0.012)  # the fit's log grid: 200 points a decade
    assert (app.init_batch, app.max_batch, app.epochs) == (100, 400, 3)
    assert app.work_samples == pytest.approx(1500 * M0)  # three epochs of 500 steps at M0
    assert app.params[:2] == pytest.approx([ALPHA_C, BETA_C], rel=1e-3)
    # Batch 100 on one GPU: one 0.2 s step of 100 samples, efficiency 1: goodput 500/s.
    # Batch 400 on one GPU: two accumulated steps of 200 (0.3 s each): 400 / 0.6 samples/s,
    # efficiency (300 + 100) / (300 + 400) = 4/7: goodput 380.95/s.
    # Batch 400 on two GPUs of one machine: 200 each, one 0.3 s step: 1333.3 x 4/7 = 761.9/s.
    got = profile.rates(np.zeros(3, np.int64), [1, 1, 1], [1, 1, 2], [100, 400, 400])
    assert got == pytest.approx([500.0, 400 / 0.6 * 4 / 7, 400 / 0.3 * 4 / 7], rel=0.01)
    assert profile.efficiency(np.zeros(2, np.int64), [100, 400]) == pytest.approx([1.0, 4 / 7], rel=0.01)


def test_elastic_job_resized_keeps_progress_at_its_new_goodput(tmp_path):
    from roundhouse.traces.goodput import ElasticProfile

    profile = ElasticProfile.load_pollux(_app_folder(tmp_path), epochs={"toy": 3})
    world = World(Cluster.parse("2x2:V100"), ProfileTable.load(), elastic=profile)
    jobs = pl.DataFrame([dict(job_id=0, arrival_s=0.0, gpus=1, model="toy", epochs=3.0)])
    batch, unknown = world.prepare(jobs, "test")
    assert not unknown
    world.add_jobs(batch)
    sim = Simulator(world, 100.0)
    assert _col(world, "work")[0] == pytest.approx(3 * 500 * M0) and _col(world, "batch_size")[0] == M0
    assert _col(world, "max_batch_size")[0] == 400  # the largest validated batch size
    play_round(world, sim, Plan.of([Assignment(0, [0])]))
    g1 = _col(world, "goodput")[0]
    assert g1 == pytest.approx(500.0, rel=0.01) and _col(world, "efficiency")[0] == 1.0
    play_round(world, sim, Plan.of(resizes=[Resize(0, [0, 1], 400)]))
    g2, eff = _col(world, "goodput")[0], _col(world, "efficiency")[0]
    assert eff == pytest.approx(4 / 7, rel=0.01) and g2 == pytest.approx(400 / 0.3 * 4 / 7, rel=0.01)
    assert _col(world, "rate")[0] == g2
    assert _col(world, "done")[0] == pytest.approx(100 * g1 + 99 * g2)  # the in-place second
    with pytest.raises(PlanError, match="batch size 800, past its limit of 400"):
        world.check_plan(Plan.of(resizes=[Resize(0, [0, 1], 800)]))


def test_elastic_trace_errors_are_located(tmp_path):
    from roundhouse.errors import TraceError
    from roundhouse.traces.goodput import ElasticProfile

    profile = ElasticProfile.load_pollux(_app_folder(tmp_path), epochs={"toy": 3})
    world = World(Cluster.parse("2x2:V100"), ProfileTable.load(), elastic=profile)
    bad = pl.DataFrame([dict(job_id=7, arrival_s=0.0, gpus=1, model="toy", epochs=2.0, batch_size=1000)])
    with pytest.raises(TraceError, match=r"job 7: batch size 1000 is outside .* toy \(100 to 400\)"):
        world.prepare(bad, "t.csv")
    with pytest.raises(TraceError, match="no such folder"):
        ElasticProfile.load_pollux(tmp_path / "nowhere")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "x").mkdir()
    (tmp_path / "broken" / "x" / "placements.csv").write_text("placement,local_bsz,step_time,sync_time\n1,4,abc,0\n")
    with pytest.raises(TraceError, match=r"placements.csv:2.*step_time"):
        ElasticProfile.load_pollux(tmp_path / "broken")


POLLUX = SHARED / "data" / "pollux" / "traces"


@pytest.mark.skipif(not POLLUX.is_dir(), reason="../shared/data/pollux not present")
def test_pollux_applications_fitted_efficiency_matches_their_curves():
    from roundhouse.traces.goodput import ElasticProfile

    profile = ElasticProfile.load_pollux(POLLUX)
    assert [a.name for a in profile.apps] == ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"]
    for app in profile.apps:
        for path in POLLUX.glob(f"{app.name}/validation-*.csv"):
            m = int(path.stem.split("-")[-1])
            curve = pl.read_csv(path)
            measured = curve["progress"][app.epochs - 1] / (curve["iteration"][app.epochs - 1] * m / app.init_batch)
            got = profile.efficiency(np.array([profile.row(app.name)]), [m])[0]
            assert got == pytest.approx(measured, rel=0.03), (app.name, m)
    # More GPUs and a larger batch: more samples/s; across machines slower than within one.
    cifar = np.full(3, profile.row("CIFAR10"))
    one, four, spread = profile.throughput(cifar, [1, 1, 4], [1, 4, 4], [128, 512, 512])
    assert one < spread < four


def test_batch_jump_penalty_adds_epochs_for_large_jumps_only():
    jobs = [dict(job_id=1, arrival_s=0.0, gpus=1, duration_s=1000.0, batch_size=32, epoch_size=100.0)]
    world, sim = _world(jobs)
    world.batch_jump_penalty = 1.5
    play_round(world, sim, Plan.of([Assignment(0, [0])]))
    play_round(world, sim, Plan.of(resizes=[Resize(0, [0, 1], 64)]))  # 2x: within ONES' safe doubling
    assert _col(world, "work")[0] == 1000.0
    play_round(world, sim, Plan.of(resizes=[Resize(0, [0, 1], 512)]))  # 8x: two doublings beyond 2x
    assert _col(world, "work")[0] == pytest.approx(1000.0 + 1.5 * 2 * 100.0)
    play_round(world, sim, Plan.of(resizes=[Resize(0, [0], 32)]))  # shrinking costs nothing
    assert _col(world, "work")[0] == pytest.approx(1300.0)


def test_a_graph_runs_elastic_jobs_at_their_goodput(run_graph, tmp_path):
    from tests.conftest import jobs_of

    _app_folder(tmp_path / "apps")
    graph = """
    round = 100s;
    elastic_profile = "apps";
    src :: TraceSource(path="trace.csv");
    src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
    """
    # Two epochs (1000 steps at M0 = 100: 100,000 samples); batch 400 on one GPU runs at 4/7 x
    # 400 / 0.6 samples/s of goodput, so it takes 100,000 / 380.95 = 262.5 s.
    jobs = [dict(job_id=0, arrival_s=0.0, gpus=1, model="toy", epochs=2.0, batch_size=400)]
    got = jobs_of(run_graph(graph, jobs, cluster="1x2:V100"))
    assert got[0]["finish_s"] == pytest.approx(100_000 / (400 / 0.6 * 4 / 7), rel=0.01)


def test_best_batch_for_an_allocation(tmp_path):
    from roundhouse.traces.goodput import ElasticProfile

    profile = ElasticProfile.load_pollux(_app_folder(tmp_path), epochs={"toy": 3})
    # On one GPU, batch M (> 100) costs 2 accumulated steps: goodput M / (0.2 + 0.001 M) x
    # 400 / (300 + M), which falls from M = 100 (500/s) on: the best is M0. On two GPUs, batch M
    # is one step of M/2 per GPU: goodput M / (0.1 + 0.0005 M) x 400 / (300 + M), largest at
    # M = sqrt(0.1 x 300 / 0.0005) = 245 (within the geometric grid's spacing).
    batch, good = profile.best_batch(np.zeros(2, np.int64), [1, 1], [1, 2])
    assert batch[0] == 100 and good[0] == pytest.approx(500.0, rel=0.01)
    assert 230 <= batch[1] <= 260
    m = 245.0
    assert good[1] == pytest.approx(m / (0.1 + 0.0005 * m) * 400 / (300 + m), rel=0.01)


def test_two_jobs_swap_gpus_by_resizes():
    world, sim = _world(TWO)
    play_round(world, sim, Plan.of([Assignment(0, [0]), Assignment(1, [2])]))
    play_round(world, sim, Plan.of(resizes=[Resize(0, [2]), Resize(1, [0], in_place=False)]))
    assert world.gpus_of(0).tolist() == [2] and world.gpus_of(1).tolist() == [0]
    assert _col(world, "done").tolist() == pytest.approx([199.0, 180.0])  # 1 s in place, 20 s by restart


def _header_only(path):
    path.write_text(path.read_text().split("\n")[0] + "\n")


def _replace_row(path, line, row):
    lines = path.read_text().split("\n")
    lines[line - 1] = row
    path.write_text("\n".join(lines))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: _header_only(f / "placements.csv"), r"toy/placements.csv: error: has no measurements \(only a header\)"),
        (lambda f: _header_only(f / "validation-200.csv"), r"toy/validation-200.csv: error: has no measurements"),
        (
            lambda f: _replace_row(f / "placements.csv", 3, "1,100,0,0.0"),
            r"placements.csv:3: error: column 'step_time': '0' is not a number more than 0",
        ),
        (
            lambda f: _replace_row(f / "placements.csv", 2, "1,50,0.15,0.15"),
            r"placements.csv:2: error: column 'sync_time': 0.15 is not less than step_time 0.15",
        ),
        (
            lambda f: _replace_row(f / "placements.csv", 2, "10,50,0.15,0.0"),
            r"placements.csv:2: error: column 'placement': 10 has a 0 digit",
        ),
        (
            lambda f: _replace_row(f / "placements.csv", 2, "1,12.5,0.15,0.0"),
            r"placements.csv:2: error: column 'local_bsz': '12.5' is not a whole number",
        ),
        (
            lambda f: _replace_row(f / "validation-100.csv", 3, "1000.0,0,0.5,1.0,1.0"),
            r"validation-100.csv:3: error: column 'iteration': '0' is not a number more than 0",
        ),
    ],
)
def test_bad_measurement_files_are_located_errors(tmp_path, damage, message):
    """A measurement file with no rows, a zero step time or a cell that cannot be what its
    column says stops the fit with the file (and line and column), never a traceback or a fit
    of garbage."""
    from roundhouse.errors import TraceError
    from roundhouse.traces.goodput import ElasticProfile

    damage(_app_folder(tmp_path) / "toy")
    with pytest.raises(TraceError, match=message):
        ElasticProfile.load_pollux(tmp_path, epochs={"toy": 3})


def test_batch_jump_penalty_charges_resizes_not_launches():
    """The penalty weighs ONES' mid-training jump (a resize growing the batch past 2x), not the
    batch a job is launched or relaunched at, however far that is from its own or its last."""
    jobs = [dict(job_id=1, arrival_s=0.0, gpus=1, duration_s=1000.0, batch_size=32, epoch_size=100.0)]
    world, sim = _world(jobs)
    world.batch_jump_penalty = 1.5
    play_round(world, sim, Plan.of([Assignment(0, [0, 1], 512)]))  # 16x its own batch, at launch
    assert _col(world, "work")[0] == 1000.0 and _col(world, "batch_used")[0] == 512
    play_round(world, sim, Plan.of(suspend=np.array([0])))
    play_round(world, sim, Plan.of([Assignment(0, [0], 32)]))
    play_round(world, sim, Plan.of(suspend=np.array([0])))
    play_round(world, sim, Plan.of([Assignment(0, [0, 1], 512)]))  # relaunched at 16x its last
    assert _col(world, "work")[0] == 1000.0
