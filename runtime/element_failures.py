"""An element's own code failing: it raised, or emitted a value its port does not carry. The
engine reports it naming the element (graph name, class, where the graph declares it and where
its class is defined), the round and the time, and keeps the Python traceback for `--debug`.
What an element emits is checked in runtime/output_checks.py. An element's own error about one
of its arguments, found as the run starts, is said at the argument (`argument_error`)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from roundhouse.errors import RoundhouseError, SchedError
from roundhouse.runtime.values import format_duration

if TYPE_CHECKING:
    from roundhouse.runtime.context import Round
    from roundhouse.runtime.element import Element


class ElementFailure(RoundhouseError):
    """An element's own code failed: it raised, or emitted a value its port does not carry.
    `detail` holds the Python traceback, which the command line prints under `--debug`."""

    detail: str = ""


def describe_element(el: Element, declared: bool = True) -> str:
    """The element as messages about it name it: `'name' (Class; declared at FILE:LINE:COL,
    class defined at FILE:LINE)`; without `declared` where a message's location says it."""
    import inspect

    cls = type(el)
    try:
        defined = f"{inspect.getsourcefile(cls)}:{inspect.getsourcelines(cls)[1]}"
    except (OSError, TypeError):
        defined = cls.__module__
    where = f"declared at {el.declared_at}, " if declared and el.declared_at is not None else ""
    return f"'{el.name}' ({cls.__name__}; {where}class defined at {defined})"


def argument_error(el: Element, field: str, message: str, hint: str | None = None) -> SchedError:
    """An error about the element's argument `field` found only once the run starts (checked
    against the trace or the cluster): at the place the file writes the argument. One given on
    the command line is said as that option's, as the compiler says it, at the element's
    declaration; one left at its default, at the declaration."""
    place = el.arguments_at.get(field)
    if isinstance(place, str):
        return SchedError(f"{place}: {message}", el.declared_at, hint=hint)
    return SchedError(message, place if place is not None else el.declared_at, hint=hint)


def element_failure(el: Element, ctx: Round, what: str, cause: BaseException | None = None) -> ElementFailure:
    """An ElementFailure naming the element (graph name, class, where the graph declares it
    and where its class is defined), the round and the time."""
    import traceback

    if cause is not None:
        what += _frozen_field(cause) + _raised_at(cause)
    failure = ElementFailure(
        f"error: element {describe_element(el)} failed in round {ctx.round_index} (t={format_duration(ctx.now)}): {what}"
    )
    failure.detail = "".join(traceback.format_exception(cause)) if cause is not None else ""
    return failure


def _library_folders() -> tuple[str, ...]:
    """Where Roundhouse's own code and installed packages lie: a frame elsewhere is the user's."""
    import roundhouse
    from roundhouse.runtime.user_modules import INSTALLED

    folders = {os.path.realpath(os.path.dirname(roundhouse.__file__))}
    for sub in ("runtime", "elements", "traces", "wire", "agents", "tools"):
        module = sys.modules.get(f"roundhouse.{sub}")
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            folders.add(os.path.realpath(os.path.dirname(file)))
    return tuple(f + os.sep for f in folders) + INSTALLED


def _raised_at(cause: BaseException) -> str:
    """Where in the user's own code (a required file, a module of theirs) the exception was
    raised, or passed through last on its way into the library: the line to look at, which
    the message otherwise leaves to `--debug`."""
    import traceback

    library = _library_folders()
    own = [
        f
        for f in traceback.extract_tb(cause.__traceback__)
        if not f.filename.startswith("<") and not os.path.realpath(f.filename).startswith(library)
    ]
    return f", at {own[-1].filename}:{own[-1].lineno} (in {own[-1].name})" if own else ""


def _frozen_field(cause: BaseException) -> str:
    """For an element setting one of its own arguments (which the error names): where changing
    state belongs."""
    from roundhouse.runtime.element import FrozenArgumentError

    if not isinstance(cause, FrozenArgumentError):
        return ""
    return " (keep what changes in an attribute of its own, set up in start and named in its `state`)"


def call_element(el: Element, what: str, ctx: Round, fn, *args, **kwargs):
    """Call an element's code; an exception from it is reported naming the element."""
    try:
        return fn(*args, **kwargs)
    except SchedError as err:
        if err.location is None:  # (a check of the element's arguments against the world: point at its line)
            err.location = el.declared_at
        raise
    except (RoundhouseError, KeyboardInterrupt):
        raise
    except (Exception, SystemExit) as err:  # (sys.exit() in element code is its failure, not the end of the run)
        raise element_failure(el, ctx, f"its {what} raised {type(err).__name__}: {err}", err) from err


def fed_by_own_code(graph, el: Element, inputs) -> str:
    """When a library element fails on its inputs, which of them came from elements defined
    outside the library (a `require`d file): the likelier cause, named in the message."""
    if not type(el).__module__.startswith("roundhouse."):
        return ""
    feeding = [graph.elements[name] for name in sorted({n for *_, sources in inputs for n, _ in sources})]
    own = [describe_element(e) for e in feeding if not type(e).__module__.startswith("roundhouse.")]
    return f" (its input came from {', '.join(own)}, defined outside the library: check what it emits)" if own else ""
