"""What the `.sched` language says about fields typed as tuples or Literals, fields of types no
file can write, a compound instance named where one element is expected, an imported file that
is not a `.sched` file, and a number too close to 0 to be held."""

import pytest

from roundhouse.errors import SchedError, SchedErrors
from roundhouse.runtime import registry
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.dsl.parser import parse_value
from tests.conftest import REPO
from tests.own_elements import policy_file

HEAD = 'round = 5min;\ncluster = "2x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=3, seed=1);\n'
CHAIN = "src -> AcceptAll -> JobPool -> {policy} -> FirstFree -> Launch -> JobMetrics;\n"


def shaped(annotation: str, default: str) -> str:
    """The file of a policy Shaped whose field is `x: annotation = attrs.field(default=default)`."""
    return policy_file(
        "Shaped",
        "Rank jobs as the pool holds them.",
        "return Ranking(active.rows, active.gpus)",
        before="from typing import Literal\n\nimport attrs\n\nfrom roundhouse.runtime.values import Duration\n\n\nclass Mine:\n    pass\n",
        outputs=(("ranking", "Ranking", "the jobs, in the pool's order."),),
        arguments=(("x", f"{annotation} = attrs.field(default={default})", "an argument of the type under test."),),
    )


def graph_with(tmp_path, annotation: str, default: str, argument: str | None):
    """A graph whose policy is an element of one's own with field `x: annotation = default`,
    given `x=argument` (if any); the graph's path."""
    (tmp_path / "shaped.py").write_text(shaped(annotation, default))
    policy = "Shaped" if argument is None else f"Shaped(x={argument})"
    path = tmp_path / "g.sched"
    path.write_text('require "shaped.py";\n' + HEAD + CHAIN.format(policy=policy))
    return path


def compiled_x(tmp_path, annotation: str, default: str, argument: str | None):
    with registry.scope():
        graph = compile_file(graph_with(tmp_path, annotation, default, argument))
    (policy,) = [el for el in graph.elements.values() if type(el).__name__ == "Shaped"]
    return policy.x


def refusal(path) -> SchedError:
    with registry.scope(), pytest.raises((SchedError, SchedErrors)) as info:
        compile_file(path)
    errors = info.value.errors if isinstance(info.value, SchedErrors) else [info.value]
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


def column_of(path, text: str) -> int:
    """The 1-based column of `text` in the graph's chain (its last line)."""
    return path.read_text().splitlines()[-1].index(text) + 1


# --- tuples ---


def test_a_fixed_length_tuple_is_given_as_a_tuple_of_its_positions_types(tmp_path):
    value = compiled_x(tmp_path, "tuple[int, float]", "(1, 2.0)", "[3, 4]")
    assert value == (3, 4.0) and isinstance(value, tuple) and isinstance(value[1], float)


@pytest.mark.parametrize(
    "argument, at, message",
    [
        ("[3]", "[3]", "expects a list of 2 items (integer, number), got 1 item"),
        ("[3, 4, 5]", "5]", "expects a list of 2 items (integer, number), got 3 items"),
        ("[3.5, 4]", "3.5", "expects a whole number, got 3.5"),
        ("[3, x]", "x]", "expects a number, got x"),
        ("3", "3)", "expects a list of 2 items (integer, number) in [brackets], got 3"),
    ],
)
def test_a_fixed_length_tuple_refuses_a_wrong_length_or_item_at_the_item(tmp_path, argument, at, message):
    path = graph_with(tmp_path, "tuple[int, float]", "(1, 2.0)", argument)
    err = refusal(path)
    assert err.message == f"argument 'x' of Shaped {message}" or err.message.startswith(f"argument 'x' of Shaped {message} (")
    assert (err.location.line, err.location.column) == (5, column_of(path, at))


def test_a_tuple_of_any_length_takes_any_number_of_its_type(tmp_path):
    value = compiled_x(tmp_path, "tuple[Duration, ...]", "()", "[1h, 2min, 5s]")
    assert value == (3600.0, 120.0, 5.0) and isinstance(value, tuple)
    assert compiled_x(tmp_path, "tuple[Duration, ...]", "()", "[]") == ()
    path = graph_with(tmp_path, "tuple[Duration, ...]", "()", "[1h, 2min, x]")
    err = refusal(path)
    assert err.message.startswith("argument 'x' of Shaped expects a duration")
    assert (err.location.line, err.location.column) == (5, column_of(path, "x]"))


def test_a_tuple_default_of_the_wrong_length_does_not_load(tmp_path):
    err = refusal(graph_with(tmp_path, "tuple[int, int]", "(1, 2, 3)", None))
    assert "cannot require 'shaped.py'" in err.message
    assert "the default of argument 'x' of Shaped expects a list of 2 items (integer, integer), got 3 items" in err.message


# --- Literal ---


@pytest.mark.parametrize("argument", ["fast", '"fast"', "slow"])
def test_a_literal_field_takes_its_words_bare_or_quoted(tmp_path, argument):
    assert compiled_x(tmp_path, 'Literal["fast", "slow"]', '"slow"', argument) == argument.strip('"')


