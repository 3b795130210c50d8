"""The language as a user writing graphs meets it: element classes that multiply, values given
with `--set`, numbers and units written with spaces, names outside ASCII, unquoted paths, and
whole numbers written with many leading zeros."""

import pytest

from roundhouse.errors import Location, SchedError
from roundhouse.runtime.dsl import ast, loader
from roundhouse.runtime.dsl.compounds import splice
from roundhouse.runtime.dsl.flat import Edge
from roundhouse.runtime.dsl.parser import parse, parse_value
from roundhouse.runtime.values import whole_number
from tests.conftest import fails

CHAIN = "src :: PoissonSource(rate=8/h, jobs=5, seed=1);\n"
TAIL = " -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"


def doubling(levels: int) -> str:
    """Element classes each holding two instances of the one before: 2**levels elements."""
    text = "elementclass C0 { input -> AcceptAll -> output; }\n"
    for i in range(1, levels):
        text += f"elementclass C{i} {{ input -> C{i - 1} -> C{i - 1} -> output; }}\n"
    return text + CHAIN + f"src -> C{levels - 1}" + TAIL


def syntax_error(text: str) -> SchedError:
    with pytest.raises(SchedError) as got:
        parse(text, "f.sched")
    return got.value


def value_error(text: str) -> SchedError:
    with pytest.raises(SchedError) as got:
        parse_value(text)
    return got.value


# --- element classes that multiply ---


class Counted(str):
    """A name that counts how often it is compared."""

    compared = 0

    def __eq__(self, other):
        Counted.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_splicing_instances_looks_only_at_their_own_connections():
    # src -> c0 -> c1 -> ... -> dst, each instance `input -> a -> output` inside.
    n, here = 300, Location("f.sched", 1, 1)
    edges = [Edge(Counted("src"), None, Counted("c0"), None, here)]
    for i in range(n):
        nxt = f"c{i + 1}" if i + 1 < n else "dst"
        edges += [
            Edge(Counted(f"c{i}/input"), None, Counted(f"c{i}/a"), None, here),
            Edge(Counted(f"c{i}/a"), None, Counted(f"c{i}/output"), None, here),
            Edge(Counted(f"c{i}"), None, Counted(nxt), None, here),
        ]
    Counted.compared = 0
    spliced, open_ports, errors = splice({f"c{i}": ("C", here) for i in range(n)}, edges)
    assert not open_ports and not errors
    expected = [(f"c{i}/a", f"c{i + 1}/a") for i in range(n - 1)] + [("src", "c0/a"), (f"c{n - 1}/a", "dst")]
    assert sorted((e.src, e.dst) for e in spliced) == sorted(expected)
    # Scanning every connection for every instance compared names n * 3n * 4 times.
    assert Counted.compared < 20 * n


def test_a_graph_of_thousands_of_instances_loads_in_moments():
    # (scanning every connection per instance took minutes at 2**13; the count of comparisons is
    # asserted in test_splicing_instances_looks_only_at_their_own_connections)
    graph = loader.load("f.sched", doubling(12))
    assert len(graph.decls) == 2**11 + 6  # (an AcceptAll in each of 2**11 places, and the chain of six)


def test_element_classes_that_multiply_past_the_limit_are_refused_at_the_instance(monkeypatch):
    monkeypatch.setattr(loader, "MAX_ELEMENTS", 50)
    with pytest.raises(SchedError) as got:
        loader.load("f.sched", doubling(7))
    assert got.value.message.startswith("'C6@1' expands into more than 50 elements")
    assert (got.value.location.line, got.value.location.column) == (9, 8)


def test_forty_doublings_are_refused_at_once():
    with pytest.raises(SchedError, match=f"expands into more than {loader.MAX_ELEMENTS} elements"):
        loader.load("f.sched", doubling(40))


def test_an_element_class_without_an_instance_that_multiplies_is_refused_too(monkeypatch):
    monkeypatch.setattr(loader, "MAX_ELEMENTS", 50)
    text = doubling(7).replace("src -> C6", "src -> AcceptAll")
    with pytest.raises(SchedError, match="expands into more than 50 elements"):
        loader.load("f.sched", text)


