"""Checks of what elements emit: each value against its port's declared type (every element,
every round: `check_emitted`), and, for an element defined outside the library, what its tick
returned beyond the type (`check_own_output`: nothing from an element without output ports, the
keys of a dict of several output ports, and a Ranking's contents), and that its tick left its
arguments as they were (`check_arguments_kept`) and its `fixed` attributes too, where that is
cheap and sure (`check_fixed_kept`). A value that fails is reported as the element's failure
(runtime/element_failures.py)."""

from __future__ import annotations

import copy
import weakref
from typing import TYPE_CHECKING

import numpy as np

from roundhouse.runtime.element_failures import element_failure
from roundhouse.runtime.types import Ranking
from roundhouse.traces.jobs import FINISHED

if TYPE_CHECKING:
    from roundhouse.runtime.context import Round
    from roundhouse.runtime.element import Element


def describe_value(value: object) -> str:
    if value is None:
        return "None"
    name = type(value).__name__
    shown = repr(value)
    shown = shown if len(shown) <= 60 else f"{shown[:59]}…"  # (cut short, and seen to be)
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name} ({shown})"


def check_emitted(el: Element, ctx: Round, port: str, value: object, port_type: type) -> None:
    """Raise ElementFailure unless `value` is a `port_type`."""
    if not isinstance(value, port_type):
        on = f"on its port '{port}'" if port != "tick" else "from its tick"
        hint = ""
        if isinstance(value, dict) and len(el.outputs) == 1:  # (a dict by port name is for several output ports)
            hint = f" (an element with one output port returns the {port_type.__name__} itself, not a dict by port name)"
        raise element_failure(el, ctx, f"it emitted {describe_value(value)} {on}, where a {port_type.__name__} belongs{hint}")


# Each own element's arguments that a tick could change in place (a list, a dict, a set), as
# they were before its first tick: keyed by the element itself, not kept on it, so that it holds
# no attribute its `state` would have to name.
_KEPT: weakref.WeakKeyDictionary[Element, dict[str, object]] = weakref.WeakKeyDictionary()


def _changeable(value: object) -> bool:
    if isinstance(value, list | dict | set | bytearray):
        return True
    return isinstance(value, tuple) and any(_changeable(v) for v in value)


def _same(now: object, was: object) -> bool:
    try:
        return bool(now == was)
    except Exception:  # (a value a converter made that compares as no bool: it is not judged)
        return True


def keep_arguments(el: Element) -> None:
    """Remember `el`'s arguments that could be changed in place, before its first tick."""
    try:
        if el in _KEPT:
            return
    except TypeError:  # (a class of one's own whose __eq__ left it unhashable: not checked)
        return
    _KEPT[el] = {k: copy.deepcopy(v) for k, v in el.config().items() if _changeable(v)}


def check_arguments_kept(el: Element, ctx: Round) -> None:
    """An argument is fixed once the graph is built: a tick that changes a list argument in place
    (`self.weights.append(...)`) is refused naming it, as one setting it is, rather than leaving
    `run.json` the changed value and a snapshot that no longer loads, as a graph not the one
    saved."""
    try:
        kept = _KEPT.get(el)
    except TypeError:
        return
    for name, was in (kept or {}).items():
        now = getattr(el, name)
        if not _same(now, was):
            raise element_failure(
                el,
                ctx,
                f"its tick changed its argument '{name}' in place (from {describe_value(was)} to {describe_value(now)}): "
                "an argument cannot change once the graph is built (keep what changes in an attribute of its own, "
                "set up in start and named in its `state`)",
            )


# Each own element's `fixed` attributes as they were before its tick: by name, the object and a
# copy of it to compare with after the tick, or None for a value not compared (`_fixed_copy`).
_FIXED: weakref.WeakKeyDictionary[Element, dict[str, tuple[object, object]]] = weakref.WeakKeyDictionary()
# What a fixed attribute's value may hold to be compared after every tick, in a time too small
# to notice beside the tick of an element written in Python: a list, dict or set of plain
# values of this many items at most (all levels), a numpy array of this many bytes at most.
FIXED_ITEMS_COMPARED = 10_000
FIXED_BYTES_COMPARED = 1 << 20
_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_MISSING = object()


