"""TiresiasDally's choice of machines within a rack and of racks across the cluster, for jobs
larger than a machine: the fewest that hold the job while they have room (as DelayPlacer), never
GPUs another job holds, and the communication slowdown of the tiers the job actually spans."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.elements.placement.dally import DelayPlacer
from roundhouse.elements.placement.tiresias import TiresiasDally
from roundhouse.traces.communication import DALLY_TIERS, CommunicationTable
from tests.test_dally_baselines import cluster_of, make_world, round_plan, tick


def place(placer, world, order, job):
    """Carry out one round of `placer`; the GPUs `job` got (sorted) and its rate over its
    compute rate (1 / (1 + its communication share))."""
    plan = round_plan(placer, world, order)
    world.check_plan(plan)
    world.apply_plan(plan, 300.0)
    row = world.jobs.row_of(job)
    cols = world.jobs.writable
    return np.flatnonzero(world.holder == row).tolist(), float(cols["rate"][row] / cols["compute_rate"][row])


def ring_sizes(cluster, gpus):
    """(most GPUs on one machine, most machines in one rack, racks) of a set of GPUs."""
    gpus = np.asarray(gpus)
    nodes, per_machine = np.unique(cluster.gpu_node[gpus], return_counts=True)
    _, per_rack = np.unique(cluster.node_rack[nodes], return_counts=True)
    return int(per_machine.max()), int(per_rack.max()), len(per_rack)


def expected_factor(model, sizes):
    table = CommunicationTable.load()
    share = table.share(table.index([model]), np.array([sizes]), DALLY_TIERS)[0]
    return 1.0 / (1.0 + share)


# Two racks of four 4-GPU machines (GPUs 0-15 rack 0, 16-31 rack 1). Jobs 100 and 101 hold 3
# GPUs of machines 0 and 1: rack 0 has 1 + 1 + 4 + 4 = 10 free GPUs, rack 1 all 16.
HELD = {100: [0, 1, 2], 101: [4, 5, 6]}


@pytest.mark.parametrize("model", ["MobileNetV3", "ResNet18"])
def test_a_job_larger_than_a_machine_takes_the_fewest_machines_of_its_rack(tmp_path, model):
    # MobileNetV3 (high skew: the fullest rack that holds it, rack 0) and ResNet18 (the first
    # rack with room, rack 0) want 8 GPUs. Machines 2 and 3 of rack 0 are free: the job takes
    # them, not the lowest-numbered free GPUs of the rack (3, 7 and 8-13: four machines, a
    # rack ring twice as long; MobileNetV3 would run 2.7 times slower).
    cluster = cluster_of(tmp_path, 8, 2)
    jobs = [(100, 3, "ResNet-50"), (101, 3, "ResNet-50"), (1, 8, model)]
    world = make_world(cluster, jobs, HELD)
    gpus, factor = place(TiresiasDally(), world, [100, 101, 1], 1)
    assert gpus == list(range(8, 16))
    assert ring_sizes(cluster, gpus) == (4, 2, 1)
    assert factor == pytest.approx(expected_factor(model, (4, 2, 1)))
    # DelayPlacer (no timers) places it the same way.
    world = make_world(cluster, jobs, HELD)
    assert place(DelayPlacer(mode="no_wait"), world, [100, 101, 1], 1)[0] == gpus


def test_a_job_larger_than_a_rack_takes_the_fewest_racks(tmp_path):
    # Three racks of two 4-GPU machines (8 GPUs each). Racks 0 and 1 have 2 GPUs free each,
    # rack 2 all 8. A 9-GPU ResNet18 fits in no rack: it takes rack 2 and 1 more rack (two
    # racks), not the lowest-numbered free GPUs (2 + 2 + 5: three racks).
    cluster = cluster_of(tmp_path, 6, 3)
    held = {100: [0, 1, 4, 5, 6, 7], 101: [8, 9, 10, 11, 12, 13]}
    jobs = [(100, 6, "ResNet-50"), (101, 6, "ResNet-50"), (1, 9, "ResNet18")]
    world = make_world(cluster, jobs, held)
    gpus, factor = place(TiresiasDally(), world, [100, 101, 1], 1)
    assert len(gpus) == 9 and not set(gpus) & {g for ids in held.values() for g in ids}
    assert ring_sizes(cluster, gpus)[2] == 2
    assert gpus == [2, 3, *range(16, 23)]
    assert factor == pytest.approx(expected_factor("ResNet18", ring_sizes(cluster, gpus)))


def test_the_choice_is_the_same_every_time_and_never_on_held_gpus(tmp_path):
    cluster = cluster_of(tmp_path, 8, 2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        held_gpus = rng.choice(32, size=12, replace=False)
        held = {100 + k: [int(g)] for k, g in enumerate(held_gpus)}
        jobs = [(j, 1, "ResNet-50") for j in held] + [(1, 6, "AlexNet"), (2, 10, "BERT-large"), (3, 5, "ResNet18")]
        order = [*held, 1, 2, 3]
        first = round_plan(TiresiasDally(), make_world(cluster, jobs, held), order)
        again = round_plan(TiresiasDally(), make_world(cluster, jobs, held), order)
        assert first.launch_rows.tolist() == again.launch_rows.tolist()
        assert first.launch_gpus.tolist() == again.launch_gpus.tolist()
        assert not set(first.launch_gpus.tolist()) & set(held_gpus.tolist())
        assert len(set(first.launch_gpus.tolist())) == len(first.launch_gpus)


def test_a_high_skew_job_takes_the_rack_that_holds_it_on_the_fewest_machines(tmp_path):
    # Rack 0 has 8 GPUs free, one or more on each of its four machines; rack 1 has 11, two
    # whole machines among them. An 8-GPU AlexNet (high skew) takes rack 1's two whole machines,
    # not rack 0 (the rack with the fewest free GPUs that holds it, on four machines).
    cluster = cluster_of(tmp_path, 8, 2)
    held = {100: [0], 101: [4, 5], 102: [8, 9], 103: [12, 13, 14], 104: [16, 17, 18, 19], 105: [20]}
    jobs = [(j, len(g), "ResNet-50") for j, g in held.items()] + [(1, 8, "AlexNet")]
    world = make_world(cluster, jobs, held)
    gpus, factor = place(TiresiasDally(), world, [*held, 1], 1)
    assert gpus == list(range(24, 32))
    assert ring_sizes(cluster, gpus) == (4, 2, 1)
    assert factor == pytest.approx(expected_factor("AlexNet", (4, 2, 1)))


# Two racks of four 4-GPU machines. Rack 0 has 10 GPUs free (machines 0 and 1 whole, one GPU
# on machines 2 and 3), rack 1 has 8 (machines 4 and 5 whole). A 16-GPU MobileNetV3 fits no
# rack: two racks it must span, and on two machines of each (ring 2 at the rack tier), not on
# all four machines of rack 0 (ring 4: 223x its compute instead of 206x).
ACROSS = {100: [8, 9, 10], 101: [12, 13, 14], 102: list(range(24, 32))}
TWO_PER_RACK = [*range(8), *range(16, 24)]


def test_across_racks_a_job_spans_as_few_machines_per_rack_as_the_racks_allow(tmp_path):
    cluster = cluster_of(tmp_path, 8, 2)
    jobs = [(j, len(g), "ResNet-50") for j, g in ACROSS.items()] + [(1, 16, "MobileNetV3")]
    world = make_world(cluster, jobs, ACROSS)
    placer = DelayPlacer(mode="no_wait")
    gpus, factor = place(placer, world, [*ACROSS, 1], 1)
    assert gpus == TWO_PER_RACK and placer.counters["network"] == 1
    assert ring_sizes(cluster, gpus) == (4, 2, 2)
    assert factor == pytest.approx(expected_factor("MobileNetV3", (4, 2, 2)))


def test_at_a_lease_end_a_job_across_racks_moves_to_fewer_machines_per_rack(tmp_path):
    # The same job runs on all four machines of rack 0 and two of rack 1 (the lowest-numbered
    # free GPUs); at its lease's end the same racks hold it on two machines each: it moves.
    cluster = cluster_of(tmp_path, 8, 2)
    running = {**ACROSS, 1: [*range(8), 11, 15, *range(16, 22)]}
    jobs = [(j, len(g), "ResNet-50") for j, g in ACROSS.items()] + [(1, 16, "MobileNetV3")]
    world = make_world(cluster, jobs, running)
    placer = DelayPlacer(mode="no_wait", release=True)
    launched, kept, suspended = tick(placer, world, [*ACROSS, 1])
    assert launched == {1: TWO_PER_RACK} and kept == sorted(ACROSS) and suspended == [1]
    assert placer.counters["moved"] == 1
