"""What the `.sched` language says about mistakes: every problem printed, each at the line that
holds it (an imported file's own, an instance's beside its library's), in a form a person can
act on, and no text silently ignored or lost."""

import pickle
import warnings

import pytest

from roundhouse.errors import MAX_SHOWN, QUOTED_WIDTH, Location, RoundhouseErrors, SchedError, SchedErrors, TraceError
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.dsl.parser import parse, parse_value
from roundhouse.runtime.simulate import simulate
from roundhouse.tools.results import check_traces
from tests.conftest import REPO, fails

TAIL = 'cluster = "2x4:V100";\n'
CHAIN = "-> AcceptAll -> JobPool -> Las -> FirstFree -> Launch -> JobMetrics;\n"
GRAPH = "round = 5min;\n" + TAIL + "src :: PoissonSource(rate=8/h, jobs=5, seed=0);\nsrc " + CHAIN


def write(folder, name, text):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def errors_of(path, overrides=()):
    with pytest.raises((SchedError, SchedErrors)) as info:
        compile_file(path, overrides)
    return info.value.errors if isinstance(info.value, SchedErrors) else [info.value]


# --- traces: every problem, at the line that names the file ---


def bad_trace(folder, name, column):
    return write(folder, name, f"job_id,{column}\n1,2\n")


def test_run_prints_the_problems_of_every_trace(tmp_path, capsys):
    bad_trace(tmp_path, "t1.csv", "foo")
    bad_trace(tmp_path, "t2.csv", "bar")
    sources = 'a1 :: TraceSource(path="t1.csv");\na2 :: TraceSource(path="t2.csv");\npool :: JobPool;\n'
    text = "round = 5min;\n" + TAIL + sources + "a1 -> AcceptAll -> pool;\na2 -> AcceptAll -> pool;\n"
    path = write(tmp_path, "g.sched", text + "pool -> Las -> FirstFree -> Launch -> JobMetrics;\n")
    err = fails(capsys, "run", path, "--until", "1h")
    assert f"{path}:3:" in err and "'foo'" in err and f"{path}:4:" in err and "'bar'" in err
    # Given with --set, each trace's own error names its file: both printed too.
    elsewhere = tmp_path / "other"
    bad_trace(elsewhere, "x1.csv", "foo")
    bad_trace(elsewhere, "x2.csv", "bar")
    err = fails(
        capsys, "run", path, "--until", "1h", "--set", f'a1.path="{elsewhere}/x1.csv"', "--set", f'a2.path="{elsewhere}/x2.csv"'
    )
    assert "x1.csv: error: missing column 'arrival_s'" in err and "x2.csv: error: missing column 'arrival_s'" in err


def test_problems_of_several_kinds_are_raised_together(tmp_path):
    graph = compile_file(write(tmp_path, "g.sched", GRAPH))
    trace = TraceError("t.csv", "missing column 'arrival_s'")
    located = SchedError("argument 'path' of TraceSource: bad", Location("g.sched", 3, 1))
    combined = RoundhouseErrors([trace, located])
    assert str(combined).splitlines()[0] == "t.csv: error: missing column 'arrival_s'"
    assert "g.sched:3:1: error: argument 'path'" in str(combined)
    copy = pickle.loads(pickle.dumps(combined))
    assert str(copy) == str(combined) and copy.exit_code == 2
    check_traces(graph)  # (a graph without a trace has none to complain of)


def test_a_trace_error_of_an_imported_source_is_at_its_line(tmp_path, capsys):
    bad_trace(tmp_path, "bad.csv", "foo")
    lib = write(tmp_path, "sub/src.sched", '\na1 :: TraceSource(path="../bad.csv");\n')
    path = write(tmp_path, "g.sched", 'import "sub/src.sched";\nround = 5min;\n' + TAIL + "a1 " + CHAIN)
    err = fails(capsys, "run", path, "--until", "1h")
    assert err.startswith(f"{lib}:2:24: error: argument 'path' of TraceSource: ../bad.csv: missing column 'arrival_s'")
    assert "TraceSource(path=" in err  # (the line quoted)


# --- ports that connect nothing ---


