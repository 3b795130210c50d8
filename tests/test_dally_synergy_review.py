"""Dally's tuned-timer timeline reports the timers a job is held to; a running job moves at a
lease's end only to a placement with smaller communication rings; and the communication profile
and its fitting refuse inputs that would leave a model unreachable or give NaN or negative
scales."""

from __future__ import annotations

import numpy as np
import pytest

from roundhouse.elements.placement.dally import DelayPlacer
from roundhouse.errors import TraceError
from roundhouse.traces.communication import SHIPPED_COMMUNICATION, CommunicationTable, fit_scales
from tests.test_dally_baselines import cluster_of, make_world, tick

# --- the timeline of tuned timers ---


def test_the_timeline_gives_a_job_larger_than_a_machine_a_machine_timer_of_zero(tmp_path):
    # Two racks of 2 machines of 4 GPUs, all free. A 6-GPU job fits no machine, so its T_Mc is 0
    # (Algorithm 1), whatever the machine floor; it fits a rack, so its T_Rk is the rack floor.
    # It has starved 300 s < the 1 h machine floor, yet takes a rack at once: the timer it was held
    # to is 0, and so is what the timeline reports.
    world = make_world(cluster_of(tmp_path, 4, 2), [(1, 6, "MobileNetV3")])
    placer = DelayPlacer(tuned=True, timeline=True, machine_floor=3600.0, rack_floor=7200.0)
    launched, _, _ = tick(placer, world, [1], now=300.0)
    assert len(launched[1]) == 6 and placer.counters["rack"] == 1
    assert placer._timeline == [(300.0, 6, 0.0, 7200.0)]


def test_the_timeline_keeps_the_tuned_machine_timer_of_a_job_that_fits_a_machine(tmp_path):
    # A 4-GPU job with one GPU busy on every machine: no machine has room, so its timers are asked
    # for; it fits a machine, so its machine timer is the floor, and it declines.
    running = {100: [0], 101: [4], 102: [8], 103: [12]}
    jobs = [(j, 1, "BERT") for j in running] + [(1, 4, "MobileNetV3")]
    world = make_world(cluster_of(tmp_path, 4, 2), jobs, running)
    placer = DelayPlacer(tuned=True, timeline=True, machine_floor=3600.0, rack_floor=7200.0)
    launched, _, _ = tick(placer, world, [1, *running], now=300.0)
    assert launched == {} and placer.counters["declined"] == 1
    assert placer._timeline == [(300.0, 4, 3600.0, 7200.0)]


# --- a move at a lease's end goes to a tighter placement only ---


def _rings(cluster, gpus):
    """(GPUs on the busiest machine, machines in the busiest rack, racks): the ring sizes."""
    per_node = np.bincount(cluster.gpu_node[np.asarray(gpus)], minlength=cluster.n_nodes)
    per_rack = np.bincount(cluster.node_rack[per_node > 0], minlength=cluster.n_racks)
    return int(per_node.max()), int(per_rack.max()), int(np.count_nonzero(per_rack))


def test_a_job_across_racks_does_not_move_to_fewer_machines_that_leave_a_rack_as_busy(tmp_path):
    # Two racks of 2 machines of 4 GPUs. Job 1 (ResNet50, 8 GPUs) holds 2 GPUs on each machine:
    # rings (2, 2, 2). Jobs 2-4 hold the other 2 GPUs of machines 1-3 and rank above it, so at
    # the lease's end they take theirs back, and what job 1 is offered is its own gang and
    # machine 0's 2 idle GPUs. Across 2 racks it could take 4 + 2 on machines 0 and 1 and 2 on
    # machine 2: 3 machines rather than 4, but still 2 machines in rack 0 and 2 racks, with 4
    # GPUs on machine 0: rings (4, 2, 2), more communication, and a checkpoint to get there. It
    # keeps its GPUs.
    cluster = cluster_of(tmp_path, 4, 2)
    running = {1: [0, 1, 4, 5, 8, 9, 12, 13], 2: [6, 7], 3: [10, 11], 4: [14, 15]}
    world = make_world(cluster, [(1, 8, "ResNet50"), (2, 2, "BERT"), (3, 2, "BERT"), (4, 2, "BERT")], running)
    placer = DelayPlacer(machine_wait=100.0, rack_wait=200.0, release=True)
    launched, kept, suspended = tick(placer, world, [2, 3, 4, 1])
    assert (launched, kept, suspended) == ({}, [1, 2, 3, 4], [])
    assert placer.counters["moved"] == 0
    # (the move refused would have cost it communication: its share on (4, 2, 2) is higher)
    table = CommunicationTable.load()
    row = table.index(["ResNet50"])
    worse = table.share(row, [(4, 2, 2)], cluster.tiers)[0]
    assert worse > table.share(row, [_rings(cluster, running[1])], cluster.tiers)[0]


def test_a_job_across_racks_still_moves_to_fewer_machines_in_its_busiest_rack(tmp_path):
    # As above, but machine 1 is idle (job 2 is gone): job 1 can take machines 0 and 1 whole, one
    # rack, and moves there.
    cluster = cluster_of(tmp_path, 4, 2)
    running = {1: [0, 1, 4, 5, 8, 9, 12, 13], 3: [10, 11], 4: [14, 15]}
    world = make_world(cluster, [(1, 8, "ResNet50"), (3, 2, "BERT"), (4, 2, "BERT")], running)
    placer = DelayPlacer(machine_wait=100.0, rack_wait=200.0, release=True)
    launched, kept, suspended = tick(placer, world, [3, 4, 1])
    assert launched == {1: list(range(8))} and suspended == [1] and placer.counters["moved"] == 1
    assert _rings(cluster, launched[1]) == (4, 2, 1)


