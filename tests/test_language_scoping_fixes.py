"""The .sched language's scopes: where a path an instance gives is found, which element a name
an instance gives means, which file's setting wins, what a required file can import, and how
clashes and mistakes of naming are said."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from roundhouse.errors import RoundhouseError
from roundhouse.runtime import registry
from roundhouse.runtime.compiler import compile_file
from roundhouse.runtime.dsl.loader import load
from roundhouse.runtime.results_store import ResultsStore
from roundhouse.tools.cli import main
from roundhouse.tools.common import error_text
from tests.conftest import fails
from tests.own_elements import Argument, policy_file

REPO = Path(__file__).resolve().parents[1]
TAIL = "-> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
SRC = "src :: PoissonSource(rate=8/h, jobs=5, seed=1);\nsrc " + TAIL


@pytest.fixture(autouse=True)
def own_scope():
    """Each test's element files are forgotten after it (their class names repeat)."""
    with registry.scope():
        yield


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def trace(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"job_id": [0], "arrival_s": [0.0], "gpus": [1], "duration_s": [600.0]}).write_csv(path)
    return path


def error_of(path: Path, *overrides: str) -> str:
    with pytest.raises(RoundhouseError) as caught:
        compile_file(path, overrides)
    return error_text(caught.value)


# --- a path an instance gives is the instance's file's ------------------------------------------

LIB = 'elementclass Src { $p, $q="own.csv" | s :: TraceSource(path=$p, rate=8/h, seed=0); t :: TraceSource(path=$q); s -> output; t -> output; }\n'


def test_a_path_given_to_an_elementclass_is_relative_to_the_file_that_writes_it(tmp_path):
    write(tmp_path / "lib" / "lib.sched", LIB)
    own = trace(tmp_path / "lib" / "own.csv")
    mine = trace(tmp_path / "main" / "trace.csv")
    graph = write(tmp_path / "main" / "g.sched", 'import "../lib/lib.sched";\nx :: Src(p="trace.csv");\nx ' + TAIL)
    compiled = compile_file(graph)
    assert Path(compiled.elements["x/s"].path).resolve() == mine.resolve()
    # (a default, written in the elementclass, is the elementclass's file's)
    assert Path(compiled.elements["x/t"].path).resolve() == own.resolve()
    # A file of the same name beside the elementclass is not taken in its place.
    trace(tmp_path / "lib" / "trace.csv")
    assert Path(compile_file(graph).elements["x/s"].path).resolve() == mine.resolve()
    mine.unlink()
    assert "main/trace.csv" in error_of(graph) and "lib/trace.csv" not in error_of(graph)


def test_a_list_of_paths_written_in_two_files_takes_each_from_its_own(tmp_path):
    source = _element(
        "LangFixPaths",
        "SIGN = 1\nfrom roundhouse.runtime.values import FilePath",
        arguments=(("paths", "list[FilePath] | None = attrs.field(default=None)", "files."),),
    )
    write(tmp_path / "main" / "paths.py", source)
    write(tmp_path / "lib" / "lib.sched", 'elementclass L { $p | input -> LangFixPaths(paths=[$p, "y.csv"]) -> output; }\n')
    graph = write(
        tmp_path / "main" / "g.sched",
        'require "paths.py";\nimport "../lib/lib.sched";\n' + SRC.replace("Fifo", 'x :: L(p="x.csv")'),
    )
    (element,) = [el for el in compile_file(graph).elements.values() if type(el).__name__ == "LangFixPaths"]
    assert [Path(p).resolve() for p in element.paths] == [tmp_path / "main" / "x.csv", tmp_path / "lib" / "y.csv"]


# --- a name an instance gives is the instance's scope's ------------------------------------------