@pytest.mark.parametrize(
    "text, where, message, hint",
    [
        (
            "elementclass G { input -> AcceptAll -> output [admitted]; }\nsrc -> G ",
            (1, 47),
            "port [admitted] after 'output' connects nothing",
            "'... -> [admitted] output'",
        ),
        (
            "elementclass G { [jobs] input -> AcceptAll -> output; }\nsrc -> G ",
            (1, 18),
            "port [jobs] before 'input' connects nothing",
            "'input [jobs] -> ...'",
        ),
        ("[nonsense] src -> AcceptAll ", (1, 1), "port [nonsense] before 'src' connects nothing", "'... -> [nonsense] src'"),
    ],
)
def test_a_port_that_connects_nothing_is_an_error_at_it(tmp_path, text, where, message, hint):
    graph = text + CHAIN + "round = 5min;\n" + TAIL + "src :: PoissonSource(rate=8/h, jobs=5);\n"
    (err,) = errors_of(write(tmp_path, "g.sched", graph))
    assert err.message.startswith(message) and (err.location.line, err.location.column) == where
    assert hint in err.hint


def test_a_port_after_the_last_element_is_an_error(tmp_path):
    (err,) = errors_of(write(tmp_path, "g.sched", GRAPH.replace("JobMetrics;", "JobMetrics [junk];")))
    assert err.message.startswith("port [junk] after 'JobMetrics' connects nothing") and "'JobMetrics [junk] -> ...'" in err.hint


def test_named_compound_ports_written_where_they_connect(tmp_path):
    gate = "elementclass G { input [j] -> a :: AcceptAll -> [out] output; }\n"
    text = gate + "round = 5min;\n" + TAIL + "src :: PoissonSource(rate=8/h, jobs=5);\ng :: G;\n"
    graph = compile_file(write(tmp_path, "g.sched", text + "src -> [j] g [out] -> JobPool -> Las -> FirstFree -> Launch;\n"))
    assert ("src", "jobs", "g/a", "jobs") in {(c.src, c.src_port, c.dst, c.dst_port) for c in graph.connections}


def test_the_shipped_graphs_still_check():
    from roundhouse.runtime.dsl.loader import load

    graphs = sorted((REPO / "graphs").glob("*.sched"))
    assert graphs
    for path in graphs:
        load(path)  # (raises on any problem of the language)


# --- settings of imported files ---


def test_two_imports_that_set_a_setting_differently_are_an_error(tmp_path):
    first = write(tmp_path, "s1.sched", "round = 1min;\n")
    second = write(tmp_path, "lib/s2.sched", "seed = 3;\nround = 2min;\n")
    text = 'import "s1.sched";\nimport "lib/s2.sched";\n' + TAIL + "src :: PoissonSource(rate=8/h, jobs=5);\nsrc " + CHAIN
    (err,) = errors_of(write(tmp_path, "g.sched", text))
    assert err.location == Location(str(second), 2, 1, 5)
    assert f"2min here, 1min at {first}:1:1" in err.message and "imports them" in err.hint
    # The importing file's own setting chooses; a nearer file's wins over a deeper one's.
    assert compile_file(write(tmp_path, "g2.sched", text + "round = 3min;\n")).settings.round == 180
    write(tmp_path, "deep.sched", 'import "s1.sched";\nround = 4min;\n')
    text = 'import "deep.sched";\n' + TAIL + "src :: PoissonSource(rate=8/h, jobs=5);\nsrc " + CHAIN
    assert compile_file(write(tmp_path, "g3.sched", text)).settings.round == 240


def test_two_imports_that_agree_are_no_conflict(tmp_path):
    write(tmp_path, "s1.sched", "round = 2min;\n")
    write(tmp_path, "s2.sched", "round = 120s;\n")
    text = 'import "s1.sched";\nimport "s2.sched";\n' + TAIL + "src :: PoissonSource(rate=8/h, jobs=5);\nsrc " + CHAIN
    assert compile_file(write(tmp_path, "g.sched", text)).settings.round == 120


# --- compounds ---


