"""Network tiers in cluster specs and the communication model (traces/communication.py),
checked against Dally's Table I and hand-computed alpha-beta rings."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pytest

from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.types import Plan
from roundhouse.runtime.world import World
from roundhouse.tools.cli import main
from roundhouse.traces.communication import SHIPPED_COMMUNICATION, CommunicationTable
from roundhouse.traces.profiles import ProfileTable
from roundhouse.traces.throughput import Placement
from tests.conftest import REPO, SHARED, jobs_of

# Dally (Sharma et al., IEEE BigData 2025) Table I: communication as a % of compute, 8 GPUs
# on one machine, in one rack, across racks; typed from the paper, not read from the profile.
TABLE_I = {
    "VGG11": (1, 6, 7),
    "AlexNet": (2, 13, 100),
    "MobileNetV3": (42, 940, 19592),
    "ResNet18": (7, 116, 2749),
    "ResNet50": (12, 12, 38),
    "BERT-large": (8, 23, 715),
}
# Dally's tiers (notes §4): latency in s, bandwidth in bytes/s.
ALPHA = {"machine": 500e-9, "rack": 5_000e-9, "network": 50_000e-9}
BETA = {"machine": 600e9, "rack": 200e9, "network": 400e9}

FIFO = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""


def world_with(cluster: str, models: list[str], gpus: int = 8) -> tuple[World, np.ndarray]:
    world = World(Cluster.parse(cluster), ProfileTable.load())
    trace = pl.DataFrame(
        {"job_id": list(range(len(models))), "gpus": [gpus] * len(models), "duration_s": [1000.0] * len(models), "model": models}
    )
    batch, _ = world.prepare(trace, "test")
    return world, world.add_jobs(batch)


def rates_on(world: World, rows, gpu_sets) -> tuple[np.ndarray, np.ndarray]:
    placement = Placement.of(np.concatenate(gpu_sets), [len(g) for g in gpu_sets])
    compute = np.empty(len(rows))
    rates = world.throughput.rates(world.jobs.reader, np.asarray(rows), placement, compute=compute)
    return rates, compute


# GPU ids on `dally:2`: node k holds GPUs 8k..8k+7, rack 0 is nodes 0-7, rack 1 nodes 8-15.
MACHINE = np.arange(0, 8)  # one machine
RACK = np.r_[0:4, 8:12]  # 2 machines x 4 GPUs, one rack
NETWORK = np.r_[0:4, 64:68]  # 2 racks x 4 GPUs


def test_eight_gpus_give_table_one_exactly_on_each_tier():
    world, rows = world_with("dally:2", list(TABLE_I))
    computes = []
    for t, gpus in enumerate((MACHINE, RACK, NETWORK)):
        rates, compute = rates_on(world, rows, [gpus] * len(rows))
        shares = np.array([TABLE_I[m][t] / 100 for m in TABLE_I])
        assert compute / rates - 1 == pytest.approx(shares, rel=1e-12)
        computes.append(compute)
    # Jobs known by their duration compute one unit of work per second, whatever the tier,
    # even those whose model the throughput profile knows (ResNet18 and ResNet50).
    assert computes[0].tolist() == computes[1].tolist() == computes[2].tolist() == [1.0] * 6


def test_the_dally_trace_names_find_their_profiles():
    table = CommunicationTable.load()
    got = table.index(["VGG", "BERT", "MobileNetV3", "resnet18", "ResNet-50", "AlexNet", "LM", None])
    assert [table.models[i] if i >= 0 else None for i in got] == [
        "VGG11",
        "BERT-large",
        "MobileNetV3",
        "ResNet18",
        "ResNet50",
        "AlexNet",
        None,
        None,
    ]


def profile_row(model: str) -> dict:
    frame = pl.read_csv(SHIPPED_COMMUNICATION, comment_prefix="#")
    return frame.filter(pl.col("model") == model).row(0, named=True)


def ring(p: dict, tier: str, n: int) -> float:
    """One tier's alpha-beta all-reduce, the formula of docs/semantics.md written out."""
    return 2 * (n - 1) * p["layers"] * ALPHA[tier] + 2 * (n - 1) / n * p["gradient_bytes"] / BETA[tier]


