"""Names in a graph's `gpu_types` setting that are near misses of the throughput profile's GPU
types (`V1OO` for V100): the setting takes them as types of their own, where a job known by its
model never runs, so each is warned of on stderr, once per command, and the run goes on (real
types can be as near: it is not refused).

The rule (docs/clusters.md): case aside, and reading O as 0 and I or l as 1, a name that is a
profile type, or one with a character added or dropped or two neighbours swapped (V10, V1000,
V010), is near it. A name one character replaced away is not (K40 for K80, A100 for V100): real
types differ so. A name the profile has, case aside, is the profile's type, and no near miss.
(difflib's ratio, which `did_you_mean` uses, cannot see O for 0 and finds A100 close to V100.)"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence

from roundhouse.errors import print_warning

# Characters read alike in a type's name, read as the digits they look like.
_CONFUSABLE = str.maketrans({"o": "0", "i": "1", "l": "1"})

# The near misses already warned of, in this process and (through its environment, which the
# worker processes of a sweep inherit) in the command that started it, as `name>type/type`.
_WARNED: set[str] = set()
_WARNED_ENV = "ROUNDHOUSE_GPU_TYPES_WARNED"


def near_types(name: str, profile_types: Sequence[str]) -> list[str]:
    """The profile's types that `name` is a near miss of (the rule above), in the profile's order;
    none when the profile has `name` itself, case aside."""
    if name.lower() in {t.lower() for t in profile_types}:
        return []
    folded = _folded(name)
    return [t for t in profile_types if _one_slip(folded, _folded(t))]


def _folded(name: str) -> str:
    return name.lower().translate(_CONFUSABLE)


def _one_slip(a: str, b: str) -> bool:
    """Whether `a` is `b`, or `b` with one character added or dropped, or two neighbours swapped."""
    if a == b:
        return True
    if abs(len(a) - len(b)) == 1:
        short, long = sorted((a, b), key=len)
        return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))
    if len(a) != len(b):
        return False
    differ = [i for i in range(len(a)) if a[i] != b[i]]
    return len(differ) == 2 and differ[1] == differ[0] + 1 and a[differ[0]] == b[differ[1]] and a[differ[1]] == b[differ[0]]


def warn_near_misses(names: Sequence[str], profile_types: Sequence[str], start: str) -> None:
    """On stderr, once per command: each of `names` (the `gpu_types` setting's) that is a near miss
    of a profile type. `start` begins the warning with where the setting was given: its place in
    a graph (`g.sched:2:13: warning: setting 'gpu_types': `) or the option (`warning: --set gpu_types: `)."""
    for name in names:
        near = near_types(name, profile_types)
        key = f"{name}>{'/'.join(near)}"
        if not near or _warned(key):
            continue
        _WARNED.add(key)
        os.environ[_WARNED_ENV] = ",".join(sorted(_WARNED | _inherited()))
        print_warning(f"{start}{_advice(name, near)}")


def _warned(key: str) -> bool:
    # (a worker process of this command's sweep: the command warned of the points before any ran)
    return key in _WARNED or (multiprocessing.parent_process() is not None and key in _inherited())


def _inherited() -> set[str]:
    return {k for k in os.environ.get(_WARNED_ENV, "").split(",") if k}


def _advice(name: str, near: list[str]) -> str:
    which = " or ".join(near)
    meant = near[0] if len(near) == 1 else "that type"
    return (
        f"'{name}' is near the throughput profile's {which}, but is taken as a type of its own, where jobs known by "
        f"their model never run (the profile gives no speed there); if you meant {which}, leave it out of gpu_types "
        f"(the profile's types need no naming) and write {meant} in the cluster; if {name} is a type of its own, "
        "give the profile rows on it for such jobs to run there"
    )
