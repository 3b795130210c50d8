"""A snapshot is written by the C pickler, and stays the same bytes for one state: equal strings
(interned or not, or the very objects a reference is named by), equal dtypes, equal torch
tensors and read-only arrays are written by what they are, not by which objects hold them; what
is shared stays shared; a version 1 snapshot (strings written as they were) loads still."""

from __future__ import annotations

import _pickle
import hashlib
import io
import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from roundhouse import Simulation
from roundhouse.runtime import snapshot
from roundhouse.runtime.snapshot import SnapshotError
from tests.conftest import REPO


def small(graph: str = "las.sched") -> Simulation:
    return Simulation(str(REPO / "graphs" / graph), overrides=["arrivals.jobs=30"])


def saved(sim: Simulation, path: Path) -> bytes:
    """The state a save writes (after the header line)."""
    sim.save(path)
    return path.read_bytes().partition(b"\n")[2]


def pickled(obj: object) -> bytes:
    buffer = io.BytesIO()
    snapshot._Pickler(buffer).dump(obj)
    return buffer.getvalue()


def unpickled(data: bytes) -> object:
    return snapshot._Unpickler(io.BytesIO(data), {}).load()


def fresh(text: str) -> str:
    """An equal string that is an object of its own (never the interned one)."""
    return text.encode().decode()


def test_the_snapshot_pickler_is_the_c_one():
    # Python's own pickler wrote the same bytes at several times the cost.
    assert issubclass(snapshot._Pickler, _pickle.Pickler)
    assert not issubclass(snapshot._Pickler, pickle._Pickler)


def test_equal_strings_and_bytes_are_written_by_value():
    word, data = "resnet50", b"weights"
    one = [word, word, {word: word}, data, data, (word,)]
    other = [fresh(word), sys.intern(fresh(word)), {fresh(word): fresh(word)}, data, bytes(bytearray(data)), (fresh(word),)]
    assert other[0] is not other[1] and other[3] is not other[4]
    assert pickled(one) == pickled(other)
    back = unpickled(pickled(other))
    assert back == other
    assert back[0] is back[1]  # (loaded: one object per value, as written)


@pytest.mark.parametrize("name", ["settings", "cluster", "on_round"])
def test_a_string_that_is_a_reference_name_is_written_as_any_other(name):
    # The references are named "settings", "cluster" ...: interned strings, which a state's
    # string can be (the same object) or not.
    sim = small()
    sim.run_until(50_000)
    first, second = sim.fork(), sim.fork()
    # ...and a string of the state can be one an element's configuration holds (not saved).
    element = next(iter(sim._engine.graph.elements.values()))
    for fork, value, other in ((first, sys.intern(name), element.name), (second, fresh(name), fresh(element.name))):
        column = fork._engine.world.jobs._cols["model"]
        column[0], column[1] = value, other
    assert first._engine.world.jobs._cols["model"][0] is not second._engine.world.jobs._cols["model"][0]
    buffers = []
    for fork in (first, second):
        engine = fork._engine
        refs = {id(obj): key for key, obj in snapshot._references(engine).items() if obj is not None}
        buffer = io.BytesIO()
        snapshot._Pickler(buffer, refs).dump({"engine": engine})
        buffers.append(buffer.getvalue())
    assert buffers[0] == buffers[1]


def test_a_run_whose_strings_are_other_objects_saves_the_same_bytes(tmp_path):
    sim = small()
    sim.run_until(100_000)
    original = saved(sim, tmp_path / "run.snap")
    fork = sim.fork()
    table = fork._engine.world.jobs
    for column in table._cols.values():
        if column.dtype == object:
            column[: len(table)] = [fresh(v) if type(v) is str else v for v in column[: len(table)]]
    assert saved(fork, tmp_path / "fork.snap") == original
    for column in table._cols.values():
        if column.dtype == object:
            column[: len(table)] = [sys.intern(v) if type(v) is str else v for v in column[: len(table)]]
    assert saved(fork, tmp_path / "interned.snap") == original


