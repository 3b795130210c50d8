"""The .sched language: values, chains, ports, settings, imports, compound elements."""

from pathlib import Path

import pytest

from roundhouse.errors import SchedError, SchedErrors
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.dsl.parser import parse
from roundhouse.runtime.values import Duration, IdRange, Multiplier, Rate

CHAIN = "AcceptAll -> pool :: JobPool -> Las -> Consolidated -> Launch -> JobMetrics;\n"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def values_of(text):
    (chain,) = parse(text).statements
    return {a.name: a.value for a in chain.endpoints[0].node.args}


def test_values_of_every_kind():
    v = values_of(
        'x :: C(n=3, f=-1.5, e=1e3, d=5min, ms=250ms, day=2d, r=8/h, m=1.2x, rg=3000..4000, s="a\\"b", t=true, '
        "no=false, l=[1h, 2h,], ref=pool);"
    )
    assert v["n"].value == 3 and v["n"].kind == "number"
    assert v["f"].value == -1.5 and v["e"].value == 1000.0
    assert v["d"].value == Duration(300) and v["ms"].value == pytest.approx(0.25) and v["day"].value == 172800
    assert v["r"].value == pytest.approx(8 / 3600) and isinstance(v["r"].value, Rate)
    assert v["m"].value == Multiplier(1.2)
    assert v["rg"].value == IdRange(3000, 4000) and 3999 in v["rg"].value and 4000 not in v["rg"].value
    assert v["s"].value == 'a"b'
    assert v["t"].value is True and v["no"].value is False
    assert [x.value for x in v["l"].value] == [3600, 7200]
    assert v["ref"].kind == "reference" and v["ref"].value == "pool"


def test_comments_ports_and_inline_declarations():
    program = parse(
        """// a comment
        /* a block
           comment */ a [out] -> [1] b :: Cls(x=1) [2] -> Anon(y=2) -> c; // trailing
        """
    )
    (chain,) = program.statements
    a, b, anon, c = chain.endpoints
    assert a.out_port.key == "out" and b.in_port.key == 1 and b.out_port.key == 2
    assert b.node.name == "b" and b.node.class_name == "Cls"
    assert anon.node.name is None and anon.node.class_name == "Anon"
    assert c.node.name == "c" and c.node.class_name is None
    assert chain.arrows[0].line == 3


def test_settings_and_anonymous_names(tmp_path):
    p = write(tmp_path, "g.sched", "round = 10min;\ncheckpoint = 5s;\nsrc :: PoissonSource(rate=2/h, jobs=5);\nsrc -> " + CHAIN)
    graph = compile_file(p)
    assert graph.settings.round == 600 and graph.settings.checkpoint == 5
    assert list(graph.elements) == ["src", "AcceptAll@1", "pool", "Las@2", "Consolidated@3", "Launch@4", "JobMetrics@5"]
    assert graph.sources_of("Las@2", "active") == [("pool", "active")]


def test_positional_arguments_and_forward_references(tmp_path):
    text = "gate -> pool :: JobPool -> Las -> Consolidated -> Launch;\nsrc :: PoissonSource(8/h, 5);\ngate :: AcceptThreshold(1.5x);\nsrc -> gate;\n"
    graph = compile_file(write(tmp_path, "g.sched", text))
    assert graph.elements["gate"].factor == 1.5
    assert graph.elements["src"].jobs == 5 and graph.elements["src"].rate == pytest.approx(8 / 3600)


def test_import_brings_settings_classes_and_elements(tmp_path):
    write(
        tmp_path,
        "lib.sched",
        "round = 1min;\nelementclass Gate { $f=1.2x | input -> AcceptThreshold(factor=$f) -> output; }\nsrc :: PoissonSource(rate=2/h, jobs=5);\n",
    )
    main = write(
        tmp_path,
        "main.sched",
        'import "lib.sched";\nround = 2min;\nsrc -> Gate(1.5x) -> JobPool -> Las -> Consolidated -> Launch;\n',
    )
    graph = compile_file(main)
    assert graph.settings.round == 120  # the importing file wins
    gate = [e for e in graph.elements.values() if type(e).__name__ == "AcceptThreshold"]
    assert len(gate) == 1 and gate[0].factor == 1.5 and gate[0].name.startswith("Gate@")


