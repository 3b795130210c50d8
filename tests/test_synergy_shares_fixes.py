"""CPU and memory with GPUs that two jobs share (space sharing): the two split their GPUs'
share, by default, in Proportional, in SynergyTune's and SynergyOpt's books and in the plan check,
so that no machine hands out more than it has; SynergyTune's demand cap for a job spread unevenly
over machines; the Synergy workload's demands per GPU."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.elements.placement.synergy import Proportional, SynergyOpt, SynergyTune
from roundhouse.runtime.allocation import regain_shared
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.simulate import simulate
from roundhouse.runtime.types import Plan
from roundhouse.traces.generators import SYNERGY_MODELS, synergy_philly
from roundhouse.traces.resources import ResourceTable
from tests.test_synergy import SYNERGY_MACHINE, apply, column, launch, tick, world_of


@pytest.fixture
def machine(tmp_path):
    """Machines like Synergy's (8 GPUs, 24 cores, 500 GB each)."""

    def make(nodes=1):
        path = tmp_path / "cluster.toml"
        path.write_text(SYNERGY_MACHINE.format(nodes=nodes))
        return Cluster.parse(str(path))

    return make


def pair_and_rest(world, alloc=None) -> Plan:
    """Jobs 0 and 1 launched to share GPU 0 of an 8-GPU machine, job 2 on its other 7 GPUs."""
    plan = launch(world, {0: [0], 1: [0], 2: list(range(1, 8))}, alloc=alloc)
    rows = plan.launch_rows
    return Plan(
        launch_rows=rows,
        launch_gpus=plan.launch_gpus,
        launch_counts=plan.launch_counts,
        launch_partner=[rows[1], rows[0], -1],
        alloc_rows=plan.alloc_rows,
        alloc_cpus=plan.alloc_cpus,
        alloc_memory_gb=plan.alloc_memory_gb,
    )


# --- a shared GPU's share, split between its two holders ---


def test_a_pair_launched_without_amounts_splits_its_gpus_share(machine):
    # 24 cores and 500 GB on 8 GPUs: the pair's GPU gives 1.5 cores and 31.25 GB to each, and
    # the 7 other GPUs' 21 cores and 437.5 GB to job 2 fill the machine exactly.
    world = world_of(machine(), [(0, "A3C", 1), (1, "CycleGAN", 1), (2, "AlexNet", 7)])
    apply(world, pair_and_rest(world, alloc={2: (21.0, 437.5)}))
    assert [column(world, "cpus_held", j) for j in range(3)] == [1.5, 1.5, 21.0]
    assert [column(world, "memory_held_gb", j) for j in range(3)] == [31.25, 31.25, 437.5]


def test_proportional_gives_a_pair_half_its_gpus_share_each(machine):
    world = world_of(machine(), [(0, "A3C", 1), (1, "CycleGAN", 1), (2, "AlexNet", 7)])
    _, got = tick(Proportional(), world, pair_and_rest(world))  # (tick checks the plan)
    assert got == {0: (1.5, 31.25), 1: (1.5, 31.25), 2: (21.0, 437.5)}


@pytest.mark.parametrize("allocator", [SynergyTune, SynergyOpt])
def test_synergy_allocators_count_a_shared_gpu_once(machine, allocator):
    # Every job wants more than its share; the machine is full at the shares (the pair's GPU
    # counted once): nobody can have more, and the plan fits.
    world = world_of(machine(), [(0, "ResNet18", 1), (1, "ResNet50", 1), (2, "AlexNet", 7)])
    _, got = tick(allocator(), world, pair_and_rest(world))
    assert got == {0: (1.5, 31.25), 1: (1.5, 31.25), 2: (21.0, 437.5)}


def test_regain_shared_gives_a_lone_partner_what_its_partner_held_up_to_the_whole_share(machine):
    # A job holding half its GPU's share, once its partner has left, takes what the partner
    # held up to the whole share; one holding more keeps what it holds.
    world = world_of(machine(), [(0, "A3C", 1), (1, "CycleGAN", 1), (2, "AlexNet", 7)])
    apply(world, pair_and_rest(world, alloc={2: (21.0, 437.5)}))
    cols, rows = world._cols, np.array([world.jobs.row_of(0), world.jobs.row_of(2)])
    freed = (np.array([1.5, 3.0]), np.array([31.25, 62.5]))
    regain_shared(cols, world.throughput, rows, [np.array([0]), np.arange(1, 8)], freed)
    assert cols["cpus_held"][rows].tolist() == [3.0, 21.0]
    assert cols["memory_held_gb"][rows].tolist() == [62.5, 437.5]


def test_a_lone_partner_takes_only_what_its_partner_freed(machine):
    # The partner held less than half the share (an allocator gave the machine's rest to
    # others): the job that stays takes that much, not the whole share, so the machine holds
    # no more than it has.
    world = world_of(machine(), [(0, "A3C", 1), (1, "CycleGAN", 1), (2, "AlexNet", 7)])
    apply(world, pair_and_rest(world, alloc={2: (21.0, 437.5)}))
    cols, rows = world._cols, np.array([world.jobs.row_of(0)])
    held_cpu, held_memory = float(cols["cpus_held"][rows][0]), float(cols["memory_held_gb"][rows][0])
    regain_shared(cols, world.throughput, rows, [np.array([0])], (np.array([0.5]), np.array([10.0])))
    assert cols["cpus_held"][rows].tolist() == [held_cpu + 0.5]
    assert cols["memory_held_gb"][rows].tolist() == [held_memory + 10.0]


