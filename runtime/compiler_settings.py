"""The graph's settings, as the compiler reads them: those its files write and those the command
line gives (`--set setting=value`, `--vary`), converted and validated, each problem reported
where it was given; and the `--set element.field=value` overrides, split from them by element
(`split_overrides`), which the compiler applies as it builds each element.

_Compiler binds these functions as its methods (runtime/compiler.py).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from roundhouse.errors import Location, SchedError, did_you_mean
from roundhouse.runtime import registry
from roundhouse.runtime.arguments import NeedsInstance, convert, validate
from roundhouse.runtime.cluster import spec_file
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.dsl.parser import parse_value
from roundhouse.runtime.settings import BUILT_IN_ELASTIC, GraphSettings

if TYPE_CHECKING:
    from roundhouse.runtime.compiler import _Compiler


# Settings whose value is text: on the command line they may be written without quotes.
_TEXT_SETTINGS = frozenset(f.name for f in attrs.fields(GraphSettings) if f.type in (str, str | None))
_SETTINGS = frozenset(f.name for f in attrs.fields(GraphSettings))


def split_overrides(compiler: _Compiler) -> tuple[dict[str, list[tuple[str, ast.Value, str]]], dict[str, ast.Value]]:
    per_element: dict[str, list[tuple[str, ast.Value, str]]] = defaultdict(list)
    per_setting: dict[str, ast.Value] = {}
    for o in compiler.overrides:
        # (an element or argument left out, `pool.=3` or `.seed=3`, is no name to look up)
        if "=" not in o.text or not o.target or o.target.startswith(".") or o.target.endswith("."):
            compiler.errors.append(SchedError(f"{o.label}: write {o.flag} element.field=value or {o.flag} setting=value"))
            continue
        try:
            value = parse_value(o.value_text, where=f"{o.flag} {o.target}")
        except SchedError as err:
            # (an unknown setting's name is said to be one, not its value to be bad: the value of
            # `--set clustr=8x4:V100` would have been text)
            unknown = "." not in o.target and o.target not in _SETTINGS
            if (o.target not in _TEXT_SETTINGS and not unknown) or not o.value_text.strip():
                compiler.errors.append(SchedError(f"{o.label}: bad value: {err.message}", hint=err.hint))
                continue
            # (text the language cannot read as a value, for a setting that is text: a list of
            # GPU types, a cluster spec with commas; taken as written, as if quoted)
            where = Location(f"{o.flag} {o.target}", 1, 1, len(o.value_text))
            value = ast.Value("string", o.value_text.strip(), where, o.value_text)
        if "." in o.target:
            element, field = o.target.rsplit(".", 1)
            if element not in compiler.flat.decls:
                inner = [name for name in compiler.flat.decls if name.startswith(f"{element}/")]
                hint: str | None
                if inner:  # a compound's instance: its elements are set by their own names
                    message = f"{o.label}: '{element}' is a compound; its elements are {', '.join(inner)}"
                    hint = _compound_hint(compiler, o.flag, element, field, inner)
                else:
                    message, hint = f"{o.label}: the graph has no element '{element}'", did_you_mean(element, compiler.flat.decls)
                compiler.errors.append(SchedError(message, hint=hint))
                continue
            per_element[element].append((field, value, o.label))
        else:
            per_setting[o.target] = value
            compiler._setting_flags[o.target] = f"{o.flag} {o.target}"
            compiler._setting_labels[o.target] = o.label
    return per_element, per_setting


def _compound_hint(compiler: _Compiler, flag: str, instance: str, field: str, inner: list[str]) -> str:
    """What an override naming a compound instance's argument suggests: the first of its
    elements that has an argument of that name; else (the name is the compound's `$parameter`,
    say, which no element inside takes by that name) where the instance's own arguments go."""
    having = [name for name in inner if _has_argument(compiler.flat.decls[name].class_name, field)]
    if having:
        return f"set one of them ({flag} {having[0]}.{field}=...) or the argument where '{instance}' is declared"
    elementclass = compiler.flat.instances.get(instance, ("", None))[0] or "its elementclass"
    return (
        f"none of them has an argument '{field}': a parameter of {elementclass} is given where '{instance}' "
        f"is declared ({instance} :: {elementclass}({field}=...)); {flag} sets an argument of one of its "
        f"elements by its own name ({flag} {inner[0]}.ARGUMENT=...)"
    )


def _has_argument(class_name: str, field: str) -> bool:
    cls = registry.get(class_name)
    return cls is not None and any(f.name == field and f.init for f in attrs.fields(cls))


def _not_a_setting_hint(compiler: _Compiler, name: str, fields) -> str:
    """What an unknown setting's error suggests: an element's argument when the name is an
    element's (given to --set or --vary without its argument), else a setting of a like name."""
    if name in compiler.flat.decls:
        given = compiler._setting_flags.get(name)
        if given is None:  # (written in the file)
            return f"'{name}' is an element: give its arguments where it is declared, {name} :: CLASS(ARGUMENT=VALUE)"
        return f"'{name}' is an element: set one of its arguments, as {given.split(' ')[0]} {name}.ARGUMENT=VALUE"
    return did_you_mean(name, fields) or f"settings are: {', '.join(fields)}"


