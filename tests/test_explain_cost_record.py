"""The explanation record made cheaper, the same record: blocks joined from chunks of every kind
(numbers of other dtypes, rows not contiguous) as the chunks' records one by one; moves and
resizes read where a job was from the record itself, also from blocks spilled to disk and in
forks, and only when one asks (a round that moves nothing pays nothing for it)."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import numpy as np
import pytest

import roundhouse.runtime.explain as explain
from roundhouse.runtime.explain import Reason, Recorder
from roundhouse.runtime.types import Plan

# --- joined blocks: the chunks' records, one by one ---


def _expected(chunks: list[tuple], node: np.ndarray) -> dict[str, list]:
    """The records of chunks, worked out one by one from what `Recorder.note` and
    `Recorder.plan` keep: numbers given once or per row; a launch's a (the machine of its
    first GPU), b (its GPU count) and c (the machines it spans)."""
    out: dict[str, list] = {name: [] for name in ("t", "row", "key", "a", "b", "c")}
    for chunk in chunks:
        rows = [int(r) for r in chunk[1]]
        n = len(rows)
        out["row"] += rows

        def each(value, kind=int, n=n):
            return [kind(v) for v in value] if isinstance(value, np.ndarray) else [kind(value)] * n

        out["t"] += each(chunk[0], float)
        out["key"] += each(chunk[2])
        if isinstance(chunk[3], str):  # a launch: counts, GPUs, where each job's GPUs begin
            counts, gpus, starts = chunk[4], chunk[5], chunk[6]
            for count, start in zip(counts, starts):
                machines = [int(node[g]) for g in gpus[start : start + count]]
                out["a"].append(machines[0])
                out["b"].append(int(count))
                out["c"].append(1 + sum(x != y for x, y in zip(machines, machines[1:])))
        else:
            for name, value in zip("abc", chunk[3:6]):
                out[name] += each(value)
    return out


def _random_chunks(rng: np.random.Generator, node: np.ndarray) -> list[tuple]:
    """Chunks as elements and the runtime leave them, with the odd ones numpy allows: rows of
    other integer dtypes or not contiguous, numbers as Python or numpy scalars, bools, floats
    in whole-number columns (cut as numpy casts them), arrays of other dtypes."""

    def rows(n):
        r = rng.permutation(1000)[:n]
        kind = rng.integers(5)
        if kind == 1:
            return r.astype(np.int32)
        if kind == 2:
            return r.astype(np.uint64)
        if kind == 3:
            return np.repeat(r, 2)[::2]  # (a view, not contiguous)
        return r

    def number(n):
        kind = rng.integers(9)
        choices = [
            int(rng.integers(-5, 1 << 40)),
            bool(rng.integers(2)),
            np.int64(rng.integers(100)),
            float(rng.integers(100)) + 0.75,
            rng.integers(-(1 << 35), 1 << 35, n),
            rng.integers(0, 100, n).astype(np.int32),
            rng.random(n) * 1e4,
            np.arange(2 * n)[::2],
            np.int32(7),
        ]
        return choices[kind]

    chunks: list[tuple] = []
    for _ in range(int(rng.integers(0, 40))):
        n = int(rng.integers(1, 6))
        if rng.random() < 0.2:  # a launch
            counts = rng.integers(1, 4, n)
            gpus = rng.permutation(len(node))[: int(counts.sum())]
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            chunks.append((float(rng.random() * 1e5), rows(n), int(rng.integers(1 << 12)), explain._LAUNCH, counts, gpus, starts))
            continue
        t = float(rng.random() * 1e5) if rng.random() < 0.8 else rng.random(n) * 1e5
        key = int(rng.integers(1 << 12)) if rng.random() < 0.7 else rng.integers(0, 1 << 12, n)
        chunks.append((t, rows(n), key, number(n), number(n), number(n)))
    return chunks


@pytest.mark.parametrize("seed", range(40))
def test_a_joined_block_holds_its_chunks_records_whatever_they_were_given_as(seed):
    rng = np.random.default_rng(seed)
    node = np.repeat(np.arange(6), 4)  # 6 machines of 4 GPUs
    chunks = _random_chunks(rng, node)
    expected = _expected(chunks, node)
    for narrow in (False, True):
        block = explain.join_chunks(chunks, node, narrow=narrow)
        got = explain._records(block)
        for name, values in expected.items():
            assert got[name].tolist() == values, (seed, name, narrow)
            assert got[name].dtype.kind == ("f" if name == "t" else "i"), (seed, name, narrow)
        for name, values in block.items():
            assert values.flags.writeable, (seed, name)  # (as numpy's own joins leave them)


# --- moves and resizes: where a job was, read from the record ---


def _plan(rng: np.random.Generator, running: dict[int, list[int]], n_gpus: int, moves: bool = True) -> Plan:
    """A plan that suspends some running jobs, launches some (with `moves`, some of them just
    suspended: moved, or resized), and resizes some running ones in place (with `moves`)."""
    free = sorted(set(range(n_gpus)) - {g for gpus in running.values() for g in gpus})
    suspend = [r for r in running if rng.random() < 0.3]
    for r in suspend:
        free += running.pop(r)
    rng.shuffle(free)
    launch_rows, launch_gpus = [], []
    for r in [*suspend, *range(40)] if moves else range(40):
        if r in running or r in launch_rows or (r in suspend and not moves) or rng.random() < 0.6:
            continue
        count = int(rng.integers(1, 4))
        if count > len(free):
            break
        launch_rows.append(r)
        launch_gpus.append([free.pop() for _ in range(count)])
    resize = [r for r in running if moves and rng.random() < 0.2]
    resize_gpus = []
    for r in resize:
        free += running[r]
        count = min(int(rng.integers(1, 4)), len(free))
        resize_gpus.append([free.pop() for _ in range(count)])
    for r, gpus in zip([*launch_rows, *resize], [*launch_gpus, *resize_gpus]):
        running[r] = gpus
    return Plan(
        keep=np.asarray(sorted(set(running) - set(launch_rows) - set(resize)), dtype=np.int64),
        launch_rows=np.asarray(launch_rows, dtype=np.int64),
        launch_gpus=np.asarray([g for gpus in launch_gpus for g in gpus], dtype=np.int64),
        launch_counts=np.asarray([len(g) for g in launch_gpus], dtype=np.int64),
        suspend=np.asarray(sorted(suspend), dtype=np.int64),
        resize_rows=np.asarray(resize, dtype=np.int64),
        resize_gpus=np.asarray([g for gpus in resize_gpus for g in gpus], dtype=np.int64),
        resize_counts=np.asarray([len(g) for g in resize_gpus], dtype=np.int64),
    )


def _moves_by_hand(plans: list[Plan], node: np.ndarray) -> list[tuple[int, int, int]]:
    """(row, code, c) of each move and resize, from each job's last placement by hand."""
    last: dict[int, tuple[int, int]] = {}  # row -> (GPUs, machine of the first)
    out = []
    for plan in plans:
        suspended = set(plan.suspend.tolist())
        starts = np.concatenate([[0], np.cumsum(plan.launch_counts)[:-1]]).astype(int)
        for r, count, start in zip(plan.launch_rows.tolist(), plan.launch_counts.tolist(), starts):
            if r in suspended:
                had, machine = last.get(r, (0, -1))
                resized = had > 0 and had != count
                out.append((r, int(Reason.RESIZED if resized else Reason.MOVED), had if resized else machine))
            last[r] = (count, int(node[plan.launch_gpus[start]]))
        starts = np.concatenate([[0], np.cumsum(plan.resize_counts)[:-1]]).astype(int)
        for r, count, start in zip(plan.resize_rows.tolist(), plan.resize_counts.tolist(), starts):
            had, machine = last.get(r, (0, -1))
            resized = had > 0 and had != count
            out.append((r, int(Reason.RESIZED if resized else Reason.MOVED), had if resized else machine))
            last[r] = (count, int(node[plan.resize_gpus[start]]))
    return out


