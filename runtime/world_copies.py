"""How a world is copied (forks, runtime/snapshot.py's `fork_engine`) and pickled (snapshot
files): its arrays are copied, its read-only faces made afresh, and the cluster, profile and
throughput model shared. A backend compares running sets by identity, so a fork's arrays are new
objects, never the original's.

World binds these functions as its `__deepcopy__`, `__getstate__` and `__setstate__`
(runtime/world.py). A field added to the world that is an array it writes in place belongs in
`COPIED`; one it makes from others (a view, a face) belongs in `REMADE`.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from roundhouse.runtime.plans import PlanCheck
from roundhouse.runtime.progress_log import ProgressLog
from roundhouse.traces.jobs import read_only

if TYPE_CHECKING:
    from roundhouse.runtime.world import World


# What a world remakes when copied or loaded rather than carrying it: the job table's writable
# columns, the plan checker, and the read-only faces of the holder and online arrays.
REMADE = ("_cols", "_check", "holder_face", "online_face", "co_holder_face")
# The arrays a copy gets its own of (`co_holder` is None until a plan launches a pair).
COPIED = ("holder", "co_holder", "online", "running_rows")


def deep_copy(world: World, memo: dict) -> World:
    """A copy of the world for a fork: its own arrays, job table, record of decisions and
    progress log; the rest shared."""
    new = memo[id(world)] = object.__new__(type(world))
    state = get_state(world)
    for name in COPIED:
        # The memo is keyed by the original array, so that whatever else the fork copies with
        # the same memo and refers to it refers to the copy.
        state[name] = memo[id(world.__dict__[name])] = None if state[name] is None else state[name].copy()
    if world.explain is not None:
        # The fork's record goes on by itself from here; the engine's record is the same object.
        state["explain"] = memo[id(world.explain)] = world.explain.copy()
    # The progress log goes with its readers, which the elements' state names (same memo).
    state["progress_log"] = copy.deepcopy(world.progress_log, memo)
    set_state(new, {**state, "jobs": copy.deepcopy(world.jobs, memo)})
    return new


def get_state(world: World) -> dict:
    """The world's fields, less those it remakes."""
    return {k: v for k, v in world.__dict__.items() if k not in REMADE}


def set_state(world: World, state: dict) -> None:
    """Fill a world from its fields, and remake the rest."""
    world.__dict__.update(state)
    # Snapshots written before the world kept a progress log, the time it is as of, or where its
    # last round began.
    world.__dict__.setdefault("progress_log", ProgressLog())
    world.__dict__.setdefault("as_of", None)
    world.__dict__.setdefault("last_round_s", None)
    world._cols, world._check = world.jobs.writable, PlanCheck(world)
    # The running rows own their data (made by `_set_running`, or a copy), so this cannot fail.
    world.running_rows.setflags(write=False)
    world.holder_face, world.online_face = read_only(world.holder), read_only(world.online)
    world.co_holder_face = None if world.co_holder is None else read_only(world.co_holder)
