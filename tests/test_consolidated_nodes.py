"""A job larger than a node, placed consolidated: on the fewest nodes a job of its size spans,
or not at all (it waits, or preempts to make room); never spread over more nodes, where the
simulator would slow it as spread."""

from __future__ import annotations

import numpy as np
import polars as pl

from roundhouse.elements.placement.packing import choose_consolidated
from roundhouse.elements.placement.preemption import _fewest_for_nodes
from roundhouse.runtime.cluster import Cluster
from roundhouse.tools.cli import main

TRACE = """job_id,arrival_s,gpus,duration_s,spread_slowdown
1,0,3,1000,1
2,0,3,1000,1
3,0,3,1000,1
4,10,6,100,2
"""


def run(tmp_path, policy: str, placer: str) -> pl.DataFrame:
    (tmp_path / "t.csv").write_text(TRACE)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 10s;\ncluster = "4x4:P100";\nsrc :: TraceSource(path="t.csv");\n'
        f"src -> AcceptAll -> JobPool -> {policy} -> {placer} -> Launch -> m :: JobMetrics;\n"
    )
    assert main(["run", str(graph), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    return pl.read_csv(tmp_path / "out" / "jobs.csv").sort("job_id")


def test_a_job_larger_than_a_node_waits_for_the_nodes_it_needs(tmp_path):
    # Three 3-GPU jobs leave 1, 1, 1 and 4 GPUs free: six GPUs, but on three nodes. The 6-GPU
    # job waits for two nodes with room (YARN-CS's head-of-line blocking) and runs unslowed.
    for placer in ("Consolidated", "Consolidated(strict=true)"):
        big = run(tmp_path, "YarnCS", placer).row(3, named=True)
        assert (big["first_start_s"], big["finish_s"], big["run_s"]) == (1000.0, 1100.0, 100.0), placer


def test_a_job_larger_than_a_node_preempts_until_the_nodes_it_needs_have_room(tmp_path):
    big = run(tmp_path, "Las", "Consolidated").row(3, named=True)
    assert big["first_start_s"] == 10.0 and big["run_s"] == 100.0  # (on two nodes each time: never slowed)


def test_without_strictness_a_job_that_cannot_be_consolidated_is_spread(tmp_path):
    big = run(tmp_path, "YarnCS", "Consolidated(strict=false)").row(3, named=True)
    assert big["first_start_s"] == 10.0 and big["run_s"] == 200.0  # (spread over three nodes: twice as slow)


def test_the_count_of_victims_agrees_with_the_choice():
    cluster = Cluster.parse("4x4:V100")
    rng = np.random.default_rng(0)
    for _ in range(200):
        free = rng.random(16) < 0.3
        held = (~free).nonzero()[0]
        tail = rng.permutation(held)  # the victims' GPUs, one victim each, in the order they go
        victim_of = np.arange(len(tail))
        want = int(rng.integers(5, 13))
        count = _fewest_for_nodes(cluster, free, tail, victim_of, want, 0)
        for k in range(len(tail) + 1):
            trial = free.copy()
            trial[tail[:k]] = True
            got = choose_consolidated(cluster, trial, want, [0])
            assert (got is not None) == (k >= count), (want, k, count)
            if got is not None:
                assert len(np.unique(cluster.gpu_node[got])) == cluster.nodes_needed(want)


def test_a_placer_that_may_spread_takes_as_many_nodes_as_it_must():
    cluster = Cluster.parse("4x4:V100")
    free = np.zeros(16, dtype=bool)
    free[[0, 4, 8, 12, 13, 14, 15]] = True  # 1, 1, 1 and 4 GPUs free: six GPUs on four nodes
    assert choose_consolidated(cluster, free, 6, [0]) is None
    got = choose_consolidated(cluster, free, 6, [0], spread=True)
    assert got is not None and sorted(got.tolist()) == [0, 4, 12, 13, 14, 15]