def hand_share(model: str, machine: int, rack: int, network: int) -> float:
    p = profile_row(model)
    return (
        p["machine_scale"] * ring(p, "machine", machine)
        + p["rack_scale"] * ring(p, "rack", rack)
        + p["network_scale"] * ring(p, "network", network)
    )


def test_ring_sizes_of_many_launches_at_once_are_those_of_each_alone(monkeypatch):
    # Random gangs on 4 racks, counted together in tables a few launches at a time (the tables
    # made small here), against each launch's GPUs counted by hand.
    import roundhouse.traces.throughput as throughput

    world, _ = world_with("dally:4", ["VGG11"])
    cluster = world.cluster
    rng = np.random.default_rng(3)
    counts = rng.choice([1, 2, 3, 8, 12, 24], 60)
    gpus = np.concatenate([rng.choice(len(cluster.gpu_node), c, replace=False) for c in counts])
    placement = Placement.of(gpus, counts)
    launches = rng.permutation(60)[:50]
    expected = []
    for k in launches:
        own = gpus[placement.starts[k] : placement.starts[k] + counts[k]]
        machines, per_machine = np.unique(cluster.gpu_node[own], return_counts=True)
        _, per_rack = np.unique(cluster.node_rack[machines], return_counts=True)
        expected.append([per_machine.max(), per_rack.max(), len(per_rack)])
    monkeypatch.setattr(throughput, "_TIER_TABLE", 7 * cluster.n_nodes)
    assert world.throughput.tier_sizes(placement, launches).tolist() == expected


@pytest.mark.parametrize("model", ["VGG11", "MobileNetV3", "ResNet50"])
def test_other_sizes_and_uneven_spreads_follow_the_ring_formula(model):
    cases = [
        (2, [np.r_[0:2]], (2, 1, 1)),  # 2 GPUs, one machine
        (4, [np.r_[0:4]], (4, 1, 1)),  # 4 GPUs, one machine
        (4, [np.r_[0:2, 8:10]], (2, 2, 1)),  # 2 machines x 2 GPUs, one rack
        (16, [np.r_[0:16]], (8, 2, 1)),  # two whole machines of a rack
        (16, [np.r_[0:8, 64:72]], (8, 1, 2)),  # one machine in each of two racks
        (8, [np.r_[5:8, 8:13]], (5, 2, 1)),  # uneven 3 + 5: as slow as the larger machine ring
        (8, [np.r_[0:3, 8:10, 64:67]], (3, 2, 2)),  # 3 + 2 in rack 0, 3 in rack 1
    ]
    for gpus, sets, sizes in cases:
        world, rows = world_with("dally:2", [model], gpus)
        rates, compute = rates_on(world, rows, sets)
        assert world.throughput.tier_sizes(Placement.of(np.concatenate(sets), [gpus]), np.array([0])).tolist() == [list(sizes)]
        assert compute[0] / rates[0] - 1 == pytest.approx(hand_share(model, *sizes), rel=1e-12)


def test_hand_identity_sixteen_gpus_over_two_racks():
    # 8 GPUs on each of two racks' machines: the whole machine ring (Table I's machine share)
    # plus the 2-rack ring, whose scale Table I's network placement fixed as
    # network share - machine scale x (4-GPU machine ring). For VGG11 (11 layers,
    # 531,405,568 bytes): 4-GPU ring = 6*11*500ns + 1.5*S/600e9 = 1.3615e-3 s; 8-GPU ring =
    # 14*11*500ns + 1.75*S/600e9 = 1.62694e-3 s; share = 0.01 + 0.07 - 0.01 * 1.3615/1.62694.
    world, rows = world_with("dally:2", ["VGG"], 16)
    rates, compute = rates_on(world, rows, [np.r_[0:8, 64:72]])
    assert compute[0] / rates[0] - 1 == pytest.approx(0.0716315, abs=1e-6)


