"""Mistakes a new user makes in a `.sched` file, and in a first element of their own, each told
at its place and in the language's words: a rate per several units, a duration in two units,
an empty import or require path, an element named after an element class, a string in single
quotes, ':' for '=' in arguments, arrows written otherwise, an element class without a tick."""

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.dsl.parser import parse, parse_value
from roundhouse.tools.cli import main

GRAPH = """round = 5min;
cluster = "4x4:V100";
src :: PoissonSource(rate=8/h, jobs=5, seed=1);
src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;
"""


def only_error(text: str) -> SchedError:
    with pytest.raises(SchedError) as got:
        parse(text, "g.sched")
    return got.value


def check(tmp_path, capsys, text: str, name: str = "g.sched") -> str:
    """`roundhouse check` of a graph; its messages (it must fail, with no traceback)."""
    (tmp_path / name).write_text(text)
    assert main(["check", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("written", "per_unit"),
    [("8/2h", "4/h"), ("8/1h", "8/h"), ("3/1.5min", "2/min"), ("-8/2h", "-4/h")],
)
def test_a_rate_per_several_units_is_said_so_not_taken_for_a_path(written, per_unit):
    # (read as a path, it was told to be quoted: "8/2h" is text, which no rate is)
    error = only_error(f"src :: PoissonSource(rate={written}, jobs=5);\n")
    assert error.message == f"rate '{written}' is not written per one unit: a rate is a count per unit of time, such as 8/h"
    assert (error.location.line, error.location.column, error.location.length) == (1, 27, len(written))
    assert error.hint == f"{written} is {per_unit}"
    assert "quotes" not in error.hint


def test_a_rate_per_several_units_of_no_unit_names_the_units():
    error = only_error("src :: PoissonSource(rate=8/2w, jobs=5);\n")
    assert error.message.startswith("rate '8/2w' is not written per one unit")
    assert error.hint == "time units are ms, s, min, h, d"


def test_a_rate_per_several_units_on_the_command_line():
    with pytest.raises(SchedError) as got:
        parse_value("8/2h")
    assert "not written per one unit" in got.value.message and got.value.hint == "8/2h is 4/h"


def test_a_path_is_still_told_to_be_quoted():
    error = only_error("src :: TraceSource(path=traces/x.csv);\n")
    assert error.hint == 'text such as a cluster spec or a file path is written in quotes: "traces/x.csv"'


@pytest.mark.parametrize(("written", "one_unit"), [("1h30min", "90min"), ("5min30s", "330s"), ("1d12h", "36h")])
def test_a_duration_in_two_units_is_given_in_one(written, one_unit):
    error = only_error(f"round = {written};\n")
    assert error.hint == f"a duration is written with one unit: {written} is {one_unit}"
    with pytest.raises(SchedError) as got:
        parse_value(written)
    # (not "a list is written [a, b]", which it was told)
    assert got.value.hint == f"a duration is written with one unit: {written} is {one_unit}"


def test_two_values_that_are_no_duration_get_no_such_hint():
    assert only_error("round = 1h2x;\n").hint is None


@pytest.mark.parametrize("statement", ['import "";', 'require "";', 'import "  ";'])
def test_an_empty_path_is_said_to_be_empty(tmp_path, capsys, statement):
    # (to pathlib, an empty path is the graph's own folder: "'' is a directory", ". is a folder")
    err = check(tmp_path, capsys, statement + "\n" + GRAPH)
    word = statement.split()[0]
    assert f"g.sched:1:{len(word) + 2}: error: cannot {word} '" in err
    assert "the path is empty" in err
    assert "directory" not in err and "folder" not in err


def test_an_element_named_after_an_element_class_is_refused(tmp_path, capsys):
    # `-> Fifo ->` read as the element declared `Fifo :: Las`: a graph that says FIFO and ranks by LAS.
    text = GRAPH.replace("src -> AcceptAll", "Fifo :: Las(backfill=false);\nsrc -> AcceptAll")
    err = check(tmp_path, capsys, text)
    assert "g.sched:4:1: error: element 'Fifo' (Las) has the name of an element class" in err
    assert "hint: name it otherwise, such as fifo :: Las" in err


def test_an_element_named_after_an_elementclass_is_refused(tmp_path, capsys):
    text = "elementclass Gate { input -> AcceptAll -> output; }\nGate :: AcceptAll;\n" + GRAPH.replace("AcceptAll ->", "Gate ->")
    err = check(tmp_path, capsys, text)
    assert "g.sched:2:1: error: element 'Gate' (AcceptAll) has the name of an element class" in err


def test_an_element_named_as_its_own_lower_case_class_is_told_only_to_rename_it(tmp_path, capsys):
    text = "elementclass gate { input -> AcceptAll -> output; }\ngate :: gate;\n" + GRAPH.replace("AcceptAll ->", "gate ->")
    err = check(tmp_path, capsys, text)
    assert "element 'gate' (gate) has the name of an element class" in err
    assert "hint: name it otherwise\n" in err


def test_names_that_are_no_class_still_declare_elements(tmp_path, capsys):
    (tmp_path / "g.sched").write_text(GRAPH.replace("-> Fifo ->", "-> fifo :: Fifo ->"))
    assert main(["check", str(tmp_path / "g.sched")]) == 0


def test_a_string_in_single_quotes_is_told_to_take_double_quotes():
    error = only_error("x :: JobMetrics(track='abc');\n")
    assert error.message == 'unexpected character "\'"' and error.location.column == 23
    assert error.hint == 'a string is written between double quotes: "abc"'


def test_a_colon_for_an_equals_sign_in_arguments_says_how_an_argument_is_written():
    error = only_error("x :: Fifo(backfill: false);\n")
    assert error.message == "unexpected ':' (an argument is written 'name=value')"
    # (outside an argument list, a ':' is still a declaration's)
    assert only_error("x : Fifo;\n").message == "unexpected ':' (a declaration is written 'name :: Class')"


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("a => b;\n", 4, "unexpected '>' (a connection is written 'a -> b')"),
        ("a <- b;\n", 3, "unexpected '<-' (a connection is written 'a -> b', from left to right)"),
    ],
)
def test_arrows_written_otherwise_say_how_a_connection_is_written(text, column, message):
    error = only_error(text)
    assert error.message == message and error.location.column == column


