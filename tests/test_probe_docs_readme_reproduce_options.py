"""README's table of commands names every option `roundhouse reproduce` takes, and only those."""

from __future__ import annotations

import re
from pathlib import Path

from roundhouse.tools.cli import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"


def _reproduce_options() -> set[str]:
    parser = build_parser("reproduce")
    sub = next(a for a in parser._actions if a.dest == "command")
    reproduce = sub.choices["reproduce"]
    return {o for a in reproduce._actions for o in a.option_strings if o not in ("-h", "--help")}


def _readme_row() -> str:
    rows = [line for line in README.read_text().splitlines() if line.startswith("| `roundhouse reproduce")]
    assert len(rows) == 1, rows
    return rows[0]


def test_readme_row_names_every_reproduce_option():
    row = _readme_row()
    missing = sorted(o for o in _reproduce_options() if not re.search(re.escape(o) + r"\b", row))
    assert not missing, f"README's reproduce row leaves out {missing}"


def test_readme_row_names_no_option_reproduce_lacks():
    named = set(re.findall(r"(--[a-z][a-z-]*)", _readme_row()))
    assert named <= _reproduce_options(), sorted(named - _reproduce_options())
