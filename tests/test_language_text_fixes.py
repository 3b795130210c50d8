"""How the language reads its text: a blank cluster, an element class left open, converters
before validators, digits, string escapes, unquoted values, parameters' defaults, comments in
`--set` values, underlines below wide characters, and arguments drawn as written."""

import attrs
import pytest

from roundhouse.errors import ClusterError, Location, SchedError, display_width, remember_source
from roundhouse.runtime.arguments import convert, validate
from roundhouse.runtime.cluster import ClusterSpec
from roundhouse.runtime.dsl import ast
from roundhouse.runtime.dsl.parser import parse, parse_value
from roundhouse.runtime.values import Duration, duration_from_text, positive, rate_from_text, whole_number
from roundhouse.tools.cli import main
from tests.conftest import fails

CHAIN = (
    "src :: PoissonSource(rate=8/h, jobs=5, seed=1);\nsrc -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
)


def syntax_error(text: str) -> SchedError:
    with pytest.raises(SchedError) as got:
        parse(text, "f.sched")
    return got.value


# --- a blank cluster ---


@pytest.mark.parametrize("spec", ['""', '"   "'])
def test_a_blank_cluster_is_refused_by_check_as_by_run(tmp_path, capsys, spec):
    graph = tmp_path / "g.sched"
    graph.write_text(f"cluster = {spec};\n" + CHAIN)
    for command in (["check", graph], ["run", graph, "--until", "1h", "--quiet"]):
        err = fails(capsys, *command)
        assert err.startswith(f"{graph}:1:11: error: setting 'cluster': the cluster is blank"), err


def test_a_blank_cluster_spec_is_refused_wherever_it_is_given():
    with pytest.raises(ClusterError, match="the cluster is blank"):
        ClusterSpec.parse("  ")


# --- an element class without its '}' ---


def test_an_element_class_left_open_at_the_end_of_the_file_is_named():
    err = syntax_error("elementclass A {\n input -> AcceptAll -> output;\n")
    assert err.message == "unexpected end of file: elementclass A (line 1) is not closed with '}'"
    assert str(err.location) == "f.sched:2:31"
    # Statements after it that could be inside it: the end of the file still finds it open.
    err = syntax_error("elementclass A {\n input -> AcceptAll -> output;\n\n" + CHAIN)
    assert err.message == "unexpected end of file: elementclass A (line 1) is not closed with '}'"


def test_an_element_class_left_open_before_a_statement_it_cannot_hold_is_named():
    err = syntax_error("elementclass A { input -> AcceptAll -> output;\nround = 5min;\n" + CHAIN)
    assert err.message == "elementclass A (line 1) is not closed with '}': a setting cannot be written inside it"
    assert (err.location.line, err.location.column) == (2, 1)
    err = syntax_error("elementclass A { input -> AcceptAll -> output;\n\nelementclass B { input -> output; }\n")
    # (a '}' follows, B's: whether A was meant to end is the user's to say)
    assert err.message == "'elementclass' cannot be written inside elementclass A (line 1)"
    assert (err.location.line, err.location.column) == (3, 1)
    assert "close it there with '}'" in err.hint
    err = syntax_error('elementclass A { input -> AcceptAll -> output;\nimport "lib.sched";\n')
    assert err.message == "elementclass A (line 1) is not closed with '}': 'import' cannot be written inside it"


def test_a_missing_semicolon_in_an_open_element_class_names_both():
    err = syntax_error("elementclass A {\n input -> AcceptAll -> output\n")
    assert err.message == "unexpected end of file: missing ';' at the end of the last statement"
    assert err.hint == "elementclass A (line 1) is not closed with '}' either"


def test_a_closed_element_class_is_no_error():
    parse("elementclass A { input -> AcceptAll -> output; }\n" + CHAIN)


# --- converters run before validators ---

CONVERTING = '''
import attrs
import numpy as np

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking
from roundhouse.runtime.values import positive


def no_seven(value):
    if value == 7:
        raise ValueError("seven is not allowed")
    return abs(value)


@element
class AbsoluteFirst(Element):
    """Rank jobs by the GPUs they ask for, fewest first.

    Ports:
        active: admitted, unfinished jobs.
        ranking: the jobs, fewest GPUs first.
    Arguments:
        n: a number, made positive.
        cap: at least n (as made positive).
    Counters:
        ranked: jobs ranked in the last round.
    See also: Las
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)
    state = ()

    n: int = attrs.field(default=1, converter=no_seven, validator=positive)
    cap: int = attrs.field(default=100)

    @cap.validator
    def _at_least_n(self, attribute, value):
        if value < self.n:
            raise ValueError(f"must be at least n ({self.n}), got {value}")

    def tick(self, ctx, active):
        order = np.argsort(active.gpus, kind="stable")
        return Ranking(active.rows[order], active.gpus[order])
'''