def test_a_literal_field_refuses_other_values_naming_the_choices(tmp_path):
    path = graph_with(tmp_path, 'Literal["fast", "slow"]', '"slow"', "fsat")
    err = refusal(path)
    assert err.message == "argument 'x' of Shaped must be one of 'fast', 'slow', got fsat"
    assert err.hint == "did you mean 'fast'?" and err.location.column == column_of(path, "fsat")
    assert refusal(graph_with(tmp_path, 'Literal["fast", "slow"]', '"slow"', "3")).message.endswith("got 3")


def test_a_literal_of_numbers_and_booleans_takes_those_of_its_own(tmp_path):
    assert compiled_x(tmp_path, "Literal[1, 2, True] | None", "None", "2") == 2
    assert compiled_x(tmp_path, "Literal[1, 2, True] | None", "None", "true") is True
    assert compiled_x(tmp_path, "Literal[1, 2, True] | None", "None", None) is None
    err = refusal(graph_with(tmp_path, "Literal[1, 2, True] | None", "None", "2.5"))
    assert err.message == "argument 'x' of Shaped must be one of 1, 2, true, got 2.5"


def test_a_literal_default_outside_its_choices_does_not_load(tmp_path):
    err = refusal(graph_with(tmp_path, 'Literal["fast", "slow"]', '"medium"', None))
    assert "the default of argument 'x' of Shaped must be one of 'fast', 'slow', got \"medium\"" in err.message


def test_a_list_of_literals_names_the_bad_item(tmp_path):
    assert compiled_x(tmp_path, 'list[Literal["a", "b"]]', "[]", "[a, b, a]") == ["a", "b", "a"]
    path = graph_with(tmp_path, 'list[Literal["a", "b"]]', "[]", "[a, c]")
    err = refusal(path)
    assert err.message.endswith("must be one of 'a', 'b', got c") and err.location.column == column_of(path, "c]")


# --- types no value can have ---


@pytest.mark.parametrize(
    "annotation, part",
    [("dict", "dict"), ("dict[str, int]", "dict[str, int]"), ("Mine", "Mine"), ("list[Mine]", "Mine"), ("int | Mine", "Mine")],
)
def test_a_field_of_a_type_no_value_can_have_does_not_load(tmp_path, annotation, part):
    path = graph_with(tmp_path, annotation, "None", None)
    err = refusal(path)
    assert err.location is not None and (str(err.location.path), err.location.line, err.location.column) == (str(path), 1, 9)
    decorator = (tmp_path / "shaped.py").read_text().splitlines().index("@element") + 1
    assert err.message.startswith(
        f"cannot require 'shaped.py': {tmp_path / 'shaped.py'}:{decorator}: TypeError: Shaped: argument 'x' is of type {annotation}, "
        f"but a .sched file cannot give a value of type {part}: an argument's type may be int, float, bool, str,"
    )
    assert "Literal" in err.message


def test_a_field_without_a_type_does_not_load(tmp_path):
    (tmp_path / "shaped.py").write_text(shaped("int", "1").replace("x: int = ", "x = "))
    path = tmp_path / "g.sched"
    path.write_text('require "shaped.py";\n' + HEAD + CHAIN.format(policy="Shaped"))
    assert "argument 'x' has no type: annotate it" in refusal(path).message


def test_a_field_no_file_sets_may_have_any_type(tmp_path):
    # (init=False: the element sets it itself)
    value = compiled_x(tmp_path, "dict", "attrs.Factory(dict), init=False", None)
    assert value == {}


def test_library_elements_all_have_types_a_file_can_give():
    from roundhouse.runtime.arguments import check_default

    for cls in registry.classes():
        for field in cls.fields():
            check_default(cls, field)


# --- a compound instance named as one element ---


def test_naming_a_compound_instance_as_a_candidate_says_what_it_is(tmp_path):
    path = tmp_path / "g.sched"
    path.write_text(
        HEAD + "elementclass P { input -> Fifo -> output; }\npp :: P;\nsrtf :: Srtf;\n"
        "src -> AcceptAll -> JobPool -> ChoosePolicy(candidates=[pp, srtf]) -> FirstFree -> Launch -> JobMetrics;\n"
    )
    err = refusal(path)
    assert err.message == (
        f"argument 'candidates' of ChoosePolicy names 'pp', an instance of elementclass P (declared at {path}:5:1), not one element"
    )
    assert (err.location.line, err.location.column) == (7, column_of(path, "pp,"))
    assert err.hint == "declare the element you mean by itself (fifo :: Fifo;) and name that (P holds Fifo)"