def test_the_limit_refuses_a_graph_of_that_many_plain_elements(monkeypatch):
    monkeypatch.setattr(loader, "MAX_ELEMENTS", 10)
    text = CHAIN + "src" + " -> AcceptAll" * 12 + TAIL
    with pytest.raises(SchedError, match="the graph has more than 10 elements"):
        loader.load("f.sched", text)


# --- values given with --set ---


def test_a_parameter_given_with_set_is_said_without_the_parsers_own_setting():
    err = value_error("$x")
    assert err.message == "a $parameter is only allowed inside an elementclass"
    assert "__value__" not in str(err)
    assert "__value__" not in str(value_error("[1h, $x]"))


def test_a_parameter_given_with_set_on_the_command_line(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(CHAIN + "src -> AcceptAll" + TAIL)
    err = fails(capsys, "run", graph, "--until", "1h", "--set", "round=$x")
    assert "a $parameter is only allowed inside an elementclass" in err
    assert "__value__" not in err


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("5 min", "a unit is written right after its number, without a space: 5min"),
        ("1.5 h", "a unit is written right after its number, without a space: 1.5h"),
        ("1.2 x", "a unit is written right after its number, without a space: 1.2x"),
        ("8 / h", "a rate is written without spaces, as 8/h"),
    ],
)
def test_a_number_and_its_unit_written_apart_are_said_so(text, hint):
    assert value_error(text).hint == hint  # (not: write it in quotes, which makes it text)
    assert syntax_error(f"round = {text};\n").hint == hint


@pytest.mark.parametrize("text", ["5.", "1_000", "0x10", "1.5..2"])
def test_a_number_written_wrong_on_the_command_line_is_not_told_to_be_quoted(text):
    err = value_error(text)
    assert err.hint is None or "quotes" not in err.hint


def test_a_word_after_a_number_that_is_no_unit_gets_no_unit_hint():
    assert syntax_error("round = 5 foo;\n").hint is None


# --- names and paths ---


def test_a_name_with_a_letter_outside_ascii_says_how_names_are_written():
    err = syntax_error("pööl :: JobPool;\n")
    assert err.message == "unexpected character 'ö' (U+00F6)"
    assert (err.location.line, err.location.column) == (1, 2)
    assert "A-Z" in (err.hint or "")


@pytest.mark.parametrize("path", ["../traces/x.csv", "./x.csv", "/data/x.csv"])
def test_an_unquoted_path_is_told_to_be_quoted(path):
    err = syntax_error(f"src :: TraceSource(path={path});\n")
    assert err.hint == f'text such as a cluster spec or a file path is written in quotes: "{path}"'
    assert err.location.line == 1


# --- whole numbers ---


def test_a_whole_number_with_thousands_of_leading_zeros_is_read():
    assert whole_number("0" * 5000 + "42") == 42
    assert whole_number("-" + "0" * 5000 + "7") == -7
    assert whole_number("+0") == 0
    with pytest.raises(ValueError, match="too large"):
        whole_number("0" * 5000 + "9" * 20)


def test_a_setting_with_thousands_of_leading_zeros_is_read():
    program = parse("seed = " + "0" * 5000 + "3;\n", "f.sched")
    (setting,) = program.statements
    assert isinstance(setting, ast.Setting) and setting.value.value == 3


def test_a_range_too_large_is_quoted_short():
    err = syntax_error("x :: JobMetrics(track=0.." + "9" * 3000 + ");\n")
    assert err.message.startswith("range 0..99999999999999999...(3003 characters): ")
    assert len(err.message) < 300


# --- limits said once, reserved names ---


def nested(levels: int) -> str:
    """Element classes each holding one instance of the one before."""
    text = "elementclass C0 { input -> AcceptAll -> output; }\n"
    for i in range(1, levels):
        text += f"elementclass C{i} {{ input -> C{i - 1} -> output; }}\n"
    return text


