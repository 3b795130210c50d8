"""`copy.deepcopy` for elements' states (runtime/snapshot.py's `fork_engine`), faster for what
they mostly hold: lists, tuples and dicts of numbers, strings and numpy arrays, such as a
policy's per-job lists, which forking copies at every look-ahead. The copy is the one `copy.deepcopy` makes, with the same memo: each object
copied once (what another part of the fork refers to is the same copy), a tuple whose items
copy to themselves kept as it is, and every original copied kept alive in the memo (where
`fork_engine` finds the read-only arrays). Anything else goes to `copy.deepcopy` itself.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

_NOTHING = object()
# What `copy.deepcopy` gives back as it is (after looking in the memo), of the types met here.
_ATOMIC = frozenset({type(None), int, float, bool, str, bytes})


def deep_copy(x: Any, memo: dict[int, Any]) -> Any:
    """`copy.deepcopy(x, memo)`."""
    d = id(x)
    y = memo.get(d, _NOTHING)
    if y is not _NOTHING:
        return y
    kind = type(x)
    if kind in _ATOMIC:
        return x
    if kind is np.ndarray:
        y = x.__deepcopy__(memo)
    elif kind is list:
        y = memo[d] = []
        append = y.append
        for item in x:
            append(deep_copy(item, memo))
    elif kind is tuple:
        items = [deep_copy(item, memo) for item in x]
        y = memo.get(d, _NOTHING)  # (a tuple that holds itself, through a list or a dict)
        if y is not _NOTHING:
            return y
        y = x if all(a is b for a, b in zip(x, items)) else tuple(items)
        if y is x:
            return x
    elif kind is dict:
        y = memo[d] = {}
        for key, value in x.items():
            y[deep_copy(key, memo)] = deep_copy(value, memo)
    else:
        return copy.deepcopy(x, memo)
    memo[d] = y
    kept = memo.get(id(memo))  # (as `copy.deepcopy` keeps the originals it copied)
    if kept is None:
        memo[id(memo)] = [x]
    else:
        kept.append(x)
    return y
