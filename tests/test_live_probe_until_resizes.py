"""In-place resizes at a live run's time limit: the round at `--until` (the last: the run ends
after its tick) sends no resize, as it sends no launch (its running jobs are revoked at once
to checkpoint); a resize decided in a round before the limit still reaches the agent. A real
scheduler and agent on loopback, with a small placement element of the test's own that grows
its one job onto a second GPU from a given time on."""

from __future__ import annotations

import re

import pytest

from tests.livecluster import TEST_PROFILE, LiveCluster

GROW = '''
import attrs

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Assignment, Plan, Resize
from roundhouse.runtime.values import Duration


@element
class GrowAt(Element):
    """Start the first job on GPU 0, and grow it in place onto GPUs 0 and 1 from a time on.

    Ports:
        active: admitted, unfinished jobs.
        plan: the launch, the resize, or the running job kept.
    Arguments:
        at: the time from which the running job is grown.
    Counters:
        none
    Cost: O(1).
    See also: none
    Paper: none
    """

    category = "placement"
    inputs = (In("active", Active),)
    outputs = (Out("plan", Plan),)
    state = ()

    at: Duration = attrs.field(default=Duration(0.0))

    def tick(self, ctx, active):
        running = ctx.running_rows
        if not len(running):
            return Plan.of([Assignment(int(active.rows[0]), [0])]) if len(active.rows) else Plan()
        row = int(running[0])
        if ctx.now >= self.at and int((ctx.holder == row).sum()) == 1:
            return Plan.of(resizes=[Resize(row, [0, 1])])
        return Plan(keep=running)
'''

GRAPH = """
require "grow.py";
round = 1s;
cluster = "1x2:V100";
profile = "profile.csv";
src :: TraceSource(path="jobs.csv");
src -> AcceptAll -> JobPool -> GrowAt(at={at}) -> Launch -> m :: JobMetrics;
"""
JOBS = "job_id,arrival_s,gpus,model,iterations,batch_size\n0,0,1,LM,100000000,10\n"


def _run(tmp_path, at: str) -> LiveCluster:
    files = {"grow.py": GROW, "profile.csv": TEST_PROFILE, "jobs.csv": JOBS}
    return LiveCluster(tmp_path, GRAPH.format(at=at), files, serve_args=("--until", "2s"))


def _start(cluster: LiveCluster) -> None:
    cluster.start_scheduler()
    cluster.start_agent("node-a")
    assert cluster.wait_exit("scheduler", 60) == 0, cluster.logs()


@pytest.mark.live
def test_the_round_at_the_time_limit_sends_no_resize(tmp_path):
    cluster = _run(tmp_path, "2s")  # (the resize is decided in the round at the limit)
    try:
        _start(cluster)
        log = cluster.log("scheduler")
        assert re.findall(r"launch job (\d+) attempt (\d+)", log) == [("0", "1")], log
        assert "resize job 0" not in log, log
        assert "at the time limit: 1 resize(s) not sent (job(s) 0)" in log, log
        # The agent heard of no resize: its one worker stopped as a preemption, as launched.
        shapes = cluster.query("SELECT * FROM shapes")
        assert cluster.query("SELECT COUNT(*) FROM shapes WHERE generation > 0") == [(0,)], shapes
        assert [(e[0], e[2], e[4]) for e in cluster.exits()] == [(0, 0, "preempted")], cluster.exits()
        assert "2 workers" not in cluster.log("node-a"), cluster.log("node-a")
    finally:
        cluster.close()


@pytest.mark.live
def test_a_resize_before_the_time_limit_is_still_sent(tmp_path):
    cluster = _run(tmp_path, "1s")
    try:
        _start(cluster)
        log = cluster.log("scheduler")
        assert "resize job 0 attempt 1 in place: 1 -> 2 workers" in log, log
        assert "resize(s) not sent" not in log, log
        assert cluster.query("SELECT job_id, attempt, generation FROM shapes WHERE generation > 0") == [(0, 1, 1)]
        assert "2 workers" in cluster.log("node-a"), cluster.log("node-a")  # (it heard of the resize)
        assert sorted(e[2] for e in cluster.exits()) == [0, 1], cluster.exits()  # (both workers stopped)
    finally:
        cluster.close()