def _plain_items(value: object, budget: list[int]) -> bool:
    """Whether `value` is plain values in lists, dicts, sets and tuples, of no more items than
    `budget` has left: values whose `==` says surely whether one changed."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if isinstance(value, _PLAIN):
        return type(value) in _PLAIN  # (a subclass's `==` is its own)
    if type(value) in (list, tuple, set, frozenset, bytearray):
        return type(value) is bytearray or all(_plain_items(v, budget) for v in value)  # type: ignore[attr-defined]
    if type(value) is dict:
        return all(_plain_items(k, budget) and _plain_items(v, budget) for k, v in value.items())
    return False


def _fixed_copy(value: object) -> object:
    """A copy of a fixed attribute's value to compare with after a tick, or None when it could
    not change in place (a number, a string, a tuple of them) or cannot be compared cheaply and
    surely (an object of other kinds, whose `==` may be identity or anything; one too large)."""
    if type(value) is np.ndarray:
        small = not value.dtype.hasobject and value.nbytes <= FIXED_BYTES_COMPARED
        return value.copy() if small else None
    if not _changeable(value) or not _plain_items(value, [FIXED_ITEMS_COMPARED]):
        return None
    return copy.deepcopy(value)


def _unchanged(now: object, was: object) -> bool:
    if type(was) is np.ndarray:  # (by bytes: a NaN is the NaN it was)
        return type(now) is np.ndarray and now.dtype == was.dtype and now.shape == was.shape and now.tobytes() == was.tobytes()
    return _same(now, was)


def keep_fixed(el: Element) -> None:
    """Before `el`'s tick: a copy of each of its `fixed` attributes set since the last (in start,
    or rebound), to compare with after the tick (`check_fixed_kept`)."""
    fixed = type(el).fixed
    if not fixed:
        return
    try:
        kept = _FIXED.get(el)
        if kept is None:
            kept = _FIXED[el] = {}
    except TypeError:  # (unhashable: not checked, as for its arguments)
        return
    held = el.__dict__
    for name in fixed:
        value = held.get(name, _MISSING)
        entry = kept.get(name)
        if entry is None or entry[0] is not value:
            kept[name] = (value, None if value is _MISSING else _fixed_copy(value))


def check_fixed_kept(el: Element, ctx: Round) -> None:
    """A `fixed` attribute is shared with the run's forks, not copied (runtime/snapshot.py): a
    tick that changes one in place would change every fork's, and theirs this run's. Refused
    naming the attribute, for values `_fixed_copy` compares. (One set anew is no such change:
    a fork made before keeps the value it shares.)"""
    if not type(el).fixed:
        return
    try:
        kept = _FIXED.get(el)
    except TypeError:
        return
    held = el.__dict__
    for name, (value, was) in (kept or {}).items():
        if was is None or held.get(name, _MISSING) is not value or _unchanged(value, was):
            continue
        raise element_failure(
            el,
            ctx,
            f"its tick changed its fixed attribute '{name}' in place (from {describe_value(was)} to "
            f"{describe_value(value)}): what `fixed` names is shared with the run's forks, not copied, so a fork "
            "would see the change and make its own to this run's; name it in `state` instead (copied into each fork)",
        )


def check_own_output(el: Element, ctx: Round, out: object) -> None:
    """What an element defined outside the library returned, beyond its type (which the engine
    checks after): a dict of its several output ports holds exactly their keys, and a Ranking
    asks at least one GPU for each job it ranks, ranks each job once, and ranks only jobs of the
    job table. (Else a placer would fail on it, or nothing would run, far from the cause.)"""
    outputs = el.outputs
    if not outputs and out is not None:  # (else it is dropped without a word: a sink's report meant, say)
        raise element_failure(
            el,
            ctx,
            f"its tick returned {describe_value(out)}, but it has no output ports, so that would go nowhere: "
            "return None (an element reports at the end from finish(ctx); docs/writing-elements.md)",
        )
    if len(outputs) == 1:
        if outputs[0].type is Ranking and type(out) is Ranking:
            check_ranking(el, ctx, outputs[0].name, out)
        return
    if not outputs or not isinstance(out, dict) or el.category in ("source", "launch"):
        return  # (the engine says what is wrong with anything else)
    names = [p.name for p in outputs]
    extra = [str(k) for k in out if k not in names]
    if extra:
        raise element_failure(
            el,
            ctx,
            f"its tick returned key(s) {', '.join(repr(k) for k in extra)} that are not output ports "
            f"(its output ports: {', '.join(names)})",
        )
    missing = [n for n in names if n not in out]
    if missing:
        raise element_failure(
            el, ctx, f"its tick did not return port {missing[0]!r} (a dict by port name holds each of {', '.join(names)})"
        )
    for p in outputs:
        got = out[p.name]
        if p.type is Ranking and type(got) is Ranking:
            check_ranking(el, ctx, p.name, got)


def check_ranking(el: Element, ctx: Round, port: str, ranking: Ranking) -> None:
    """A Ranking's contents: rows of the job table, each once, unfinished, each asked at least one GPU; and
    what it asks beyond GPU counts, where given: GPU types of the cluster, batch sizes of 0 or
    more, partners that are rows of the job table."""
    rows, gpus = ranking.rows, ranking.gpus
    if not len(rows):
        return
    _check_columns(el, ctx, port, ranking)
    on = f"on its port '{port}'"
    known = len(ctx.jobs)
    outside = np.flatnonzero((rows < 0) | (rows >= known))
    if len(outside):
        raise element_failure(
            el,
            ctx,
            f"it emitted a Ranking {on} that ranks row {rows[outside[0]]}, which is not a row of the job table (it has {known} job(s))",
        )
    ids = ctx.jobs.column("job_id")
    ordered = np.sort(rows, kind="stable")
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(twice):
        raise element_failure(el, ctx, f"it emitted a Ranking {on} that ranks job {ids[twice[0]]} (row {twice[0]}) twice")
    done = np.flatnonzero(ctx.jobs.column("status")[rows] == FINISHED)
    if len(done):  # (else the placer's plan is refused, naming the placer)
        row = rows[done[0]]
        raise element_failure(
            el,
            ctx,
            f"it emitted a Ranking {on} that ranks job {ids[row]} (row {row}), which has finished: rank the jobs "
            "of its input, which are unfinished",
        )
    none = np.flatnonzero(gpus < 1)
    if len(none):
        row = rows[none[0]]
        raise element_failure(
            el,
            ctx,
            f"it emitted a Ranking {on} that asks {gpus[none[0]]} GPUs for job {ids[row]} (row {row}): "
            f"each job it ranks needs 1 GPU or more ({len(none)} of its {len(rows)} job(s) ask fewer)",
        )


def _check_columns(el: Element, ctx: Round, port: str, ranking: Ranking) -> None:
    """A Ranking's optional columns (`gpu_type`, `batch_size`, `consolidate`, `partner`): numpy
    arrays of the right kind and range, else a placer fails on them far from the cause."""
    on = f"on its port '{port}'"
    n_types = len(ctx.cluster.gpu_types)
    columns = (
        (
            "gpu_type",
            ranking.gpu_type,
            "integer",
            -1,
            n_types - 1,
            f"a GPU type code of the cluster (0 to {n_types - 1}) or -1 for any",
        ),
        ("batch_size", ranking.batch_size, "integer", 0, None, "a batch size, or 0 for the job's own"),
        ("consolidate", ranking.consolidate, "bool", None, None, "True or False"),
        ("partner", ranking.partner, "integer", -1, len(ctx.jobs) - 1, "the row of a job of the job table, or -1 for none"),
    )
    for name, value, kind, low, high, wanted in columns:
        if value is None:
            continue
        if not isinstance(value, np.ndarray) or (value.dtype.kind not in "iu" if kind == "integer" else value.dtype != bool):
            got = type(value).__name__ if not isinstance(value, np.ndarray) else f"an array of {value.dtype}"
            raise element_failure(
                el, ctx, f"it emitted a Ranking {on} whose {name} is {got}: it must be a numpy array of {kind}s, each {wanted}"
            )
        if low is None:
            continue
        bad = np.flatnonzero((value < low) | (value > high)) if high is not None else np.flatnonzero(value < low)
        if len(bad):
            i = bad[0]
            raise element_failure(
                el,
                ctx,
                f"it emitted a Ranking {on} whose {name} is {value[i]} for job {ctx.jobs.column('job_id')[ranking.rows[i]]} "
                f"(row {ranking.rows[i]}): each must be {wanted}",
            )


def check_own_explanation(reason: object, rows: object, known: int) -> None:
    """What an element defined outside the library hands `ctx.explain`: a reason code (or one
    per row) of runtime.explain.Reason and rows of the job table, as whole numbers. ValueError
    saying which otherwise, rather than an index error from inside the record."""
    from roundhouse.runtime.explain import CANDIDATE, Reason

    codes = {int(r) for r in Reason} | {CANDIDATE}  # (a switch's selection, which a family of the library may note)
    given = np.asarray(rows)
    if given.dtype.kind not in "iu":
        raise ValueError(f"ctx.explain: rows must be whole numbers (rows of the job table), got {given.dtype}")
    outside = given[(given < 0) | (given >= known)]
    if len(outside):
        raise ValueError(f"ctx.explain: row {outside[0]} is not a row of the job table (it has {known} job(s))")
    if isinstance(reason, np.ndarray):
        if reason.shape != given.shape:
            raise ValueError(f"ctx.explain: {reason.size} reason codes for {given.size} row(s): give one code, or one per row")
        if reason.dtype.kind not in "iu":
            raise ValueError(f"ctx.explain: reason codes must be whole numbers (runtime.explain.Reason), got {reason.dtype}")
        wrong = [r for r in np.unique(reason).tolist() if r not in codes]
    else:
        wrong = [] if isinstance(reason, int | np.integer) and int(reason) in codes else [reason]
    if wrong:
        raise ValueError(f"ctx.explain: reason {wrong[0]!r} is not a reason code (runtime.explain.Reason)")