def test_equal_dtypes_are_one_and_arrays_keep_whether_they_can_be_written():
    kept = np.arange(6, dtype=np.int64)
    kept.setflags(write=False)
    written = np.arange(6, dtype=np.int64)
    other_dtype = pickle.loads(pickle.dumps(np.dtype(np.int64)))
    copies = np.frombuffer(bytearray(written.tobytes()), dtype=other_dtype)
    assert copies.dtype is not written.dtype and copies.flags.writeable
    one = {"kept": kept, "written": written, "dtype": np.dtype(np.int64), "strided": written[::2]}
    other = {"kept": kept.copy(), "written": copies, "dtype": other_dtype, "strided": written[::2].copy()}
    other["kept"].setflags(write=False)
    assert pickled(one) == pickled(other)
    back = unpickled(pickled(one))
    assert isinstance(back, dict)
    assert not back["kept"].flags.writeable and back["written"].flags.writeable
    assert back["written"].dtype is back["dtype"] and back["kept"].dtype is back["dtype"]
    assert np.array_equal(back["strided"], written[::2])
    assert pickled(back) == pickled(one)


def test_what_is_shared_stays_shared_and_a_job_tables_reader_is_its_own():
    items = ["a", "b"]
    back = unpickled(pickled({"x": items, "y": items, "z": ["a", "b"]}))
    assert isinstance(back, dict)
    assert back["x"] is back["y"] and back["z"] is not back["x"] and back["z"] == items


def test_equal_torch_tensors_are_the_same_bytes():
    torch = pytest.importorskip("torch")
    one, other = torch.arange(8, dtype=torch.float32), torch.arange(8, dtype=torch.float32)
    assert one.data_ptr() != other.data_ptr()
    assert pickled({"w": one}) == pickled({"w": other})
    back = unpickled(pickled({"w": one}))
    assert isinstance(back, dict) and torch.equal(back["w"], one)


def test_the_header_says_this_format_version(tmp_path):
    sim = small()
    sim.run_until(20_000)
    header = json.loads((sim.save(tmp_path / "run.snap")).read_bytes().partition(b"\n")[0])
    assert header["version"] == snapshot.FORMAT_VERSION == 2


def _as_version_1(sim: Simulation, path: Path) -> None:
    """The simulation saved as version 1 wrote it: strings and dtypes as pickle writes them,
    persistent ids only for the references (arrays, a job table's reader and torch's data as
    now)."""

    class Version1(pickle.Pickler):
        def __init__(self, file, refs):
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self._refs = refs

        def persistent_id(self, obj):
            return self._refs.get(id(obj))

        reducer_override = snapshot._Pickler.reducer_override

    sim.save(path)  # (for the header's fields)
    header = json.loads(path.read_bytes().partition(b"\n")[0])
    engine = sim._engine
    states = {name: snapshot._element_state(el) for name, el in engine.graph.elements.items()}
    refs = {id(obj): key for key, obj in snapshot._references(engine).items() if obj is not None}
    buffer = io.BytesIO()
    Version1(buffer, {}).dump(engine.world.cluster)
    Version1(buffer, refs).dump({"engine": engine, "elements": states})
    payload = buffer.getvalue()
    assert b"cluster" in payload  # (a reference, by its name)
    header.update(version=1, payload_bytes=len(payload), payload_sha256=hashlib.sha256(payload).hexdigest())
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)


@pytest.mark.parametrize("graph", ["las.sched", "gavel-las.sched"])
def test_a_version_1_snapshot_loads_and_saves_what_the_run_saves(graph, tmp_path):
    sim = small(graph)
    sim.run_until(100_000)
    original = saved(sim, tmp_path / "run.snap")
    _as_version_1(sim, tmp_path / "old.snap")
    loaded = Simulation.load(tmp_path / "old.snap")
    assert loaded.now == sim.now and loaded.rounds == sim.rounds
    assert saved(loaded, tmp_path / "again.snap") == original
    for each in (sim, loaded):
        each.run_until(200_000)
    assert saved(loaded, tmp_path / "loaded-on.snap") == saved(sim, tmp_path / "run-on.snap")


def test_an_unknown_persistent_id_is_refused_naming_it():
    buffer = io.BytesIO()

    class Stray(pickle.Pickler):
        def persistent_id(self, obj):
            return "nothing-of-this-name" if obj == "x" else None

    Stray(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(["x"])
    with pytest.raises(pickle.UnpicklingError, match="unknown reference 'nothing-of-this-name'"):
        snapshot._Unpickler(io.BytesIO(buffer.getvalue()), {}).load()
    with pytest.raises(SnapshotError, match="cannot read its cluster: UnpicklingError: unknown reference"):
        snapshot.load_cluster("f.snap", buffer.getvalue())