def converting_graph(tmp_path, n: str, more: str = ""):
    (tmp_path / "absolute.py").write_text(CONVERTING)
    graph = tmp_path / "g.sched"
    graph.write_text(
        'require "absolute.py";\nsrc :: PoissonSource(rate=8/h, jobs=5, seed=1);\n'
        f"src -> AcceptAll -> JobPool -> AbsoluteFirst(n={n}{more}) -> FirstFree -> Launch -> JobMetrics;\n"
    )
    return graph


def test_a_fields_converter_runs_before_its_validator(tmp_path, capsys):
    assert main(["check", str(converting_graph(tmp_path, "-3"))]) == 0, capsys.readouterr().err
    # What the converter makes is what the validator judges.
    err = fails(capsys, "check", converting_graph(tmp_path, "0"))
    assert "g.sched:3:48: error: argument 'n' of AbsoluteFirst must be greater than 0, got 0" in err
    # A converter's own complaint is said at the argument.
    err = fails(capsys, "check", converting_graph(tmp_path, "7"))
    assert "g.sched:3:48: error: argument 'n' of AbsoluteFirst is refused by its converter: seven is not allowed" in err


def test_a_validator_reading_another_field_sees_it_converted(tmp_path, capsys):
    # n=-3 is made 3: a cap of 2 is below it, a cap of 3 is not (the raw -3 would pass both).
    err = fails(capsys, "check", converting_graph(tmp_path, "-3", ", cap=2"))
    assert "g.sched:3:56: error: argument 'cap' of AbsoluteFirst must be at least n (3), got 2" in err
    assert main(["check", str(converting_graph(tmp_path, "-3", ", cap=3"))]) == 0, capsys.readouterr().err


def test_validate_runs_converters_that_take_the_instance():
    @attrs.define
    class Shifted:
        lo: int = 1
        n: int = attrs.field(
            default=1, converter=attrs.Converter(lambda v, self: v + self.lo, takes_self=True), validator=positive
        )
        m: int = attrs.field(default=1, converter=attrs.converters.pipe(int, abs), validator=positive)

    fields = attrs.fields_dict(Shifted)
    assert validate(fields["n"], -1, {"lo": 5}) is None
    assert validate(fields["n"], -1, {"lo": 1}) == "must be greater than 0, got 0"
    assert validate(fields["m"], -3) is None
    assert validate(fields["m"], "x").startswith("is refused by its converter: invalid literal for int()")


# --- digits ---


@pytest.mark.parametrize(
    "text, column",
    [
        ("round = ５min;", 9),
        ("x :: Las(a=٨/h);", 12),
        ("x :: Las(a=٥٠);", 12),
        ("x :: Las(a=5٠);", 13),
        ("x :: Las(a=1..٥);", 15),
        ("a -> b [٠] -> c;", 9),
    ],
)
def test_numbers_are_read_in_the_digits_0_to_9_only(text, column):
    err = syntax_error(text)
    assert "a digit of another script" in err.message
    assert err.hint == "numbers are written with the digits 0-9"
    assert (err.location.line, err.location.column) == (1, column)


def test_values_from_the_command_line_are_read_in_the_digits_0_to_9_only():
    with pytest.raises(SchedError) as got:
        parse_value("５min")
    assert got.value.hint == "numbers are written with the digits 0-9"
    for read in (duration_from_text, rate_from_text, whole_number):
        with pytest.raises(ValueError):
            read({"duration_from_text": "５min", "rate_from_text": "٨/h", "whole_number": "٥٠"}[read.__name__])
    for spec in ("٣٢x4:V100", "dally:٢", "３:3:3"):
        with pytest.raises(ClusterError, match="digits 0-9"):
            ClusterSpec.parse(spec)


# --- string escapes ---


def test_an_unknown_escape_is_refused_at_its_column():
    err = syntax_error('reference_gpu = "sub\\\\new\\qtrace.csv";\n')
    assert err.message == "unknown escape '\\q' in a string"
    assert (err.location.column, err.location.length) == (26, 2)
    assert '\\" (a quote), \\\\ (a backslash), \\t (a tab) and \\n (a line break)' in err.hint
    err = syntax_error('import "lib\\sched";\n')
    assert err.message == "unknown escape '\\s' in a string"