def test_an_element_class_without_a_tick_does_not_load(tmp_path, capsys):
    # (it loaded, `check` said ok, and the run failed in its first round)
    (tmp_path / "tockless.py").write_text(
        "from roundhouse.runtime.element import Element, In, element\n"
        "from roundhouse.runtime.types import Active\n\n\n"
        "@element\nclass Tockless(Element):\n"
        '    """Ranks nothing.\n\n    Ports:\n        active: the jobs.\n    Arguments:\n        none\n'
        '    Counters:\n        none\n    See also: Fifo\n    Paper: none.\n    """\n\n'
        '    category = "sink"\n    inputs = (In("active", Active),)\n    state = ()\n\n'
        "    def tock(self, ctx, active):\n        return None\n"
    )
    text = 'require "tockless.py";\n' + GRAPH.replace("src -> AcceptAll -> JobPool", "src -> AcceptAll -> pool :: JobPool")
    err = check(tmp_path, capsys, text + "pool -> Tockless;\n")
    assert "g.sched:1:9: error: cannot require 'tockless.py'" in err
    assert "Tockless defines no tick: write `def tick(self, ctx, active)`" in err


def test_errors_of_a_file_are_all_told(tmp_path, capsys):
    # (each check above stops nothing else: two mistakes, two messages)
    err = check(tmp_path, capsys, GRAPH + "Launch :: Launch;\nLas :: Las;\n")
    assert err.count("has the name of an element class") == 2


def test_elements_require_of_a_file_that_declares_none_says_so(tmp_path, capsys):
    # (It listed the built-in elements only, without a word, where a graph's `require` hints.)
    (tmp_path / "mine.py").write_text(
        "from roundhouse.runtime.element import Element, In, Out\n"
        "from roundhouse.runtime.types import Active, Ranking\n\n\n"
        "class Forgot(Element):\n"
        '    """Forgot its decorator.\n\n    Synopsis: nothing.\n    """\n\n'
        '    category = "policy"\n'
        '    inputs = (In("active", Active),)\n'
        '    outputs = (Out("ranking", Ranking),)\n\n'
        "    def tick(self, ctx, active):\n"
        "        return active\n"
    )
    (tmp_path / "none.py").write_text("X = 1\n")
    for name, said in (
        (
            "mine.py",
            f"declares no element: class Forgot in {tmp_path / 'mine.py'} is an Element not declared as one: "
            "put @element on the line above its class",
        ),
        ("none.py", "declares no element"),
    ):
        assert main(["elements", "--require", str(tmp_path / name)]) == 2
        assert f"error: --require {tmp_path / name}: {said}" in capsys.readouterr().err
