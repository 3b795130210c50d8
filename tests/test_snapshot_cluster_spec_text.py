"""A cluster built in Python, given to a Simulation: its graph (and so a snapshot's) says it as
its spec text, which reads back as that cluster, so that `whatif --set` and anything else that
builds the graph's cluster build it; only one that no spec file writes is said as `Cluster(...)`."""

from __future__ import annotations

import json

import attrs
import pytest

from tests.conftest import REPO

GRAPH = (
    'round = 5min;\ncluster = "2x2:V100";\nsrc :: PoissonSource(rate=6/h, jobs=12, seed=3);\n'
    "src -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n"
)


def _built():
    """Dally's two racks with nodes of 3 cores and 100 GB, a rack name of their own: no
    shorthand writes it, no file was read."""
    from roundhouse.runtime.cluster import Cluster, NodeGroup

    dally = Cluster.parse("dally:2")
    group = attrs.evolve(dally.spec.groups[0], cpus=3, memory_gb=100.5, rack="east")
    small = NodeGroup(nodes=2, gpus_per_node=4, gpu_type="P100", network_gbps=25.0)
    return Cluster(attrs.evolve(dally.spec, name="mine", groups=(group, small)))


def test_a_snapshot_of_a_python_built_cluster_keeps_it_as_spec_text_whatif_reads(tmp_path, capsys):
    from roundhouse import Simulation
    from roundhouse.runtime.cluster import Cluster, ClusterSpec
    from roundhouse.runtime.simulate import load_cluster
    from roundhouse.runtime.simulation import graph_of_snapshot
    from roundhouse.runtime.snapshot import read_header
    from roundhouse.runtime.whatif import _unused_settings
    from roundhouse.tools.cli import main

    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH)
    built = _built()
    sim = Simulation(graph, cluster=built)
    path = sim.run_until(3600).save(tmp_path / "hour.snap")
    header, _ = read_header(path)

    # `whatif --set`'s graph: the snapshot's, whose cluster builds as the run's world's.
    other = graph_of_snapshot(header, ["round=10min"])
    world = Simulation.load(path).world
    assert load_cluster(other, None, world.profile).fingerprint() == built.fingerprint()
    assert _unused_settings(sim.graph, other, world) == []  # (no "its own cluster ... is not used")
    capsys.readouterr()
    assert main(["whatif", str(path), "--set", "round=10min", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["from"]["cluster"] == built.describe() and len(got["projections"]) == 2

    # The graph says it in full in its setting, and prints it in one line.
    text = sim.graph.settings.cluster
    assert header["cluster"] == text == built.spec.spec_text()
    again = ClusterSpec.parse(text)
    assert again.name == "mine" and Cluster(again).fingerprint() == built.fingerprint()
    assert str(sim.graph).endswith("cluster Cluster(136 GPUs on 18 nodes (16x8:V100, 2x4:P100) in 3 racks of 2-8 machines))")
    assert str(Simulation.load(path).graph) == str(sim.graph)
    # A new simulation given the graph's setting runs on the same cluster.
    assert Simulation(graph, cluster=text).world.cluster.fingerprint() == built.fingerprint()


@pytest.mark.parametrize(
    "spec", ["2x4:V100", "dally:2", "36:36:36", "16x4:V100,16x4:P100", "2x4:V100@p3.8xlarge", "clusters/synergy-128.toml"]
)
def test_spec_text_reads_back_as_the_spec(spec):
    from roundhouse.runtime.cluster import Cluster, ClusterSpec

    read = ClusterSpec.parse(str(REPO / spec) if spec.endswith(".toml") else spec)
    text = read.spec_text()
    assert text is not None
    again = ClusterSpec.parse(text)
    assert Cluster(again).fingerprint() == Cluster(read).fingerprint() and again.name == read.name
    assert again.spec_text() == text  # (written again, the same text)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"cpus": 0}, "a count below 1"),
        ({"cpus": 2.5}, "a count that is no whole number"),
        ({"memory_gb": float("nan")}, "an amount not finite"),
        ({"gpu_memory_gb": 2e6}, "an amount past 1,000,000"),
        ({"gpu_type": "V 100"}, "a GPU type that is no plain name"),
        ({"racks": 40}, "more racks than nodes"),
    ],
)
def test_a_cluster_no_spec_file_writes_is_said_as_the_object_it_is(tmp_path, change, why):
    from roundhouse import Simulation
    from roundhouse.runtime.cluster import Cluster
    from roundhouse.runtime.simulation import _cluster_spec

    base = Cluster.parse("2x4:V100")
    built = Cluster(attrs.evolve(base.spec, groups=(attrs.evolve(base.spec.groups[0], **change),)))
    assert built.spec.spec_text() is None, why
    said = _cluster_spec(built)
    assert said.startswith("Cluster(") and "\n" not in said, why
    if "gpu_type" not in change:  # (a type the profile lacks: the graph's elements cannot use it)
        graph = tmp_path / "g.sched"
        graph.write_text(GRAPH)
        assert Simulation(graph, cluster=built).graph.settings.cluster == said