def test_the_known_escapes_are_read():
    (setting,) = parse('reference_gpu = "a\\tb\\\\c\\"d\\ne";\n').statements
    assert setting.value.value == 'a\tb\\c"d\ne'


# --- values written without quotes ---


@pytest.mark.parametrize(
    "text, written",
    [
        ("cluster = 32x4:V100;\n", "32x4:V100"),
        ("cluster = dally:2;\n", "dally:2"),
        ("src :: TraceSource(path=traces/x.csv);\n", "traces/x.csv"),
        ("src :: TraceSource(seed=1, path=/data/x.csv);\n", "/data/x.csv"),
    ],
)
def test_an_unquoted_value_gets_the_quoting_hint(text, written):
    err = syntax_error(text)
    assert err.hint == f'text such as a cluster spec or a file path is written in quotes: "{written}"'
    assert "declaration" not in err.message


@pytest.mark.parametrize("text", ["round = 5min 3;\n", "round = 5.;\n", "seed = 1_000;\n", "seed = 0x10;\n"])
def test_a_number_written_wrong_gets_no_quoting_hint(text):
    err = syntax_error(text)
    assert err.hint is None or "quotes" not in err.hint


# --- parameters named where a value belongs ---


def test_a_parameters_default_cannot_name_a_parameter():
    for default in ("$a", "[$a]"):
        err = syntax_error(f"elementclass A {{ $a=1x, $b={default} | input -> AcceptThreshold(factor=$b) -> output; }}\n")
        assert err.message == "the default of $b names the parameter $a: a default is a value, it cannot name a parameter"
        assert err.location.column == 28 + default.index("$")


def test_a_setting_cannot_take_a_parameter():
    err = syntax_error("seed = $a;\n")
    assert err.message == "setting 'seed' is given $a: a $parameter is only allowed inside an elementclass"
    assert err.location.column == 8


def test_a_parameter_where_a_value_belongs_is_named_as_such():
    with pytest.raises(SchedError, match=r"got \$a \(a \$parameter\)"):
        convert(ast.Value("param", "a", Location("f.sched", 1, 1), "$a"), int, ".", "argument 'n'")


# --- comments in --set values ---


def test_a_set_value_may_end_with_a_comment():
    assert parse_value("5min // five minutes").value == Duration(300)
    assert parse_value("5min /* five */").value == Duration(300)
    with pytest.raises(SchedError, match="is not a single value"):
        parse_value("5min; // five")
    with pytest.raises(SchedError) as got:
        parse_value("[1, 2")
    assert got.value.message == "the value ends before its closing ']'"
    assert (got.value.location.line, got.value.location.column) == (1, 6)


def test_run_with_a_commented_set_value(tmp_path, capsys):
    graph = tmp_path / "g.sched"
    graph.write_text('cluster = "2x4:V100";\n' + CHAIN)
    assert main(["run", str(graph), "--set", "round=10min // c", "--until", "1h", "--quiet"]) == 0, capsys.readouterr().err


# --- underlines below wide characters ---


def test_the_underline_stands_below_the_text_after_wide_characters():
    line = 'reference_gpu = "日本日本";  y :: Nope;'
    remember_source("wide.sched", line + "\n")
    column = line.index("Nope") + 1
    text = str(SchedError("unknown element class 'Nope'", Location("wide.sched", 1, column, 4)))
    quoted, underline = text.splitlines()[1:3]
    assert quoted == f" 1 | {line}"
    assert underline == " " * 3 + "| " + " " * display_width(line[: column - 1]) + "^^^^"
    assert display_width(line[: column - 1]) == column - 1 + 4  # (four wide characters)
    # A wide character underlined takes two marks.
    remember_source("wide2.sched", '"日本"\n')
    text = str(SchedError("x", Location("wide2.sched", 1, 2, 2)))
    assert text.splitlines()[2] == "   |  ^^^^"


# --- arguments drawn as written ---


def test_render_draws_arguments_as_written(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(
        "src :: PoissonSource(rate=8/h, jobs=5, seed=1);\n"
        "src -> AcceptAll -> JobPool -> Las(service=wall_seconds, backfill=false) -> FirstFree -> Launch -> JobMetrics;\n"
    )
    out = tmp_path / "g.dot"
    assert main(["render", str(graph), "-o", str(out)]) == 0
    dot = out.read_text()
    assert "service=wall_seconds" in dot and "&quot;wall_seconds&quot;" not in dot
    assert "backfill=false" in dot
