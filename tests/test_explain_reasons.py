"""The placers' waiting reasons (elements/placement/reasons.py), worked out with a few array
operations per round, against the same reasons worked out job by job from their definitions."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from roundhouse.elements.placement.reasons import explain_placement
from roundhouse.runtime.explain import Reason, Recorder


class _Context:
    """What explain_placement asks of a round context, recording into a real Recorder."""

    def __init__(self, n_gpus: int, n_jobs: int):
        self.cluster = SimpleNamespace(gpu_types=("V100",), gpu_type=np.zeros(n_gpus, dtype=np.int64))
        self.record = Recorder(["place"], ["Consolidated"], ["order"])
        self.record.reserve(n_jobs)

    def explain(self, reason, rows, a=0, b=0, c=0) -> None:
        self.record.note(0, reason, rows, a, b, c, 0.0)


def _by_hand(want, is_run, placed, suspend_pos, left, backfill) -> list[tuple[int, int, int, int, int]]:
    """(position, code, a, b, c) per job, from the definitions in the module's docstring."""
    holds = [(is_run[q] or placed[q]) and q not in suspend_pos for q in range(len(want))]
    out = []
    waiting = [p for p in range(len(want)) if not is_run[p] and not placed[p]]
    # Without backfilling, the first job that did not fit: the first waiting one that wants GPUs,
    # or a running one suspended, whichever is ranked first; every waiting job behind it is blocked.
    first = min([p for p in waiting if want[p] > 0][:1] + sorted(suspend_pos)[:1], default=None)
    for p in waiting:
        if want[p] <= 0:
            continue
        # Jobs ranked ahead that hold GPUs after the plan: all but those waiting and suspended.
        ahead = sum(1 for q in range(p) if holds[q])
        # The GPUs left free for it: those the plan leaves free and those of jobs ranked behind it.
        free = left + sum(int(want[q]) for q in range(p + 1, len(want)) if holds[q])
        if not backfill and p > first:
            out.append((p, int(Reason.BLOCKED), p + 1, first + 1, free))
        else:
            code = Reason.RANKED_BEHIND if want[p] > free else Reason.NO_ROOM
            out.append((p, int(code), p + 1, ahead, free))
    for p in suspend_pos:
        holders = sum(1 for q in range(p) if (is_run[q] or placed[q]) and q not in suspend_pos)
        out.append((p, int(Reason.PREEMPTED), p + 1, holders, 0))
    return out


def test_waiting_reasons_match_the_reasons_worked_out_job_by_job():
    rng = np.random.default_rng(7)
    checked = 0
    for case in range(300):
        n, n_gpus = int(rng.integers(1, 30)), int(rng.integers(1, 40))
        want = rng.integers(0 if case % 3 == 0 else 1, 12, n)  # some rounds rank jobs wanting none
        is_run = rng.random(n) < 0.4
        placed = ~is_run & (rng.random(n) < 0.3)
        suspended = is_run & (rng.random(n) < 0.3)
        rows = rng.permutation(n)  # ranking position -> job row
        available = rng.random(n_gpus) < rng.random()
        backfill = bool(rng.random() < 0.7)
        ranking = SimpleNamespace(rows=rows, gpus=want, gpu_type=None, backfill=backfill)
        ctx = _Context(n_gpus, n)
        suspend = np.sort(rows[suspended])
        explain_placement(ctx, ranking, is_run, placed, suspend, available)
        cols = ctx.record.arrays()
        got = sorted(zip(cols["row"].tolist(), cols["code"].tolist(), cols["a"].tolist(), cols["b"].tolist()))
        left = int(np.count_nonzero(available))
        expected = _by_hand(want, is_run, placed, set(suspended.nonzero()[0].tolist()), left, backfill)
        assert got == sorted((int(rows[p]), code, a, b) for p, code, a, b, _ in expected), case
        # The GPUs left free, where the reason gives them.
        free_given = {int(r): c for r, code, c in zip(cols["row"], cols["code"], cols["c"]) if code != Reason.PREEMPTED}
        assert all(
            free_given[int(rows[p])] == c for p, code, _, _, c in expected if code not in (Reason.PREEMPTED, Reason.BLOCKED)
        )
        checked += len(expected)
    assert checked > 1000


def test_without_backfill_a_job_suspended_ahead_blocks_the_waiting_jobs_behind_it():
    # A round of LAS without backfilling: rank 1 runs on, rank 2 is launched, rank 3 (2 GPUs,
    # running) does not fit and loses its GPUs, which leaves 1 free. Rank 4 (1 GPU) would fit
    # in it, but no job starts behind rank 3: it is blocked by rank 3, not short of room.
    want = np.array([1, 2, 2, 1])
    is_run = np.array([True, False, True, False])
    placed = np.array([False, True, False, False])
    ranking = SimpleNamespace(rows=np.arange(4), gpus=want, gpu_type=None, backfill=False)
    ctx = _Context(4, 4)
    explain_placement(ctx, ranking, is_run, placed, np.array([2]), np.array([False, False, False, True]))
    cols = ctx.record.arrays()
    got = sorted(zip(cols["row"].tolist(), cols["code"].tolist(), cols["a"].tolist(), cols["b"].tolist(), cols["c"].tolist()))
    assert got == [(2, int(Reason.PREEMPTED), 3, 2, 0), (3, int(Reason.BLOCKED), 4, 3, 1)]