def test_arguments_of_a_compound_that_do_not_fit_together_name_the_instance(tmp_path):
    write(
        tmp_path, "lib/q.sched", "elementclass Q { $q, $t |\n    input -> TiresiasLas(queues=$q, thresholds=$t) -> output;\n}\n"
    )
    text = 'import "lib/q.sched";\nround = 5min;\n' + TAIL + "src :: PoissonSource(rate=8/h, jobs=5);\norder :: Q(3, [1h]);\n"
    path = write(tmp_path, "g.sched", text + "src -> AcceptAll -> JobPool -> order -> FirstFree -> Launch;\n")
    (err,) = errors_of(path)
    assert "3 queue(s) need 2 threshold(s)" in err.message and err.location.path.endswith("q.sched")
    assert err.hint == f"in 'order', declared at {path}:5:1: order :: Q(3, [1h]);"


@pytest.mark.parametrize(
    "params, body_args, instance_args, line, hint",
    [
        ("$n", "rate=1/d, jobs=$n", "100000", 1, True),  # (at the library's rate, which the instance's count makes slow)
        ("$r", "rate=$r, jobs=100000", "1/d", 4, False),  # (at the instance's own argument: its line says it all)
    ],
)
def test_an_argument_checked_with_others_in_a_compound(tmp_path, params, body_args, instance_args, line, hint):
    text = f"elementclass S {{ {params} | PoissonSource({body_args}) -> output; }}\nround = 5min;\n" + TAIL
    path = write(tmp_path, "g.sched", text + f"src :: S({instance_args});\nsrc " + CHAIN)
    (err,) = errors_of(path)
    assert "argument 'rate' of PoissonSource must be at least" in err.message and err.location.line == line
    assert (err.hint == f"in 'src', declared at {path}:4:1: src :: S({instance_args});") is hint


@pytest.mark.parametrize("args", ["a=2x, 3x", "b=2x, 3x", "a=1x, b=1x, 2x"])
def test_a_positional_parameter_after_a_keyword_one(tmp_path, args):
    gate = "elementclass Gate { $a=1x, $b=1x | input -> AcceptThreshold(factor=$b) -> output; }\n"
    text = gate + "round = 5min;\n" + TAIL + f"src :: PoissonSource(rate=8/h, jobs=5);\nadmit :: Gate({args});\n"
    (err,) = errors_of(write(tmp_path, "g.sched", text + "src -> admit -> JobPool -> Las -> FirstFree -> Launch;\n"))
    assert err.message == "a positional argument cannot follow a keyword argument"
    assert (err.location.line, err.location.column) == (5, 16 + args.rindex(" "))


@pytest.mark.parametrize(
    ("chain", "message"),
    [
        ("AcceptAll(1)", "AcceptAll takes no arguments"),
        ("AcceptThreshold(2x, 3)", "AcceptThreshold takes at most 1 argument"),
    ],
)
def test_too_many_positional_arguments_are_counted_in_words(tmp_path, chain, message):
    text = "round = 5min;\n" + TAIL + "src :: PoissonSource(rate=8/h, jobs=5);\n"
    (err,) = errors_of(write(tmp_path, "g.sched", text + f"src -> {chain} -> JobPool -> Las -> FirstFree -> Launch;\n"))
    assert err.message == message and err.location.line == 4


# --- PoissonSource's rate ---


def test_a_rate_too_slow_for_its_jobs_is_refused_at_the_rate(tmp_path):
    text = GRAPH.replace("rate=8/h, jobs=5, seed=0", "rate=1/d, jobs=100000")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no numpy warning for a vanishing rate either)
        (err,) = errors_of(write(tmp_path, "g.sched", text))
        assert (err.location.line, err.location.column) == (3, 27)
        assert "must be at least 0.115/h for 100,000 jobs, got 0.0416667/h" in err.message
        (err,) = errors_of(write(tmp_path, "g2.sched", text.replace("1/d", "1e-320/h")))
        assert "argument 'rate' of PoissonSource must be at least" in err.message
    # The bound it names passes, and fewer jobs (given with --set) may arrive as slowly.
    assert compile_file(write(tmp_path, "g3.sched", text.replace("1/d", "0.115/h")))
    assert compile_file(tmp_path / "g.sched", ["src.jobs=1000"]).elements["src"].jobs == 1000


def test_arrivals_drawn_past_a_century_are_said_at_the_source(tmp_path):
    # The average span fits; these draws (seed 0) go past it.
    path = write(tmp_path, "g.sched", GRAPH.replace("rate=8/h, jobs=5, seed=0", "rate=1.3e-6/h, jobs=2, seed=0"))
    with pytest.raises(SchedError) as got:
        simulate(compile_file(path), until=600)
    assert got.value.location is not None and got.value.location.line == 3
    assert got.value.message.startswith("PoissonSource 'src': the arrivals of its 2 jobs")


