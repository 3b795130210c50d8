"""Mistakes in elements of one's own (a `require`d file), each said at its place and naming
the element, never a traceback: validators that read other fields, raise attrs' tuples or
assert; port types given as text; defaults a file could not write; reports that are not dicts
or hold numpy values; rankings a placer would fail on; a dict of several ports with a key too
many or too few. And a notebook's simulations, each with its own required files."""

from __future__ import annotations

import json
import textwrap

import pytest

from roundhouse.runtime import registry
from roundhouse.tools.cli import main
from tests.conftest import fails
from tests.own_elements import Argument, Port, element_class, element_file, policy_file

GRAPH = """require "{file}";
round = 5min;
cluster = "2x4:V100";
src :: PoissonSource(rate=8/h, jobs=20, seed=1);
src -> AcceptAll -> JobPool -> {use} -> FirstFree -> Launch -> JobMetrics;
"""


JOBS: Port = ("active", "Active", "jobs.")


def policy(
    name: str,
    arguments: tuple[Argument, ...] = (),
    tick: str = "return Ranking(active.rows, active.gpus)",
    finish: str = "return {}",
    methods: str = "",
    before: str = "",
    **shape,
) -> str:
    """An element file with one policy `name`: its `arguments`, its tick's and finish's bodies,
    `methods` below them; `before` above the class; `shape` as element_class takes it."""
    return policy_file(
        name,
        "A policy of one's own.",
        tick,
        before=f"import attrs\nimport numpy as np\n{before}",
        after=f"def finish(self, ctx):\n    {finish}\n\n{textwrap.dedent(methods).strip()}",
        inputs=shape.pop("inputs", (JOBS,)),
        outputs=(("ranking", "Ranking", "jobs."),),
        see_also="none",
        arguments=arguments,
        **shape,
    )


@pytest.fixture(autouse=True)
def own_scope():
    """Each test's element files are forgotten after it (their class names repeat)."""
    with registry.scope():
        yield


def at(graph: str, use: str, value: str) -> str:
    """Where `value` of the element `use` is in GRAPH's last line: "graph:5:column"."""
    return f"{graph}:5:{len('src -> AcceptAll -> JobPool -> ') + use.index(value) + 1}"


def write(tmp_path, source: str, use: str, file: str = "mine.py", graph: str = "g.sched"):
    (tmp_path / file).write_text(source)
    path = tmp_path / graph
    path.write_text(GRAPH.format(file=file, use=use))
    return path


CROSS = """
@hi.validator
def _check_hi(self, attribute, value):
    if value < self.lo:
        raise ValueError(f"must be at least lo ({self.lo})")
"""


def test_a_validator_that_reads_another_field_checks_it_at_its_argument(tmp_path, capsys):
    source = policy(
        "Cross", (("lo", "int = attrs.field(default=1)", "low."), ("hi", "int = attrs.field(default=4)", "high.")), methods=CROSS
    )
    good = write(tmp_path, source, "Cross(lo=2, hi=3)")
    assert main(["check", str(good)]) == 0
    assert main(["run", str(good), "--set", "Cross@3.hi=8"]) == 0
    capsys.readouterr()
    bad = write(tmp_path, source, "Cross(lo=3, hi=2)", graph="bad.sched")
    err = fails(capsys, "check", bad)
    assert f"{at('bad.sched', 'Cross(lo=3, hi=2)', '2)')}: error: argument 'hi' of Cross must be at least lo (3)" in err
    # Given with --set, against the default of the other field:
    err = fails(capsys, "run", good, "--set", "Cross@3.hi=1", "--set", "Cross@3.lo=2")
    assert "--set Cross@3.hi=1: argument 'hi' of Cross must be at least lo (2)" in err


def test_a_validator_that_reads_what_only_the_built_element_has_is_left_to_building_it(tmp_path, capsys):
    limit = (("limit", "int = attrs.field(default=1)", "at most."),)
    methods = """
    @limit.validator
    def _check(self, attribute, value):
        if value > self.most():
            raise ValueError("is above the most")

    def most(self):
        return 3
    """
    path = write(tmp_path, policy("Later", limit, methods=methods), "Later(limit=5)")
    err = fails(capsys, "check", path)
    assert "error: Later 'Later@3': is above the most" in err
    assert main(["check", str(write(tmp_path, policy("Later", limit, methods=methods), "Later(limit=2)"))]) == 0


def test_attrs_validators_say_their_sentence_alone(tmp_path, capsys):
    limit = (("limit", "int = attrs.field(default=1, validator=attrs.validators.in_([1, 2]))", "1 or 2."),)
    err = fails(capsys, "check", write(tmp_path, policy("Within", limit), "Within(limit=7)"))
    assert f"{at('g.sched', 'Within(limit=7)', '7')}: error: argument 'limit' of Within must be in [1, 2] (got 7)\n" in err
    assert "Attribute(" not in err


