"""explain.parquet written as the run goes, on a thread of its own: the same file, byte for byte,
as one written at the end; nothing left behind by a record dropped or a write that fails."""

from __future__ import annotations

import gc
import threading

import pytest

import roundhouse.runtime.explain as explain
import roundhouse.runtime.explain_file as explain_file
from roundhouse.runtime.snapshot import fork_engine
from roundhouse.tools.cli import main
from tests import test_explain_spill
from tests.test_explain_spill import begun, run_on, spill_every_block

graph = test_explain_spill.graph  # (the fixture: multi-GPU jobs that LAS preempts every few rounds)


def written_at_the_end(graph, path):
    engine = run_on(begun(graph))
    engine.world.explain.write(path, engine.world)
    return path.read_bytes()


def writer(record) -> threading.Thread:
    """The thread writing this record's file."""
    thread = record._file._thread
    assert thread is not None and thread.is_alive()
    return thread


@pytest.mark.parametrize("spilled", [False, True])
@pytest.mark.parametrize("from_round", [0, 25])
def test_a_record_written_as_the_run_goes_is_the_file_written_at_the_end(graph, tmp_path, monkeypatch, spilled, from_round):
    monkeypatch.setattr(explain_file, "PIECE", 5)  # (many row groups, cut inside blocks)
    if spilled:
        spill_every_block(monkeypatch)
    else:
        monkeypatch.setattr(explain, "_CHUNKS", 3)  # (blocks held in memory)
    expected = written_at_the_end(graph, tmp_path / "end.parquet")
    engine = run_on(begun(graph), from_round)
    record = engine.world.explain
    path = tmp_path / "going.parquet"
    record.write_as_it_goes(path, engine.world)  # (the blocks joined so far, then the others)
    thread = writer(record)
    run_on(engine)
    assert (tmp_path / "going.parquet.part").exists() and not path.exists()
    record.write(path, engine.world)
    assert path.read_bytes() == expected and len(expected) > 5000
    assert not (tmp_path / "going.parquet.part").exists() and not thread.is_alive()


def test_a_fork_writes_nothing_of_its_parents_file(graph, tmp_path, monkeypatch):
    spill_every_block(monkeypatch)
    expected = written_at_the_end(graph, tmp_path / "end.parquet")
    engine = run_on(begun(graph), 20)
    engine.world.explain.write_as_it_goes(tmp_path / "going.parquet", engine.world)
    fork = fork_engine(engine)
    assert fork.world.explain._file is None
    run_on(fork)
    fork.world.explain.write(tmp_path / "fork.parquet", fork.world)  # (at the end, its own)
    run_on(engine)
    engine.world.explain.write(tmp_path / "going.parquet", engine.world)
    assert (tmp_path / "going.parquet").read_bytes() == expected == (tmp_path / "fork.parquet").read_bytes()


