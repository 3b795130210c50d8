"""An element class the graph has no instance of is still checked, as Click checks it: what does
not depend on an instance (class names, arguments that take no parameter, connections and their
ports) is reported at its line; what an instance gives (parameters) or connects (its own input
and output, unconnected ports) is not required."""

import pytest

from roundhouse.errors import SchedError, SchedErrors
from roundhouse.runtime.compiler import compile_file
from tests.conftest import fails

GRAPH = "src :: PoissonSource(rate=8/h, jobs=5);\nsrc -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch;\n"


def errors_of(path):
    with pytest.raises((SchedError, SchedErrors)) as info:
        compile_file(path)
    return info.value.errors if isinstance(info.value, SchedErrors) else [info.value]


def located(tmp_path, classes: str) -> list[tuple[str, int, int]]:
    path = tmp_path / "g.sched"
    path.write_text(classes + GRAPH)
    return [(e.message, e.location.line, e.location.column) for e in errors_of(path)]


@pytest.mark.parametrize(
    "body, message, at",
    [
        ("input -> x :: Lass -> output;", "unknown element class 'Lass'", "Lass"),
        ("input -> Bogus -> output;", "unknown element or class 'Bogus'", "Bogus"),
        (
            "input -> AcceptThreshold(factor=-1x) -> output;",
            "argument 'factor' of AcceptThreshold must be greater than 0, got -1x",
            "-1x",
        ),
        ("input -> AcceptThreshold(factor=5min) -> output;", "argument 'factor' of AcceptThreshold expects a multiplier", "5min"),
        ("input -> AcceptThreshold(fctor=$f) -> output;", "AcceptThreshold has no argument 'fctor'", "fctor"),
        ("input -> AcceptThreshold(factor=$g) -> output;", "elementclass G has no parameter $g", "$g"),
        ("input -> AcceptThreshold -> output;", "AcceptThreshold needs argument(s) 'factor'", "AcceptThreshold"),
        (
            "input -> a :: AcceptAll [jobs] -> output;",
            "'G/a' (AcceptAll) has no output port [jobs]; its output ports: [0] admitted",
            "[jobs]",
        ),
        (
            "input -> [ranking] a :: AcceptAll -> output;",
            "'G/a' (AcceptAll) has no input port [ranking]; its input ports: [0] jobs",
            "[ranking]",
        ),
        (
            "input -> JobPool -> Consolidated -> output;",
            "type mismatch: 'G/JobPool@6' [active] gives Active, but",
            "-> Consolidated",
        ),
        ("output -> AcceptAll -> output;", "'output' is where connections leave the elementclass", "output"),
        (
            "input -> DelayPlacer(tuned=true, machine_wait=1h) -> output;",
            "machine_wait has no effect with tuned=true",
            "DelayPlacer",
        ),
    ],
)
def test_an_element_class_without_an_instance_is_checked(tmp_path, body, message, at):
    line = f"elementclass G {{ $f=1.2x | {body} }}\n"
    errors = located(tmp_path, line)
    got = next((e for e in errors if message in e[0]), None)
    assert got is not None and got[1:] == (1, line.index(at) + 1), errors


def test_what_an_instance_gives_is_not_required(tmp_path):
    classes = (
        "elementclass Gate { $f | input -> AcceptThreshold(factor=$f) -> output; }\n"  # a parameter without a default
        "elementclass Wait { $w | input -> DelayPlacer(tuned=true, machine_wait=$w) -> output; }\n"  # checked with $w given
        "elementclass Core { input [jobs] -> pool :: JobPool; Las -> [ranking] output; }\n"  # Las's input, open
        "elementclass Choose { $c | input -> ChoosePolicy(candidates=[fifo, $c]) -> output; fifo :: Fifo; }\n"
        "elementclass Through { input -> output; }\n"
    )
    path = tmp_path / "g.sched"
    path.write_text(classes + GRAPH)
    graph = compile_file(path)
    assert list(graph.elements) == ["src", "AcceptAll@1", "JobPool@2", "Las@3", "Consolidated@4", "Launch@5"]


def test_instances_are_unchanged(tmp_path):
    used = "elementclass Gate { $f=1.2x | input -> g :: AcceptThreshold(factor=$f) -> output; }\n"
    unused = "elementclass Spare { input -> JobPool -> Fifo -> output; }\n"
    graph = "src :: PoissonSource(rate=8/h, jobs=5);\nsrc -> Gate(2x) -> JobPool -> Las -> Consolidated -> Launch;\n"
    (tmp_path / "a.sched").write_text(used + graph)
    (tmp_path / "b.sched").write_text(used + unused + graph)
    a, b = compile_file(tmp_path / "a.sched"), compile_file(tmp_path / "b.sched")
    ends = [[(c.src, c.src_port, c.dst, c.dst_port) for c in g.connections] for g in (a, b)]
    assert list(a.elements) == list(b.elements) and ends[0] == ends[1]
    assert b.elements["Gate@1/g"].factor == 2.0


def test_a_class_inside_another_is_checked_with_what_it_is_given_there(tmp_path):
    classes = (
        "elementclass Gate { $f | input -> AcceptThreshold(factor=$f) -> output; }\n"
        "elementclass Twice { input -> Gate(2x) -> Gate(-1x) -> output; }\n"
    )
    at = classes.split("\n")[1].index("-1x") + 1
    assert located(tmp_path, classes) == [("argument 'factor' of AcceptThreshold must be greater than 0, got -1x", 2, at)]
    # A port the inner class does not have; a class that contains itself.
    classes = "elementclass Gate { input -> AcceptAll -> output; }\nelementclass Outer { input -> [3] Gate -> output; }\n"
    ((message, line, col),) = located(tmp_path, classes)
    assert message.startswith("'Outer/Gate@") and "(Gate) has no input port [3]" in message and (line, col) == (2, 31)
    assert located(tmp_path, "elementclass Loop { input -> Loop -> output; }\n") == [
        ("elementclass 'Loop' contains itself", 1, 30)
    ]


def test_a_class_in_an_imported_file_is_checked_there(tmp_path, capsys):
    (tmp_path / "lib.sched").write_text("// a library\nelementclass Gate { input -> AcceptThreshold(factor=0x) -> output; }\n")
    path = tmp_path / "g.sched"
    path.write_text('import "lib.sched";\n' + GRAPH)
    err = fails(capsys, "check", path)
    assert err.startswith(f"{tmp_path / 'lib.sched'}:2:53: error: argument 'factor' of AcceptThreshold must be greater than 0")


def test_every_problem_of_a_class_is_reported_once(tmp_path):
    classes = (
        "elementclass Gate { input -> AcceptThreshold(factor=0x) -> output; }\n"
        "elementclass A { input -> Gate -> output; }\nelementclass B { input -> Gate -> Gate -> output; }\n"
    )
    assert located(tmp_path, classes) == [("argument 'factor' of AcceptThreshold must be greater than 0, got 0x", 1, 53)]
