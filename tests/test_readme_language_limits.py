"""The README's language section states the loader's limits, the characters of a name and the
numbers' exponents as the loader and the grammar have them."""

import re
from pathlib import Path

from roundhouse.runtime.dsl.loader import MAX_DEPTH, MAX_ELEMENTS, MAX_SOURCE_BYTES
from roundhouse.runtime.dsl.parser import parse_value
from roundhouse.runtime.values import Duration

README = Path(__file__).resolve().parent.parent / "README.md"
GRAMMAR = Path(__file__).resolve().parent.parent / "runtime" / "dsl" / "grammar.lark"


def language_section() -> str:
    text = README.read_text()
    start = text.index("## The language")
    end = text.index("\n## ", start + 1)
    return " ".join(text[start:end].split())  # (a phrase may be wrapped across lines)


def test_the_limits_are_the_loaders():
    section = language_section()
    assert MAX_SOURCE_BYTES == 16 * 2**20 and "a file is at most 16 MB" in section
    assert f"at most {MAX_DEPTH} deep" in section
    assert f"at most {MAX_ELEMENTS:,} elements" in section


def test_names_are_the_grammars():
    assert re.search(r"^NAME: /\[A-Za-z_\]\[A-Za-z0-9_\]\*/$", GRAMMAR.read_text(), re.M)
    assert "Names are ASCII: letters A-Z and a-z, digits 0-9 and `_`, not starting with a digit" in language_section()


def test_numbers_with_exponents_are_as_written():
    assert "may have an exponent (`1e3`, `1.5e1s`)" in language_section()
    assert parse_value("1e3").value == 1000
    assert parse_value("1.5e1s").value == Duration(15)
