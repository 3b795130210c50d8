"""What a new user is told about `.sched` text and `--set` values the language cannot take: a
list nested too deeply is named where it starts; a `--set` value followed by more text is told
that one value goes there (not that a ';' is missing, which `--set` refuses); a `--set` of an
argument an element does not have, or of no argument at all, says what to write; of two pools
or two synthesizers, the second written is the one refused; and a name as messages show it
(`JobPool@2`, `g/AcceptAll@1`) written back into a graph is explained; a list given to
`gpu_types` or `cluster`, each one string of items, is told how to write them."""

import pytest

from roundhouse.errors import SchedError
from roundhouse.runtime.dsl.parser import parse, parse_value
from tests.conftest import fails

GRAPH = """round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=5, seed=0);
arrivals -> JobPool -> Las -> Consolidated -> Launch -> report :: JobMetrics;
"""


@pytest.fixture
def graph(tmp_path):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH)
    return path


# --- a list nested too deeply to be read ---


@pytest.mark.parametrize("depth", [2000, 5000])
def test_a_list_nested_too_deeply_is_named_where_it_starts(depth):
    text = 'round = 5min;\n\nx :: Las(service="[", tags=' + "[" * depth + "]" * depth + ");\n"
    with pytest.raises(SchedError, match="nests too deeply") as info:
        parse(text, "g.sched")
    # (the list's first '[', after a string holding one that is no list)
    assert (info.value.location.line, info.value.location.column) == (3, 28)
    assert f"{depth} lists inside lists" in info.value.message


def test_the_deepest_list_is_named_when_several_are_deep():
    text = "x :: Las(a=[[1]], b=" + "[" * 3000 + "]" * 3000 + ");\n"
    with pytest.raises(SchedError, match="nests too deeply") as info:
        parse(text, "g.sched")
    assert (info.value.location.line, info.value.location.column) == (1, 21)


def test_a_set_value_nested_too_deeply_is_named_in_the_value(graph, capsys):
    err = fails(capsys, "run", graph, "--set", "report.track=" + "[" * 3000 + "]" * 3000)
    assert "nests too deeply" in err and "3000 lists inside lists" in err


# --- a --set value followed by more text ---


@pytest.mark.parametrize(
    ("text", "after"),
    [("5min,6min", "','"), ("5min 6min", "'6min'"), ("[1, 2] 3", "'3'")],
)
def test_a_value_followed_by_more_is_not_told_a_semicolon_is_missing(text, after):
    with pytest.raises(SchedError) as info:
        parse_value(text, "--set round")
    assert f"unexpected {after} after the value" in info.value.message
    assert "expected ';'" not in info.value.message


def test_the_command_line_says_one_value_goes_there(graph, capsys):
    err = fails(capsys, "run", graph, "--set", "round=5min,6min")
    assert "unexpected ',' after the value" in err and "[a, b]" in err
    assert "expected ';'" not in err


# --- --set of an argument the element does not have, or of none ---


def test_a_set_of_an_unknown_argument_lists_the_elements_arguments(graph, capsys):
    err = fails(capsys, "run", graph, "--set", "arrivals.zzz=1")
    assert "PoissonSource 'arrivals' has no argument 'zzz'" in err
    assert "its arguments: " in err and "rate" in err and "seed" in err


def test_a_set_of_an_element_that_takes_no_arguments_says_so(graph, capsys):
    err = fails(capsys, "run", graph, "--set", "Launch@4.zzz=1")
    assert "Launch 'Launch@4' has no argument 'zzz'" in err and "Launch takes no arguments" in err


@pytest.mark.parametrize("target", ["arrivals.", ".seed", "."])
def test_a_set_without_an_element_or_an_argument_says_what_to_write(graph, capsys, target):
    err = fails(capsys, "run", graph, "--set", f"{target}=3")
    assert f"--set {target}=3: write --set element.field=value or --set setting=value" in err
    assert "no argument ''" not in err and "no element ''" not in err


# --- a second pool is said after the first written ---

CHAIN = "-> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
HEAD = 'cluster = "2x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=5, seed=0);\n'


@pytest.mark.parametrize(
    "second",
    [
        "src -> AcceptAll -> pool :: JobPool " + CHAIN,  # (named in a chain below an anonymous one)
        "pool :: JobPool;\n",  # (declared on its own below it)
    ],
)
def test_the_second_pool_is_the_one_written_second(tmp_path, capsys, second):
    path = tmp_path / "g.sched"
    path.write_text(HEAD + "src -> AcceptAll -> JobPool " + CHAIN + second)
    err = fails(capsys, "check", path)
    assert f"{path}:4:" in err.splitlines()[0]
    assert "'pool' is a second (first at " + f"{path}:3:21)" in err