def space_sharing_graph(tmp_path, allocator: str, cluster: str = "2:2:2", jobs: int = 24):
    text = (
        f'round = 6min;\ncluster = "{cluster}";\n'
        f"src :: PoissonSource(rate=12/h, jobs={jobs}, gpus=single, models=blox, seed=3);\n"
        "src -> AcceptAll -> pool :: JobPool -> solve :: MaxMinFairness(space_sharing=true, interval=0) "
        f"-> mech :: GavelRounds -> GavelPlacer -> {allocator}Launch -> m :: JobMetrics;\n"
    )
    (tmp_path / "g.sched").write_text(text)
    return compile_file(tmp_path / "g.sched")


def most_held(ctx) -> float:
    """The largest fraction of a machine's cores or memory that its running jobs hold (each
    job's allocation spread evenly over its GPUs, a shared GPU's holders both counted)."""
    cluster, jobs = ctx.cluster, ctx.jobs
    holders = [np.asarray(h) for h in (ctx.holder, ctx.co_holder) if h is not None]
    gpus_of = np.bincount(np.concatenate([h[h >= 0] for h in holders]), minlength=len(jobs))
    worst = 0.0
    for name, capacity in (("cpus_held", cluster.node_cpus), ("memory_held_gb", cluster.node_memory_gb)):
        used = np.zeros(cluster.n_nodes)
        for h in holders:
            on = np.flatnonzero(h >= 0)
            np.add.at(used, cluster.gpu_node[on], jobs.column(name)[h[on]] / gpus_of[h[on]])
        worst = max(worst, float((used / np.asarray(capacity, float)).max()))
    return worst


@pytest.mark.parametrize("allocator", ["", "Proportional -> ", "SynergyTune -> ", "SynergyOpt -> "])
def test_no_machine_hands_out_more_than_it_has_under_space_sharing(tmp_path, allocator):
    graph = space_sharing_graph(tmp_path, allocator)
    worst, pairs = [], []

    def watch(ctx):
        worst.append(most_held(ctx))
        pairs.append(graph.elements["mech"].counters["pairs"])

    result = simulate(graph, on_round=watch)
    assert sum(pairs) > 0  # pairs ran
    assert result.reports["m"]["jobs"]["status"].to_list() == ["finished"] * 24
    assert max(worst) <= 1.0 + 1e-9


# On V100 machines the blox models' speed depends on their CPU and memory (their profile): a
# pair's half shares, and a lone partner's whole share regained, must leave them as fast.
@pytest.mark.parametrize("cluster, jobs", [("2:2:2", 24), ("2x4:V100", 40)])
def test_proportional_is_what_no_allocator_gives_under_space_sharing(tmp_path, cluster, jobs):
    plain = simulate(space_sharing_graph(tmp_path, "", cluster, jobs)).reports["m"]
    explicit = simulate(space_sharing_graph(tmp_path, "Proportional -> ", cluster, jobs)).reports["m"]
    assert explicit["summary"] == plain["summary"]
    assert explicit["jobs"].equals(plain["jobs"])


# --- SynergyTune: a demand capped so that its spread fits every machine ---


@pytest.mark.parametrize("allocator", [SynergyTune, SynergyOpt])
def test_a_job_spread_unevenly_gets_the_most_that_fits(machine, allocator):
    # AlexNet on 8 GPUs wants 96 cores and 1,000 GB, placed 2 + 6 over two machines of 24 cores
    # and 500 GB: its allocation goes 1/4 and 3/4 to them, so the most that fits the fuller one
    # is 24 / (3/4) = 32 cores (SynergyOpt's grid: 4 per GPU), above its share of 24.
    world = world_of(machine(2), [(0, "AlexNet", 8)])
    _, got = tick(allocator(), world, launch(world, {0: list(range(6, 14))}))
    cores, memory = got[0]
    assert cores == pytest.approx(32.0)
    assert memory == pytest.approx(2000 / 3 if allocator is SynergyTune else 500.0)  # (Opt: on the grid)
    assert 0.75 * memory <= 500.0 + 1e-9


# --- the Synergy workload's demands ---


def test_the_synergy_workload_asks_for_each_models_best_case():
    table = ResourceTable.load()
    for model, (_, cpus, memory) in SYNERGY_MODELS.items():
        i = int(table.index([model])[0])
        assert (cpus, memory) == (table.best_cpus[i], table.best_memory_gb[i]), model
    frame = synergy_philly(200, 9 / 3600, seed=0)
    i = table.index(frame["model"].to_list())
    gpus = frame["gpus"].to_numpy()
    assert np.allclose(frame["cpus"].to_numpy(), table.best_cpus[i] * gpus)
    assert np.allclose(frame["memory_gb"].to_numpy(), table.best_memory_gb[i] * gpus)
