"""Synergy's allocators behind a plan that resizes jobs, the shipped graphs' FIFO skipping jobs
that do not fit, launches credited to the element that placed them, trace demands beyond the
machines, and SynergyOpt's one program per round."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from roundhouse.elements.placement.synergy import SynergyOpt, SynergyTune
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.context import Round
from roundhouse.runtime.explain import _planner
from roundhouse.runtime.settings import GraphSettings
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Events, Plan
from roundhouse.runtime.world import World
from roundhouse.tools.cli import main
from roundhouse.tools.reproductions.synergy import _graph
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import REPO
from tests.test_synergy import SYNERGY_MACHINE, apply, launch, world_of


@pytest.fixture
def machines(tmp_path):
    def make(nodes=1):
        path = tmp_path / "cluster.toml"
        path.write_text(SYNERGY_MACHINE.format(nodes=nodes))
        return Cluster.parse(str(path))

    return make


def allocate(element, world, plan, now=300.0):
    """The element's plan for `plan`, and what it gives each job id: {job id: (cores, GB)}."""
    ctx = Round(world, GraphSettings(), now, 1, Events(time=now))
    element.start(ctx)
    out = element.tick(ctx, plan)
    ids = world.jobs.column("job_id")
    assert out.alloc_rows is not None and out.alloc_cpus is not None and out.alloc_memory_gb is not None
    return out, {int(ids[r]): (float(c), float(m)) for r, c, m in zip(out.alloc_rows, out.alloc_cpus, out.alloc_memory_gb)}


def resize_and_launch(world, resized: dict[int, list[int]], launched: dict[int, list[int]], keep=()) -> Plan:
    """A plan as a resizing policy (Ones, Pollux) makes it: running jobs resized onto new GPUs,
    pending ones launched on the GPUs that frees."""
    row = world.jobs.row_of
    return Plan(
        resize_rows=[row(j) for j in resized],
        resize_gpus=np.concatenate([np.asarray(g) for g in resized.values()]),
        resize_counts=[len(g) for g in resized.values()],
        launch_rows=[row(j) for j in launched],
        launch_gpus=np.concatenate([np.asarray(g) for g in launched.values()]),
        launch_counts=[len(g) for g in launched.values()],
        keep=np.array(sorted(row(j) for j in keep), dtype=np.int64),
    )


# --- resized jobs get CPU and memory on their new GPUs ---


@pytest.mark.parametrize("allocator", [SynergyTune, SynergyOpt])
def test_a_shrunk_job_and_the_launch_on_the_gpus_it_frees_share_the_machine(machines, allocator):
    # ResNet18 holds all 8 GPUs of the machine and its 24 cores, then shrinks to 4 GPUs; an
    # AlexNet starts on the other 4. Both want more than their share (12 cores): neither can
    # have more, and the resized job must be counted on its new GPUs and given its share.
    world = world_of(machines(), [(0, "ResNet18", 8), (1, "AlexNet", 4)])
    apply(world, launch(world, {0: list(range(8))}, alloc={0: (24, 500)}))
    out, got = allocate(allocator(), world, resize_and_launch(world, {0: [0, 1, 2, 3]}, {1: [4, 5, 6, 7]}))
    assert set(got) == {0, 1}
    assert sum(c for c, _ in got.values()) <= 24 + 1e-9
    assert sum(m for _, m in got.values()) <= 500 + 1e-9
    assert got[0] == pytest.approx((12.0, 250.0)) and got[1] == pytest.approx((12.0, 250.0))