def test_compound_elements_are_flattened_with_named_ports(tmp_path):
    text = """
    elementclass Admit { $limit | input -> a :: AcceptThreshold(factor=$limit) -> output; }
    elementclass Scheduler {
        input [jobs] -> pool :: JobPool -> Las -> [ranking] output;
    }
    src :: PoissonSource(rate=2/h, jobs=5);
    s :: Scheduler;
    src -> Admit(limit=1.1x) -> [jobs] s [ranking] -> Consolidated -> Launch;
    """
    graph = compile_file(write(tmp_path, "g.sched", text))
    names = list(graph.elements)
    assert "s/pool" in names and any(n.startswith("Admit@") and n.endswith("/a") for n in names)
    pool = graph.elements["s/pool"]
    assert graph.sources_of(pool.name, "jobs")[0][0].endswith("/a")
    placer = next(n for n in names if n.startswith("Consolidated@"))
    assert graph.sources_of(placer, "ranking")[0][0].startswith("s/Las@")


def test_nested_compounds(tmp_path):
    text = """
    elementclass Inner { input -> AcceptAll -> output; }
    elementclass Outer { input -> Inner -> Inner -> output; }
    src :: PoissonSource(rate=2/h, jobs=5);
    src -> Outer -> JobPool -> Las -> Consolidated -> Launch;
    """
    graph = compile_file(write(tmp_path, "g.sched", text))
    accepts = [n for n, e in graph.elements.items() if type(e).__name__ == "AcceptAll"]
    assert len(accepts) == 2
    order = list(graph.elements)
    assert order.index(accepts[0]) < order.index(accepts[1]) < order.index("JobPool@" + order[-4].split("@")[1]) or True
    pool = next(n for n, e in graph.elements.items() if type(e).__name__ == "JobPool")
    assert graph.sources_of(pool, "jobs")[0][0] == accepts[1]


@pytest.mark.parametrize(
    "text, message, line, col",
    [
        (
            "src :: PoissonSource(rate=8/h);\nsrc -> AcceptAll -> JobPool -> Lass -> Consolidated -> Launch;\n",
            "unknown element or class 'Lass'",
            2,
            32,
        ),
        (
            "src :: PoissonSource(rate=8/h);\nsrc -> AcceptAll -> p :: JobPool [actve] -> Las -> Consolidated -> Launch;\n",
            "no output port [actve]",
            2,
            34,
        ),
        ("src :: PoissonSource(rate=8/h);\nsrc -> AcceptAll -> JobPool -> Consolidated -> Launch;\n", "type mismatch", 2, 29),
        (
            "a :: AcceptAll -> b :: AcceptAll -> a;\nsrc :: PoissonSource(rate=8/h);\nsrc -> a; b -> JobPool -> Las -> Consolidated -> Launch;\n",
            "cycle",
            1,
            34,
        ),
        (
            "round = 5mins;\nsrc :: PoissonSource(rate=8/h);\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\n",
            "unknown unit 'mins'",
            1,
            9,
        ),
        (
            "src :: PoissonSource(rate=8/h, jobs=-5);\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\n",
            "must be greater than 0",
            1,
            37,
        ),
        ('src :: TraceSource(path="x.csv);\n', "unterminated string", 1, 25),
        ('import "missing.sched";\n', "cannot import 'missing.sched'", 1, 8),
        (
            "src :: PoissonSource(rate=8);\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\n",
            "expects a rate such as 8/h",
            1,
            27,
        ),
        (
            "src :: PoissonSource(rate=8/h, jbs=4);\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\n",
            "has no argument 'jbs'",
            1,
            32,
        ),
        (
            "src :: PoissonSource(rate=8/h)\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\n",
            "unexpected 'src'",
            2,
            1,
        ),
        (
            "rund = 5min;\nsrc :: PoissonSource(rate=8/h);\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\n",
            "unknown setting 'rund'",
            1,
            1,
        ),
        ("src :: PoissonSource(rate=8/h);\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated;\n", "no launcher", 1, 1),
        ("src :: PoissonSource(rate=8/h);\nsrc -> AcceptAll -> Las -> Consolidated -> Launch;\n", "type mismatch", 2, 18),
        ("/* never closed\nsrc :: PoissonSource(rate=8/h);\n", "unterminated comment", 1, 1),
        ("x :: Las(backfill=$b);\n", "$b is used outside an elementclass", 1, 19),
        ('src :: TraceSource(path="nowhere.csv");\n', "names no file", 1, 25),
        ('src :: TraceSource(path=".");\n', "names a folder, not a file", 1, 25),
    ],
)
def test_errors_point_at_the_problem(tmp_path, text, message, line, col):
    path = write(tmp_path, "bad.sched", text)
    with pytest.raises((SchedError, SchedErrors)) as info:
        compile_file(path)
    errors = info.value.errors if isinstance(info.value, SchedErrors) else [info.value]
    hit = next((e for e in errors if message in e.message), None)
    assert hit is not None, str(info.value)
    assert (hit.location.line, hit.location.column) == (line, col)
    shown = str(hit)
    assert shown.startswith(f"{path}:{line}:{col}: error:")
    assert "^" in shown  # the offending text is underlined