def test_a_validator_that_asserts_is_reported_at_its_argument(tmp_path, capsys):
    methods = """
    @limit.validator
    def _check(self, attribute, value):
        assert value <= 5, "limit too big"
    """
    source = policy("Sure", (("limit", "int = attrs.field(default=1)", "at most 5."),), methods=methods)
    err = fails(capsys, "check", write(tmp_path, source, "Sure(limit=7)"))
    assert (
        f"{at('g.sched', 'Sure(limit=7)', '7')}: error: argument 'limit' of Sure is refused by its validator (AssertionError: limit too big)"
        in err
    )


def test_a_port_type_given_as_text_is_refused_at_the_require(tmp_path, capsys):
    path = write(tmp_path, policy("Texty", inputs=(("active", '"Active"', "jobs."),)), "Texty")
    err = fails(capsys, "check", path)
    assert "g.sched:1:9: error: cannot require 'mine.py'" in err
    assert "TypeError: Texty: the type of port 'active' is 'Active', not a class" in err
    err = fails(capsys, "elements", "--require", tmp_path / "mine.py", "Texty")
    assert "the type of port 'active' is 'Active', not a class" in err


@pytest.mark.parametrize(
    ("field", "said"),
    [
        (
            'backfill: bool = attrs.field(default="yes")',
            "the default of argument 'backfill' of Dflt expects true or false, got \"yes\"",
        ),
        ("backfill: int = 1.5", "the default of argument 'backfill' of Dflt expects a whole number, got 1.5"),
    ],
)
def test_a_default_a_file_could_not_give_is_refused_at_the_class(tmp_path, capsys, field, said):
    argument, line = field.split(": ", 1)
    path = write(tmp_path, policy("Dflt", ((argument, line, "whether."),)), "Dflt")
    err = fails(capsys, "check", path)
    assert "cannot require 'mine.py'" in err and said in err
    assert said in fails(capsys, "elements", "--require", tmp_path / "mine.py", "Dflt")


def test_good_defaults_of_every_written_kind_load(tmp_path, capsys):
    kinds = (
        ("a", "float = 1"),
        ("b", '"Duration" = 300'),
        ("c", '"list[int]" = (1, 2)'),
        ("d", '"int | None" = None'),
        ("e", 'str = "fifo"'),
    )
    arguments = tuple((argument, line, f"{argument}.") for argument, line in kinds)
    source = policy("Kinds", arguments, before="from roundhouse.runtime.values import Duration")
    assert main(["check", str(write(tmp_path, source, "Kinds"))]) == 0


def test_a_finish_that_returns_no_dict_is_an_error_naming_the_element(tmp_path, capsys):
    err = fails(capsys, "run", write(tmp_path, policy("Says", finish='return "done"'), "Says"))
    assert "element 'Says@3' (Says;" in err
    assert "its finish() returned a str ('done'), not a dict of reports by name" in err


def test_numpy_values_in_reports_are_written_as_numbers_and_lists(tmp_path, capsys):
    finish = 'return {"totals": {"total": np.int64(3), "mean": np.float32(0.5), "each": np.arange(3)}}'
    path = write(tmp_path, policy("Counts", finish=finish), "Counts")
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    assert "total" in capsys.readouterr().out  # (printed among the objectives)
    written = json.loads((tmp_path / "out" / "Counts@3-totals.json").read_text())
    assert written == {"total": 3, "mean": 0.5, "each": [0, 1, 2]}


def test_a_report_json_cannot_hold_is_an_error_naming_it(tmp_path, capsys):
    path = write(tmp_path, policy("Odd", finish='return {"thing": {"x": object()}}'), "Odd")
    err = fails(capsys, "run", path, "--out", tmp_path / "out")
    assert "element 'Odd@3' reported 'thing', which cannot be written as JSON" in err


@pytest.mark.parametrize(
    ("tick", "said"),
    [
        (
            "return Ranking(active.rows, active.gpus * 0)",
            "that asks 0 GPUs for job 0 (row 0): each job it ranks needs 1 GPU or more",
        ),
        (
            "return Ranking(np.concatenate([active.rows] * 2), np.concatenate([active.gpus] * 2))",
            "that ranks job 0 (row 0) twice",
        ),
        ("return Ranking(active.rows + 1000, active.gpus)", "that ranks row 1000, which is not a row of the job table"),
    ],
)
def test_a_ranking_of_ones_own_is_checked_naming_its_element(tmp_path, capsys, tick, said):
    err = fails(capsys, "run", write(tmp_path, policy("Bad", tick=tick), "Bad"))
    assert "error: element 'Bad@3' (Bad;" in err and "failed in round 0" in err
    assert f"it emitted a Ranking on its port 'ranking' {said}" in err
    assert "stalled" not in err and "Launch" not in err


