"""A job Pollux never starts, its model being no application of the elastic profile: the record
says so (`not_elastic`, with the profile's application count), not that the schedule merely
gave it no GPU, and `roundhouse explain` names the model where the run's jobs.csv gives it."""

from __future__ import annotations

import re
import textwrap

import polars as pl
import pyarrow.parquet as pq
import pytest

from roundhouse.runtime.explain import FILE_NAME, MEANINGS, Reason
from roundhouse.tools.cli import main
from tests.conftest import write_trace

POLLUX = """
round = 60s;
{profile}
arrivals :: TraceSource(path="trace.csv");
arrivals -> AcceptAll -> JobPool -> sched :: Pollux(seed=0) -> PolluxAgent -> Launch -> report :: JobMetrics;
"""


def _elastic(job_id: int, arrival_s: float) -> dict:
    return {"job_id": job_id, "arrival_s": arrival_s, "gpus": 1, "model": "cifar10", "batch_size": 128, "epochs": 2.0}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A Pollux run (2 hours, 4x4:V100) of two elastic jobs and two of other models: ResNet-50,
    which the throughput profile knows (jobs.csv keeps its name), and one it does not."""
    folder = tmp_path_factory.mktemp("mixed")
    jobs = [
        _elastic(0, 0.0),
        {"job_id": 7, "arrival_s": 30.0, "gpus": 1, "model": "resnet50", "batch_size": 64, "duration_s": 600.0},
        {"job_id": 8, "arrival_s": 30.0, "gpus": 2, "model": "resnet152", "batch_size": 64, "duration_s": 600.0},
        _elastic(1, 90.0),
    ]
    return _run(folder, jobs, 'elastic_profile = "pollux";')


def _run(folder, jobs, profile: str):
    write_trace(folder / "trace.csv", jobs)
    graph = folder / "graph.sched"
    graph.write_text(textwrap.dedent(POLLUX.format(profile=profile)))
    out = folder / "out"
    argv = ["run", str(graph), "--cluster", "4x4:V100", "--until", "2h", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    return out


def _lines(capsys, out, job: int) -> list[str]:
    capsys.readouterr()
    assert main(["explain", str(out), str(job)]) == 0
    return [re.sub(r"^\s+t=\S+\s+", "", line) for line in capsys.readouterr().out.splitlines()[1:]]


def test_a_job_of_no_elastic_application_is_recorded_as_such(mixed):
    frame = pl.read_parquet(mixed / FILE_NAME)
    waits = frame.filter(pl.col("job_id").is_in([7, 8]) & (pl.col("state") == "waiting") & (pl.col("reason") != "admitted"))
    # Each waits for this one reason, given by Pollux, from its admission to the run's end.
    assert sorted(waits["job_id"].to_list()) == [7, 8]
    assert (waits["reason"] == "not_elastic").all() and (waits["element_class"] == "Pollux").all()
    assert (waits["c"] == 6).all()  # (Pollux's six applications)
    assert (waits["a"] >= 0).all() and (waits["b"] > 0).all()  # (GPUs idle that it still never takes)
    # The elastic jobs' records never say so: they run.
    elastic = frame.filter(pl.col("job_id").is_in([0, 1]))
    assert "not_elastic" not in elastic["reason"].to_list() and "launched" in elastic["reason"].to_list()


def test_explain_names_the_model_the_elastic_profile_lacks(mixed, capsys):
    row = (
        pl.read_parquet(mixed / FILE_NAME)
        .filter((pl.col("job_id") == 7) & (pl.col("reason") == "not_elastic"))
        .row(0, named=True)
    )
    assert _lines(capsys, mixed, 7)[1:] == [
        "waiting: never started: its model, ResNet-50, names none of the elastic profile's 6 applications, and it starts "
        f"only jobs whose model does; the allocation runs {row['a']} job{'s' if row['a'] != 1 else ''} and leaves "
        f"{row['b']} GPU(s) idle (Pollux 'sched')",
        "run stopped here (reached the time limit (2h)); the job had not finished",
    ]
    # A model the profiles do not know is not in jobs.csv: the line says what it can.
    [line] = [line for line in _lines(capsys, mixed, 8) if "never started" in line]
    assert line.startswith("waiting: never started: its model names none of the elastic profile's 6 applications")


def test_without_an_elastic_profile_the_line_says_the_run_sets_none(tmp_path, capsys):
    jobs = [{"job_id": 3, "arrival_s": 0.0, "gpus": 1, "model": "resnet50", "batch_size": 64, "duration_s": 600.0}]
    out = _run(tmp_path, jobs, "")
    frame = pl.read_parquet(out / FILE_NAME).filter(pl.col("reason") == "not_elastic")
    assert frame["job_id"].to_list() == [3] and frame["c"].to_list() == [0] and frame["b"].to_list() == [16]
    assert _lines(capsys, out, 3)[1].startswith(
        "waiting: never started: the run sets no elastic_profile, and it starts only jobs whose model names one"
    )


def test_the_new_reason_s_numbers_are_all_explained():
    state, a, b, c = MEANINGS[Reason.NOT_ELASTIC]
    assert state == "waiting" and a and b and c
    assert Reason.NOT_ELASTIC.name.lower() == "not_elastic" and int(Reason.NOT_ELASTIC) not in (12, 13)


def test_a_record_written_before_the_reason_reads_as_it_did(mixed, tmp_path, capsys):
    """An older record (its foreign jobs `not_scheduled`, and only the reasons it knew) reads,
    reason by name; and a reason this version does not know (a newer record's) reads too,
    in the general form."""
    table = pq.read_table(mixed / FILE_NAME)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    for reason, expected in [
        ("not_scheduled", "waiting: the schedule deployed gives it no GPU; it runs "),
        ("some_later_reason", "waiting: some_later_reason (Pollux 'sched'; a="),
    ]:
        old = tmp_path / reason
        old.mkdir()
        relabelled = frame.with_columns(
            reason=pl.when(pl.col("reason") == "not_elastic").then(pl.lit(reason)).otherwise(pl.col("reason").cast(pl.String))
        )
        relabelled.write_parquet(old / FILE_NAME)
        assert _lines(capsys, old, 7)[1].startswith(expected)
