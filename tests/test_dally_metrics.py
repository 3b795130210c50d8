"""The metrics Dally's evaluation reads, checked by hand: queueing (after preemptions too),
exposed communication time and starts per network tier, per job and in the summary."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from tests.conftest import jobs_of

FIRST_FREE = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> m :: JobMetrics;
"""

# Four machines of 8 GPUs, two per rack (machines 0-1: rack 0, 2-3: rack 1); Dally's links.
THREE_MACHINES = """
name = "three"
[[group]]
nodes = 4
gpus_per_node = 8
machines_per_rack = 2
[tiers]
"""


def test_communication_time_and_tiers_of_three_starts(run_graph, tmp_path):
    cluster = tmp_path / "three.toml"
    cluster.write_text(textwrap.dedent(THREE_MACHINES))
    jobs = [
        # GPUs 0-3 of machine 0; known by duration only, so no communication.
        {"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 500.0, "model": ""},
        # GPUs 4-11: 4 on machine 0 and 4 on machine 1, one rack: AlexNet's rack share, 13%.
        {"job_id": 1, "arrival_s": 0.0, "gpus": 8, "duration_s": 1000.0, "model": "AlexNet"},
        # GPUs 12-19: 4 on machine 1 (rack 0) and 4 on machine 2 (rack 1): network, 100%.
        {"job_id": 2, "arrival_s": 0.0, "gpus": 8, "duration_s": 1000.0, "model": "AlexNet"},
    ]
    result = run_graph(FIRST_FREE, jobs, cluster=str(cluster))
    got = jobs_of(result)
    assert [got[j]["finish_s"] for j in range(3)] == pytest.approx([500.0, 1130.0, 2000.0])
    assert [got[j]["comm_s"] for j in range(3)] == pytest.approx([0.0, 130.0, 1000.0])
    tiers = [(got[j]["machine_starts"], got[j]["rack_starts"], got[j]["network_starts"]) for j in range(3)]
    assert tiers == [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    summary = result.reports["m"]["summary"]
    assert (summary["machine_starts"], summary["rack_starts"], summary["network_starts"]) == (1, 1, 1)
    assert summary["total_comm_s"] == pytest.approx(1130.0)
    assert summary["avg_comm_s"] == pytest.approx(1130.0 / 3)
    assert summary["p95_comm_s"] == pytest.approx(np.percentile([0.0, 130.0, 1000.0], 95))
    counters = result.counters["m"]
    assert (counters["machine_starts"], counters["rack_starts"], counters["network_starts"]) == (1, 1, 1)


LAS = """
round = 100s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> m :: JobMetrics;
"""


def test_queueing_counts_the_wait_after_a_preemption(run_graph):
    # One GPU, rounds of 100 s. Job 0 runs from 0; job 1 arrives at 150, is seen at 200 with no
    # attained service, preempts job 0 and runs 200-300; job 0 resumes at 300 and finishes its
    # remaining 800 s at 1100.
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0},
        {"job_id": 1, "arrival_s": 150.0, "gpus": 1, "duration_s": 100.0},
    ]
    result = run_graph(LAS, jobs, cluster="1x1:V100")
    got = jobs_of(result)
    assert (got[0]["finish_s"], got[1]["finish_s"]) == pytest.approx((1100.0, 300.0))
    assert (got[0]["preemptions"], got[1]["preemptions"]) == (1, 0)
    # Job 0: waited 0 before its first start, 100 after its preemption; job 1: 50 before.
    assert (got[0]["queue_s"], got[1]["queue_s"]) == pytest.approx((100.0, 50.0))
    assert (got[0]["responsiveness_s"], got[1]["responsiveness_s"]) == pytest.approx((0.0, 50.0))
    assert (got[0]["queue_after_preemption_s"], got[1]["queue_after_preemption_s"]) == pytest.approx((100.0, 0.0))
    summary = result.reports["m"]["summary"]
    assert summary["avg_queue_s"] == pytest.approx(75.0)
    assert summary["median_queue_s"] == pytest.approx(75.0)
    assert summary["p95_queue_s"] == pytest.approx(97.5)  # numpy's linear interpolation between 50 and 100
    assert summary["p99_queue_s"] == pytest.approx(99.5)
    assert summary["avg_queue_after_preemption_s"] == pytest.approx(50.0)
    # On a cluster without tiers nothing is communication, and a one-GPU start is one machine.
    assert summary["total_comm_s"] == 0.0
    assert (summary["machine_starts"], summary["rack_starts"], summary["network_starts"]) == (3, 0, 0)


