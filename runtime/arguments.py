"""Argument values: a literal of a `.sched` file converted to the type its element field (or
graph setting) declares, and checked by the field's validator; a literal that does not fit is
an error at its place in the file."""

from __future__ import annotations

import os
import types
import typing
from typing import Any

import attrs

from roundhouse.errors import SchedError
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.element import type_name
from roundhouse.runtime.values import Duration, ElementRef, FilePath, IdRange, Multiplier, Rate, describe

_KIND_TEXT = {
    "number": "a number",
    "duration": "a duration",
    "rate": "a rate",
    "multiplier": "a multiplier",
    "range": "a range",
    "string": "a string",
    "bool": "a boolean",
    "list": "a list",
    "reference": "a name",
}

_EXPECTS = {
    int: "a whole number",
    float: "a number",
    bool: "true or false",
    str: "a word or a string",
    Duration: "a duration such as 300s or 5min",
    Rate: "a rate such as 8/h",
    Multiplier: "a multiplier such as 1.2x",
    IdRange: "a range such as 3000..4000",
    FilePath: 'a file path in quotes, such as "traces/x.csv"',
    ElementRef: "the name of an element",
}


def convert(value: ast.Value, annotation: Any, base_dir: str, what: str) -> Any:
    """A literal as a value of the field's type; SchedError at the literal when it does not fit."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        for option in options:
            try:
                return convert(value, option, base_dir, what)
            except SchedError:
                continue
        expected = " or ".join(_EXPECTS.get(o, type_name(o)) for o in options)
        raise _mismatch(value, expected, what)
    if origin in (list, tuple):
        (item_type, *_) = typing.get_args(annotation) or (Any,)
        if value.kind != "list":
            raise _mismatch(value, f"a list of {type_name(item_type)} in [brackets]", what)
        return [convert(v, item_type, base_dir, what) for v in value.items]
    kind, raw = value.kind, value.value
    if annotation is Any or annotation is object:
        return [convert(v, Any, base_dir, what) for v in value.items] if kind == "list" else raw
    if annotation is bool:
        if kind == "bool":
            return raw
    elif annotation is int:
        if kind == "number" and isinstance(raw, int):
            return raw
    elif annotation is float:
        if kind == "number" and isinstance(raw, int | float):
            return float(raw)
    elif annotation is Duration:
        if kind == "duration":
            return raw
        if kind == "number" and isinstance(raw, int | float):
            return Duration(raw)
    elif annotation is Rate:
        if kind == "rate":
            return raw
    elif annotation is Multiplier:
        if kind in ("multiplier", "number") and isinstance(raw, int | float):
            return Multiplier(raw)
    elif annotation is IdRange:
        if kind == "range":
            return raw
    elif annotation is FilePath:
        if kind == "string":
            path = value.word if os.path.isabs(value.word) else os.path.normpath(os.path.join(base_dir, value.word))
            return FilePath(path)
    elif annotation is str:
        if kind in ("string", "reference"):
            return raw
    elif annotation is ElementRef:
        if kind == "reference":
            return ElementRef(value.word)
    expected = _EXPECTS.get(annotation, type_name(annotation))
    raise _mismatch(value, expected, what)


def _mismatch(value: ast.Value, expected: str, what: str) -> SchedError:
    shown = value.text or describe(value.value)
    return SchedError(f"{what} expects {expected}, got {shown} ({_KIND_TEXT.get(value.kind, value.kind)})", value.location)


def validate(field: attrs.Attribute, value: Any) -> str | None:
    """Run a field's validator alone; returns its complaint, if any."""
    if field.validator is None:
        return None
    try:
        field.validator(None, field, value)
    except (ValueError, TypeError) as err:
        return str(err)
    return None
