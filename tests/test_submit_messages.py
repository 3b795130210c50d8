"""How submissions are refused, without a scheduler running: a trace file with no jobs is named
as other bad trace files are (`FILE: error: ...`), and a submission made by hand (not by
`roundhouse submit`) that lacks a column is told the columns it had, not those the scheduler
added to it (a job id, an arrival time)."""

from __future__ import annotations

import pytest

from roundhouse.errors import TraceError
from roundhouse.runtime.backends.live.submissions import Submissions
from roundhouse.runtime.cluster import Cluster
from roundhouse.runtime.journal import Journal
from roundhouse.runtime.world import World
from roundhouse.tools.cli import main
from roundhouse.traces.profiles import ProfileTable


def _submit(trace) -> list[str]:
    return ["submit", "tcp://127.0.0.1:1", "--insecure", "--timeout", "1s", str(trace)]


@pytest.mark.parametrize(("name", "text"), [("header-only.csv", "job_id,model,iterations,gpus\n"), ("empty.json", "[]")])
def test_a_trace_file_with_no_jobs_is_named_as_other_bad_trace_files_are(tmp_path, capsys, name, text):
    trace = tmp_path / name
    trace.write_text(text)
    assert main(_submit(trace)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{trace}: error: holds no jobs"), err
    # (the form of another bad file's error, from the same command)
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,model\n1,LM\n")
    assert main(_submit(bad)) == 2
    assert capsys.readouterr().err.startswith(f"{bad}: error: missing column 'gpus'")


@pytest.mark.parametrize(
    ("specs", "found"),
    [
        ([{"gpus": 1}], "'gpus'"),
        ([{"gpus": 1, "arrival_s": 3}], "'arrival_s', 'gpus'"),
        ([{"gpus": 1, "job_id": 7}], "'gpus', 'job_id'"),
        ([{"gpus": 1}, {"gpus": 1, "job_id": 9}], "'gpus', 'job_id'"),  # (one of its jobs had the column)
        ([{}], "none"),
    ],
)
def test_a_hand_made_submission_is_told_the_columns_it_had(tmp_path, specs, found):
    journal = Journal(tmp_path / "j.sqlite")
    try:
        submissions = Submissions(World(Cluster.parse("1x2:V100"), ProfileTable.load(), "V100"), journal)
        with pytest.raises(TraceError) as refused:
            submissions.accept(specs, 0.0)
        assert refused.value.message.endswith(f"; columns found: {found}"), refused.value.message
        assert journal.submission_ids() == set()  # (refused: nothing journaled)
    finally:
        journal.close()
