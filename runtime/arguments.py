"""Argument values: a literal of a `.sched` file converted to the type its element field (or
graph setting) declares, and checked by the field's validator; a literal that does not fit is
an error at its place in the file."""

from __future__ import annotations

import decimal
import numbers
import os
import types
import typing
from typing import Any

import attrs

from roundhouse.errors import Location, SchedError
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.element import type_name
from roundhouse.runtime.values import (
    INT64_MAX,
    Duration,
    ElementRef,
    FilePath,
    IdRange,
    Multiplier,
    Rate,
    describe,
    short_text,
)

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
    "param": "a $parameter",
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
        complaints = []
        for option in options:
            try:
                return convert(value, option, base_dir, what)
            except SchedError as err:
                complaints.append(err)
        # A list that one option alone takes is judged by it: its complaint names the bad item.
        takes_lists = [err for o, err in zip(options, complaints) if typing.get_origin(o) in (list, tuple)]
        if len(options) == 1 or (value.kind == "list" and len(takes_lists) == 1):
            raise (complaints[0] if len(options) == 1 else takes_lists[0])
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
        if kind == "number" and (whole := _whole_with_exponent(value, what)) is not None:
            return whole
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
        if kind == "string" and value.word.strip():  # (an empty path would name the graph's own folder)
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


def _whole_with_exponent(value: ast.Value, what: str) -> int | None:
    """A number written with an exponent that is whole (`1e3`, `2.5e1`) as that int, read from
    its text exactly; None for any other. One past 64 bits is refused as a written one is."""
    text = value.text or ""
    if "e" not in text.lower():
        return None
    exact = decimal.Decimal(text)
    if exact != exact.to_integral_value():
        return None
    if abs(exact) > INT64_MAX:  # (the parser has refused what is not finite: this int is small)
        raise SchedError(
            f"{what} expects a whole number, but {short_text(text)} is too large (whole numbers must lie within ±{INT64_MAX})",
            value.location,
        )
    return int(exact)


def _mismatch(value: ast.Value, expected: str, what: str) -> SchedError:
    shown = value.text or describe(value.value)
    return SchedError(f"{what} expects {expected}, got {shown} ({_KIND_TEXT.get(value.kind, value.kind)})", value.location)


class NeedsInstance(Exception):
    """A validator read another field (`self.lo`) of an element not built yet."""


class _Others:
    """What a validator run on one field alone sees as `self`: the other fields' values known
    so far (`values`); reading any other attribute raises NeedsInstance."""

    def __init__(self, values: dict[str, Any]):
        self._values = values

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise NeedsInstance(name)


def validate(field: attrs.Attribute, value: Any, others: dict[str, Any] | None = None) -> str | None:
    """Run a field's converter, then its validator, alone, as building the element runs them;
    returns the complaint of either, if any. `self` in them sees only `others` (the other
    fields' values known so far): one that reads another field raises NeedsInstance, for the
    caller to run it again once the field is known, or leave it to building the element."""
    if field.validator is None and field.converter is None:
        return None
    self = _Others(others or {})
    if field.converter is not None:
        try:
            value = converted(field, value, self)
        except NeedsInstance:
            raise
        except Exception as err:  # (the user's converter: all it raises is said at the argument)
            return complaint(err, field.name, "converter")
    if field.validator is None:
        return None
    try:
        field.validator(self, field, value)
    except NeedsInstance:
        raise
    except Exception as err:  # (the user's validator: an assert, a bug, all said at the argument)
        return complaint(err, field.name)
    return None


def as_built(fields, values: dict[str, Any]) -> dict[str, Any]:
    """The fields' values as building the element leaves them (what a validator reading another
    field sees): each converter run, in field order, as attrs runs them. A value its converter
    refuses is kept as given: that complaint is said at its own argument."""
    built = dict(values)
    for field in fields:
        if field.converter is not None and field.name in built:
            try:
                built[field.name] = converted(field, built[field.name], _Others(built))
            except Exception:  # (NeedsInstance among them: a converter reading what is not known)
                pass
    return built