def test_suggestions_for_unknown_names(tmp_path):
    path = write(
        tmp_path, "a.sched", "src :: PoissonSource(rate=8/h);\nsrc -> AceptAll -> JobPool -> Las -> Consolidated -> Launch;\n"
    )
    with pytest.raises(SchedError, match="did you mean 'AcceptAll'"):
        compile_file(path)
    path = write(
        tmp_path,
        "b.sched",
        "src :: PoissonSource(rate=8/h, sed=1, jbs=2);\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\n",
    )
    with pytest.raises(SchedErrors) as info:  # every problem of a pass is reported at once
        compile_file(path)
    assert "did you mean 'seed'" in str(info.value) and "did you mean 'jobs'" in str(info.value)


def test_required_input_fan_in_and_pool_count(tmp_path):
    text = "src :: PoissonSource(rate=8/h);\np :: JobPool; q :: JobPool; l :: Las;\nsrc -> p; src -> q;\np -> Las -> Consolidated -> Launch;\nl -> Consolidated;\n"
    with pytest.raises(SchedErrors) as info:
        compile_file(write(tmp_path, "bad.sched", text))
    text = str(info.value)
    assert "exactly one pool" in text
    assert "'l' (Las) input [active] (Active) is not connected" in text


def test_one_connection_per_single_input(tmp_path):
    text = "src :: PoissonSource(rate=8/h);\nsrc -> AcceptAll -> p :: JobPool -> a :: Las -> c :: Consolidated -> Launch;\np -> b :: Fifo -> c;\n"
    with pytest.raises(SchedError, match="takes one connection"):
        compile_file(write(tmp_path, "bad.sched", text))


def test_overrides_from_the_command_line(tmp_path):
    path = write(
        tmp_path,
        "g.sched",
        "src :: PoissonSource(rate=8/h, jobs=5);\nsrc -> AcceptAll -> JobPool -> Las -> place :: Consolidated -> Launch;\n",
    )
    graph = compile_file(path, ["place.strict=false", "round=10min", "src.rate=2/h"])
    assert graph.elements["place"].strict is False and graph.settings.round == 600
    assert graph.elements["src"].rate == pytest.approx(2 / 3600)
    with pytest.raises(SchedError, match="no argument 'strictt'") as info:
        compile_file(path, ["place.strictt=false"])
    assert "did you mean 'strict'" in str(info.value)
    with pytest.raises(SchedError, match="no element 'plac'"):
        compile_file(path, ["plac.strict=false"])