def test_a_name_no_text_file_holds_is_no_spec_text():
    from roundhouse.runtime.cluster import Cluster

    base = Cluster.parse("2x4:V100")
    assert attrs.evolve(base.spec, name="\ud800").spec_text() is None
    # (quotes, a line break and DEL are written escaped, and read back)
    odd = attrs.evolve(base.spec, name='a "b"\nc\x7f')
    assert Cluster.parse(odd.spec_text()).spec.name == odd.name


def test_a_bad_spec_text_is_said_at_its_line():
    from roundhouse.errors import ClusterError
    from roundhouse.runtime.cluster import ClusterSpec

    with pytest.raises(ClusterError) as err:
        ClusterSpec.parse('name = "x"\n[[group]]\nnodes = 2\ngpus_per_node = 0\n')
    assert str(err.value).startswith("cluster spec text:4: error: [[group]] #1: 'gpus_per_node' must be a whole number")
    with pytest.raises(ClusterError, match=r"^cluster spec text:2: error: not valid TOML"):
        ClusterSpec.parse('name = "x"\n[[group]\n')


@pytest.mark.parametrize(
    ("groups", "said"),
    [
        ((), "a ClusterSpec needs a tuple of one NodeGroup or more"),
        (({"nodes": 0},), "group #1: 'nodes' must be a whole number of at least 1, got 0"),
        (({"nodes": 1}, {"gpus_per_node": 0}), "group #2: 'gpus_per_node' must be a whole number of at least 1, got 0"),
        (({"nodes": 2.0},), "group #1: 'nodes' must be a whole number of at least 1, got 2.0"),
        (({"gpus_per_node": True},), "'gpus_per_node' must be a whole number of at least 1, got True"),
        (({"racks": 0},), "'racks' must be a whole number of at least 1, got 0"),
        (({"topology": "p3.8xl"},), "group #1: unknown topology 'p3.8xl'"),
        (({"nodes": 300_000},), "1,200,000 GPUs is more than the 1,000,000 a cluster may have"),
    ],
)
def test_a_cluster_built_of_groups_that_make_none_is_refused_naming_the_group(groups, said):
    # (A group of no node made numpy's "zero-size array" error, one of no GPU a cluster of 0 GPUs.)
    from roundhouse.errors import ClusterError
    from roundhouse.runtime.cluster import Cluster, ClusterSpec, NodeGroup

    spec = ClusterSpec("mine", tuple(NodeGroup(**{"nodes": 2, "gpus_per_node": 4, **g}) for g in groups))
    with pytest.raises(ClusterError) as err:
        Cluster(spec)
    assert said in str(err.value) and str(err.value).startswith("Cluster:")


def test_a_cluster_given_a_spec_text_points_to_parse():
    from roundhouse.errors import ClusterError
    from roundhouse.runtime.cluster import Cluster

    with pytest.raises(ClusterError, match="expected a ClusterSpec, got str; .* Cluster.parse"):
        Cluster("4x4:V100")  # type: ignore[arg-type]