def test_a_name_an_instance_gives_means_the_element_of_its_own_scope(tmp_path):
    graph = write(
        tmp_path / "g.sched",
        """
        elementclass P { $c | s :: Srtf; o :: ChoosePolicy(candidates=[$c, s]); input -> o -> output; }
        s :: Fifo;
        src :: PoissonSource(rate=8/h, jobs=5, seed=1);
        src -> AcceptAll -> JobPool -> x :: P(c=s) -> FirstFree -> Launch -> JobMetrics;
        """,
    )
    compiled = compile_file(graph)
    assert [ref.name for ref in compiled.elements["x/o"].candidates] == ["s", "x/s"]
    assert compiled.held == {"s", "x/s"}


def test_a_name_passed_on_to_an_inner_instance_keeps_the_scope_that_wrote_it(tmp_path):
    graph = write(
        tmp_path / "g.sched",
        """
        elementclass Q { $c | s :: Las; o :: ChoosePolicy(candidates=[$c]); input -> o -> output; }
        elementclass P { $d=s | s :: Srtf; input -> q :: Q(c=$d) -> output; }
        elementclass R { s :: Las; input -> q :: Q(c=s) -> output; }
        s :: Fifo;
        x :: P(d=s); y :: P; r :: R;
        """,
    )

    def named(element: str) -> list[str]:
        (arg,) = flat.decls[element].args
        return [v.word for v in arg.value.items]

    flat = load(graph)
    # x gives the graph's s; y takes P's default, written in P: its own s; R names its own s.
    assert named("x/q/o") == ["s"]
    assert named("y/q/o") == ["y/s"]
    assert named("r/q/o") == ["r/s"]


# --- settings: the importing file wins, whatever the order of its imports ------------------------


@pytest.mark.parametrize("imports", [("b", "c"), ("c", "b")])
def test_a_file_that_imports_another_wins_over_it_whatever_the_order_of_the_imports(tmp_path, imports):
    write(tmp_path / "b.sched", 'import "c.sched";\nround = 10min;\n')
    write(tmp_path / "c.sched", "round = 1min;\n")
    graph = write(tmp_path / "a.sched", "".join(f'import "{n}.sched";\n' for n in imports) + SRC)
    assert compile_file(graph).settings.round == 600


def test_two_files_neither_of_which_imports_the_other_setting_differently_are_an_error(tmp_path):
    write(tmp_path / "b.sched", "round = 10min;\n")
    write(tmp_path / "c.sched", "round = 1min;\n")
    write(tmp_path / "d.sched", 'import "c.sched";\n')
    graph = write(tmp_path / "a.sched", 'import "b.sched";\nimport "d.sched";\n' + SRC)
    said = error_of(graph)
    assert "setting 'round' is set differently by two files, neither of which imports the other" in said
    write(tmp_path / "a.sched", 'import "b.sched";\nimport "d.sched";\nround = 2min;\n' + SRC)
    assert compile_file(graph).settings.round == 120


# --- a required file imports the modules beside it ------------------------------------------------


def _element(cls: str, before: str, arguments: tuple[Argument, ...] = ()) -> str:
    """The file of a policy `cls` ranking jobs by their GPUs times SIGN, which `before` gives,
    declaring `arguments`."""
    return policy_file(
        cls,
        "Rank jobs by their GPUs, in the helper's direction.",
        'order = (SIGN * active.gpus).argsort(kind="stable")\nreturn Ranking(active.rows[order], active.gpus[order])',
        before=f"{before}\nimport attrs",
        inputs=(("active", "Active", "jobs."),),
        outputs=(("ranking", "Ranking", "jobs."),),
        see_also="none",
        arguments=arguments,
    )


def helped(tmp_path: Path, cls: str) -> Path:
    """A graph requiring sf.py, which imports a module beside it (named after the test's folder)."""
    helper = f"langfix_helper_{tmp_path.name.replace('-', '_')}"
    write(tmp_path / "elems" / f"{helper}.py", "SIGN = 1\n")
    write(tmp_path / "elems" / "sf.py", _element(cls, f"from {helper} import SIGN"))
    return write(
        tmp_path / "g.sched",
        f'require "elems/sf.py";\ncluster = "2x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=10, seed=1);\n'
        f"src -> AcceptAll -> JobPool -> {cls} -> FirstFree -> Launch -> JobMetrics;\n",
    )