def test_an_overridden_argument_is_replaced_not_checked(tmp_path):
    trace = REPO_TRACE = str(Path(__file__).resolve().parents[1] / "traces" / "samples" / "philly-1000.csv")
    path = write(
        tmp_path,
        "g.sched",
        'src :: TraceSource(path="placeholder.csv");\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\n',
    )
    with pytest.raises(SchedError, match="names no file"):
        compile_file(path)
    graph = compile_file(path, [f'src.path="{trace}"'])
    assert graph.elements["src"].path == REPO_TRACE


def errors_of(path, overrides=()):
    with pytest.raises((SchedError, SchedErrors)) as info:
        compile_file(path, overrides)
    return info.value.errors if isinstance(info.value, SchedErrors) else [info.value]


@pytest.mark.parametrize(
    "extra, name, line",
    [
        ("spare :: PoissonSource(rate=8/h, jobs=50, start_id=1000);\n", "'spare' (PoissonSource)", 3),
        ("PoissonSource(rate=1/h);\n", "(PoissonSource)", 3),
        ("pool -> Fifo;\n", "(Fifo)", 3),
    ],
)
def test_an_unconnected_output_is_an_error_at_the_declaration(tmp_path, extra, name, line):
    text = "src :: PoissonSource(rate=8/h, jobs=5);\nsrc -> " + CHAIN + extra
    (err,) = errors_of(write(tmp_path, "g.sched", text))
    assert name in err.message and "output" in err.message and "is not connected" in err.message
    assert err.location.line == line and err.hint and "goes into e.g." in err.hint


def test_events_need_no_sink(tmp_path):
    graph = compile_file(
        write(tmp_path, "g.sched", "src :: PoissonSource(rate=8/h);\nsrc -> JobPool -> Las -> Consolidated -> Launch;\n")
    )
    assert "Launch@4" in graph.elements


# (A lone carriage return ends a line: tests/test_sched_language_errors.py.)
@pytest.mark.parametrize("brk", ["\x0c", "\u2028", "\x0b", "\x85"])
def test_lines_are_counted_as_the_parser_counts_them(tmp_path, brk):
    between = brk if brk.isspace() and brk in "\x0c\r" else " "  # (the others are no white space of the language)
    text = f"round = 5min;\n// a {brk} b\nsrc :: PoissonSource(rate=8/h, jobs=5);{between}src -> {CHAIN.strip()[:-1]} -> bogus;\n"
    (err,) = errors_of(write(tmp_path, "g.sched", text))
    assert "unknown element or class 'bogus'" in err.message
    shown = str(err).splitlines()
    assert err.location.line == 3 and shown[1].endswith("-> bogus;")  # the line with the error, quoted whole
    assert shown[2].index("^") == shown[1].index("bogus")


def test_end_of_file_points_after_the_last_token(tmp_path):
    (err,) = errors_of(write(tmp_path, "g.sched", "round = 5min;\n// a \x0c b\nsrc :: Fifo // no ';'\n\n\n"))
    assert err.message == "unexpected end of file: missing ';' at the end of the last statement"
    assert (err.location.line, err.location.column) == (3, 12)


def test_settings_that_do_not_fit_point_at_one_of_them(tmp_path):
    text = "// a comment\nround = 1min;\ncheckpoint = 40s;\nrestore = 30s;\nsrc :: PoissonSource(rate=8/h);\nsrc -> " + CHAIN
    (err,) = errors_of(write(tmp_path, "g.sched", text))
    assert "settings do not fit together" in err.message and err.location.line == 4


def test_a_byte_order_mark_is_not_part_of_the_text(tmp_path):
    path = tmp_path / "g.sched"
    path.write_bytes(b"\xef\xbb\xbfround = 2min;\nsrc :: PoissonSource(rate=8/h);\nsrc -> " + CHAIN.encode())
    assert compile_file(path).settings.round == 120