def test_the_second_element_that_forks_the_world_is_the_one_written_second(tmp_path, capsys):
    path = tmp_path / "g.sched"
    path.write_text(
        HEAD
        + "f :: Fifo; s :: Srtf;\n"
        + "Synthesizer(switches=[order]);\n"
        + "again :: Synthesizer(switches=[order]);\n"
        + "order :: ChoosePolicy(candidates=[f, s]);\n"
        + "src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> JobMetrics;\n"
    )
    err = fails(capsys, "check", path)
    assert f"{path}:5:1: error: 'again' (Synthesizer) is a second element that forks the world, after 'Synthesizer@" in err


# --- a name as messages show it, written back into a graph ---


def test_an_anonymous_elements_shown_name_written_in_a_graph_is_explained():
    text = HEAD + "src -> a :: AcceptAll -> JobPool " + CHAIN + "src -> b :: AcceptAll -> JobPool@2;\n"
    with pytest.raises(SchedError) as info:
        parse(text, "g.sched")
    assert (info.value.location.line, info.value.location.column) == (4, 33)
    assert "'JobPool@2' is how messages name an anonymous element" in info.value.message
    assert "x :: JobPool" in info.value.hint


def test_an_inner_elements_shown_name_written_in_a_graph_is_explained():
    text = HEAD + "g/AcceptAll@1 -> JobPool " + CHAIN
    with pytest.raises(SchedError) as info:
        parse(text, "g.sched")
    assert (info.value.location.line, info.value.location.column) == (3, 2)
    assert "'g/AcceptAll@1' is how messages name an element inside the compound 'g'" in info.value.message


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("x :: JobPool; foo @ 3;\n", "unexpected character '@'"),  # (no name before it)
        ("x :: TraceSource(path=a/b.csv);\n", "in a value"),  # (a path left unquoted: quote it)
        ("src :: PoissonSource(rate=8 /h);\n", "unexpected character '/'"),  # (a rate with a space)
    ],
)
def test_other_at_signs_and_slashes_are_told_as_before(text, said):
    with pytest.raises(SchedError) as info:
        parse(text, "g.sched")
    assert said in info.value.message and "how messages name" not in info.value.message


# --- a list given to a setting that is one string of items ---


def test_a_list_of_gpu_types_is_told_to_be_one_string(tmp_path, capsys):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH + 'gpu_types = ["Q100", Z1];\n')
    err = fails(capsys, "check", path)
    assert f"{path}:5:13: error: setting 'gpu_types' expects a word or a string" in err
    assert 'hint: gpu_types is one string, its items separated by commas: gpu_types = "Q100,Z1";' in err


def test_a_list_given_with_set_is_told_the_options_form(graph, capsys):
    err = fails(capsys, "run", graph, "--set", "gpu_types=[Q100, Z1]")
    assert "hint: gpu_types is one string, its items separated by commas: --set gpu_types=Q100,Z1" in err


def test_a_list_of_what_is_no_text_keeps_the_plain_message(tmp_path, capsys):
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.replace('cluster = "2x4:V100";', "cluster = [16, 4];"))
    err = fails(capsys, "check", path)
    assert "setting 'cluster' expects a word or a string" in err and "separated by commas" not in err


def test_a_list_given_with_vary_is_not_told_to_use_commas(graph, capsys):
    # (a sweep's commas part its values: `--vary gpu_types=a,b` is two runs, not one of two types)
    err = fails(capsys, "sweep", graph, "--vary", "gpu_types=[a],[b]", "--until", "1h")
    assert "setting 'gpu_types' expects a word or a string" in err and "separated by commas" not in err


# --- check takes the --set overrides a run takes ---


def test_check_takes_the_overrides_a_run_takes(graph, capsys, tmp_path):
    from roundhouse.tools.cli import main

    assert main(["check", str(graph), "--set", "round=10min", "--set", "arrivals.jobs=3"]) == 0
    assert f"{graph}: ok" in capsys.readouterr().out
    # A type of its own, as the cluster's refusal says to name it with --set gpu_types.
    assert main(["check", str(graph), "--cluster", "2x4:Q100", "--set", "gpu_types=Q100"]) == 0
    assert "2x4:Q100" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--set", "arrivals.zzz=1"], "--set arrivals.zzz=1: PoissonSource 'arrivals' has no argument 'zzz'"),
        (["--set", "round=abc"], "--set round: setting 'round' expects a duration"),
        (["--set", "round=5min", "--set", "round=6min"], "round is set twice"),
        (["--cluster", "2x4:V100", "--set", "cluster=2x4:V100"], "the cluster is given twice"),
    ],
)
def test_check_refuses_what_run_refuses_in_overrides(graph, capsys, argv, said):
    assert said in fails(capsys, "check", graph, *argv)
