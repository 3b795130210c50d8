"""The synthesizer in live mode: a scheduler and an agent emulating one GPU on loopback. Each
decision forks the live world's books and simulates the candidates forward, as in a simulation."""

from __future__ import annotations

import polars as pl
import pytest

from tests.livecluster import TEST_PROFILE, LiveCluster

pytestmark = pytest.mark.live

GRAPH = """
round = 2s;
cluster = "1x1:V100";
profile = "profile.csv";
synth :: Synthesizer(switches=[order], every=1, horizon=2min, workers=2);
src   :: TraceSource(path="jobs.csv");
fifo  :: Fifo;
srtf  :: Srtf;
order :: ChoosePolicy(candidates=[fifo, srtf]);
src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> m :: JobMetrics;
"""

# A long job (2400 iterations at 200/s: 12 s) alone at first; two short ones (160 at 80/s: 2 s)
# come at 3 s. FIFO would keep the long one running; from the state then, SRTF finishes the
# short ones first and the jobs spend less time in the system: the synthesizer switches.
JOBS = """job_id,arrival_s,gpus,model,iterations,batch_size
0,0,1,LM,2400,10
1,3,1,ResNet-18,160,16
2,3,1,ResNet-18,160,16
"""


@pytest.mark.slow
def test_live_synthesizer_forks_the_live_books_and_switches(tmp_path):
    cluster = LiveCluster(
        tmp_path, GRAPH, {"profile.csv": TEST_PROFILE, "jobs.csv": JOBS}, serve_args=("--checkpoint-every", "0")
    )
    try:
        cluster.start_scheduler()
        cluster.start_agent("node-a", gpus="1:V100")
        status = cluster.wait_exit("scheduler", timeout=150)
        assert status == 0, cluster.logs()
        out = cluster.folder / "out"
        assert (out / "jobs.csv").is_file(), (sorted(p.name for p in out.iterdir()), cluster.logs())  # (the one sink)
        jobs = pl.read_csv(out / "jobs.csv")
        assert jobs["status"].to_list() == ["finished"] * 3, cluster.logs()
        choices = pl.read_csv(out / "synth-choices.csv")
        assert choices["combination"].to_list() == ["fifo", "srtf"], (choices, cluster.logs())
        decisions = pl.read_csv(out / "synth-decisions.csv")
        switched = decisions.filter(pl.col("round") == choices["round"][1])
        best = dict(zip(switched["combination"], switched["time_in_system_s"]))
        assert best["srtf"] < best["fifo"], decisions
        # The long job was preempted for the short ones, which finished first.
        finish = dict(zip(jobs["job_id"], jobs["finish_s"]))
        assert finish[1] < finish[0] and finish[2] < finish[0], jobs
        attempts = cluster.attempts()
        assert len(attempts[0]) >= 2 and attempts[0][0][2] == "preempted", attempts
    finally:
        cluster.close()