def converted(field: attrs.Attribute, value: Any, self: Any = None) -> Any:
    """The value as the field's converter makes it (none: the value; a plain callable, or an
    `attrs.Converter` that may take the instance, `self`, and the field)."""
    converter = field.converter
    if converter is None:
        return value
    if isinstance(converter, attrs.Converter):
        return converter(value, self, field)  # type: ignore[operator]
    return converter(value)


def complaint(err: BaseException, name: str | None = None, by: str = "validator") -> str:
    """What a validator's (or converter's) exception says: a ValueError's or TypeError's sentence
    (attrs' own validators give a tuple of it and their details: the sentence alone), anything
    else as its type and message. The field's name in quotes at its start is dropped: the
    message names it."""
    first = sentence(err)
    if name is not None and first.startswith(f"'{name}' "):
        first = first[len(name) + 3 :]
    if isinstance(err, (ValueError, TypeError)) and first:
        return first if by == "validator" else f"is refused by its converter: {first}"
    return f"is refused by its {by} ({type(err).__name__}{': ' + first if first else ''})"


def sentence(err: BaseException) -> str:
    """An exception's message: the first of its arguments when that is text (attrs' validators
    add the field and the options after it), else the whole."""
    return err.args[0] if err.args and isinstance(err.args[0], str) else str(err)


def raised(err: BaseException) -> str:
    """What building an element raised: a ValueError's or TypeError's sentence (the complaint of
    a validator that reads other fields), anything else with its type."""
    if isinstance(err, (ValueError, TypeError)):
        return sentence(err)
    return f"{type(err).__name__}: {sentence(err)}" if sentence(err) else type(err).__name__


def check_default(cls: type, field: attrs.Attribute) -> None:
    """A field's default must be a value a `.sched` file could give it: TypeError at the class
    otherwise (it would be shown as a default and used without a word). Types a file cannot
    write (the user's own), computed defaults and None are not checked."""
    default = field.default
    if default is attrs.NOTHING or default is None or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return
    if not _writable(field.type) or field.type is Any or field.type is object:
        return
    literal = _literal(default)
    what = f"the default of argument '{field.name}' of {cls.__name__}"
    if literal is None:
        expected = _EXPECTS.get(field.type, type_name(field.type)) if isinstance(field.type, type) else type_name(field.type)
        raise TypeError(f"{what} is {default!r}, which is not {expected}")
    try:
        convert(literal, field.type, os.getcwd(), what)
    except SchedError as err:
        raise TypeError(err.message) from None


def _writable(annotation: Any) -> bool:
    """Whether a `.sched` file can write values of this type (`convert` knows it)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return all(_writable(a) for a in typing.get_args(annotation) if a is not type(None))
    if origin in (list, tuple):
        return all(_writable(a) for a in typing.get_args(annotation)[:1])
    return annotation in _EXPECTS or annotation is Any or annotation is object


_HERE = Location("<default>", 1, 1)


def _literal(value: Any) -> ast.Value | None:
    """A Python value as the literal a `.sched` file would write for it (None: none would)."""
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (bool, "bool"),
        (Duration, "duration"),
        (Rate, "rate"),
        (Multiplier, "multiplier"),
        (IdRange, "range"),
        (ElementRef, "reference"),
        (str, "string"),
    )
    if isinstance(value, (list, tuple)):
        items = [_literal(v) for v in value]
        return None if any(i is None for i in items) else ast.Value("list", tuple(items), _HERE)
    if isinstance(value, numbers.Real) and not isinstance(value, bool | Duration | Rate | Multiplier):
        # (numpy's numbers too, as the plain number a file writes)
        return ast.Value("number", int(value) if isinstance(value, numbers.Integral) else float(value), _HERE)
    for kind_type, kind in kinds:
        if isinstance(value, kind_type):
            raw = value.name if isinstance(value, ElementRef) else value
            return ast.Value(kind, raw, _HERE)
    return None
