"""ONES' graph live on loopback: the scheduler and one agent process emulating two machines of
four GPUs, three small elastic jobs in ONES' own trace format. Every job finishes, and the graph
renders."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.livecluster import LiveCluster

REPO = Path(__file__).resolve().parents[1]

# ONES' trace format (traces/ones.py): BERT jobs (about 100 samples/s a GPU in ONES'
# applications) with epochs of tens of samples, so that they train for seconds. Live, a job's
# work is its iterations: here one per sample, paced at the emulated GPUs' samples/s.
JOBS = """time,model,task,epoch_size,patience,batch_size,lr,max_lr,target_acc,num_gpus
0,bert,mrpc,200,5,16,5e-6,2e-5,0.8,2
0,bert,cola,200,5,16,5e-6,2e-5,0.8,2
1,bert,sst2,100,5,32,2.5e-6,2e-5,0.9,8
"""


@pytest.mark.live
def test_the_ones_graph_runs_live_on_emulated_agents(tmp_path):
    from roundhouse.traces import ones

    (tmp_path / "ones.csv").write_text(JOBS)
    # A live job needs a program; emulated agents run it as a timer at its placement's rate.
    command = f"{sys.executable} {REPO / 'tests' / 'elastic_worker.py'}"
    trace = ones.read_trace(tmp_path / "ones.csv").with_columns(command=pl.lit(command))
    trace.write_csv(tmp_path / "jobs.csv")
    options = ["--cluster", "2x4:V100", "--trace", str(tmp_path / "jobs.csv"), "--set", "round=2s"]
    cluster = LiveCluster(tmp_path, "", serve_args=("--stop-agents", "--checkpoint-every", "0", *options))
    cluster.graph = REPO / "graphs" / "ones.sched"  # the graph itself, not a copy
    try:
        cluster.start_scheduler()
        cluster.start_agent("m", "4:V100", nodes=2)
        assert cluster.wait_exit("scheduler", timeout=90) == 0, cluster.logs()
        jobs = pl.read_csv(tmp_path / "out" / "jobs.csv")
        assert jobs["status"].to_list() == ["finished"] * 3, f"{jobs}\n{cluster.logs()}"
        # ONES starts every job on one GPU (its batch limit's start), whatever it asked for.
        firsts = cluster.query("SELECT job_id, gpus FROM attempts WHERE attempt = 1 ORDER BY job_id")
        assert [len(pl.Series(g.strip("[]").split(","))) for _, g in firsts] == [1, 1, 1], firsts
        # ONES grew a job in place while it ran (the emulated agents carry resizes out). (The
        # whole log: logs() shows only its end, which a loaded machine's warnings fill.)
        assert "in place: 1 -> 2 workers" in cluster.log("scheduler"), cluster.logs()
    finally:
        cluster.close()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_the_ones_graph_renders(tmp_path):
    out = tmp_path / "ones.svg"
    assert main(["render", str(REPO / "graphs" / "ones.sched"), "-o", str(out)]) == 0
    assert "Ones" in out.read_text()