def test_a_required_file_imports_a_module_beside_it(tmp_path, monkeypatch):
    graph = helped(tmp_path, "LangFixHelped")
    path_before = list(sys.path)
    try:
        compiled = compile_file(graph)
        assert [type(el).__name__ for el in compiled.elements.values()].count("LangFixHelped") == 1
        assert sys.path == path_before  # (the folder is on it only while the file is imported)
    finally:
        sys.modules.pop(f"langfix_helper_{tmp_path.name.replace('-', '_')}", None)


def test_a_sweeps_worker_processes_find_the_module_beside_a_required_file(tmp_path, monkeypatch, capsys):
    graph = helped(tmp_path, "LangFixSwept")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # (the helper's folder is on no path the workers start with)
    out = tmp_path / "out"
    try:
        code = main(["sweep", str(graph), "--vary", "seed=1,2", "--workers", "2", "--out", str(out)])
    finally:
        sys.modules.pop(f"langfix_helper_{tmp_path.name.replace('-', '_')}", None)
    err = capsys.readouterr().err
    assert code == 0, err
    frame = ResultsStore(out / "results").read()
    assert frame.height == 2 and set(frame["status"]) == {"ok"}, frame.select("status", "error").to_dicts()


def test_graphs_whose_files_import_same_named_neighbours_each_get_their_own(tmp_path):
    # Two folders, each with an element file importing a module of one name beside it: the
    # second graph's file imports its own neighbour, not the module the first one left imported.
    helper = f"langfix_same_{tmp_path.name.replace('-', '_')}"
    graphs = []
    for folder, sign, cls in (("a", 1, "LangFixSameA"), ("b", -1, "LangFixSameB")):
        write(tmp_path / folder / f"{helper}.py", f"SIGN = {sign}\n")
        write(tmp_path / folder / "sf.py", _element(cls, f"from {helper} import SIGN"))
        graphs.append(
            write(
                tmp_path / folder / "g.sched",
                f'require "sf.py";\ncluster = "2x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=10, seed=1);\n'
                f"src -> AcceptAll -> JobPool -> {cls} -> FirstFree -> Launch -> JobMetrics;\n",
            )
        )
    try:
        signs = []
        for graph in graphs:
            compiled = compile_file(graph)
            (policy,) = [el for el in compiled.elements.values() if type(el).__name__.startswith("LangFixSame")]
            signs.append(sys.modules[type(policy).__module__].SIGN)
        assert signs == [1, -1]
    finally:
        sys.modules.pop(helper, None)


# --- an elementclass may not take a required class's name ----------------------------------------


@pytest.mark.parametrize("class_first", [True, False])
def test_an_elementclass_named_as_a_required_class_is_an_error_whichever_comes_first(tmp_path, class_first):
    write(tmp_path / "smallest_first.py", _element("LangFixSmallest", "SIGN = 1"))
    compound = "elementclass LangFixSmallest { input -> Fifo -> output; }\n"
    require = 'require "smallest_first.py";\n'
    graph = write(
        tmp_path / "g.sched",
        (compound + require if class_first else require + compound) + SRC.replace("Fifo", "LangFixSmallest"),
    )
    said = error_of(graph)
    assert "elementclass 'LangFixSmallest' has the name of a required element class (defined in smallest_first.py)" in said
    assert "built-in" not in said


def test_an_elementclass_named_as_a_built_in_class_is_still_said_so(tmp_path):
    graph = write(tmp_path / "g.sched", "elementclass Fifo { input -> Las -> output; }\n" + SRC)
    assert "elementclass 'Fifo' has the name of a built-in element class" in error_of(graph)


# --- a bad element named with --set is the option's error ----------------------------------------

