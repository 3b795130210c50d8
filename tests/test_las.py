"""Least attained service: service measured in GPU-seconds (Tiresias) or wall-clock seconds (Blox)."""

import pytest

from roundhouse.errors import RoundhouseError
from tests.conftest import jobs_of

GRAPH = """
round = 100s;
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Las{args} -> FirstFree -> Launch -> m :: JobMetrics;
"""

# One 4-GPU node. A (4 GPUs) and B (1 GPU) arrive together and cannot run together; each needs
# 300 s. A round of A gives it 400 GPU-seconds but only 100 wall-clock seconds.
JOBS = [
    {"job_id": 0, "arrival_s": 0.0, "gpus": 4, "duration_s": 300.0},
    {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 300.0},
]


def _finish(run_graph, args: str) -> dict[int, float]:
    result = run_graph(GRAPH.format(args=args), JOBS, cluster="1x4:V100")
    return {job: row["finish_s"] for job, row in jobs_of(result).items()}


def test_gpu_seconds_and_wall_seconds_order_jobs_differently(run_graph):
    # By GPU-seconds, after A's first round (400 GPU-s) B (1 GPU) stays ahead of A until it has
    # 400 GPU-s, i.e. until it finishes at 400 s; A then needs two more rounds: 600 s.
    assert _finish(run_graph, "") == {0: 600.0, 1: 400.0}
    assert _finish(run_graph, "(service=gpu_seconds)") == {0: 600.0, 1: 400.0}
    # By seconds held, the two alternate (ties go to A, admitted first): A runs in rounds 0, 2
    # and 4 and finishes at 500 s; B runs in rounds 1, 3 and 5 and finishes at 600 s.
    assert _finish(run_graph, "(service=wall_seconds)") == {0: 500.0, 1: 600.0}


def test_an_unknown_service_measure_is_refused(run_graph):
    with pytest.raises(RoundhouseError) as caught:
        run_graph(GRAPH.format(args="(service=gpu_hours)"), JOBS, cluster="1x4:V100")
    text = str(caught.value)
    assert "argument 'service' of Las" in text and "'gpu_seconds', 'wall_seconds'" in text