def test_one_gpu_has_no_communication_and_no_profile_no_factor():
    world, rows = world_with("dally:2", ["MobileNetV3"], 1)
    rates, compute = rates_on(world, rows, [np.array([5])])
    assert rates[0] == compute[0] == 1.0
    # A job with no model on a tiered cluster runs as on any cluster (no communication).
    world, rows = world_with("dally:2", [None], 8)
    rates, compute = rates_on(world, rows, [NETWORK])
    assert rates[0] == compute[0] == 1.0


def test_without_tiers_the_model_is_off():
    world, rows = world_with("128x8:V100", ["VGG", "LM"])
    assert world.throughput.communication is None
    assert world.jobs.column("comm_model").tolist() == [-1, -1]
    rates, compute = rates_on(world, rows, [MACHINE, np.r_[8:16]])
    assert rates[0] == 1.0 and rates.tolist() == compute.tolist()


def test_a_launch_records_its_compute_rate_beside_its_rate():
    world, rows = world_with("dally:2", ["ResNet18", "AlexNet"])
    plan = Plan(launch_rows=rows, launch_gpus=np.concatenate([RACK, NETWORK + 16]), launch_counts=[8, 8])
    world.check_plan(plan)
    world.apply_plan(plan, 0.0)
    assert world.jobs.column("compute_rate")[rows].tolist() == [1.0, 1.0]
    assert world.jobs.column("rate")[rows] == pytest.approx([1 / 2.16, 1 / 2.00], rel=1e-12)


def cluster_file(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(body))
    return path


def test_a_network_spread_job_runs_slower_by_the_factor(run_graph, tmp_path):
    jobs = [{"job_id": 0, "arrival_s": 0.0, "gpus": 8, "duration_s": 1000.0, "model": "AlexNet"}]
    finish = {}
    for name, per_rack, gpus_per_node in (("machine", 1, 8), ("rack", 2, 4), ("network", 1, 4)):
        nodes = 8 // gpus_per_node
        spec = f'name = "{name}"\n[[group]]\nnodes = {nodes}\ngpus_per_node = {gpus_per_node}\n'
        spec += f"machines_per_rack = {per_rack}\n[tiers]\n"
        path = cluster_file(tmp_path, name, spec)
        finish[name] = jobs_of(run_graph(FIFO, jobs, cluster=str(path)))[0]["finish_s"]
    assert finish["machine"] == pytest.approx(1000 * 1.02)
    assert finish["rack"] == pytest.approx(1000 * 1.13)
    assert finish["network"] == pytest.approx(1000 * 2.00)
    # The same trace on a cluster without tiers: no communication model, no slowdown.
    assert jobs_of(run_graph(FIFO, jobs, cluster="2x4:V100"))[0]["finish_s"] == pytest.approx(1000.0)