@pytest.mark.parametrize("used", [True, False])
def test_element_classes_nested_too_deep_are_said_so_once(used):
    text = nested(300) + CHAIN + ("src -> C299" if used else "src -> AcceptAll") + TAIL
    with pytest.raises(SchedError) as got:  # (a SchedErrors, of several, is no SchedError)
        loader.load("f.sched", text)
    assert got.value.message == f"element classes nest more than {loader.MAX_DEPTH} deep"


@pytest.mark.parametrize("name", ["input", "output"])
def test_an_element_class_cannot_take_the_name_of_a_compound_port(name):
    text = f"elementclass {name} {{ input -> AcceptAll -> output; }}\n" + CHAIN + "src -> AcceptAll" + TAIL
    with pytest.raises(SchedError) as got:
        loader.load("f.sched", text)
    assert got.value.message == f"'{name}' is reserved for compound ports"
    assert (got.value.location.line, got.value.location.column) == (1, 14)


# --- a plan carried out twice ---


def test_a_plan_given_to_two_launchers_is_refused_by_check_as_by_run(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(
        'cluster = "2x4:V100";\n'
        + CHAIN
        + "src -> AcceptAll -> JobPool -> Fifo -> place :: FirstFree -> Launch -> JobMetrics;\nplace -> Launch;\n"
    )
    for command in (["check", graph], ["render", graph, "-o", tmp_path / "g.dot"], ["run", graph, "--until", "1h"]):
        err = fails(capsys, *command)
        assert f"{graph}:4:7: error: 'place' [plan] gives its plan to 'Launch@4'" in err, err
        assert "a plan is carried out once" in err


def test_two_launchers_with_plans_of_their_own_are_allowed(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text(
        'cluster = "2x4:V100";\n'
        + CHAIN
        + "src -> AcceptAll -> pool :: JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\npool -> Las -> Consolidated -> Launch;\n"
    )
    from roundhouse.tools.cli import main

    assert main(["check", str(graph)]) == 0


# --- characters pasted from elsewhere ---


@pytest.mark.parametrize(
    ("ch", "what"), [("\u00a0", "no-break space"), ("\u200b", "zero width space"), ("\ufeff", "zero width no-break space")]
)
def test_an_invisible_character_is_named(ch, what):
    err = syntax_error(f"round = 5min;{ch}\n")
    assert err.message == f"unexpected character {ch!r} (U+{ord(ch):04X}, {what})"
    assert (err.location.line, err.location.column) == (1, 14)
    assert err.hint == "replace it with a plain space, or delete it"


def test_a_typographic_quote_is_named_in_a_file_and_on_the_command_line():
    err = syntax_error("src :: TraceSource(path=\u201ctraces/x.csv\u201d);\n")
    assert err.message == "unexpected character '\u201c' (a typographic quote)"
    assert err.hint == 'a string is written between plain quotes: "..."'
    assert value_error("\u201ctraces/x.csv\u201d").hint == 'a string is written between plain quotes: "..."'


# --- port numbers ---


def test_a_port_number_of_thousands_of_digits_is_refused_at_the_port():
    err = syntax_error("a [" + "9" * 5000 + "] -> b;\n")
    assert err.message == "port number 99999999999999999999...(5000 characters) is too large"
    assert (err.location.line, err.location.column) == (1, 4)


def test_a_port_number_with_leading_zeros_is_the_port():
    program = parse("a [007] -> b;\n", "f.sched")
    (chain,) = program.statements
    assert isinstance(chain, ast.Chain)
    out_port = chain.endpoints[0].out_port
    assert out_port is not None and out_port.key == 7


def test_a_rate_too_large_to_be_finite_is_refused_as_a_duration_is():
    err = value_error("1e308/ms")
    assert err.message == "'1e308/ms' is too large (it is not a finite number)"
    assert syntax_error("x :: PoissonSource(rate=1e308/ms);\n").location.column == 25