@pytest.mark.parametrize("allocator", [SynergyTune, SynergyOpt])
def test_a_moved_job_is_given_room_on_its_new_machine_not_its_old_one(machines, allocator):
    # Two machines. AlexNet (job 0, 1 GPU) on machine 0 with 12 cores moves to machine 1, where
    # job 2 (AlexNet, 1 GPU) is kept with 12 cores; job 1 (AlexNet) starts on machine 0. Counted
    # on machine 1, job 0 cannot have 12 cores beside job 2's 12 and the fallbacks; counted on
    # its old machine (as before) it would have taken them all.
    world = world_of(machines(2), [(0, "AlexNet", 1), (1, "AlexNet", 1), (2, "AlexNet", 1), (3, "GNMT", 6)])
    apply(world, launch(world, {0: [0], 2: [8], 3: list(range(9, 15))}, alloc={0: (12, 125), 2: (12, 125), 3: (6, 125)}))
    plan = resize_and_launch(world, {0: [15]}, {1: [1]}, keep=[2, 3])
    out, got = allocate(allocator(), world, plan)
    assert 0 in got and 1 in got
    on_machine_1 = got[0][0] + got.get(2, (12.0, 0.0))[0] + got.get(3, (6.0, 0.0))[0]
    assert on_machine_1 <= 24 + 1e-9
    assert got[1] == (12.0, 125.0)  # machine 0 is job 1's alone now


# --- the shipped graphs skip jobs that do not fit, as Synergy's FIFO does ---


@pytest.mark.parametrize("name", ["synergy-proportional", "synergy-tune", "synergy-opt"])
def test_synergy_graphs_skip_jobs_that_do_not_fit(name):
    graph = compile_file(REPO / "graphs" / f"{name}.sched")
    (fifo,) = graph.by_class("Fifo")
    assert fifo.backfill is True


def test_the_reproductions_graph_skips_jobs_that_do_not_fit(tmp_path):
    path = tmp_path / "g.sched"
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s,model\n0,0,1,60,ResNet18\n")
    path.write_text(_graph("SynergyTune", str(trace)))
    (fifo,) = compile_file(path).by_class("Fifo")
    assert fifo.backfill is True


# --- explain credits a launch to the placer (and its policy), not the allocator after it ---


def test_launches_are_credited_to_the_placer_and_its_ranking():
    graph = compile_file(REPO / "graphs" / "synergy-tune.sched")
    result = simulate(graph, until=3 * 3600.0, explain=True)
    frame = result.world.explain.frame(result.world).with_columns(pl.col("reason").cast(pl.String))
    launched = frame.filter(pl.col("reason") == "launched")
    assert launched.height > 0
    assert set(launched["element_class"].to_list()) == {"FirstFree"}
    assert set(launched["ranked_by_class"].to_list()) == {"Fifo"}


def test_the_walk_back_passes_only_elements_that_take_a_plan_and_hand_it_on():
    graph = compile_file(REPO / "graphs" / "synergy-opt.sched")
    (launcher,) = [e.name for e in graph.elements.values() if e.category == "launch"]
    (placer,) = graph.by_class("FirstFree")
    assert _planner(graph, launcher) == placer.name
    pollux = compile_file(REPO / "graphs" / "pollux.sched")
    (launcher,) = [e.name for e in pollux.elements.values() if e.category == "launch"]
    assert type(pollux.elements[_planner(pollux, launcher)]).__name__ == "Pollux"


# --- a trace's CPU and memory demands beyond the machines ---

BIG_ASKS = "job_id,arrival_s,gpus,duration_s,model,cpus,memory_gb\n0,0,2,600,ResNet18,48,1500\n1,0,8,600,VGG,96,4000\n"


def small_cluster(tmp_path) -> str:
    path = tmp_path / "small.toml"
    path.write_text('name = "small"\n[[group]]\nnodes = 2\ngpus_per_node = 4\ngpu_type = "V100"\ncpus = 8\nmemory_gb = 260\n')
    return str(path)


