"""Decision explanations, reviewed: a Gavel job preempted and then waiting for GPUs of its type is
one suspension, a damaged record is refused in words (never a crash of the reader), and a
number that is not whole gets no suggestion of ids spelled like it."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from roundhouse.runtime.explain import FILE_NAME, Reason, Recorder
from roundhouse.runtime.explain_file import _schema
from roundhouse.runtime.types import Plan
from tests.conftest import fails

# --- one suspension, however many reasons the element gave for it ---


def _codes(record: Recorder) -> list[tuple[int, str]]:
    cols = record.arrays()
    return [(int(r), Reason(int(c)).name.lower()) for r, c in zip(cols["row"], cols["code"])]


def test_a_gavel_job_preempted_and_left_waiting_for_its_type_is_not_suspended_twice():
    # GavelRounds says why it stops a running job whose entry its type had too few GPUs left
    # for: preempted, then waiting for GPUs of that type. The same plan moves another job, so
    # the plan suspends more jobs than elements explained.
    record = Recorder(["mech", "place", "run"], ["GavelRounds", "GavelPlacer", "Launch"], ["", "mech", ""])
    record.reserve(4)
    world = SimpleNamespace(cluster=SimpleNamespace(gpu_node=np.arange(4)))
    first = Plan(launch_rows=np.array([0, 1]), launch_gpus=np.array([0, 1, 2]), launch_counts=np.array([2, 1]))
    record.plan(first, world, 1, 2, 0.0)
    record.note(0, Reason.PREEMPTED, np.array([0]), 5, 4, t=360.0)
    record.note(0, Reason.NO_FREE_TYPE, np.array([0]), 5, 0, 1, t=360.0)
    move = Plan(launch_rows=np.array([1]), launch_gpus=np.array([3]), launch_counts=np.array([1]), suspend=np.array([0, 1]))
    record.plan(move, world, 1, 2, 360.0)
    assert _codes(record) == [(0, "launched"), (1, "launched"), (0, "preempted"), (0, "no_free_type"), (1, "moved")]


# --- a damaged record ---


def _record(path, ids=tuple(range(7))) -> dict[str, int]:
    """A small record of 40 changes (of jobs `ids` in turn), written uncompressed so that a byte
    changed lands in the values; returns the job_id column's page offsets."""
    n = 40
    cols = [pa.array(np.arange(n, dtype=float)), pa.array(np.resize(np.asarray(ids), n), pa.int64())]
    cols += [pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.uint32)), pa.array(["waiting"])) for _ in range(6)]
    cols += [pa.array(np.zeros(n, dtype=np.int64)) for _ in "abc"]
    pq.write_table(pa.Table.from_arrays(cols, schema=_schema()), path, compression="none")
    column = pq.ParquetFile(path).metadata.row_group(0).column(1)
    return {"data": column.data_page_offset}


def _damaged(tmp_path, at: int, value: int):
    run = tmp_path / f"run-{at}-{value}"
    run.mkdir()
    path = run / FILE_NAME
    pages = _record(path)
    data = bytearray(path.read_bytes())
    data[pages["data"] + at] = value
    path.write_bytes(bytes(data))
    return run


@pytest.mark.parametrize(
    ("at", "value", "says"),
    [
        (5, 0, "cannot be read as Parquet"),  # (polars panicked)
        (10, 127, "cannot be read as Parquet"),  # (polars panicked)
        (68, 0, "have no job id (damaged?)"),  # (every job id lost: a Python error before)
    ],
)
def test_a_damaged_record_is_refused_in_words(tmp_path, capsys, at, value, says):
    run = _damaged(tmp_path, at, value)
    err = fails(capsys, "explain", run, "3")
    assert str(run / FILE_NAME) in err and says in err


@pytest.mark.parametrize(("at", "value"), [(8, 127), (15, 0)])  # (polars aborted; crashed)
def test_a_damaged_record_does_not_crash_the_reader(tmp_path, at, value):
    run = _damaged(tmp_path, at, value)
    env = {**os.environ, "RUST_BACKTRACE": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "roundhouse.tools.cli", "explain", str(run), "3"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {run / FILE_NAME}: cannot be read as Parquet (")
    assert "panicked" not in done.stderr and "Traceback" not in done.stderr


def test_an_undamaged_record_reads_every_job(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _record(run / FILE_NAME)
    from roundhouse.tools.cli import main

    for job in range(7):
        assert main(["explain", str(run), str(job)]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"job {job}: {len(range(job, 40, 7))} change(s)")


# --- a job named by a number that is not whole ---


@pytest.mark.parametrize("job", ["1e400", "1.5"])
def test_a_number_that_is_not_whole_gets_no_suggestion_of_ids_spelled_like_it(tmp_path, capsys, job):
    run = tmp_path / "run"
    run.mkdir()
    _record(run / FILE_NAME, ids=(15, 100, 140, 400, 915))  # (spelled like "1.5" and "1e400")
    err = fails(capsys, "explain", run, job)
    assert "job ids are whole numbers" in err and "did you mean" not in err


@pytest.mark.parametrize("job", ["1e19", "1e400", "1e999999999", "99999999999999999999", "9223372036854775808"])
def test_a_whole_number_too_long_for_an_id_is_said_to_be(tmp_path, capsys, job):
    run = tmp_path / "run"
    run.mkdir()
    _record(run / FILE_NAME, ids=(15, 100))
    err = fails(capsys, "explain", run, job)
    assert "job ids are whole numbers up to 9223372036854775807" in err


def test_text_that_is_no_number_still_gets_suggestions(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _record(run / FILE_NAME, ids=(15, 100, 140, 400, 915))
    assert "did you mean 15" in fails(capsys, "explain", run, "15x")