def graph_settings(compiler: _Compiler, overrides: dict[str, ast.Value]) -> GraphSettings:
    fields = {f.name: f for f in attrs.fields(GraphSettings)}
    values: dict[str, Any] = {}
    given: dict[str, tuple[ast.Value, Location | None]] = {
        name: (s.value, s.location) for name, s in compiler.flat.settings.items()
    }
    for name, value in overrides.items():
        given[name] = (value, None)
    for name, (value, location) in given.items():
        field = fields.get(name)
        if field is None:
            where = compiler._setting_flags[name] if location is None else None
            compiler.errors.append(
                SchedError(
                    f"unknown setting '{name}'" + (f" ({where})" if where else ""),
                    location,
                    hint=_not_a_setting_hint(compiler, name, fields),
                )
            )
            continue
        # A path in a file is relative to the file that writes it (an imported one included).
        base_dir = str(Path(location.path).parent) if location is not None else os.getcwd()
        try:
            converted = convert(value, field.type, base_dir, f"setting '{name}'")
        except SchedError as err:
            err = _with_list_hint(err, name, value, compiler._setting_flags.get(name) if location is None else None)
            err = _with_built_in_hint(err, name, value, compiler._setting_flags.get(name) if location is None else None)
            compiler.errors.append(
                err if location is not None else SchedError(f"{compiler._setting_flags[name]}: {err.message}", hint=err.hint)
            )
            continue
        if name == "cluster" and location is not None:
            converted = cluster_path(compiler, converted, base_dir)
        try:
            problem = validate(field, converted)
        except NeedsInstance:  # (reads another setting: checked with them all below)
            problem = None
        if problem:
            # (one given on the command line is said there, as an element's argument is: the
            # value's place in the option's text is no file)
            if location is None:
                compiler.errors.append(SchedError(f"{compiler._setting_labels[name]}: setting '{name}' {problem}"))
            else:
                compiler.errors.append(SchedError(f"setting '{name}' {problem}", value.location))
            continue
        values[name] = converted
    try:
        return GraphSettings(**values)
    except (ValueError, TypeError) as err:
        # Name the options that gave settings the complaint names, else point at the last
        # written of them.
        named = [(n, where) for n, (_, where) in given.items() if re.search(rf"\b{n}\b", str(err))]
        flags = [compiler._setting_flags[n] for n, where in named if where is None]
        if flags:
            compiler.errors.append(SchedError(f"{', '.join(flags)}: settings do not fit together: {err}"))
        else:
            compiler.errors.append(SchedError(f"settings do not fit together: {err}", named[-1][1] if named else None))
        return GraphSettings()


# Settings whose one string may hold several items, separated by commas.
_COMMA_SETTINGS = frozenset({"cluster", "gpu_types"})


def _with_list_hint(err: SchedError, name: str, value: ast.Value, flag: str | None) -> SchedError:
    """A list given to a setting whose string holds several items is told how to write them, in
    the file, or with the option `flag` (`--set gpu_types`) that gave it."""
    # (not for --vary, whose commas part the values of a sweep)
    if name not in _COMMA_SETTINGS or value.kind != "list" or err.hint is not None or (flag and not flag.startswith("--set")):
        return err
    items = [str(v.value) for v in value.items if v.kind in ("string", "reference")]
    if not items or len(items) != len(value.items):
        return err
    written = f"{flag}={','.join(items)}" if flag is not None else f'{name} = "{",".join(items)}";'
    hint = f"{name} is one string, its items separated by commas: {written}"
    return SchedError(err.message, err.location, hint=hint)


def _with_built_in_hint(err: SchedError, name: str, value: ast.Value, flag: str | None) -> SchedError:
    """A built-in elastic profile's name written bare (`elastic_profile = ones;`, `--set
    elastic_profile=ones`) is told that it is written as a string, as a folder's path is."""
    if name != "elastic_profile" or value.kind != "reference" or str(value.value).lower() not in BUILT_IN_ELASTIC:
        return err
    given = str(value.value)
    written = f"""{flag.split(" ")[0]} 'elastic_profile="{given}"'""" if flag is not None else f'elastic_profile = "{given}";'
    return SchedError(err.message, err.location, hint=f"the built-in profile {given!r} is named in quotes too: {written}")


def cluster_path(compiler: _Compiler, spec: str, base_dir: str) -> str:
    """The `cluster` setting is a shorthand or a spec file; the run finds a file relative to
    the graph's folder, so one named by an imported file in another folder is given from there."""
    graph_dir = str(Path(compiler.flat.path).parent)
    written = spec_file(spec, base_dir)
    if base_dir == graph_dir or os.path.isabs(spec) or written is None:
        return spec
    return os.path.relpath(written, graph_dir)