TWO = element_file(
    element_class(
        "Two",
        "Two rankings.",
        "r = Ranking(active.rows, active.gpus)\nreturn RETURNED",
        inputs=(JOBS,),
        outputs=(("ranking", "Ranking", "jobs."), ("other", "Ranking", "jobs.")),
        see_also="none",
    ),
    element_class(
        "Eat",
        "Takes a ranking.",
        "return None",
        category="sink",
        inputs=(("ranking", "Ranking", "a ranking."),),
        outputs=(),
        see_also="none",
    ),
    before="import numpy as np",
)


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        (
            '{"ranking": r, "other": r, "third": r}',
            "its tick returned key(s) 'third' that are not output ports (its output ports: ranking, other)",
        ),
        ('{"ranking": r}', "its tick did not return port 'other'"),
    ],
)
def test_a_dict_of_several_ports_holds_exactly_their_keys(tmp_path, capsys, returned, said):
    (tmp_path / "two.py").write_text(TWO.replace("RETURNED", returned))
    path = tmp_path / "g.sched"
    path.write_text(GRAPH.format(file="two.py", use="t :: Two") + "t [other] -> Eat;\n")
    err = fails(capsys, "run", path)
    assert "error: element 't' (Two;" in err and said in err


# --- the Simulation API ----------------------------------------------------------------------
KEEPER = '''
class Seen:
    """An object of the file's own, kept in the element's state (pickled by reference)."""

    def __init__(self):
        self.rounds = 0
'''


def test_simulations_of_files_defining_one_class_name_each_keep_their_own(tmp_path):
    from roundhouse import Simulation

    first = policy(
        "SameName",
        tick="self._seen.rounds += 1\nreturn Ranking(active.rows, active.gpus)",
        methods="def start(self, ctx):\n    self._seen = Seen()",
        before=KEEPER,
        declares='state = ("_seen",)',
    )
    second = policy("SameName", tick="return Ranking(active.rows[::-1], active.gpus[::-1])")
    a_path = write(tmp_path, first, "SameName", file="a.py", graph="a.sched")
    b_path = write(tmp_path, second, "SameName", file="b.py", graph="b.sched")
    a = Simulation(a_path)
    a.run_until(3600)
    assert registry.get("SameName") is None  # (what a graph requires does not leak to the next)
    b = Simulation(b_path)
    assert type(b.graph.elements["SameName@3"]) is not type(a.graph.elements["SameName@3"])
    again = Simulation(a_path)  # (the same file, unchanged: the same classes)
    assert type(again.graph.elements["SameName@3"]) is type(a.graph.elements["SameName@3"])
    fork = a.fork()
    a.save(tmp_path / "a.snap")
    loaded = Simulation.load(tmp_path / "a.snap")
    for sim in (a, fork, loaded):
        sim.run()
    assert fork.jobs().equals(a.jobs()) and loaded.jobs().equals(a.jobs())
    assert b.run().rounds > 0


def test_a_one_line_graph_text_is_taken_as_text(tmp_path, monkeypatch):
    from roundhouse import Simulation
    from roundhouse.errors import RoundhouseError

    monkeypatch.chdir(tmp_path)
    text = 'round=5min; cluster="2x4:V100"; PoissonSource(rate=8/h, jobs=5, seed=1) -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;'
    assert Simulation(text).run().stop_reason == "every job finished"
    with pytest.raises(RoundhouseError, match="no such file"):
        Simulation("nope.sched")


def test_brackets_in_an_elements_docs_are_shown_as_written(tmp_path, capsys, monkeypatch):
    # (Rich would read them as its markup: dropped, styled, or a MarkupError for a "[/data]".)
    monkeypatch.setenv("COLUMNS", "300")
    source = policy("Brackets").replace("A policy of one's own.", "Ranks [bold]all[/bold] of [/data].")
    (tmp_path / "mine.py").write_text(source)
    assert main(["elements", "--require", str(tmp_path / "mine.py"), "Brackets"]) == 0
    assert "Ranks [bold]all[/bold] of [/data]." in capsys.readouterr().out
    assert main(["elements", "--require", str(tmp_path / "mine.py")]) == 0
    assert "Ranks [bold]all[/bold] of [/data]." in capsys.readouterr().out
    assert main(["elements", "TiresiasGittins"]) == 0
    assert "E[min(S - a, D) | S > a]" in capsys.readouterr().out


def test_two_ports_of_one_side_with_one_name_are_refused_at_the_require(tmp_path, capsys):
    # (the second would never be connected: a graph names a port to connect it)
    path = write(tmp_path, policy("Twice", inputs=(JOBS, JOBS)), "Twice")
    err = fails(capsys, "check", path)
    assert "TypeError: Twice.inputs: port name(s) 'active' given twice" in err
