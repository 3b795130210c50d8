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

from roundhouse.errors import Location, SchedError, did_you_mean
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
        if _says_none(value) and len(options) < len(typing.get_args(annotation)):
            # (Python's word for an optional argument left unset, which no .sched literal gives.)
            raise SchedError(
                f"{what} cannot be given {value.value}: a .sched file has no None; leave the argument out for its default",
                value.location,
            )
        # A list that one option alone takes is judged by it: its complaint names the bad item.
        takes_lists = [err for o, err in zip(options, complaints) if is_sequence(o)]
        if len(options) == 1 or (value.kind == "list" and len(takes_lists) == 1):
            raise (complaints[0] if len(options) == 1 else takes_lists[0])
        expected = " or ".join(type_name(o) if is_sequence(o) and tuple_positions(o) is None else _expected(o) for o in options)
        raise _mismatch(value, expected, what)
    if origin is typing.Literal:
        return _choice(value, typing.get_args(annotation), base_dir, what)
    if is_sequence(annotation):
        return _sequence(value, annotation, base_dir, what)
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
    raise _mismatch(value, _expected(annotation), what)


def is_sequence(annotation: Any) -> bool:
    """Whether values of this type are written as a list: `list[X]`, `tuple[X, ...]`,
    `tuple[X, Y]`, or bare `list` or `tuple`."""
    return annotation in (list, tuple) or typing.get_origin(annotation) in (list, tuple)


def tuple_positions(annotation: Any) -> tuple[Any, ...] | None:
    """The type of each position of a fixed-length tuple (`tuple[int, float]`); None for a
    sequence of any length."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is tuple and args and args[-1] is not Ellipsis:
        return args
    return None


def _sequence(value: ast.Value, annotation: Any, base_dir: str, what: str) -> list | tuple:
    """A list literal as a list, or as a tuple for a tuple type: of the one item type, or of a
    fixed length with a type for each position. A wrong item or length is said at the item."""
    positions = tuple_positions(annotation)
    if value.kind != "list":
        raise _mismatch(value, f"{_expected(annotation)} in [brackets]", what)
    if positions is None:
        (item_type, *_) = typing.get_args(annotation) or (Any,)
        items = [convert(v, item_type, base_dir, what) for v in value.items]
    else:
        if len(value.items) != len(positions):
            # (an item too many is pointed at; one too few, at the list)
            where = value.items[len(positions)].location if len(value.items) > len(positions) else value.location
            raise SchedError(f"{what} expects {_expected(annotation)}, got {_items(len(value.items))}", where)
        items = [convert(v, t, base_dir, what) for v, t in zip(value.items, positions)]
    is_tuple = annotation is tuple or typing.get_origin(annotation) is tuple
    return tuple(items) if is_tuple else items


def _choice(value: ast.Value, choices: tuple[Any, ...], base_dir: str, what: str) -> Any:
    """A literal that is one of a `Literal`'s choices (a word or string, a whole number, a
    boolean), as that choice; refused otherwise, naming them, as a `one_of` validator does."""
    for choice in choices:
        if choice is None:
            continue
        try:
            given = convert(value, type(choice), base_dir, what)
        except SchedError:
            continue
        if given == choice and type(given) is type(choice):
            return choice
    words = [c for c in choices if isinstance(c, str)]
    hint = did_you_mean(value.word, words) if value.kind in ("string", "reference") else None
    shown = value.text or describe(value.value)
    raise SchedError(f"{what} must be one of {_listed(choices)}, got {shown}", value.location, hint=hint)


def _listed(choices: tuple[Any, ...]) -> str:
    return ", ".join(describe(c) if isinstance(c, bool) else repr(c) for c in choices if c is not None)


def _expected(annotation: Any) -> str:
    """What a value of this type is, in a message: "a whole number", "one of 'a', 'b'",
    "a list of 2 items (whole number, number)"."""
    if annotation in _EXPECTS:
        return _EXPECTS[annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return f"one of {_listed(typing.get_args(annotation))}"
    if is_sequence(annotation):
        positions = tuple_positions(annotation)
        if positions is not None:
            return f"a list of {_items(len(positions))} ({', '.join(_named(t) for t in positions)})"
        (item_type, *_) = typing.get_args(annotation) or (Any,)
        return f"a list of {_named(item_type)}"
    return type_name(annotation)


def _items(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"


def _named(annotation: Any) -> str:
    """A type as a list's item is named ("integer", "'a' or 'b'")."""
    if typing.get_origin(annotation) is typing.Literal:
        return " or ".join(_listed((c,)) for c in typing.get_args(annotation) if c is not None)
    if is_sequence(annotation):
        return _expected(annotation)
    return "anything" if annotation is Any else type_name(annotation)


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


def _says_none(value: ast.Value) -> bool:
    return value.kind == "reference" and isinstance(value.value, str) and value.value.lower() in ("none", "null")


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


# What `_unwritable` accepts, for the message refusing the rest.
FIELD_TYPES = (
    "int, float, bool, str, Duration, Rate, Multiplier, IdRange, FilePath or ElementRef (roundhouse.runtime.values), "
    "a Literal of words, whole numbers or booleans, a list[...] or tuple[...] of those, or a union of them (with None)"
)


def check_default(cls: type, field: attrs.Attribute) -> None:
    """A field a `.sched` file sets must have a type its values can have, and a default it could
    give: TypeError at the class otherwise (every value would be refused; a default would be
    shown and used without a word). Computed defaults and None are not checked; nor is the type
    of a field no file sets (`init=False`)."""
    part = _unwritable(field.type)
    if field.type is None and field.init:
        raise TypeError(
            f"{cls.__name__}: argument '{field.name}' has no type: annotate it ({field.name}: int = attrs.field(...)); "
            f"an argument's type may be {FIELD_TYPES}"
        )
    if part is not None and field.init:
        raise TypeError(
            f"{cls.__name__}: argument '{field.name}' is of type {_type_text(field.type)}, but a .sched file cannot "
            f"give a value of type {_type_text(part)}: an argument's type may be {FIELD_TYPES}"
        )
    default = field.default
    if default is attrs.NOTHING or default is None or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return
    if field.type is None or part is not None or field.type is Any or field.type is object:
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


def _unwritable(annotation: Any) -> Any:
    """The part of a type whose values no `.sched` file can write (`convert` does not know it),
    or None: all of it can be written."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple):
        parts = (_unwritable(a) for a in args if a is not type(None) and a is not Ellipsis)
        return next((p for p in parts if p is not None), None)
    if origin is typing.Literal:
        # (bool is an int; None is left to the default, as in an optional type)
        return None if all(c is None or isinstance(c, str | int) for c in args) else annotation
    known = annotation in _EXPECTS or annotation in (list, tuple) or annotation is Any or annotation is object
    return None if known else annotation


def _type_text(annotation: Any) -> str:
    """A type as Python code writes it (`dict[str, int]`, `Literal['a', 1.5]`, `Mine`)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None) or annotation is Ellipsis:
        return "None" if annotation is type(None) else "..."
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(c) for c in args)}]"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(a) for a in args)
    if origin is not None and args:
        return f"{_type_text(origin)}[{', '.join(_type_text(a) for a in args)}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return repr(annotation).replace("typing.", "")


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