BLOX = REPO / "graphs" / "blox-synthesizer.sched"


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("synth.switches=[admit,fifo]", "'fifo' (Fifo) is not a switch"),
        ("synth.switches=[admit,nothere]", "argument 'switches' of Synthesizer names no element 'nothere'"),
        ("order.candidates=[fifo,acceptall]", "'acceptall' (AcceptAll) cannot be a candidate of 'order'"),
        ("order.candidates=[fifo,order]", "'order' names itself as one of its own candidates"),
    ],
)
def test_an_element_named_with_set_is_reported_as_the_options(capsys, given, said):
    err = fails(capsys, "run", BLOX, "--set", given)
    assert f"error: --set {given}: {said}" in err
    assert "blox-synthesizer.sched:" not in err  # (no place in the file, which does not write it)


def test_the_same_mistake_written_in_the_file_is_shown_at_its_place(tmp_path):
    graph = write(tmp_path / "g.sched", BLOX.read_text().replace("switches=[admit, order]", "switches=[admit, fifo]"))
    (tmp_path / "g.sched").write_text(graph.read_text().replace('"../traces/', f'"{REPO}/traces/'))
    said = error_of(graph)
    assert f"{graph}:13:" in said and "'fifo' (Fifo) is not a switch" in said


# --- smaller mistakes of naming ------------------------------------------------------------------


def test_importing_a_python_file_says_to_require_it(tmp_path):
    write(tmp_path / "lib.py", "X = 1\n")
    graph = write(tmp_path / "g.sched", 'import "lib.py";\n' + SRC)
    said = error_of(graph)
    assert "cannot import 'lib.py': it is a Python file, which is brought in with require" in said
    assert 'require "lib.py";' in said and "missing ';'" not in said


def test_requiring_a_folder_says_it_is_one(tmp_path):
    (tmp_path / "adir.py").mkdir()
    graph = write(tmp_path / "g.sched", 'require "adir.py";\n' + SRC)
    said = error_of(graph)
    assert "cannot require 'adir.py':" in said and "is a folder, not a Python file" in said and "no such file" not in said


def test_a_missing_element_is_never_suggested_by_a_name_the_language_cannot_write(tmp_path):
    graph = write(tmp_path / "g.sched", SRC + "fifo2 :: Fifo; x :: ChoosePolicy(candidates=[Fifo, fifo]);\n")
    said = error_of(graph)
    assert "names no element 'Fifo'" in said and "@" not in said.split("names no element 'Fifo'")[1].split("\n\n")[0]
    assert "did you mean 'fifo2'?" in said


def test_inside_an_elementclass_its_own_names_are_suggested_as_written_there(tmp_path):
    graph = write(
        tmp_path / "g.sched",
        """
        elementclass P { fifo :: Fifo; o :: ChoosePolicy(candidates=[fifoo]); input -> o -> output; }
        src :: PoissonSource(rate=8/h, jobs=5, seed=1);
        src -> AcceptAll -> JobPool -> x :: P -> FirstFree -> Launch -> JobMetrics;
        """,
    )
    said = error_of(graph)
    assert "names no element 'fifoo'" in said and "did you mean 'fifo'?" in said


def test_two_instances_of_a_whole_graph_compound_name_the_instances(tmp_path):
    graph = write(
        tmp_path / "g.sched",
        """
        elementclass Whole { $n | src :: PoissonSource(rate=8/h, jobs=$n, seed=1);
          src -> AcceptAll -> pool :: JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics; }
        a :: Whole(n=5);
        b :: Whole(n=6);
        """,
    )
    said = error_of(graph)
    assert f"{graph}:5:1: error: a graph has exactly one pool; 'b/pool' is a second, after 'a/pool'" in said
    assert f"two instances, 'a' (at {graph}:4:1) and 'b' (here)" in said


def test_two_pools_in_the_graph_itself_still_name_the_first(tmp_path):
    graph = write(tmp_path / "g.sched", SRC + "p :: JobPool; src2 :: PoissonSource(rate=1/h); src2 -> p;\n")
    said = error_of(graph)
    assert "a graph has exactly one pool;" in said and "(first at " in said