def test_naming_a_compound_instance_inside_an_elementclass(tmp_path):
    path = tmp_path / "g.sched"
    path.write_text(
        HEAD + "elementclass P { input -> Fifo -> output; }\n"
        "elementclass Q { pp :: P; srtf :: Srtf; input -> ChoosePolicy(candidates=[srtf, pp]) -> output; }\n"
        "q :: Q;\nsrc -> AcceptAll -> JobPool -> q -> FirstFree -> Launch -> JobMetrics;\n"
    )
    err = refusal(path)
    assert err.message.startswith("argument 'candidates' of ChoosePolicy names 'pp', an instance of elementclass P")
    assert (err.location.line, err.location.column) == (5, path.read_text().splitlines()[4].index("pp]") + 1)


# --- importing a file that is not a .sched file ---


def test_importing_a_file_that_is_not_sched_names_the_import_and_the_error(tmp_path):
    (tmp_path / "t.csv").write_text("job_id,gpus\n1,2\n")
    path = tmp_path / "g.sched"
    path.write_text('round = 5min;\nimport "t.csv";\n')
    err = refusal(path)
    assert (str(err.location.path), err.location.line, err.location.column) == (str(path), 2, 8)
    assert err.message.startswith(
        f"cannot import 't.csv': it is not a .sched file, and does not read as one ({tmp_path / 't.csv'}:1:7: "
    )
    assert "TraceSource(path=...)" in err.hint


def test_a_syntax_error_in_an_imported_sched_file_is_still_said_in_that_file(tmp_path):
    (tmp_path / "lib.sched").write_text("x :: ;\n")
    path = tmp_path / "g.sched"
    path.write_text('import "lib.sched";\n')
    err = refusal(path)
    assert (str(err.location.path), err.location.line, err.location.column) == (str(tmp_path / "lib.sched"), 1, 6)


# --- a number too close to 0 ---


@pytest.mark.parametrize("text", ["1e-400", "-2.5e-400", "1e-400s", "1e-322/h", "1e-400x"])
def test_a_number_that_reads_as_0_is_refused_as_written(text):
    with pytest.raises(SchedError) as info:
        parse_value(text)
    assert info.value.message.startswith(f"'{text}' is too small to be held (it would read as 0)")


@pytest.mark.parametrize("text, value", [("0e-400", 0.0), ("0.0", 0.0), ("1e-320", 1e-320), ("1e-300s", 1e-300)])
def test_a_number_that_is_0_or_holdable_is_read(text, value):
    assert parse_value(text).value == value


def test_an_underflowing_argument_is_said_as_written_not_as_0(tmp_path):
    text = (REPO / "graphs" / "tiresias.sched").read_text().replace("TiresiasLas(", "TiresiasLas(promote_knob=1e-400, ")
    path = tmp_path / "t.sched"
    path.write_text(text.replace("../traces/", str(REPO / "traces") + "/"))
    err = refusal(path)
    assert "'1e-400'" in err.message and "got 0" not in err.message
    assert err.location.column == text.splitlines()[err.location.line - 1].index("1e-400") + 1


# --- tuples elsewhere: the reference, references held in a tuple, paths written in two files ---


def test_the_reference_names_a_tuples_positions_and_a_literals_choices():
    from typing import Literal

    from roundhouse.runtime.element import type_name
    from roundhouse.runtime.values import Duration

    assert type_name(tuple[int, Duration]) == "list of 2: integer, duration"
    assert type_name(tuple[Duration, ...]) == "list of duration"
    assert type_name(Literal["fast", "slow"]) == "one of 'fast', 'slow'"


def test_element_references_held_in_a_tuple_are_references():
    from roundhouse.runtime.values import ElementRef, element_refs

    a, b = ElementRef("a"), ElementRef("b")
    assert element_refs((a, 3, b)) == [a, b] == element_refs([a, "x", b])
    assert element_refs(a) == [a] and element_refs(3) == []


def test_a_tuples_paths_written_in_two_files_are_each_their_own_files_and_a_tuple(tmp_path):
    """An elementclass's list holding an instance's path: each item is converted where it is
    written, by its position's type, and the value is still a tuple."""
    from roundhouse.runtime.values import FilePath

    (tmp_path / "lib").mkdir()
    (tmp_path / "shaped.py").write_text(shaped("tuple[FilePath, FilePath]", '("a.csv", "b.csv")'))
    (tmp_path / "shaped.py").write_text(
        (tmp_path / "shaped.py").read_text().replace("import Duration", "import Duration, FilePath")
    )
    (tmp_path / "lib" / "pick.sched").write_text('elementclass Pick { $file | input -> Shaped(x=[$file, "b.csv"]) -> output; }\n')
    (tmp_path / "g.sched").write_text(
        'require "shaped.py";\nimport "lib/pick.sched";\n' + HEAD + CHAIN.format(policy='Pick(file="traces/t.csv")')
    )
    with registry.scope():
        graph = compile_file(tmp_path / "g.sched")
    (policy,) = [el for el in graph.elements.values() if type(el).__name__ == "Shaped"]
    assert isinstance(policy.x, tuple) and all(isinstance(path, FilePath) for path in policy.x)
    assert [str(path) for path in policy.x] == [str(tmp_path / "traces" / "t.csv"), str(tmp_path / "lib" / "b.csv")]
