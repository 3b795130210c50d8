"""TiresiasGittins without a history file: the service distribution is every job that has
arrived so far with its exact service, the jobs being ranked included; not the whole trace, and
not a separate history as Tiresias' simulator reads. What the element and its graph say of it."""

from __future__ import annotations

import inspect

from roundhouse.elements.policies.tiresias import TiresiasGittins
from tests.conftest import REPO, jobs_of, write_trace

GRAPH = """
round = 1s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> {policy} -> FirstFree -> Launch -> m :: JobMetrics;
"""
# One GPU, one queue below a limit far above every job: the Gittins index alone orders them.
# Job 1 (10 s) runs alone until job 2 (3 s) arrives at 5 s; job 3 (100 s) arrives after both end.
JOBS = [
    {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 10.0},
    {"job_id": 2, "arrival_s": 5.0, "gpus": 1, "duration_s": 3.0},
    {"job_id": 3, "arrival_s": 100.0, "gpus": 1, "duration_s": 100.0},
]


def _finishes(run_graph, tmp_path, history: list[dict] | None) -> list[float]:
    policy = "TiresiasGittins(queues=2, thresholds=[1000])"
    if history is not None:
        write_trace(tmp_path / "history.csv", history)
        policy = 'TiresiasGittins(queues=2, thresholds=[1000], history="history.csv")'
    got = jobs_of(run_graph(GRAPH.format(policy=policy), JOBS, cluster="1x1:V100"))
    return [got[j]["finish_s"] for j in (1, 2, 3)]


def test_without_a_history_the_jobs_arrived_so_far_are_the_distribution(run_graph, tmp_path):
    default = _finishes(run_graph, tmp_path, None)
    # At 5 s the distribution is {10, 3}: jobs 1 and 2, job 2 (being ranked) with its exact
    # service. Job 1 (5 s attained) then has the higher index and finishes first.
    assert default == _finishes(run_graph, tmp_path, JOBS[:2]) == [10.0, 13.0, 200.0]
    # The whole trace, {10, 3, 100}, would rank job 2 first: job 3 is not in it until it arrives.
    assert _finishes(run_graph, tmp_path, JOBS) == [13.0, 8.0, 200.0] != default


def test_the_element_and_its_graph_do_not_call_the_default_the_trace_or_tiresias_history():
    texts = {
        "TiresiasGittins": inspect.getdoc(TiresiasGittins) or "",
        "graphs/tiresias-gittins.sched": (REPO / "graphs" / "tiresias-gittins.sched").read_text(),
    }
    for where, text in texts.items():
        flat = " ".join(text.replace("//", " ").split())
        assert "trace itself" not in flat, where
        assert "arrived so far" in flat and "ranked" in flat, where
