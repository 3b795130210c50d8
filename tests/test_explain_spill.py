"""The explanation record kept on disk while a run goes on: blocks spilled to a temporary file
read back as the same record, forks that share what was spilled, packed forks, and the
temporary folder removed when the record goes."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pytest

import roundhouse.runtime.explain as explain
import roundhouse.runtime.explain_file as explain_file
from roundhouse.runtime.backends.sim import Simulator
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.engine import Engine
from roundhouse.runtime.simulate import load_cluster, load_profile, new_world
from roundhouse.runtime.snapshot import fork_engine, pack
from tests.conftest import write_trace

# Multi-GPU jobs arriving faster than four GPUs serve them: LAS preempts every few rounds.
LAS = """
round = 300s;
src :: TraceSource(path="trace.csv");
src -> admit :: AcceptAll -> JobPool -> order :: Las -> place :: Consolidated -> Launch -> m :: JobMetrics;
"""


@pytest.fixture
def graph(tmp_path):
    jobs = [{"job_id": i, "arrival_s": 200.0 * i, "gpus": 1 + i % 3, "duration_s": 600.0 + 450 * (i % 7)} for i in range(60)]
    write_trace(tmp_path / "trace.csv", jobs)
    (tmp_path / "g.sched").write_text(textwrap.dedent(LAS))
    return compile_file(tmp_path / "g.sched")


def begun(graph) -> Engine:
    profile = load_profile(graph)
    world = new_world(graph, load_cluster(graph, "2x2:V100", profile), profile)
    engine = Engine(graph, world, Simulator.for_graph(world, graph.settings), explain=True)
    engine.begin()
    return engine


def run_on(engine: Engine, rounds: int | None = None) -> Engine:
    while rounds is None or rounds > 0:
        if engine.step():
            break
        rounds = None if rounds is None else rounds - 1
    return engine


def spill_every_block(monkeypatch):
    monkeypatch.setattr(explain, "_CHUNKS", 3)
    monkeypatch.setattr(explain, "_SPILL_BYTES", 0)


def folders(record) -> list[str]:
    return [os.path.dirname(store.path) for store, _ in record._spilled]


def test_a_spilled_record_reads_and_writes_as_the_one_kept_in_memory(graph, tmp_path, monkeypatch):
    kept = run_on(begun(graph)).world
    kept.explain.write(tmp_path / "kept.parquet", kept)
    spill_every_block(monkeypatch)
    spilled = run_on(begun(graph)).world
    spilled.explain.write(tmp_path / "spilled.parquet", spilled)
    record = spilled.explain
    assert not kept.explain._spilled and len(record._spilled) == 1 and record._spilled[0][1] > 10 and not record._blocks
    assert record.records == kept.explain.records > 300
    frame = record.frame(spilled)
    assert frame.equals(kept.explain.frame(kept)) and frame.schema == kept.explain.frame(kept).schema
    assert pl.read_parquet(tmp_path / "spilled.parquet").equals(pl.read_parquet(tmp_path / "kept.parquet"))
    assert pl.read_parquet(tmp_path / "spilled.parquet").equals(frame)
    for name, values in kept.explain.arrays().items():
        got = record.arrays()[name]
        assert np.array_equal(got, values) and got.dtype == values.dtype, name


def test_a_fork_shares_what_was_spilled_and_spills_its_own_elsewhere(graph, monkeypatch):
    whole = run_on(begun(graph)).world
    spill_every_block(monkeypatch)
    engine = run_on(begun(graph), 60)
    record = engine.world.explain
    assert record._spilled and not engine.stop_reason
    before, at_fork = record.frame(engine.world), record.records
    fork = fork_engine(engine)
    assert fork.world.explain._spilled == record._spilled  # the same file, the same blocks
    assert fork.world.explain.frame(fork.world).equals(before)
    run_on(fork)  # the fork's later records are its own
    assert record.records == at_fork and record.frame(engine.world).equals(before)
    assert fork.world.explain._spill is not None and fork.world.explain._spill is not record._spill
    run_on(engine)
    for world in (engine.world, fork.world):  # each goes on to what running on alone gives
        assert world.explain.frame(world).equals(whole.explain.frame(whole))


def test_a_packed_fork_carries_the_spilled_blocks_with_it(graph, monkeypatch):
    whole = run_on(begun(graph)).world
    spill_every_block(monkeypatch)
    engine = run_on(begun(graph), 60)
    assert engine.world.explain._spilled
    unpacked = pack(fork_engine(engine)).unpack()
    assert not unpacked.world.explain._spilled  # (read in: another process has no such folder)
    run_on(unpacked)
    assert unpacked.world.explain._spilled  # and it spills anew, to its own place
    assert folders(unpacked.world.explain)[0] not in folders(engine.world.explain)
    assert unpacked.world.explain.frame(unpacked.world).equals(whole.explain.frame(whole))


def test_the_temporary_folder_goes_with_the_last_record_using_it(graph, monkeypatch):
    spill_every_block(monkeypatch)
    engine = run_on(begun(graph), 60)
    fork = fork_engine(engine)
    shared = folders(engine.world.explain)
    assert shared and all(os.path.isdir(f) for f in shared)
    del engine
    gc.collect()
    assert all(os.path.isdir(f) for f in shared)  # the fork still reads them
    run_on(fork)
    own = folders(fork.world.explain)
    assert len(own) == 2 and own[0] == shared[0]
    del fork
    gc.collect()
    assert not any(os.path.exists(f) for f in own)


def test_the_temporary_folder_goes_when_the_process_exits():
    code = (
        "import numpy as np, roundhouse.runtime.explain as e\n"
        "e._SPILL_BYTES = 0\n"
        "r = e.Recorder(['place'], ['Consolidated'], [''])\n"
        "r._keep({'t': np.zeros(3)})\n"
        "print(r._spill.path, flush=True)\n"
        "raise SystemExit(3)  # (a run that fails, the record still held)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ}, check=False)
    assert done.returncode == 3, done.stderr
    path = done.stdout.strip()
    assert path.endswith("blocks") and not os.path.exists(os.path.dirname(path))


def test_writing_reads_the_spilled_blocks_one_at_a_time(graph, tmp_path, monkeypatch):
    # (Not all read in first: the point of spilling is that the record never stands in memory.)
    spill_every_block(monkeypatch)
    world = run_on(begun(graph)).world
    steps: list[str] = []
    read, table = explain._Spill.read, explain_file.Labels.piece
    monkeypatch.setattr(explain._Spill, "read", lambda self, i: steps.append("read") or read(self, i))
    monkeypatch.setattr(explain_file.Labels, "piece", lambda self, c: steps.append("table") or table(self, c))
    world.explain.write(tmp_path / "e.parquet", world)
    assert steps.count("read") > 10 and "read,read" not in ",".join(steps)


def test_a_spill_that_fails_leaves_the_record_whole(graph, monkeypatch):
    whole = run_on(begun(graph)).world
    spill_every_block(monkeypatch)
    engine = run_on(begun(graph), 30)
    record = engine.world.explain
    monkeypatch.setattr(explain, "_SPILL_BYTES", 10**9)
    run_on(engine, 30)  # blocks held in memory
    assert len(record._blocks) > 2
    add, calls = explain._Spill.add, []

    def full_disk(self, block):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        add(self, block)

    monkeypatch.setattr(explain._Spill, "add", full_disk)
    monkeypatch.setattr(explain, "_SPILL_BYTES", 0)
    with pytest.raises(OSError):
        record._keep(record._blocks.pop())  # (the last block again, to spill every one held)
    assert calls == [1, 1] and record._spilled[-1][1] == len(record._spill._index)  # the first one kept
    monkeypatch.setattr(explain._Spill, "add", add)
    run_on(engine)
    assert record.frame(engine.world).equals(whole.explain.frame(whole))


def test_a_joined_block_reads_back_as_its_chunks_records():
    # Chunks as a round leaves them: numbers given once or per row, reasons per row, launches
    # (whose machine, GPU count and machines spanned are worked out when joined).
    node = np.repeat(np.arange(4), 4)  # 4 machines of 4 GPUs
    launch_gpus, launch_counts = np.array([0, 1, 6, 7, 8, 3]), np.array([2, 3, 1])
    chunks = [
        (300.0, np.array([5, 6]), 10, 0, 0, 0),
        (np.array([301.5, 302.0, 303.25]), np.array([1, 2, 3]), 20, np.array([4, 5, 6]), 7, 1.0),
        (600.0, np.array([7, 8, 9]), 30, explain._LAUNCH, launch_counts, launch_gpus, np.array([0, 2, 5])),
        (900.0, np.array([4]), np.array([40]), 2**40, 0, 0),
    ]
    expected = {
        "t": [300.0, 300.0, 301.5, 302.0, 303.25, 600.0, 600.0, 600.0, 900.0],
        "row": [5, 6, 1, 2, 3, 7, 8, 9, 4],
        "key": [10, 10, 20, 20, 20, 30, 30, 30, 40],
        "a": [0, 0, 4, 5, 6, 0, 1, 0, 2**40],  # a launch: the machine of its first GPU
        "b": [0, 0, 7, 7, 7, 2, 3, 1, 0],  # a launch: its GPU count
        "c": [0, 0, 1, 1, 1, 1, 2, 1, 0],  # a launch: the machines it spans
    }
    for narrow in (False, True):
        got = explain._records(explain.join_chunks(chunks, node, narrow=narrow))
        for name, values in expected.items():
            np.testing.assert_array_equal(got[name], values, err_msg=f"{name}, narrow={narrow}")
    narrow = explain.join_chunks(chunks, node, narrow=True)
    assert narrow["row"].dtype == np.int8 and narrow["a"].dtype == np.int64  # (2**40 does not fit in 32 bits)
    assert "a/chunk" not in narrow  # (worked out for a launch: kept per row)
    assert narrow["t/given"].tolist() == [1] and narrow["key/given"].tolist() == [3]  # (the few given per row)
    assert explain.join_chunks(chunks[:1], node, narrow=True)["t/chunk"].tolist() == [300.0]


def test_a_block_keeps_each_column_in_its_fewest_bytes():
    # A busy round's records: a few hundred preemptions (ranks and counts per row, one time and
    # reason), a few finishes at their own times. The times and reasons are kept once per
    # chunk, with the few finishing times beside; ranks and counts in 16 bits, job rows in 32.
    rows = np.arange(70_000, 70_400)
    chunks = [(float(300 * r), rows, 2 * 128 + 22, np.arange(1, 401) + 9000, np.arange(400) % 300, 0) for r in range(1, 40)] + [
        (np.array([300.5, 601.25]), np.array([3, 4]), 30, 0, 0, 0)
    ]
    block = explain.join_chunks(chunks, None, narrow=True)
    records = 39 * 400 + 2
    assert {name: values.dtype for name, values in block.items() if len(values) == records} == {
        "row": np.int32,
        "a": np.int16,
        "b": np.int16,
    }
    assert block["c/chunk"].dtype == np.int8  # (one number a chunk)
    assert block["t/values"].tolist() == [300.5, 601.25] and block["t/given"].tolist() == [39]
    assert explain._nbytes(block) < 9 * records + 1000  # (the same columns of 64 bits: 48 a record)
    got = explain._records(block)
    expected = explain._records(explain.join_chunks(chunks, None))
    for name, values in expected.items():
        assert np.array_equal(got[name], values), name
    assert got["t"].dtype == np.float64 and got["t"][-3:].tolist() == [300.0 * 39, 300.5, 601.25]
