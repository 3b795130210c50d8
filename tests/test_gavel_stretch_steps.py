"""The steps of Gavel's rounds between two events, made cheaper, give the same runs: the entries a
column's greedy pass skipped for want of GPUs (worked out with arrays, against a walk over each
column), and the jobs' throughputs kept by the solver between its solves (against those worked
out afresh at every solve, spread rates looked up in the profile), every job's times compared."""

from __future__ import annotations

import numpy as np

from roundhouse.elements.policies.gavel import mechanism
from roundhouse.elements.policies.gavel.formulation import Columns, KeptThroughputs
from tests.test_gavel_fast_paths import _run  # (multi-GPU jobs on Gavel's one-GPU servers)


def _walked(sf, col_type, sorted_cols, missed):
    """What `_too_big` gives, by a walk over each column's candidates (the first column that
    skipped an entry gives its numbers)."""
    found: dict[int, tuple[int, int, int, int]] = {}
    for c, cand, picked, before in sorted_cols:
        chosen = set(picked.tolist())
        left, ahead = before, 0
        last = max((i for i, e in enumerate(cand.tolist()) if e in chosen), default=0)  # (none behind the last pick)
        for i, e in enumerate(cand.tolist()[:last]):
            if e in chosen:
                ahead += 1
                left -= int(sf[e])
            elif missed[e] and sf[e] > left:
                _walked.again += e in found  # (passed over in an earlier column too)
                found.setdefault(e, (i + 1, ahead, int(col_type[c]), left))
    return found


_walked.again = 0  # type: ignore[attr-defined]


class _Mech:
    def __init__(self, sf, col_type, sorted_cols):
        self._sf, self._col_type, self._sorted = sf, col_type, sorted_cols
        self._rows = np.arange(len(sf))


def _greedy_columns(rng, n, k):
    """Columns sorted as the mechanism sorts them: candidates in some order, the greedy's picks."""
    sf = rng.choice([1, 1, 1, 2, 4, 8], n).astype(np.int64)
    out, taken = [], np.zeros(n, dtype=bool)
    for c in range(k):
        cand = rng.permutation(np.flatnonzero(~taken & (rng.random(n) < 0.8)))
        if not len(cand):
            continue
        before = int(rng.integers(1, 20))
        picked, _ = mechanism._greedy(cand, sf, None, None, taken, before, False)
        out.append((c, cand, picked, before))
    return sf, out


def test_entries_passed_over_equal_the_walk_over_each_column():
    rng = np.random.default_rng(7)
    seen = 0
    for trial in range(400):
        n, k = int(rng.integers(1, 40)), int(rng.integers(1, 5))
        sf, sorted_cols = _greedy_columns(rng, n, k)
        col_type = rng.integers(0, 3, k)
        missed = rng.random(n) < 0.7
        entries, rank, ahead, code, left = mechanism._too_big(_Mech(sf, col_type, sorted_cols), missed)
        want = _walked(sf, col_type, sorted_cols, missed)
        assert entries.tolist() == list(want), trial  # (in the order the columns found them)
        got = list(zip(rank.tolist(), ahead.tolist(), code.tolist(), left.tolist()))
        assert got == list(want.values()), trial
        assert all(a.dtype == np.int64 for a in (entries, rank, ahead, code, left))
        seen += len(want)
    assert seen > 500 and _walked.again > 20  # type: ignore[attr-defined]  # (many passed over, some in several columns)


class _Table:
    def __init__(self, **columns):
        self.columns = columns

    def column(self, name):
        return self.columns[name]


class _Ctx:
    def __init__(self, table):
        self.jobs = table


def test_throughputs_kept_by_job_are_worked_out_again_when_the_job_changes():
    table = _Table(
        job_id=np.array([10, 11, 12, 13, 14]),
        gpus=np.array([1, 2, 4, 8, 2]),
        batch_size=np.array([32, 64, 0, 128, 64]),
    )
    asked = []

    def work_out(ctx, rows, columns):  # (a job's throughput: a number of its own per column)
        asked.append(rows.tolist())
        return ctx.jobs.column("gpus")[rows, None] * 10.0 + np.arange(columns.k) + ctx.jobs.column("job_id")[rows, None]

    def want(rows, k):
        return table.column("gpus")[rows, None] * 10.0 + np.arange(k) + table.column("job_id")[rows, None]

    kept, ctx, three = KeptThroughputs(), _Ctx(table), _columns(3)
    rows = np.array([3, 1])
    np.testing.assert_array_equal(kept.of(ctx, rows, three, work_out), want(rows, 3))
    rows = np.array([1, 4, 3, 0])
    np.testing.assert_array_equal(kept.of(ctx, rows, three, work_out), want(rows, 3))
    assert asked == [[3, 1], [4, 0]]  # (rows 1 and 3 kept; row 4 lies past what was kept)
    table.columns["gpus"] = np.array([1, 4, 4, 8, 2])  # job 11 resized
    table.columns["batch_size"] = np.array([32, 64, 0, 256, 64])  # job 13 given another batch size
    table.columns["job_id"] = np.array([20, 11, 12, 13, 14])  # (row 0 another job)
    rows = np.array([0, 1, 2, 3, 4])
    np.testing.assert_array_equal(kept.of(ctx, rows, three, work_out), want(rows, 3))
    assert asked[2:] == [[0, 1, 2, 3]]
    two = _columns(2)  # other columns: nothing kept applies
    np.testing.assert_array_equal(kept.of(ctx, rows, two, work_out), want(rows, 2))
    assert asked[3:] == [[0, 1, 2, 3, 4]]
    assert kept.of(ctx, rows[:0], two, work_out).shape == (0, 2) and len(asked) == 4


def _columns(k):
    return Columns(tuple(f"T{i}" for i in range(k)), np.arange(k), None, np.ones(k))


def test_throughputs_kept_between_solves_equal_those_worked_out_at_every_solve(monkeypatch):
    found = []
    of = KeptThroughputs.of

    def counting(self, ctx, rows, columns, work_out):
        asked = []
        T = of(self, ctx, rows, columns, lambda c, r, cols: asked.append(len(r)) or work_out(c, r, cols))
        found.append(len(rows) - sum(asked))
        return T

    monkeypatch.setattr(KeptThroughputs, "of", counting)
    kept, result = _run([])
    assert result.counters["solve"]["solves"] > 20
    assert sum(found) > 100  # later solves found the throughputs of jobs still active
    # Without them: every solve works out every job's throughputs (spread rates looked up).
    monkeypatch.setattr(KeptThroughputs, "of", lambda self, ctx, rows, columns, work_out: work_out(ctx, rows, columns))
    worked_out, _ = _run([])
    assert kept.keys() == worked_out.keys()
    for column in kept:
        np.testing.assert_array_equal(kept[column], worked_out[column], err_msg=column)
