"""`roundhouse elements --require` given no file name: said so, not that the current folder
(which an empty path names) is a folder; given a file Python cannot read, its place said once,
with the column."""

import pytest

from tests.conftest import refused


@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_require_asks_for_a_file(capsys, given):
    err = refused(capsys, ["elements", "--require", given], "--require: give a Python file of your own elements")
    assert "is a folder" not in err and "Traceback" not in err


def test_a_syntax_error_is_said_at_its_line_and_column_once(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import math\ndef f(:\n    pass\n")
    err = refused(capsys, ["elements", "--require", str(bad)], f"{bad}:2:7: SyntaxError: invalid syntax\n")
    assert err.count("line 2") == 0 and "Traceback" not in err


@pytest.mark.parametrize(("name", "graph_hint"), [("mine.sched", True), ("day1.snap", False), ("mine.txt", False)])
def test_a_required_file_not_python_is_said_so_with_import_named_for_a_graph_only(capsys, tmp_path, name, graph_hint):
    given = tmp_path / name
    given.write_text("x")
    err = refused(capsys, ["elements", "--require", str(given)], "a required file is Python ending in .py")
    assert ("brought in with import" in err) == graph_hint, err
