"""Trace readers: jobs arriving together are ordered by job id whatever the file's order (and
the schema says so); a Philly log that gives two jobs one `jobid` is refused, as a job id used
twice is by every reader."""

from __future__ import annotations

import json

import polars as pl
import pytest

from roundhouse.errors import TraceError
from roundhouse.traces import canonical, philly, schema
from tests.conftest import jobs_of

ROWS = [
    {"job_id": 5, "arrival_s": 0.0, "gpus": 1, "duration_s": 100.0},
    {"job_id": 3, "arrival_s": 0.0, "gpus": 1, "duration_s": 200.0},
    {"job_id": 9, "arrival_s": 10.0, "gpus": 1, "duration_s": 50.0},
    {"job_id": 1, "arrival_s": 0.0, "gpus": 1, "duration_s": 10.0},
]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_jobs_arriving_together_are_read_in_job_id_order_whatever_the_files_order(tmp_path, suffix):
    frames = []
    for name, rows in (("given", ROWS), ("reversed", ROWS[::-1])):
        path = tmp_path / f"{name}{suffix}"
        (pl.DataFrame(rows).write_parquet if suffix == ".parquet" else pl.DataFrame(rows).write_csv)(path)
        frames.append(canonical.read(path))
    assert frames[0].get_column("job_id").to_list() == [1, 3, 5, 9]
    assert frames[0].equals(frames[1])


def test_the_schema_documents_the_row_order():
    doc = " ".join(schema.__doc__.split())
    assert "jobs arriving at the same time by `job_id`, whatever their order in the file" in doc


def test_of_jobs_arriving_together_fifo_starts_the_smaller_id_first(run_graph):
    result = run_graph(
        """
        round = 1min;
        TraceSource(path="trace.csv") -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;
        """,
        jobs=[ROWS[0], ROWS[1]],  # (id 5 first in the file, 3 second; one GPU for both)
        cluster="1x1:V100",
    )
    jobs = jobs_of(result)
    assert jobs[3]["finish_s"] < jobs[5]["finish_s"]


def _record(jobid: str, minute: int, ran: bool = True) -> dict:
    attempt = {
        "start_time": f"2017-10-03 08:{minute:02d}:10",
        "end_time": f"2017-10-03 09:{minute:02d}:00",
        "detail": [{"ip": "m1", "gpus": ["gpu0"]}],
    }
    return {
        "status": "Pass" if ran else "Killed",
        "vc": "vc1",
        "jobid": jobid,
        "user": "u",
        "submitted_time": f"2017-10-03 08:{minute:02d}:00",
        "attempts": [attempt] if ran else [],
    }


def _write_log(path, records: list[dict]):
    # (one record a line: record n begins on line n + 1)
    path.write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n")
    return path


def test_a_philly_log_giving_two_jobs_one_jobid_is_refused_naming_both_records(tmp_path):
    path = _write_log(
        tmp_path / "log.json", [_record("application_1", 0), _record("application_2", 1), _record("application_1", 2)]
    )
    with pytest.raises(TraceError) as caught:
        philly.parse(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:4: error: column 'jobid': record 3: job id application_1 is used twice")
    assert message.endswith(f"here and at {path}:2")


def test_a_philly_record_skipped_does_not_count_as_a_use_of_its_jobid(tmp_path):
    # (a record that never ran is no job: it is skipped and counted, and its id not compared)
    path = _write_log(tmp_path / "log.json", [_record("application_1", 0, ran=False), _record("application_1", 1)])
    trace = philly.parse(path)
    assert trace.frame.get_column("name").to_list() == ["application_1"]
    assert trace.skipped == 1