def test_check_shows_the_shape_of_a_tiered_cluster(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text('cluster = "dally:4";\n' + FIFO)
    (tmp_path / "trace.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,10\n")
    assert main(["check", str(graph)]) == 0
    out = capsys.readouterr().out
    assert "256 GPUs on 32 nodes (32x8:V100) in 4 racks of 8 machines" in out
    assert "machine 500 ns 600 GB/s, rack 5,000 ns 200 GB/s, network 50,000 ns 400 GB/s" in out


def test_a_tiers_table_sets_links_and_keeps_dally_defaults(tmp_path):
    path = cluster_file(
        tmp_path,
        "mine",
        """
        [[group]]
        nodes = 6
        gpus_per_node = 4
        machines_per_rack = 3

        [tiers.rack]
        bandwidth_gb_per_s = 100
        """,
    )
    cluster = Cluster.parse(str(path))
    assert cluster.n_racks == 2 and cluster.node_rack.tolist() == [0, 0, 0, 1, 1, 1]
    assert (cluster.tiers.rack.latency_ns, cluster.tiers.rack.bandwidth_gb_per_s) == (5000.0, 100.0)
    assert cluster.tiers.network.bandwidth_gb_per_s == 400.0
    assert Cluster.parse("dally:3").describe().startswith("192 GPUs on 24 nodes (24x8:V100) in 3 racks of 8 machines")


BAD_SPECS = [
    (
        "[[group]]\nnodes = 10\ngpus_per_node = 8\nmachines_per_rack = 4\n[tiers]\n",
        "[[group]] #1: 'machines_per_rack' (4) does not divide 'nodes' (10) into whole racks",
    ),
    (
        "[[group]]\nnodes = 8\ngpus_per_node = 8\n\n[[group]]\nnodes = 8\ngpus_per_node = 8\nracks = 2\nmachines_per_rack = 4\n",
        "[[group]] #2: give 'racks' or 'machines_per_rack', not both",
    ),
    (
        "[[group]]\nnodes = 8\ngpus_per_node = 8\n[tiers.rack]\nbandwidth_gb_per_s = 0\n",
        "[tiers.rack]: 'bandwidth_gb_per_s' must be a number from 1e-06 to 1,000,000, got 0",
    ),
    (
        "[[group]]\nnodes = 8\ngpus_per_node = 8\n[tiers.network]\nbandwidth_gb_per_s = -400.0\n",
        "[tiers.network]: 'bandwidth_gb_per_s' must be a number from 1e-06 to 1,000,000, got -400.0",
    ),
    (
        "[[group]]\nnodes = 8\ngpus_per_node = 8\n[tiers.machine]\nlatency_ns = -1\n",
        "[tiers.machine]: 'latency_ns' must be a number from 0 to 1,000,000,000,000 (1,000 s), got -1",
    ),
    ("[[group]]\nnodes = 8\ngpus_per_node = 8\n[tiers.racks]\n", "[tiers]: unknown tier 'racks' (did you mean 'rack'?)"),
    (
        "[[group]]\nnodes = 8\ngpus_per_node = 8\n[tiers.rack]\nbandwidth = 3\n",
        "[tiers.rack]: unknown key 'bandwidth' (did you mean 'bandwidth_gb_per_s'?)",
    ),
    ("[[group]]\nnodes = 8\ngpus_per_node = 8\ntiers = 3\n", "[[group]] #1: unknown key 'tiers'"),
    ("tiers = 3\n[[group]]\nnodes = 8\ngpus_per_node = 8\n", "'tiers' must be a table"),
]


@pytest.mark.parametrize("body, message", BAD_SPECS)
def test_bad_tiers_get_a_located_error(tmp_path, capsys, body, message):
    path = cluster_file(tmp_path, "bad", body)
    assert main(["run", str(REPO / "graphs" / "las.sched"), "--cluster", str(path)]) == 2
    err = capsys.readouterr().err
    # (the file and the line of the key or table at fault)
    assert re.match(rf"(error: )?{re.escape(str(path))}:[0-9]+: error: ", err)
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("spec", ["dally:0", "dally:", "dally:two"])
def test_a_bad_dally_shorthand_is_a_usage_error(capsys, spec):
    assert main(["run", str(REPO / "graphs" / "las.sched"), "--cluster", spec]) == 2
    assert (
        capsys.readouterr().err
        == f"error: --cluster: bad cluster '{spec}': write dally:N, N racks of Dally's machines (N at least 1)\n"
    )


def test_a_model_without_a_communication_profile_on_a_tiered_cluster_is_located(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s,model\n0,0,8,100,VGG\n7,0,8,100,LM\n")
    graph = tmp_path / "g.sched"
    graph.write_text(FIFO)
    assert main(["run", str(graph), "--cluster", "dally:1"]) == 2
    err = capsys.readouterr().err
    assert "job 7: model 'LM' has no communication profile, which a cluster with network tiers needs" in err
    assert str(trace) in err and "Traceback" not in err
    # Without tiers the same trace runs.
    assert main(["run", str(graph), "--cluster", "8x8:V100", "--quiet"]) == 0


def shared_workloads():
    for root in (SHARED, REPO.parents[1] / "shared"):
        folder = root / "data" / "dally" / "astra-sim-workload"
        if folder.is_dir():
            return folder
    return None


@pytest.mark.skipif(shared_workloads() is None, reason="shared/data/dally/astra-sim-workload not present")
def test_the_shipped_profile_is_what_the_script_derives(tmp_path):
    out = tmp_path / "communication.csv"
    script = REPO / "benchmarks" / "derive_communication.py"
    done = subprocess.run(
        [sys.executable, str(script), "--workloads", str(shared_workloads()), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == SHIPPED_COMMUNICATION.read_text()
    # What the profile summarises, summed here from the workload files on our own.
    rows = {r["model"]: r for r in pl.read_csv(out, comment_prefix="#").iter_rows(named=True)}
    for name, model in (("vgg11_B256_astra-sim.csv", "VGG11"), ("resnet18_B512_astra-sim.csv", "ResNet18")):
        cells = [line.split("\t") for line in (shared_workloads() / name).read_text().splitlines()]
        sizes = [int(c[c.index("ALLREDUCE") + 1]) for c in cells if "ALLREDUCE" in c]
        assert (rows[model]["layers"], rows[model]["gradient_bytes"]) == (len(sizes), sum(sizes))


def test_the_shape_shown_in_the_docs_is_what_the_example_gives(tmp_path):
    page = (REPO / "docs" / "clusters.md").read_text()
    body = [b for b in re.findall(r"^```toml\n(.*?)^```", page, re.S | re.M) if "[tiers" in b][0]
    path = tmp_path / "dally.toml"
    path.write_text(body)
    shown = re.search(r"show a tiered cluster's shape: `([^`]+)`", page, re.S).group(1)
    assert Cluster.parse(str(path)).describe() == " ".join(shown.split())


def test_a_profiled_model_known_by_iterations_computes_at_the_profile_rate():
    # ResNet-18 by iterations (no duration): compute is the throughput profile's consolidated
    # rate for 4 V100s, and the rack tier's share slows it (2 machines x 2 GPUs).
    world = World(Cluster.parse("dally:1"), ProfileTable.load())
    trace = pl.DataFrame({"job_id": [0], "gpus": [4], "iterations": [1e6], "model": ["ResNet-18"], "batch_size": [32]})
    batch, _ = world.prepare(trace, "test")
    rows = world.add_jobs(batch)
    rates, compute = rates_on(world, rows, [np.r_[0:2, 8:10]])
    assert compute[0] == ProfileTable.load().rate("ResNet-18", 32, "V100", 4, True)
    assert compute[0] / rates[0] - 1 == pytest.approx(hand_share("ResNet18", 2, 2, 1), rel=1e-12)


def test_a_bad_communication_profile_names_its_row_and_column(tmp_path):
    from roundhouse.errors import TraceError

    header = (
        "model,also_named,layers,gradient_bytes,machine_share,rack_share,network_share,machine_scale,rack_scale,network_scale\n"
    )
    good = "VGG11,VGG,11,531405568,0.01,0.06,0.07,6.1,18.6,25.3\n"
    path = tmp_path / "communication.csv"
    path.write_text("# a comment line\n" + header + good + "AlexNet,,8,244361984,0.02,0.13,1.0,26.0,-87.1,697.0\n")
    with pytest.raises(TraceError) as err:
        CommunicationTable.load(path)
    assert (err.value.row, err.value.column) == (4, "rack_scale")
    assert "must be a finite number 0 or more, got '-87.1'" in err.value.message  # (a scale may be 0)
    path.write_text(header + good.replace("VGG11,VGG,11,", "VGG11,VGG,0,"))
    with pytest.raises(TraceError, match="must be a finite number above 0, got '0'"):
        CommunicationTable.load(path)
    path.write_text(header.replace(",network_scale", "") + good.replace(",25.3", ""))
    with pytest.raises(TraceError, match="no column 'network_scale'"):
        CommunicationTable.load(path)
    path.write_text(header + good)
    assert CommunicationTable.load(path).models == ("VGG11",)