# --- reading the text ---


def test_a_file_with_carriage_returns_alone_is_read_line_by_line(tmp_path):
    text = "// a comment\rround = 5min;\r" + TAIL.replace("\n", "\r") + "src :: PoissonSource(rate=8/h, jobs=5);\rsrc " + CHAIN
    path = tmp_path / "g.sched"
    path.write_bytes(text.encode())
    assert compile_file(path).settings.round == 300
    path.write_bytes(text.replace("jobs=5", "jobs=5, bogus=1").encode())
    (err,) = errors_of(path)
    assert (err.location.line, err.location.column) == (4, 40) and str(err).splitlines()[1].endswith("bogus=1);")


@pytest.mark.parametrize(
    "before, hint",
    [
        ("src :: Fifo;\n}\n", False),
        ("elementclass G { input -> output; }\n}\n", False),
        ("src :: Fifo;\n-> src;\n", False),
        ("round = 5min\nsrc :: Fifo;\n", True),
    ],
)
def test_the_missing_semicolon_hint_only_where_one_may_be_missing(before, hint):
    with pytest.raises(SchedError) as got:
        parse(before, "f.sched")
    assert (got.value.hint is not None and "forget" in got.value.hint) is hint


def test_a_long_line_is_quoted_around_the_column_and_errors_are_counted(tmp_path):
    text = "a :: JobPool;\na" + " -> a" * 500 + ";\n"
    with pytest.raises(SchedErrors) as got:
        compile_file(write(tmp_path, "g.sched", text))
    shown = str(got.value)
    assert len(got.value.errors) > MAX_SHOWN and shown.endswith(f"…and {len(got.value.errors) - MAX_SHOWN} more error(s)")
    assert len(shown) < 400 * MAX_SHOWN
    far = next(e for e in got.value.errors if e.location.column > 1000)
    _, quoted, underline = str(far).splitlines()[:3]
    assert len(quoted) < QUOTED_WIDTH + 12 and quoted.split("| ", 1)[1].startswith("…")
    column = underline.index("^")
    assert quoted[column : column + 2] == "->"


def test_a_setting_given_with_set_is_said_on_the_command_line(tmp_path, capsys):
    path = write(tmp_path, "g.sched", GRAPH)
    err = fails(capsys, "run", path, "--until", "30min", "--set", "round=-1min")
    assert err.startswith("error: --set round=-1min: setting 'round' must be at least 0.001s, got -1min")
    assert " | " not in err  # (no line of a file quoted)


def test_a_range_given_with_set_is_not_told_to_be_quoted():
    with pytest.raises(SchedError) as got:
        parse_value("5..3")
    assert "ends before it starts" in got.value.message and got.value.hint is None


def test_a_file_that_is_not_utf8_is_named_by_line_and_column(tmp_path, capsys):
    path = tmp_path / "g.sched"
    path.write_bytes(b"round = 5min;\n// caf\xe9 \xff\n")
    err = fails(capsys, "check", path)
    assert err.startswith(f"{path}:2:7: error: not UTF-8 text (byte 0xe9 cannot be decoded)")
    importer = write(tmp_path, "i.sched", 'import "g.sched";\n')
    (got,) = errors_of(importer)
    assert "byte 0xe9 at line 2, column 7 cannot be decoded" in got.message


@pytest.mark.parametrize("ch", ["\x01", "\x00", "\x1b", "\x7f"])
def test_a_control_character_in_a_string_is_refused_at_it(tmp_path, ch):
    text = GRAPH.replace("Launch", "run :: Launch") + f'et :: EffectiveThroughput(by="x{ch}y");\nrun -> et;\n'
    (err,) = errors_of(write(tmp_path, "g.sched", text))
    assert f"control character U+{ord(ch):04X}" in err.message and (err.location.line, err.location.column) == (5, 32)


def test_a_tab_in_a_string_is_kept():
    (chain,) = parse('x :: C(s="a\tb");').statements
    assert chain.endpoints[0].node.args[0].value.value == "a\tb"
