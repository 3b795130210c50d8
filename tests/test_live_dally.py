"""Dally's graphs and its baselines' live on loopback: for each, a scheduler and one agent
process emulating four machines (two GPUs each) forming a tiny cluster with network tiers (two racks of two machines),
and two short training jobs, one of which spans two machines. The live backend paces the
emulated GPUs at the rates the communication model gives each placement, as the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.livecluster import LiveCluster

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[1]
GRAPHS = ["dally", "dally-manual", "dally-nowait", "dally-consolidated", "tiresias-dally", "gandiva"]

SPEC = """name = "tiny-tiers"
[[group]]
nodes = 4
gpus_per_node = 2
machines_per_rack = 2
[tiers]
"""

# The example workload's speeds on one CPU core (tests/livecluster.py), for the emulated GPUs.
PROFILE = """model,batch_size,gpu_type,gpus,placement,iters_per_s
ResNet-18,16,V100,1,consolidated,80
ResNet-18,16,V100,2,consolidated,60
ResNet-18,16,V100,3,consolidated,55
"""

# Job 1 wants three GPUs, more than a machine holds: Dally's placer puts it on one rack, Gandiva
# anywhere. The jobs fit together: with leases of one short round, contending jobs would take
# turns every round, each turn a restart of seconds in live mode.
JOBS = """job_id,arrival_s,gpus,model,iterations,batch_size
0,0,2,ResNet-18,60,16
1,0,3,ResNet-18,20,16
"""


@pytest.mark.slow
def test_every_dally_graph_runs_live_on_a_tiered_cluster(tmp_path):
    # The six runs are independent (each its own folder, ports and processes) and mostly wait on
    # rounds: they run side by side, and each is then checked on its own.
    clusters = {}
    try:
        for name in GRAPHS:
            folder = tmp_path / name
            folder.mkdir()
            for file, text in {"spec.toml": SPEC, "jobs.csv": JOBS, "profile.csv": PROFILE}.items():
                (folder / file).write_text(text)
            options = ["--cluster", str(folder / "spec.toml"), "--trace", str(folder / "jobs.csv")]
            options += ["--set", f'profile="{folder / "profile.csv"}"', "--set", "round=2s"]
            # Round 0 waits for all four machines however long six runs starting at once take.
            options += ["--wait-for-agents", "120s"]
            cluster = clusters[name] = LiveCluster(folder, "", serve_args=("--stop-agents", "--checkpoint-every", "0", *options))
            cluster.graph = REPO / "graphs" / f"{name}.sched"  # the graph itself, not a copy
            cluster.start_scheduler()
            # One agent process emulating the four machines (jobs run as timers at their
            # placement's rate): the graphs' decisions are what is tested, not worker processes.
            cluster.start_agent("m", "2:V100", nodes=4)
        for name, cluster in clusters.items():
            status = cluster.wait_exit("scheduler", timeout=180)
            assert status == 0, f"{name}\n{cluster.logs()}"
            jobs = pl.read_csv(cluster.folder / "out" / "jobs.csv")
            assert jobs["status"].to_list() == ["finished"] * 2, f"{name}\n{jobs}\n{cluster.logs()}"
            # Job 1 first ran on one rack (GPUs 4 per rack): Dally's placers and TiresiasDally
            # take the first rack with room; Gandiva knows no racks.
            gpus = cluster.query("SELECT gpus FROM attempts WHERE job_id = 1 AND attempt = 1")[0][0]
            racks = {g // 4 for g in json.loads(gpus)}
            assert name == "gandiva" or racks == {1}, (name, gpus)
    finally:
        for cluster in clusters.values():
            cluster.close()