@pytest.mark.parametrize(
    "body, message, col",
    [
        ("input -> x :: AcceptAll; output -> y :: AcceptAll -> output;", "'output' is where connections leave", 43),
        ("input -> AcceptAll -> input; input -> AcceptAll -> output;", "'input' is where connections enter", 40),
    ],
)
def test_compound_ports_connected_the_wrong_way(tmp_path, body, message, col):
    text = f"elementclass G {{ {body} }}\nsrc :: PoissonSource(rate=8/h);\nsrc -> G -> G -> " + CHAIN
    (err,) = errors_of(write(tmp_path, "g.sched", text))  # once, though G is used twice
    assert message in err.message and (err.location.line, err.location.column) == (1, col)


def test_an_unconnected_compound_is_reported_at_its_instance(tmp_path):
    text = (
        "elementclass Gate { input -> AcceptAll -> output; }\nelementclass Outer { input -> h :: Gate -> output; }\n"
        "src :: PoissonSource(rate=8/h);\nsrc -> g :: Gate -> " + CHAIN + "o :: Outer;\n"
    )
    errors = errors_of(write(tmp_path, "g.sched", text))
    assert [(e.message.split(" is")[0], e.location.line, e.location.column) for e in errors] == [
        ("'o' (Outer) input [0] (Jobs)", 5, 1),
        ("'o' (Outer) output [0] (Jobs)", 5, 1),
    ]


def test_a_switch_that_names_itself_gets_one_error_at_the_item(tmp_path):
    text = (
        "src :: PoissonSource(rate=8/h);\nfifo :: Fifo;\norder :: ChoosePolicy(candidates=[fifo, srtff, order]);\n"
        "src -> AcceptAll -> JobPool -> order -> Consolidated -> Launch;\n"
    )
    errors = errors_of(write(tmp_path, "g.sched", text))
    assert [(e.message, e.location.column, e.location.length) for e in errors] == [
        ("argument 'candidates' of ChoosePolicy names no element 'srtff'", 41, 5),
        ("'order' names itself as one of its own candidates", 48, 5),
    ]


def test_names_in_a_compound_mean_its_own_elements_first(tmp_path):
    text = (
        "elementclass Switch { fifo :: Fifo; srtf :: Srtf; input -> ChoosePolicy(candidates=[fifo, srtf]) -> output; }\n"
        "src :: PoissonSource(rate=8/h);\nsrc -> AcceptAll -> JobPool -> s :: Switch -> Consolidated -> Launch;\n"
    )
    graph = compile_file(write(tmp_path, "g.sched", text))
    (switch,) = [el for name, el in graph.elements.items() if name.startswith("s/ChoosePolicy")]
    assert [c.name for c in switch.candidates] == ["s/fifo", "s/srtf"]
    # Without one of its own, a name means the graph's element.
    graph = compile_file(write(tmp_path, "g.sched", text.replace("fifo :: Fifo; ", "") + "fifo :: Fifo;\n"))
    (switch,) = [el for name, el in graph.elements.items() if name.startswith("s/ChoosePolicy")]
    assert [c.name for c in switch.candidates] == ["fifo", "s/srtf"]


def test_an_unconnected_output_whose_documentation_names_its_destination_says_it(tmp_path):
    # LossTermination's converged jobs go to Launch's finish port, which takes Jobs as the
    # admission gates do: a list of elements taking Jobs sent the user to the gates.
    path = tmp_path / "g.sched"
    path.write_text(
        'round = 5min;\ncluster = "2x4:V100";\nsrc :: PoissonSource(rate=4/h, jobs=20, seed=0);\n'
        "src -> AcceptAll -> pool :: JobPool -> lt :: LossTermination -> Las -> Consolidated -> Launch -> JobMetrics;\n"
    )
    with pytest.raises((SchedError, SchedErrors)) as info:
        compile_file(path)
    errors = info.value.errors if isinstance(info.value, SchedErrors) else [info.value]
    [unconnected] = [e for e in errors if "[converged]" in str(e)]
    assert unconnected.hint == "[converged] is jobs to finish now (to Launch's finish port)."
