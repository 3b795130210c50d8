"""Elements' states are copied for a fork (every look-ahead of a synthesizer) by a faster
`copy.deepcopy` (runtime/state_copies.py): the same copy, with the same memo."""

from __future__ import annotations

import copy

import numpy as np

from roundhouse.runtime.state_copies import deep_copy


def _state() -> tuple[list, np.ndarray, dict]:
    shared = np.arange(4)
    view = np.arange(10)[2:5]
    view.setflags(write=False)
    cycle: list = []
    cycle.append((cycle, 1))
    kept = [(view, shared, np.ones(2)), (shared, view, np.zeros(1)), ("name", 3, 2.5, None, b"x")]
    state = {"kept": kept, "cycle": cycle, (1, "key"): {"shared": shared, "object": np.array([[1], "a"], dtype=object)}}
    return kept, shared, state


def _same(a, b, seen: set | None = None) -> bool:
    """Equal in structure, types and values (a container met again is not compared again)."""
    seen = set() if seen is None else seen
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()
    if isinstance(a, list | tuple | dict):
        if id(a) in seen:
            return True
        seen.add(id(a))
        if isinstance(a, dict):
            return list(a) == list(b) and all(_same(a[k], b[k], seen) for k in a)
        return len(a) == len(b) and all(_same(x, y, seen) for x, y in zip(a, b))
    return a == b


def test_a_state_copies_as_deepcopy_copies_it():
    kept, shared, state = _state()
    ours, theirs = deep_copy(state, {}), copy.deepcopy(state, {})
    assert _same(ours, state) and _same(theirs, state)
    # Each object copied once: what two parts of the state share, their copies share.
    assert ours["kept"][0][1] is ours["kept"][1][0] is ours[(1, "key")]["shared"] is not shared
    assert ours["kept"][0][0] is ours["kept"][1][1] is not kept[0][0]
    assert ours["cycle"][0][0] is ours["cycle"] is not state["cycle"]
    # Nothing of the original's is written through the copy; a tuple of plain values is kept.
    ours["kept"][0][1][0] = 99
    assert shared[0] == 0 and ours["kept"][2] is kept[2]
    assert ours[(1, "key")]["object"][0] is not state[(1, "key")]["object"][0]


def test_a_state_copies_with_the_memo_of_the_rest_of_the_fork():
    kept, shared, state = _state()
    elsewhere = np.array([7])
    memo: dict = {id(shared): elsewhere, id(kept[2]): "left out"}
    ours = deep_copy(state, memo)
    # What the memo already maps (copied with another part of the fork, or shared) is used.
    assert ours["kept"][0][1] is elsewhere and ours["kept"][2] == "left out"
    # Every original copied is kept in the memo, as `copy.deepcopy` keeps them (a fork sets
    # the copies of read-only arrays read-only from that list), and maps to its copy.
    originals = memo[id(memo)]
    assert any(o is kept[0][0] for o in originals) and memo[id(kept[0][0])] is ours["kept"][0][0]
    assert any(o is state for o in originals) and memo[id(state)] is ours
