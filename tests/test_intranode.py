"""Intra-node topologies, bandwidth-aware and random intra-node placement, and the bandwidth metric."""

import numpy as np
import pytest

from roundhouse.elements.placement.intranode import BandwidthAwareIntraNode, RandomIntraNode
from roundhouse.errors import ClusterError
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.topologies import TOPOLOGIES, mean_link_gbps


def test_topology_in_shorthand_and_toml(tmp_path):
    cluster = Cluster.parse("2x4:V100@p3.8xlarge,1x4:K80")
    links = cluster.node_link_gbps
    assert links.shape == (3, 4, 4)
    assert links[0, 0, 3] == 2 * links[0, 0, 1]  # GPU 0-3 has twice the bandwidth of GPU 0-1
    assert np.isnan(links[2]).all()
    assert "@p3.8xlarge" in cluster.describe()
    spec = tmp_path / "c.toml"
    spec.write_text('[[group]]\nnodes = 2\ngpus_per_node = 4\ntopology = "p3.8xlarge"\n')
    assert np.array_equal(Cluster.parse(str(spec)).node_link_gbps[1], TOPOLOGIES["p3.8xlarge"])
    spec.write_text('[[group]]\nnodes = 2\ngpus_per_node = 8\ntopology = "p3.8xlarge"\n')
    with pytest.raises(ClusterError, match="has 4 GPUs per node, the group 8"):
        Cluster.parse(str(spec))
    with pytest.raises(ClusterError, match="did you mean 'p3.8xlarge'"):
        Cluster.parse("2x4:V100@p3.8xlarg")


def test_mean_link_bandwidth():
    links = TOPOLOGIES["p3.8xlarge"]
    assert mean_link_gbps(links, np.array([0, 3])) == 400.0
    assert mean_link_gbps(links, np.array([0, 1])) == 200.0
    assert mean_link_gbps(links, np.array([0, 1, 2, 3])) == pytest.approx((4 * 200 + 2 * 400) / 6)
    assert np.isnan(mean_link_gbps(links, np.array([2])))


def test_bandwidth_aware_picks_the_double_link():
    cluster = Cluster.parse("2x4:V100@p3.8xlarge")
    placer = BandwidthAwareIntraNode()
    available = np.ones(8, dtype=bool)
    assert list(placer.choose(cluster, available, 2, [0], True)) == [0, 3]
    available[0] = False  # GPU 0 busy: the other double pair
    assert list(placer.choose(cluster, available, 2, [0], True)) == [1, 2]
    # Best fit first (node 0 has 3 free, node 1 has 4): the job stays on node 0.
    assert list(placer.choose(cluster, available, 3, [0], True)) == [1, 2, 3]
    # Among equally full nodes, the one with the better pair: node 0 keeps only 0-1 free.
    available[:] = True
    available[[2, 3, 5, 6]] = False  # node 0: GPUs 0, 1 free (single link); node 1: 4, 7 (double)
    assert list(placer.choose(cluster, available, 2, [0], True)) == [4, 7]


GRAPH = """
round = 5min;
src :: PoissonSource(rate=6/h, jobs=150, models=blox, seed=4);
run :: Launch;
src -> AcceptAll -> JobPool -> Fifo -> {placer} -> run -> JobMetrics;
run -> links :: LinkBandwidth;
"""


def test_bandwidth_seen_by_jobs(run_graph):
    aware = run_graph(GRAPH.format(placer="BandwidthAwareIntraNode"), cluster="8x4:V100@p3.8xlarge")
    random = run_graph(GRAPH.format(placer="RandomIntraNode(seed=1)"), cluster="8x4:V100@p3.8xlarge")
    a, r = aware.reports["links"]["bandwidth"], random.reports["links"]["bandwidth"]
    assert a["launches"] > 10 and r["launches"] > 10
    assert a["avg_gbps_2gpu"] > r["avg_gbps_2gpu"]
    assert a["avg_gbps_2gpu"] > 300.0  # a double pair (400 Gbps) was free most times
    assert a["avg_gbps_4gpu"] == r["avg_gbps_4gpu"]  # a whole node either way
    frame = aware.reports["links"]["links"]
    assert set(frame.columns) == {"job_id", "gpus", "gbps", "time_s"} and (frame["gpus"] >= 2).all()
    again = run_graph(GRAPH.format(placer="RandomIntraNode(seed=1)"), cluster="8x4:V100@p3.8xlarge")
    assert again.reports["links"]["links"].equals(random.reports["links"]["links"])  # seeded
    # Without a known topology nothing is measured.
    plain = run_graph(GRAPH.format(placer="BandwidthAwareIntraNode"), cluster="8x4:V100")
    assert plain.reports["links"]["bandwidth"]["launches"] == 0


def test_random_intra_node_draws_among_free_gpus():
    cluster = Cluster.parse("1x4:V100@p3.8xlarge")
    placer = RandomIntraNode(seed=0)
    placer._rng = np.random.default_rng(0)
    available = np.array([True, False, True, True])
    seen = {tuple(placer.choose(cluster, available, 2, [0], True)) for _ in range(40)}
    assert seen == {(0, 2), (0, 3), (2, 3)}
