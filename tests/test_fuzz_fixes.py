"""Defects the fuzzing of .sched files found: each input once gave a Python traceback, an error
without its line, or a wait of minutes; each now gives an error at the line that caused it."""

import os
import time

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime import registry
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.dsl.parser import parse
from tests.conftest import fails


def _refused_at_line_2(tmp_path, statement: str) -> SchedError:
    graph = tmp_path / "g.sched"
    graph.write_text(f"round = 5min;\n{statement}\n")
    with registry.scope(), pytest.raises(SchedError) as caught:
        compile_file(graph)
    err = caught.value
    assert err.location is not None and (err.location.path, err.location.line) == (str(graph), 2), str(err)
    return err


def test_a_require_of_links_that_loop_is_an_error_at_its_line(tmp_path, capsys):
    (tmp_path / "loop.py").symlink_to("loop.py")
    err = _refused_at_line_2(tmp_path, 'require "loop.py";')
    assert err.message == "cannot require 'loop.py': too many levels of symbolic links"
    assert "g.sched:2:9: error: cannot require 'loop.py'" in fails(capsys, "check", tmp_path / "g.sched")


def test_an_import_of_links_that_loop_is_an_error_at_its_line(tmp_path, capsys):
    (tmp_path / "loop.sched").symlink_to("loop.sched")
    err = _refused_at_line_2(tmp_path, 'import "loop.sched";')
    assert err.message == "cannot import 'loop.sched': too many levels of symbolic links"
    assert "g.sched:2:8: error: cannot import 'loop.sched'" in fails(capsys, "check", tmp_path / "g.sched")


@pytest.mark.parametrize("written", ["x" * 300 + ".py", "/" + "a/" * 3000 + "x.py"], ids=["a part", "the whole path"])
def test_a_require_of_a_name_too_long_is_an_error_at_its_line(tmp_path, capsys, written):
    """A file name longer than the system takes (one part of it, or the whole path)."""
    err = _refused_at_line_2(tmp_path, f'require "{written}";')
    assert err.message == f"cannot require '{written}': file name too long"
    assert "g.sched:2:9: error: cannot require" in fails(capsys, "check", tmp_path / "g.sched")


def test_a_require_of_what_is_no_regular_file_says_so(tmp_path):
    """A named pipe is there: "no such file" would send its writer looking for a typo."""
    os.mkfifo(tmp_path / "pipe.py")
    err = _refused_at_line_2(tmp_path, 'require "pipe.py";')
    assert err.message == f"cannot require 'pipe.py': {tmp_path / 'pipe.py'} is not a regular file"


def test_an_import_of_a_named_pipe_is_refused_rather_than_waited_on(tmp_path):
    """Opening a named pipe for reading waits for a writer: `check` would hang without a word."""
    os.mkfifo(tmp_path / "pipe.sched")
    err = _refused_at_line_2(tmp_path, 'import "pipe.sched";')
    assert (
        err.message
        == f"cannot import 'pipe.sched': {tmp_path / 'pipe.sched'} is a named pipe, not a file: its text would be waited for"
    )


def test_a_required_folder_is_said_to_be_a_folder_whatever_its_name(tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    err = _refused_at_line_2(tmp_path, 'require "mine";')
    assert err.message == f"cannot require 'mine': {tmp_path / 'mine'} is a folder, not a Python file"
    said = fails(capsys, "elements", "--require", tmp_path / "mine")
    assert f"--require {tmp_path / 'mine'}: {tmp_path / 'mine'} is a folder, not a Python file" in said, said


def test_a_long_name_earlier_in_the_file_leaves_a_syntax_error_quick():
    """The name before an unexpected character was looked for from each character of the file:
    a 100,000-character name on an earlier line took about a minute before the error."""
    text = "x" * 100_000 + " :: Fifo;\ny :: Las#;\n"
    started = time.perf_counter()
    with pytest.raises(SchedError) as caught:
        parse(text, "long.sched")
    assert time.perf_counter() - started < 5  # (about 0.01 s now)
    assert caught.value.location is not None and (caught.value.location.line, caught.value.location.column) == (2, 9)
    assert caught.value.message == "unexpected character '#'"


def test_a_name_shown_as_messages_show_it_is_still_recognised_after_digits():
    """The quick search finds the same name as before: digits before a name are no part of it."""
    with pytest.raises(SchedError) as caught:
        parse("x :: Fifo;\n12JobPool@2 -> x;\nLas@3 -> x;\n", "g.sched")
    assert caught.value.location is not None and caught.value.location.line == 2
    with pytest.raises(SchedError) as caught:
        parse("x :: Fifo;\nLas@3 -> x;\n", "g.sched")
    assert "'Las@3' is how messages name an anonymous element" in caught.value.message