def _recorded(plans: list[Plan], world, copy_at: int | None = None) -> Recorder:
    record = Recorder(["place", "run"], ["Consolidated", "Launch"], ["", ""])
    record.reserve(64)
    for i, plan in enumerate(plans):
        if i == copy_at:  # (a fork goes on from a copy, and a packed one from a pickle)
            record = pickle.loads(pickle.dumps(record.copy()))
        record.plan(plan, world, 0, 1, 300.0 * i)
    return record


@pytest.mark.parametrize("seed", range(6))
def test_moves_and_resizes_say_where_a_job_was_also_when_its_launch_is_spilled_to_disk(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    node = np.repeat(np.arange(8), 4)  # 8 machines of 4 GPUs
    world = SimpleNamespace(cluster=SimpleNamespace(gpu_node=node))
    running: dict[int, list[int]] = {}
    plans = [_plan(rng, running, len(node)) for _ in range(120)]
    expected = _moves_by_hand(plans, node)
    assert len(expected) > 40
    kept = _recorded(plans, world).arrays()
    placed = np.isin(kept["code"], [Reason.MOVED, Reason.RESIZED])
    assert list(zip(kept["row"][placed].tolist(), kept["code"][placed].tolist(), kept["c"][placed].tolist())) == expected
    # Blocks of a few chunks each, every one spilled to disk as soon as joined, a fork made on
    # the way: the same record.
    monkeypatch.setattr(explain, "_CHUNKS", 3)
    monkeypatch.setattr(explain, "_SPILL_BYTES", 0)
    for copy_at in (None, 57):
        record = _recorded(plans, world, copy_at)
        assert record._spilled
        got = record.arrays()
        for name, values in kept.items():
            np.testing.assert_array_equal(got[name], values, err_msg=f"{name}, copy at {copy_at}")


def test_places_pickled_as_written_launch_by_launch_are_read_again_from_the_record():
    node = np.repeat(np.arange(4), 4)
    world = SimpleNamespace(cluster=SimpleNamespace(gpu_node=node))
    rows, gpus = np.array([0, 1]), np.array([0, 1, 9])
    first = Plan(launch_rows=rows, launch_gpus=gpus, launch_counts=np.array([2, 1]))
    record = _recorded([first], world)
    # (The earlier record kept each job's count and first GPU, and launches not yet written in.)
    record._places = explain._Places.__new__(explain._Places)
    record._places.__setstate__(
        {"count": np.zeros(64, np.int32), "first": np.zeros(64, np.int32), "pending": [()], "pending_rows": 2}
    )
    move = Plan(launch_rows=rows, launch_gpus=np.array([12, 13, 5]), launch_counts=np.array([2, 1]), suspend=rows)
    record.plan(move, world, 0, 1, 300.0)
    cols = record.arrays()
    assert cols["code"][-2:].tolist() == [Reason.MOVED, Reason.MOVED]
    assert cols["c"][-2:].tolist() == [0, 2]  # (the machines they were on)


# --- a round that moves nothing pays nothing for where jobs are ---


def test_where_jobs_are_is_read_only_when_a_move_or_resize_asks(monkeypatch):
    monkeypatch.setattr(explain, "_CHUNKS", 3)  # (blocks joined every few plans)
    node = np.repeat(np.arange(8), 4)
    world = SimpleNamespace(cluster=SimpleNamespace(gpu_node=node))
    rng = np.random.default_rng(3)
    running: dict[int, list[int]] = {}
    plans = [_plan(rng, running, len(node), moves=False) for _ in range(60)]
    record = _recorded(plans, world)
    assert len(record._blocks) > 10
    # Jobs launched and suspended, none moved or resized: where each is was never worked out.
    assert not record._places.count.any() and not record._places.machine.any()
    # A move reads it, from the record's blocks and its chunks not yet joined.
    mover = int(plans[-1].launch_rows[0]) if len(plans[-1].launch_rows) else int(next(iter(running)))
    gpus = running[mover]  # (suspended and launched again on the same GPUs: moved, in place)
    move = Plan(
        launch_rows=np.array([mover]), launch_gpus=np.array(gpus), launch_counts=np.array([len(gpus)]), suspend=np.array([mover])
    )
    record.plan(move, world, 0, 1, 300.0 * len(plans))
    cols = record.arrays()
    assert (cols["row"][-1], cols["code"][-1], cols["c"][-1]) == (mover, Reason.MOVED, node[gpus[0]])


# --- placement reasons round after round: the numbers of the jobs whose reason changed ---


def test_placement_reasons_recorded_round_after_round_are_those_worked_out_job_by_job():
    """One record over many rounds: each round records exactly the jobs whose reason changed,
    with the numbers worked out job by job (the GPUs left free, worked out only for those,
    among them)."""
    from roundhouse.elements.placement.reasons import explain_placement
    from tests.test_explain_reasons import _by_hand, _Context

    rng = np.random.default_rng(11)
    n, n_gpus = 24, 20
    ctx = _Context(n_gpus, n)
    held: dict[int, int] = {}  # per row: the code it holds
    partial = 0
    for case in range(400):
        want = rng.integers(0 if case % 4 == 0 else 1, 6, n)
        is_run = rng.random(n) < 0.5
        placed = ~is_run & (rng.random(n) < 0.2)
        suspended = is_run & (rng.random(n) < 0.1)
        rows = rng.permutation(n)
        available = rng.random(n_gpus) < 0.3
        backfill = bool(rng.random() < 0.7)
        ranking = SimpleNamespace(rows=rows, gpus=want, gpu_type=None, backfill=backfill)
        before = ctx.record.records
        explain_placement(ctx, ranking, is_run, placed, np.sort(rows[suspended]), available)
        expected = []
        given = _by_hand(want, is_run, placed, set(suspended.nonzero()[0].tolist()), int(np.count_nonzero(available)), backfill)
        for p, code, a, b, c in given:
            row = int(rows[p])
            if code == Reason.PREEMPTED or held.get(row) != code:
                expected.append((row, code, a, b, c))
            held[row] = int(Reason.RANKED_BEHIND) if code == Reason.PREEMPTED else code
        cols = ctx.record.arrays()
        got = list(zip(*(cols[name][before:].tolist() for name in ("row", "code", "a", "b", "c"))))
        assert sorted(got) == sorted(expected), case
        partial += 0 < len(expected) < len(given)
    assert partial > 100  # (most rounds record some of the jobs they explain, not all)