def test_a_running_job_s_communication_so_far_is_reported(run_graph, tmp_path):
    # Stopped at 600 s while a network-spread AlexNet job (twice its compute time) still runs:
    # it has held its GPUs 600 s, 300 s of which is compute.
    cluster = tmp_path / "three.toml"
    cluster.write_text(textwrap.dedent(THREE_MACHINES))
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 12, "duration_s": 100.0, "model": ""},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 8, "duration_s": 1000.0, "model": "AlexNet"},
    ]
    result = run_graph(FIRST_FREE, jobs, cluster=str(cluster), until=600.0)
    got = jobs_of(result)
    assert got[1]["finish_s"] is None
    assert got[1]["network_starts"] == 1
    assert got[1]["comm_s"] == pytest.approx(300.0)


def test_the_delay_placer_reports_its_tuned_timers_as_they_change(tmp_path):
    from roundhouse.elements.placement.dally import DelayPlacer
    from roundhouse.runtime.cluster import Cluster
    from tests.test_dally import TINY, fragmented, offer

    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    world = fragmented(Cluster.parse(str(path)), [(1, 4, 0.0), (2, 4, 0.0)])
    placer = DelayPlacer(tuned=True, history=1000.0, timeline=True)
    # No machine has 4 free GPUs. With no history both timers are 0: job 1 takes a rack at 50 s,
    # and its 50 s wait becomes the rack list of demand 4; at 80 s job 2's rack timer is 50 s.
    assert offer(placer, world, [1], now=50.0) == {1: [2, 3, 6, 7]}
    assert offer(placer, world, [2], now=80.0, started=False) == {2: [2, 3, 6, 7]}
    # Now the rack list holds 50 and 80: mean 65 + 2 sample standard deviations (15 * sqrt 2).
    assert placer.timers(4, 90.0) == pytest.approx((0.0, 65.0 + 30.0 * np.sqrt(2.0)))
    placer.timers(4, 95.0)  # unchanged timers add no row
    timers = placer.finish(None)["timers"]
    assert timers.rows() == pytest.approx([(50.0, 4, 0.0, 0.0), (80.0, 4, 0.0, 50.0), (90.0, 4, 0.0, 65.0 + 30.0 * np.sqrt(2.0))])
    assert DelayPlacer(tuned=True).finish(None) == {}


def test_starts_counted_in_batches_are_those_counted_round_by_round(run_graph, tmp_path, monkeypatch):
    # LAS time-shares an overloaded tiered cluster, and FirstFree spreads jobs over machines and
    # racks: many starts per job, of every tier. Counting one round's launches at a time, or a
    # few rounds' (a job then starts more than once in a batch), or all at the end gives the same.
    from roundhouse.elements import sinks

    cluster = tmp_path / "three.toml"
    cluster.write_text(textwrap.dedent(THREE_MACHINES))
    graph = """
    round = 5min;
    src :: PoissonSource(rate=12/h, jobs=150, seed=3);
    src -> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> m :: JobMetrics;
    """
    columns = ["job_id", "machine_starts", "rack_starts", "network_starts"]
    seen = []
    for batch in (1, 7, sinks.START_BATCH):
        monkeypatch.setattr(sinks, "START_BATCH", batch)
        result = run_graph(graph, cluster=str(cluster))
        counters = result.counters["m"]
        seen.append((result.reports["m"]["jobs"].select(columns), [counters[c] for c in columns[1:]]))
    table, counts = seen[0]
    assert min(counts) > 0 and table["machine_starts"].max() > 7  # every tier, and repeated starts
    assert counts == [int(table[c].sum()) for c in columns[1:]]
    for other, other_counts in seen[1:]:
        assert other.equals(table) and other_counts == counts
