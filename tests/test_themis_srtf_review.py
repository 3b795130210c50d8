"""SRTF breaks ties between equal remaining times by admission order, whatever rounding error
the jobs' work over their throughput leaves."""

from __future__ import annotations

import numpy as np

from roundhouse.traces.profiles import REFERENCE_GPU_TYPE, ProfileTable
from tests.conftest import jobs_of

SRTF = """
round = 5min;
cluster = "1x1:V100";
src :: TraceSource(path="trace.csv");
src -> AcceptAll -> JobPool -> Srtf -> Consolidated -> Launch -> JobMetrics;
"""


def test_srtf_ties_of_equal_duration_go_to_the_job_admitted_first(run_graph):
    # Two 1,000 s jobs of different models: duration x rate / rate is 1000.0000000000001 for
    # the first and 999.9999999999999 for the second, so an unrounded key ranks the second first.
    profile = ProfileTable.load()
    rates = [profile.rate(model, batch, REFERENCE_GPU_TYPE, 1) for model, batch in (("ResNet-50", 64), ("ResNet-18", 128))]
    assert (1000.0 * rates[0]) / rates[0] > (1000.0 * rates[1]) / rates[1]  # (the premise)
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0, "model": "ResNet-50", "batch_size": 64},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0, "model": "ResNet-18", "batch_size": 128},
    ]
    done = jobs_of(run_graph(SRTF, jobs))
    assert done[0]["first_start_s"] == 0.0
    assert done[1]["first_start_s"] > done[0]["first_start_s"]
    assert np.isclose(done[0]["run_s"], 1000.0) and np.isclose(done[1]["run_s"], 1000.0)


def test_srtf_still_runs_the_shorter_job_first(run_graph):
    jobs = [
        {"job_id": 0, "arrival_s": 0.0, "gpus": 1, "duration_s": 1000.0, "model": "ResNet-50", "batch_size": 64},
        {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 999.0, "model": "ResNet-18", "batch_size": 128},
    ]
    done = jobs_of(run_graph(SRTF, jobs))
    assert done[1]["first_start_s"] == 0.0 and done[0]["first_start_s"] > 0.0