@pytest.mark.parametrize("allocator", ["Proportional", "SynergyTune", "SynergyOpt", None])
def test_demands_beyond_the_machines_run_capped(tmp_path, capsys, allocator):
    trace = tmp_path / "big.csv"
    trace.write_text(BIG_ASKS)
    chain = "Fifo(backfill=true) -> FirstFree" + (f" -> {allocator}" if allocator else "")
    (tmp_path / "g.sched").write_text(
        f'round = 5min;\nsrc :: TraceSource(path="{trace}");\n'
        f"src -> AcceptAll -> JobPool -> {chain} -> Launch -> report :: JobMetrics;\n"
    )
    out = tmp_path / "out"
    code = main(["run", str(tmp_path / "g.sched"), "--cluster", small_cluster(tmp_path), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    jobs = pl.read_csv(out / "jobs.csv")
    assert jobs["finish_s"].null_count() == 0 and jobs.height == 2


def test_a_synergy_tune_job_without_a_profile_gets_its_demand_capped_at_its_machine(machines):
    # VGG has no sensitivity profile: SynergyTune reads the trace's demand, 96 cores and 4000 GB
    # for 2 GPUs on one machine of 24 and 500, and gives it the machine's (it is alone there).
    world = World(machines(), ProfileTable.load())
    frame = pl.DataFrame(
        {
            "job_id": [0],
            "arrival_s": [0.0],
            "gpus": [2],
            "duration_s": [1e6],
            "model": ["VGG"],
            "cpus": [96.0],
            "memory_gb": [4000.0],
        }
    )
    batch, _ = world.prepare(frame, "test")
    world.add_jobs(batch)
    out, got = allocate(SynergyTune(), world, launch(world, {0: [0, 1]}))
    assert got == {0: (24.0, 500.0)}
    world.check_plan(out)


def test_negative_demands_are_still_refused(tmp_path, capsys):
    trace = tmp_path / "bad.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s,cpus\n0,0,1,60,-1\n")
    code = main(
        ["run", str(REPO / "graphs" / "synergy-tune.sched"), "--trace", str(trace), "--quiet", "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "cpus" in err and "must be 0 or more" in err


# --- SynergyOpt: one program per round, over every machine ---


def test_synergy_opt_solves_one_program_a_round_for_jobs_on_several_machines(machines):
    world = world_of(machines(3), [(0, "AlexNet", 1), (1, "ResNet18", 1), (2, "M5", 1)])
    opt = SynergyOpt()
    allocate(opt, world, launch(world, {0: [0], 1: [8], 2: [16]}))
    assert opt.counters["solves"] == 1
    cost = (SynergyOpt.__doc__ or "").split("Cost:")[1].split("See also")[0]
    assert "per round" in cost and "per machine," not in cost.split("program")[0]


ELASTIC_BEHIND = """
round = 10s;
cluster = "{root}/clusters/synergy-128.toml";
elastic_profile = "ones";
resize_in_place = 1s;
arrivals :: TraceSource(path="{root}/traces/samples/ones-60.csv");
arrivals -> AcceptAll -> pool :: JobPool -> Ones(population=16, mutate_rate=0.3, seed=0) -> {allocator} -> Launch -> report :: JobMetrics;
"""


@pytest.mark.parametrize("allocator", ["SynergyTune", "SynergyOpt", "Proportional"])
def test_an_allocator_behind_a_resizing_policy_runs(allocator):
    """The plan check counts a resized job on its new GPUs (not on those it gives up, which the
    round's launches may take) and accepts the allocator's amounts for it; before, such runs
    stopped with a machine counted twice, or with the resized job's allocation refused."""
    root = Path(__file__).resolve().parents[1]
    graph = compile_file("g.sched", text=ELASTIC_BEHIND.format(root=root, allocator=allocator))
    # Ten minutes: ONES has resized jobs some 80 times by then (the first within five minutes).
    result = simulate(graph, None, until=10 * 60.0)
    table = result.world.jobs
    assert int(table.column("resizes").sum()) > 0  # (the case in question happened)
    # A resized job not given amounts holds its new GPUs' share, not what its old GPUs gave it.
    running = result.world.running_rows
    share_cpu, _ = result.world.throughput.gpu_shares()
    on = result.world.holder >= 0
    per_job = np.bincount(result.world.holder[on], weights=share_cpu[on], minlength=len(table))
    if allocator == "Proportional":
        assert np.allclose(table.column("cpus_held")[running], per_job[running])
