"""`roundhouse elements [NAME]`: the element reference, generated from the code.

Without a name: every element class by category. With one: its synopsis, ports, arguments
(with types and defaults), counters, see-also and source paper. `--markdown` prints the whole
reference as Markdown (docs/elements.md is made with it). `--require FILE` loads a Python file of
one's own elements first, as a graph's `require` does, so that they are listed and shown too.
"""

from __future__ import annotations

from pathlib import Path

import attrs
from rich.console import Console
from rich.table import Table
from rich.text import Text

from roundhouse.errors import UsageError, did_you_mean
from roundhouse.runtime import registry
from roundhouse.runtime.dsl.loader import elements_of_file, load_element_file, undeclared_element
from roundhouse.runtime.element import CATEGORIES, type_name
from roundhouse.runtime.values import describe
from roundhouse.tools.outputs.stdout_result import result_console, text_of, write_result


def register(sub) -> None:
    p = sub.add_parser("elements", help="list element classes, or show one's reference")
    p.add_argument("name", nargs="?", help="an element class, e.g. Las")
    p.add_argument("--markdown", action="store_true", help="print the reference as Markdown")
    p.add_argument(
        "--require",
        metavar="FILE",
        action="append",
        default=[],
        help="a Python file of your own elements to load first (repeatable)",
    )
    p.set_defaults(handler=elements)


def elements(args) -> int:
    for path in args.require:
        if not path.strip():  # (Path("") is the current folder, which would be said to be one)
            raise UsageError("--require: give a Python file of your own elements, e.g. --require my_elements.py")
        problem = load_element_file(Path(path))
        if problem:
            raise UsageError(f"--require {path}: {problem}")
        declared, undeclared = elements_of_file(Path(path))
        if not declared:  # (it would list nothing of its own, without a word)
            why = "".join(f": {undeclared_element(name, path)}" for name in undeclared[:1])
            raise UsageError(f"--require {path}: declares no element{why}")
    console = result_console()  # (the reference is the command's one result: written whole, or an error)
    if args.markdown:
        classes = [_get(args.name)] if args.name is not None else registry.classes()
        write_result(reference_markdown(classes), "the element reference")
        return 0
    if args.name is not None:
        _show(console, _get(args.name))
        write_result(text_of(console), f"the reference of {args.name}")
        return 0
    table = Table(title="Roundhouse elements", show_lines=False)
    table.add_column("category")
    table.add_column("element")
    table.add_column("synopsis")
    for category in CATEGORIES:
        for cls in (c for c in registry.classes() if c.category == category):
            table.add_row(category, cls.__name__, Text(cls.doc.synopsis))
    console.print(table)
    console.print("roundhouse elements NAME shows one element's reference")
    write_result(text_of(console), "the list of elements")
    return 0


def _get(name: str):
    cls = registry.get(name)
    if cls is None and name.lower() in CATEGORIES:  # (a family's name: its elements are what was meant)
        named = ", ".join(c.__name__ for c in registry.classes() if c.category == name.lower())
        raise UsageError(f"'{name}' is a category of elements, not an element class; its elements: {named}")
    if cls is None:
        hint = did_you_mean(name, registry.names())
        raise UsageError(f"no element class '{name}'" + (f"; {hint}" if hint else "; 'roundhouse elements' lists them"))
    return cls


def _default(field) -> str:
    """An argument's default: a value as a `.sched` file writes it, or words where there is no
    such value (an optional argument left out is "not given"; `none` is no value of the language)."""
    if field.default is attrs.NOTHING:
        return "required"
    if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        # A fresh value each instance (a list): shown as that value, unless it depends on the rest.
        return "(computed)" if field.default.takes_self else describe(field.default.factory())
    if field.default is None:
        return "not given"
    return describe(field.default)


def _default_markdown(field) -> str:
    """The default as a Markdown cell: values in code type, words plain."""
    words = field.default is attrs.NOTHING or field.default is None or _default(field) == "(computed)"
    return _default(field) if words else f"`{_default(field)}`"


def _ports(cls):
    for direction, ports in (("in", cls.inputs), ("out", cls.outputs)):
        for i, p in enumerate(ports):
            notes = []
            if direction == "in" and not p.required:
                notes.append("optional")
            if p.multi:
                notes.append("several connections")
            yield direction, i, p, ", ".join(notes)


def _show(console: Console, cls) -> None:
    doc = cls.doc
    # (Doc text is shown as written: brackets in it are maths or code, not Rich markup.)
    console.print(Text.assemble((cls.__name__, "bold"), f" ({cls.category}) — {doc.synopsis}"))
    if doc.description:
        console.print(doc.description, highlight=False, markup=False)
    if cls.inputs or cls.outputs:
        t = Table(title="ports", title_justify="left")
        for col in ("direction", "#", "port", "type", "notes", "what"):
            t.add_column(col)
        for direction, i, p, notes in _ports(cls):
            t.add_row(direction, str(i), p.name, p.type.__name__, notes, Text(doc.port(direction, p.name)))
        console.print(t)
    fields = attrs.fields(cls)
    if fields:
        t = Table(title="arguments", title_justify="left")
        for col in ("argument", "type", "default", "what"):
            t.add_column(col)
        for f in fields:
            t.add_row(f.name, Text(type_name(f.type)), Text(_default(f)), Text(doc.arguments.get(f.name, "")))
        console.print(t)
    if doc.counters:
        t = Table(title="counters", title_justify="left")
        t.add_column("counter")
        t.add_column("what")
        for k, v in doc.counters.items():
            t.add_row(k, Text(v))
        console.print(t)
    if doc.cost:
        console.print("cost per round: " + doc.cost, highlight=False, markup=False)
    if doc.see_also:
        console.print("see also: " + ", ".join(doc.see_also), markup=False)
    console.print("paper: " + doc.paper, highlight=False, markup=False)


def reference_markdown(classes) -> str:
    out = ["# Element reference", "", "Generated by `roundhouse elements --markdown` from the elements' code and docstrings.", ""]
    for category in CATEGORIES:
        members = [c for c in classes if c.category == category]
        if not members:
            continue
        out += [f"## {category}", ""]
        for cls in members:
            doc = cls.doc
            out += [f"### {cls.__name__}", "", doc.synopsis, ""]
            if doc.description:
                out += [doc.description, ""]
            if cls.inputs or cls.outputs:
                out += ["| port | # | direction | type | what |", "|---|---|---|---|---|"]
                for direction, i, p, notes in _ports(cls):
                    what = doc.port(direction, p.name) + (f" ({notes})" if notes else "")
                    out.append(f"| `{p.name}` | {i} | {direction} | {p.type.__name__} | {_cell(what)} |")
                out.append("")
            fields = attrs.fields(cls)
            if fields:
                out += ["| argument | type | default | what |", "|---|---|---|---|"]
                for f in fields:
                    cells = (type_name(f.type), _default_markdown(f), doc.arguments.get(f.name, ""))
                    out.append(f"| `{f.name}` | " + " | ".join(_cell(c) for c in cells) + " |")
                out.append("")
            if doc.counters:
                out += ["Counters: " + "; ".join(f"`{k}`: {v}" for k, v in doc.counters.items()), ""]
            if doc.cost:
                out += [f"Cost per round: {doc.cost}", ""]
            if doc.see_also:
                out += ["See also: " + ", ".join(doc.see_also), ""]
            out += [f"Paper: {doc.paper}", ""]
    return "\n".join(out)


def _cell(text: str) -> str:
    """Text for a cell of a Markdown table: a `|` would end the cell (in code type too), and a
    line break the row."""
    return " ".join(text.replace("|", "\\|").split("\n"))
