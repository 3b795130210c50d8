"""A submitted job that gives no command and whose model has no example workload (a profiled
model such as Transformer, or a job given by its duration alone) cannot run on any agent. It
used to be accepted, journaled and counted, then failed at its first launch (`job 8 cannot run;
giving up`); the scheduler now refuses it when it is submitted, naming its place, and journals
nothing of the submission."""

from __future__ import annotations

import pytest

from roundhouse.errors import TraceError
from roundhouse.runtime.backends.live.submissions import Submissions, as_submitted
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.world import World
from roundhouse.traces.profiles import ProfileTable


@pytest.fixture
def submissions(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    try:
        yield Submissions(World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100"), journal)
    finally:
        journal.close()


@pytest.mark.parametrize(
    ("job", "said"),
    [
        ({"gpus": 1, "model": "Transformer", "iterations": 10}, "model 'Transformer' has no example workload"),
        ({"gpus": 1, "duration_s": 10}, "it names no model"),
        ({"gpus": 1, "model": "LM", "iterations": 10, "command": "  "}, "model 'LM'"),  # (blank: refused as such)
    ],
)
def test_a_job_with_nothing_to_run_is_refused_when_submitted(submissions, job, said):
    runnable = {"gpus": 1, "model": "LM", "iterations": 10}
    with pytest.raises(TraceError) as refused:
        submissions.accept([runnable, job], 0.0)
    assert refused.value.row == 2, refused.value
    if "command" in job:
        assert "blank" in refused.value.message, refused.value.message
        return
    assert said in refused.value.message and "give the job a 'command'" in refused.value.message, refused.value.message
    assert "ResNet-18, ResNet-50, LM, Recommendation" in refused.value.message
    # As the scheduler logs it: by the job's place, not by the id it would have been given.
    logged = as_submitted(str(refused.value), [runnable, job])
    assert "row 2 of the submission (which gave no job id): error: cannot run live" in logged, logged
    assert submissions.journal.submission_ids() == set()


@pytest.mark.parametrize(
    "job",
    [
        {"gpus": 1, "model": "resnet18", "iterations": 10},  # (an accepted spelling of ResNet-18)
        {"gpus": 1, "model": "Transformer", "iterations": 10, "command": "python train.py"},
        {"gpus": 1, "command": "sleep 10", "duration_s": 10},
    ],
)
def test_a_job_with_a_workload_or_a_command_is_accepted(submissions, job):
    assert submissions.accept([job], 0.0) == [0]
