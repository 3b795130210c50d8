"""Fixes from a review of elastic jobs (ONES, Pollux): the learning-rate factor's B0 (the batch
the trace's learning rate is for) in the simulator and the live backend, and at launch; ONES
trace rows checked by their batch per GPU; validation curves shorter than their application's
epochs; Pollux's p = 0 as the limit of its power means."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.policies import pollux_search
from roundhouse.errors import TraceError
from roundhouse.runtime.simulation import Simulation
from roundhouse.runtime.types import LR_LINEAR, LR_SQRT, Assignment, Plan, Resize
from roundhouse.traces import ones
from roundhouse.traces.goodput import ElasticProfile
from roundhouse.traces.jobs import JobBatch, JobTable
from tests.conftest import SHARED
from tests.test_live_backend import add_jobs, live, pump, round_trip  # noqa: F401 (the fixture)

POLLUX_DATA = SHARED / "data" / "pollux" / "traces"
HEADER = ",".join(ones.TRACE_COLUMNS)


def _ones_graph(tmp_path: Path, rows: list[str], policy: str = "Ones(population=16, mutate_rate=0.3, seed=0)") -> Path:
    trace = tmp_path / "ones.csv"
    trace.write_text("\n".join([HEADER, *rows]) + "\n")
    graph = tmp_path / "ones.sched"
    graph.write_text(
        'round = 10s;\ncluster = "16x4:V100";\nelastic_profile = "ones";\nresize_in_place = 1s;\n\n'
        f'arrivals :: TraceSource(path="{trace}");\n'
        f"arrivals -> AcceptAll -> pool :: JobPool -> {policy} -> Launch -> report :: JobMetrics;\n"
    )
    return graph


def _run(graph: Path, on_step=None) -> Simulation:
    sim = Simulation(str(graph), skip_rounds=False)
    while not sim.done:
        sim.step()
        if on_step is not None:
            on_step(sim)
    return sim


# --- 1. the learning-rate factor's B0 ------------------------------------------------------------


def test_ones_resizes_scale_the_learning_rate_from_the_local_batch(tmp_path):
    """A BERT job of local batch 32 (the trace's learning rate is for it), started on one GPU and
    grown by ONES: under the linear rule its factor is its global batch over 32, as ONES' rule
    (lr x GPUs) gives it; the job's `batch_size` (32 x the 8 GPUs it asked for) is not B0."""
    seen: list[tuple[int, float, float]] = []

    def note(sim: Simulation) -> None:
        t = sim.world.jobs
        if t.column("held")[0] > 0:
            seen.append((int(t.column("resizes")[0]), float(t.column("batch_used")[0]), float(t.column("lr_scale")[0])))

    _run(_ones_graph(tmp_path, ["0,bert,sst2,20000,5,32,0.0000025,0.00004,0.9,8"]), note)
    resized = [(b, f) for n, b, f in seen if n > 0]
    assert resized, "ONES never resized the job"
    assert all(f == pytest.approx(b / 32) for b, f in resized)
    assert any(b > 32 for b, _ in resized)  # (before: 64 / 256 = 0.25)


def _table(batch: list[int], local: list[float] | None) -> JobTable:
    table = JobTable(1)
    frame = {"job_id": np.arange(len(batch)), "batch_size": np.array(batch, dtype=np.int64)}
    if local is not None:
        frame["local_batch"] = np.array(local, dtype=np.float64)
    table.append(JobBatch({k: np.asarray(v) for k, v in frame.items()}, np.ones((len(batch), 1)), "t"))
    return table


def test_b0_is_the_local_batch_where_a_job_has_one_else_its_batch_size():
    from roundhouse.runtime.resizing import lr_base

    assert lr_base(_table([256, 64, 7], [32.0, np.nan, 1.0]), np.arange(3)).tolist() == [32.0, 64.0, 1.0]
    assert lr_base(_table([256, 64], None), np.arange(2)).tolist() == [256.0, 64.0]


@pytest.mark.live
def test_the_live_backend_sends_the_factor_of_the_local_batch(live):  # noqa: F811
    """A job of local batch 20 asking for 2 GPUs (its batch_size 40), launched on one GPU at 20
    and grown in place to 40: the resize message carries 40 / 20 = 2 (before: 40 / 40 = 1)."""
    world, backend, (a, b), _ = live
    for ag in (a, b):
        ag.receive()
    job = {"job_id": 5, "arrival_s": 0.0, "gpus": 2, "model": "LM", "iterations": 900.0, "batch_size": 40, "local_batch": 20.0}
    (row,) = add_jobs(world, [job])
    round_trip(world, backend, Plan.of([Assignment(row, [0], 20)]))
    pump(backend)
    a.receive()
    round_trip(world, backend, Plan.of(resizes=[Resize(row, [0, 1], 40, LR_LINEAR)]))
    pump(backend)
    [(t, msg)] = a.receive(1)
    assert t == "resize" and msg["lr_scale"] == pytest.approx(2.0)
    assert world.jobs.column("lr_scale")[row] == pytest.approx(2.0)  # the simulator's books agree


def _world_with_two_jobs():
    from roundhouse.runtime.cluster import Cluster
    from roundhouse.runtime.world import World
    from roundhouse.traces.profiles import ProfileTable

    world = World(Cluster.parse("1x4:V100"), ProfileTable.load(), "V100")
    frame = pl.DataFrame(
        [
            {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 1e6, "batch_size": 20},
            {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 1e6, "batch_size": 20},
        ]
    )
    batch, _ = world.prepare(frame, "test")
    return world, world.add_jobs(batch)


def test_a_launch_with_a_batch_size_sets_the_learning_rate_factor():
    """A job launched at twice its own batch has factor 2 (linear, never resized); one resized
    under sqrt to 4x and relaunched at its own batch has the factor of that batch, 1, not the
    resize's 2. A launch without batch sizes changes nothing."""
    world, (r0, r1) = _world_with_two_jobs()
    world.apply_plan(Plan.of([Assignment(r0, [0], 40), Assignment(r1, [1])]), 0.0)
    lr = world.jobs.column("lr_scale")
    assert (lr[r0], lr[r1]) == (pytest.approx(2.0), pytest.approx(1.0))
    assert world.jobs.column("lr_rule")[r0] == -1  # (never resized)
    world.apply_plan(Plan.of(keep=[r0], resizes=[Resize(r1, [1, 2], 80, LR_SQRT)]), 10.0)
    assert world.jobs.column("lr_scale")[r1] == pytest.approx(2.0)
    world.apply_plan(Plan(suspend=[r1]), 20.0)
    world.apply_plan(Plan.of([Assignment(r1, [1])], keep=[r0]), 30.0)
    assert world.jobs.column("lr_scale")[r1] == pytest.approx(1.0)  # (before: 2, its resize's)
    world.apply_plan(Plan(suspend=[r1], keep=[r0]), 40.0)
    world.apply_plan(Plan(launch_rows=[r1], launch_gpus=[3], launch_counts=[1], keep=[r0]), 50.0)
    assert world.jobs.column("lr_scale")[r1] == pytest.approx(1.0)


# --- 2. ONES trace rows asking for more GPUs than Table 2 -----------------------------------------


@pytest.mark.parametrize(
    ("row", "said"),
    [
        # a batch per GPU past the largest batch (before: read, and refused at the run naming only the job)
        (
            "0,resnet50,imagenet,20000,10,1000,0.0005,0.008,0.55,1",
            "1000 (the batch per GPU a job starts with on one GPU) is above",
        ),
        # a global batch below the smallest
        ("0,resnet50,imagenet,20000,10,16,0.0005,0.008,0.55,1", "16 x num_gpus 1 = 16 (the job's global batch) is below"),
    ],
)
def test_an_ones_row_outside_its_application_s_batches_is_refused_at_read(tmp_path, row, said):
    path = tmp_path / "t.csv"
    path.write_text(f"{HEADER}\n0,resnet50,imagenet,20000,10,32,0.0005,0.008,0.55,4\n{row}\n")
    with pytest.raises(TraceError) as err:
        ones.read_trace(path)
    assert (err.value.path, err.value.row, err.value.column) == (str(path), 3, "batch_size")
    assert said in err.value.message and "resnet50-imagenet (32 to 512)" in err.value.message


def test_ones_rows_asking_for_many_gpus_or_a_small_local_batch_read(tmp_path):
    """What the reader's check lets through: a global batch past the largest (20 GPUs x 32), and
    a batch per GPU below the smallest whose global batch is not (128 x 4 of resnet18-cifar)."""
    path = tmp_path / "t.csv"
    path.write_text(
        f"{HEADER}\n0,resnet50,imagenet,20000,10,32,0.0005,0.008,0.55,20\n0,resnet18,cifar,10000,10,128,0.001,0.003,0.55,4\n"
    )
    frame = ones.read_trace(path)
    assert frame["batch_size"].to_list() == [640, 512] and frame["local_batch"].to_list() == [32, 128]


@pytest.mark.parametrize(
    "row", ["0,resnet50,imagenet,20000,10,32,0.0005,0.008,0.55,20", "0,bert,sst2,20000,5,32,0.0000025,0.00004,0.9,16"]
)
def test_an_ones_job_asking_for_more_gpus_than_its_pair_s_default_runs(tmp_path, row):
    """Its batch size (local x GPUs) is what it asks for on all its GPUs, past the profile's
    largest: ONES starts it on one GPU at its local batch and keeps it within its limit (before:
    the run was refused, naming a batch size the file does not hold)."""
    sim = Simulation(str(_ones_graph(tmp_path, [row])))
    result = sim.run()
    assert result.stop_reason.endswith("every job finished"), result.stop_reason
    assert sim.jobs()["finish_s"].is_finite().all()


# --- 3. validation curves shorter than their application's epochs ---------------------------------


def test_a_validation_curve_shorter_than_the_application_s_epochs_is_refused(tmp_path):
    """cifar10 trains for Pollux's 100 epochs: a curve of 2 rows is refused naming its file
    (before: the application silently trained for 2 epochs)."""
    folder = tmp_path / "prof"
    shutil.copytree(POLLUX_DATA / "cifar10", folder / "cifar10")
    short = folder / "cifar10" / "validation-4096.csv"
    short.write_text("\n".join(short.read_text().splitlines()[:3]) + "\n")
    with pytest.raises(TraceError) as err:
        ElasticProfile.load_pollux(folder)
    assert err.value.path == str(short)
    assert "has 2 epoch(s) of measurements" in err.value.message and "cifar10 trains for 100 epochs" in err.value.message


def test_pollux_s_own_curves_give_each_application_its_epochs():
    profile = ElasticProfile.load_pollux(POLLUX_DATA)
    assert {a.name: a.epochs for a in profile.apps} == {
        "bert": 2,
        "cifar10": 100,
        "deepspeech2": 80,
        "imagenet": 90,
        "ncf": 10,
        "yolov3": 50,
    }


# --- 4. Pollux's p = 0 ---------------------------------------------------------------------------


def test_p_0_is_the_limit_of_the_power_means():
    """With a speedup of 0 (a job given nothing) the mean at p = 0 is that of s + 0.001, as the
    others are: before, max(s, 0.001) made it 0.001 x 0.001 = 1e-6 rather than 0.001 x 1.001."""
    s = np.array([[0.0, 1.0], [0.5, 2.0]])
    geometric = pollux_search.power_mean(s, 0.0)
    assert geometric == pytest.approx(np.exp(np.log(s + 1e-3).mean(axis=-1)), rel=1e-12)
    for p in (1e-6, -1e-6):
        assert pollux_search.power_mean(s, p) == pytest.approx(geometric, rel=1e-5)
    table = np.zeros((2, 2, 3))
    table[0, 1, 1], table[1, 1, 2] = 0.0, 2.0
    score = pollux_search.scorer(table, np.zeros((2, 1), np.int8), np.ones(2), 1.0, 0.0)
    state = np.array([[[1], [2]]], dtype=np.int8)
    assert score(state)[0] == pytest.approx(pollux_search.power_mean(np.array([0.0, 2.0]), 0.0), rel=1e-12)


@pytest.mark.live
def test_a_live_launch_with_a_batch_size_carries_the_factor_the_simulator_books(live):  # noqa: F811
    """A job never resized, launched at twice its own batch: the launch message carries the
    linear factor 2, as the simulator's books have it (before: no factor, so the job trained at
    its own learning rate on twice the batch)."""
    world, backend, (a, b), _ = live
    for ag in (a, b):
        ag.receive()
    job = {"job_id": 6, "arrival_s": 0.0, "gpus": 1, "model": "LM", "iterations": 900.0, "batch_size": 20}
    (row,) = add_jobs(world, [job])
    round_trip(world, backend, Plan.of([Assignment(row, [0], 40)]))
    pump(backend)
    [(t, msg)] = a.receive(1)
    assert t == "launch" and msg["lr_scale"] == pytest.approx(2.0)
    assert world.jobs.column("lr_scale")[row] == pytest.approx(2.0)
