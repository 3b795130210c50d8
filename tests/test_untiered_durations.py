"""A job of the throughput profile with a duration (Dally's traces give both) on a cluster
without network tiers: its duration is unused there, so a job the profile has no throughput for
is refused saying that the duration counts only on a tiered cluster."""

from __future__ import annotations

from tests.conftest import REPO, fails

TRACE = "job_id,arrival_s,gpus,model,batch_size,duration_s\n0,0,32,ResNet-50,64,3600\n"
GRAPH = """round = 5min;
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


def _graph(tmp_path):
    (tmp_path / "jobs.csv").write_text(TRACE)
    (tmp_path / "g.sched").write_text(GRAPH)
    return tmp_path / "g.sched"


def test_a_duration_unused_without_tiers_is_said_so(capsys, tmp_path):
    err = fails(capsys, "run", _graph(tmp_path), "--cluster", "8x4:V100", "--until", "1h")
    assert "no throughput for ResNet-50 (batch size 64) on 32 GPU(s)" in err, err
    assert "duration_s stands for its compute time only on a cluster with network tiers" in err, err


def test_the_same_job_runs_by_its_duration_on_a_tiered_cluster(capsys, tmp_path):
    from roundhouse.tools.cli import main

    assert main(["run", str(_graph(tmp_path)), "--cluster", "dally:4", "--until", "2h", "--quiet"]) == 0, capsys.readouterr().err


def test_the_shipped_dally_graph_on_a_cluster_without_tiers_says_why_it_is_refused(capsys):
    err = fails(capsys, "run", REPO / "graphs" / "dally.sched", "--cluster", "32x4:V100", "--until", "1h")
    assert "only on a cluster with network tiers" in err, err