def test_a_record_dropped_before_it_is_written_leaves_nothing(graph, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    engine = run_on(begun(graph), 30)
    engine.world.explain.write_as_it_goes(out / "e.parquet", engine.world)
    thread = writer(engine.world.explain)
    run_on(engine, 10)
    assert (out / "e.parquet.part").exists()
    del engine
    gc.collect()
    assert not list(out.iterdir()) and not thread.is_alive()


def test_a_failure_in_writing_is_raised_when_the_file_is_finished_and_leaves_nothing(graph, tmp_path, monkeypatch):
    spill_every_block(monkeypatch)
    engine = run_on(begun(graph), 5)
    old = tmp_path / "e.parquet"
    old.write_bytes(b"an earlier run's record")
    write, calls = explain_file._write_block, []

    def full_disk(*args):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        write(*args)

    monkeypatch.setattr(explain_file, "_write_block", full_disk)
    engine.world.explain.write_as_it_goes(old, engine.world)
    thread = writer(engine.world.explain)
    run_on(engine)  # (the run goes on: the failure waits for the file to be finished)
    with pytest.raises(OSError, match="No space left"):
        engine.world.explain.write(old, engine.world)
    assert old.read_bytes() == b"an earlier run's record" and not (tmp_path / "e.parquet.part").exists()
    assert not thread.is_alive()


def test_the_command_line_writes_the_record_as_the_run_goes(graph, tmp_path, monkeypatch):
    spill_every_block(monkeypatch)
    expected = written_at_the_end(graph, tmp_path / "end.parquet")
    started = []
    on_a_thread = explain_file.RecordFile.on_a_thread.__func__
    monkeypatch.setattr(
        explain_file.RecordFile, "on_a_thread", classmethod(lambda cls, *a: started.append(a[0]) or on_a_thread(cls, *a))
    )
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(["run", "g.sched", "--cluster", "2x2:V100", "--out", str(out), "--quiet"]) == 0
    assert started == [out / "explain.parquet"]
    assert (out / "explain.parquet").read_bytes() == expected
    assert sorted(p.name for p in out.iterdir()) == ["explain.parquet", "jobs.csv", "run.json", "summary.json"]


def test_explain_reads_a_job_out_of_a_file_of_many_pieces_as_out_of_the_whole_table(graph, tmp_path, monkeypatch, capsys):
    # `roundhouse explain` scans the file for one job's rows: row groups cut inside spilled
    # blocks, each with label dictionaries of its own, give what the whole table gives.
    import polars as pl
    import pyarrow.parquet as pq

    from roundhouse.tools.explain_cmd import clock, describe

    monkeypatch.setattr(explain_file, "PIECE", 5)
    spill_every_block(monkeypatch)
    engine = run_on(begun(graph))
    path = tmp_path / "run" / "explain.parquet"
    path.parent.mkdir()
    engine.world.explain.write(path, engine.world)
    assert pq.ParquetFile(path).metadata.num_row_groups > 50
    whole = pl.read_parquet(path)
    for job in whole["job_id"].unique().to_list():
        capsys.readouterr()
        assert main(["explain", str(path.parent), str(job)]) == 0
        rows = whole.filter(pl.col("job_id") == job).sort("t_s", maintain_order=True).to_dicts()
        assert capsys.readouterr().out.splitlines()[1:] == [f"  t={clock(r['t_s']):<10} {describe(r)}" for r in rows]
    # Damaged pages (the footer whole) are found when the job's rows are read, and said alike.
    data = bytearray(path.read_bytes())
    damaged = slice(len(data) // 4, len(data) // 2)  # (every column of many row groups)
    data[damaged] = bytes(b ^ 0x5A for b in data[damaged])
    path.write_bytes(bytes(data))
    assert main(["explain", str(path.parent), "0"]) == 2
    assert f"{path}: cannot be read as Parquet (" in capsys.readouterr().err


def test_job_ids_and_first_numbers_are_written_as_their_differences(graph, tmp_path, monkeypatch):
    # Ids and ranks take too many values for a dictionary: written as differences, with no
    # dictionary tried, and read back as the record holds them; the labels stay dictionaries,
    # and only time and job carry statistics. The pieces' tables share buffers: each piece is
    # read back as it was, not as the next overwrote it.
    import polars as pl
    import pyarrow.parquet as pq

    monkeypatch.setattr(explain_file, "PIECE", 5)
    spill_every_block(monkeypatch)
    engine = run_on(begun(graph))
    path = tmp_path / "explain.parquet"
    engine.world.explain.write(path, engine.world)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups > 50
    for group in range(meta.num_row_groups):
        columns = {meta.row_group(group).column(i).path_in_schema: meta.row_group(group).column(i) for i in range(11)}
        for name in ("job_id", "a"):
            assert "DELTA_BINARY_PACKED" in columns[name].encodings and "RLE_DICTIONARY" not in columns[name].encodings
        for name in ("t_s", "reason", "element", "b"):
            assert "RLE_DICTIONARY" in columns[name].encodings, name
        assert {name for name, column in columns.items() if column.is_stats_set} == {"t_s", "job_id"}
    frame = engine.world.explain.frame(engine.world)
    assert pl.read_parquet(path).equals(frame) and frame.height > 250
