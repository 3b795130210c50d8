"""One agent process emulating many nodes (`roundhouse agent --nodes`): 64 emulated GPUs, 8
nodes on the wire, driven by a real scheduler through rotations, revocations and resumptions,
and the scheduler's figures on it (send lag, bytes, journal writes). Every run ends by itself."""

from __future__ import annotations

import csv
import time

import pytest

from roundhouse.agents.submitter import SchedulerError, Submitter
from roundhouse.wire.security import ClientSecurity
from tests.livecluster import LiveCluster

pytestmark = [pytest.mark.live, pytest.mark.slow]

NODES, GPUS = 8, 8
JOBS = 96
GRAPH = f"""
round = 1s;
cluster = "{NODES}x{GPUS}:V100";
src :: LiveSource(jobs={JOBS});
src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> m :: JobMetrics;
"""


def test_one_agent_process_emulates_eight_nodes_of_eight_gpus(tmp_path):
    cluster = LiveCluster(tmp_path, GRAPH, serve_args=("--stop-agents",))
    try:
        cluster.start_scheduler()
        cluster.start_agent("emu", f"{GPUS}:V100", nodes=NODES)
        with Submitter(cluster.address, ClientSecurity(None), timeout_s=30) as client:
            cluster.wait_for(lambda: client.status()["gpus_online"] == NODES * GPUS, 30, "every emulated node")
            # 96 jobs wanting 150 GPUs (ResNet-18 runs 32 to 383 iterations a second in the
            # shipped profile, so one to two seconds each): Las rotates them through the 64 GPUs.
            sizes = [1, 2, 4, 8] * (JOBS // 4)
            ids = client.submit([{"model": "ResNet-18", "iterations": 40 * g, "gpus": g} for g in sizes])
            assert len(ids) == JOBS
            status = client.status()
            # Asked with a short wait: the scheduler ends its run by itself, and a question sent
            # as it exits would otherwise wait out the submitter's whole timeout.
            client.timeout_s = 2.0
            deadline = time.time() + 90
            scheduler = cluster.processes["scheduler"]
            while status["finished"] < JOBS and scheduler.poll() is None and time.time() < deadline:
                time.sleep(0.3)
                try:
                    status = client.status()
                except SchedulerError:  # the scheduler ended its run between two questions
                    break
        assert cluster.wait_exit("scheduler", timeout=60) == 0, cluster.logs()
        assert cluster.wait_exit("emu", timeout=30) == 0, cluster.logs()

        names = sorted(name for (name,) in cluster.query("SELECT name FROM nodes"))
        assert names == sorted(f"emu-{i}" for i in range(NODES))  # each node its own identity and name
        with open(tmp_path / "out" / "jobs.csv") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == JOBS and all(r["status"] == "finished" for r in rows)
        attempts = cluster.attempts()
        assert all(runs[-1][2] == "done" for runs in attempts.values())
        # Revoked jobs stopped at an iteration and their next attempt resumed there.
        resumed = [
            (before, after) for runs in attempts.values() for before, after in zip(runs, runs[1:]) if before[2] == "preempted"
        ]
        assert resumed, "Las never rotated a job out"
        for before, after in resumed:
            assert before[4] is not None and after[1] == before[4], (before, after)
        # Multi-node jobs' ranks on other nodes learned of their revocation: every rank exited.
        exits = cluster.exits()
        ranks = {}
        for job, attempt, rank, *_ in exits:
            ranks.setdefault((job, attempt), set()).add(rank)
        sizes_of = {int(r["job_id"]): int(r["gpus"]) for r in rows}
        assert all(ranks[(job, n)] == set(range(sizes_of[job])) for job, runs in attempts.items() for n, *_ in runs)
        assert len({e[3] for e in exits}) == NODES
        # What the scheduler reports about its rounds.
        assert status["send_rounds"] >= 3
        assert 0 < status["send_lag_median_s"] < 1.0  # the plan went out well within its 1 s round
        assert status["bytes_out"] > 0 and status["journal_writes"] > status["launches"]
    finally:
        cluster.close()