def test_a_job_across_racks_moves_to_as_many_racks_with_fewer_machines_in_each(tmp_path):
    # Job 1 holds 2 GPUs on each machine (rings (2, 2, 2)); jobs 2 and 3 hold 2 GPUs on machines
    # 0 and 2 and rank above it. Machines 1 and 3 each have 4 on offer: across 2 racks still,
    # one machine in each, rings (4, 1, 2). It moves there.
    cluster = cluster_of(tmp_path, 4, 2)
    running = {1: [0, 1, 4, 5, 8, 9, 12, 13], 2: [2, 3], 3: [10, 11]}
    world = make_world(cluster, [(1, 8, "ResNet50"), (2, 2, "BERT"), (3, 2, "BERT")], running)
    placer = DelayPlacer(machine_wait=100.0, rack_wait=200.0, release=True)
    launched, kept, suspended = tick(placer, world, [2, 3, 1])
    assert launched == {1: [4, 5, 6, 7, 12, 13, 14, 15]} and placer.counters["moved"] == 1
    assert _rings(cluster, launched[1]) == (4, 1, 2)


# --- the communication profile ---

HEADER = "model,also_named,layers,gradient_bytes,machine_share,rack_share,network_share,machine_scale,rack_scale,network_scale\n"
VGG = "VGG11,VGG,11,531405568,0.01,0.06,0.07,6.1,18.6,25.3\n"
ALEXNET = "AlexNet,,8,244361984,0.02,0.13,1.0,26.0,87.1,697.0\n"


@pytest.mark.parametrize(
    "second, column, words",
    [
        (VGG.replace("0.01,0.06,0.07", "0.5,0.6,0.7"), "model", "'VGG11' also names VGG11 (row 2)"),
        (ALEXNET.replace("AlexNet,,", "AlexNet,vgg,"), "also_named", "'vgg' also names VGG11 (row 2)"),
        (ALEXNET.replace("AlexNet,,", "vgg-11,,"), "model", "'vgg-11' also names VGG11 (row 2)"),
    ],
    ids=["same-model", "same-other-name", "same-name-spelt-otherwise"],
)
def test_a_name_that_finds_two_models_is_refused_naming_both_rows(tmp_path, second, column, words):
    # Before, the second row was read and silently never found: every lookup found the first.
    path = tmp_path / "communication.csv"
    path.write_text(HEADER + VGG + second)
    with pytest.raises(TraceError) as err:
        CommunicationTable.load(path)
    assert (err.value.row, err.value.column) == (3, column)
    assert words in err.value.message


def test_a_model_may_list_its_own_name_among_its_other_names(tmp_path):
    path = tmp_path / "communication.csv"
    path.write_text(HEADER + VGG.replace("VGG11,VGG,", "VGG11,VGG;vgg11,") + ALEXNET)
    table = CommunicationTable.load(path)
    assert table.index(["vgg11", "VGG", "alexnet"]).tolist() == [0, 0, 1]


@pytest.mark.parametrize("column, cell", [("layers", "11.5"), ("gradient_bytes", "531405568.25")])
def test_a_layer_or_byte_count_must_be_whole(tmp_path, column, cell):
    path = tmp_path / "communication.csv"
    layers, volume = ("11.5", "531405568") if column == "layers" else ("11", cell)
    path.write_text(HEADER + VGG.replace("11,531405568", f"{layers},{volume}"))
    with pytest.raises(TraceError) as err:
        CommunicationTable.load(path)
    assert (err.value.row, err.value.column) == (2, column)
    assert f"must be a whole number, got '{cell}'" in err.value.message


def test_the_shipped_profile_still_loads():
    assert CommunicationTable.load(SHIPPED_COMMUNICATION).models == (
        "VGG11",
        "AlexNet",
        "MobileNetV3",
        "ResNet18",
        "ResNet50",
        "BERT-large",
    )


# --- fitting the scales ---


@pytest.mark.parametrize(
    "layers, volume, shares, words",
    [
        (0, 102011648, (0.12, 0.12, 0.38), "layers must be a finite number above 0, got 0"),
        (54, 0, (0.12, 0.12, 0.38), "gradient_bytes must be a finite number above 0, got 0"),
        (54, float("nan"), (0.12, 0.12, 0.38), "gradient_bytes must be a finite number above 0, got nan"),
        (54, 102011648, (0.12, float("nan"), 0.38), "shares must be three finite fractions"),
        (54, 102011648, (0.12, 0.12), "shares must be three finite fractions"),
        (54, 102011648, (0.12, 0.01, 0.38), "a rack share of 0.01 is less than"),
        (54, 102011648, (0.12, 0.12, 0.01), "a network share of 0.01 is less than"),
    ],
)
def test_fitting_refuses_inputs_that_give_nan_or_negative_scales(layers, volume, shares, words):
    with pytest.raises(ValueError) as err:
        fit_scales(layers, volume, shares)
    assert words in str(err.value)


def test_fitting_table_one_gives_the_shipped_scales():
    table = CommunicationTable.load()
    for i in range(len(table.models)):
        scales = fit_scales(int(table.layers[i]), float(table.gradient_bytes[i]), table.shares[i])
        assert np.all(scales >= 0)
        assert scales == pytest.approx(table.scales[i], rel=1e-12)
