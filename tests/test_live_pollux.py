"""Pollux's graph live on loopback: a scheduler running graphs/pollux.sched and one agent
process emulating two machines of two GPUs (jobs run as timers at the goodput the elastic
profile gives their placement and batch size). Pollux starts each job on one GPU (its
exploration cap), then grows the longer one onto more GPUs while it trains; every job finishes."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.livecluster import LiveCluster

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[1]

# The emulating agent runs each job as a timer; the command is what a real agent would start.
# Short jobs: CIFAR-10 trains 50,000 samples an epoch at about a thousand samples/s per GPU,
# BERT 88,644 at tens a second.
COMMAND = "python tests/elastic_worker.py"
JOBS = f"""job_id,arrival_s,gpus,model,batch_size,epochs,command
0,0,1,cifar10,128,0.5,{COMMAND}
1,0,1,bert,12,0.001,{COMMAND}
"""


def test_pollux_graph_runs_live_with_emulated_agents(tmp_path):
    (tmp_path / "jobs.csv").write_text(JOBS)
    # The graph as shipped, with a smaller search and no restart penalty (the jobs are seconds
    # old, so Pollux's 30 s penalty would keep them where they start).
    graph = (REPO / "graphs" / "pollux.sched").read_text()
    graph = graph.replace("Pollux(seed=0)", "Pollux(seed=0, population=30, generations=20, restart_delay=0)")
    assert "restart_delay=0" in graph
    options = ["--cluster", "2x2:V100", "--trace", str(tmp_path / "jobs.csv"), "--set", "round=2s"]
    cluster = LiveCluster(tmp_path, graph, serve_args=("--stop-agents", "--checkpoint-every", "0", *options))
    try:
        cluster.start_scheduler()
        cluster.start_agent("m", "2:V100", nodes=2)
        # (Pollux's search takes its CPU every round: rounds overrun on a loaded machine.)
        status = cluster.wait_exit("scheduler", timeout=90)
        assert status == 0, cluster.logs()
        jobs = pl.read_csv(tmp_path / "out" / "jobs.csv")
        assert jobs["status"].to_list() == ["finished"] * 2, f"{jobs}\n{cluster.logs()}"
        # Job 0 ran on more than one GPU at some point: Pollux resized it while it trained.
        attempts = cluster.query("SELECT gpus FROM attempts WHERE job_id = 0 ORDER BY attempt")
        assert len(attempts) >= 2 and max(len(g[0].split(",")) for g in attempts) >= 2, f"{attempts}\n{cluster.logs()}"
    finally:
        cluster.close()
