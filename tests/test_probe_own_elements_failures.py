"""An element of one's own that fails during a run: the message names the line of the user's
code that raised (not only the class's), which argument a tick tried to change, and how an
element with one output port returns its value."""

import pytest

from roundhouse import Simulation
from roundhouse.errors import RoundhouseError
from roundhouse.tools.cli import main
from tests.own_elements import policy_file


def _element(name: str, body: str, imports: str) -> str:
    """The file of a policy `name` ranking jobs by the GPUs they ask for, running `body` (a line)
    between making its ranking and returning it; `imports` above it."""
    return policy_file(
        name,
        "Rank jobs by the GPUs they ask for, or fail as its body says.",
        f"""
        order = np.argsort(active.gpus, kind="stable")
        ranking = Ranking(active.rows[order], active.gpus[order], backfill=self.backfill)
        {body}
        return ranking
        """,
        before=f"import attrs\nimport numpy as np\n{imports}",
        outputs=(("ranking", "Ranking", "the jobs, fewest GPUs first."),),
        arguments=(
            ("backfill", "bool = attrs.field(default=True)", "let lower-ranked jobs run when a higher one does not fit."),
        ),
    )


GRAPH = """require "mine.py";
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=20, seed=1);
order :: {name};
arrivals -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> JobMetrics;
"""


def _write(tmp_path, name, body, imports=""):
    text = _element(name, body, imports)
    (tmp_path / "mine.py").write_text(text)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name=name))
    line = text.splitlines().index(f"        {body}") + 1
    return graph, line


def _run(graph, capsys):
    assert main(["run", str(graph)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return " ".join(err.split())  # (the console wraps long lines)


def test_a_raise_in_tick_names_the_line_that_raised(tmp_path, capsys):
    graph, line = _write(tmp_path, "RaisesOnLine", "raise RuntimeError('a bug')")
    err = _run(graph, capsys)
    assert f"its tick raised RuntimeError: a bug, at {tmp_path / 'mine.py'}:{line} (in tick)" in err


def test_a_raise_inside_numpy_names_the_users_line_that_called_it(tmp_path, capsys):
    graph, line = _write(tmp_path, "RaisesInNumpy", "np.zeros(3)[np.array([7])]")
    err = _run(graph, capsys)
    assert "its tick raised IndexError" in err
    assert f"at {tmp_path / 'mine.py'}:{line} (in tick)" in err


def test_a_raise_in_a_module_of_ones_own_names_its_line(tmp_path, capsys):
    (tmp_path / "helper_of_raiser.py").write_text("def check(x):\n    raise ValueError('helper says no')\n")
    graph, _ = _write(tmp_path, "RaisesInHelper", "helper_of_raiser.check(1)", imports="import helper_of_raiser")
    err = _run(graph, capsys)
    assert f"its tick raised ValueError: helper says no, at {tmp_path / 'helper_of_raiser.py'}:2 (in check)" in err


def test_setting_an_argument_in_tick_names_it_and_where_state_goes(tmp_path, capsys):
    graph, line = _write(tmp_path, "SetsItsArgument", "self.backfill = False")
    err = _run(graph, capsys)
    assert "its tick raised FrozenArgumentError: argument 'backfill' cannot change once the graph is built" in err
    assert "(keep what changes in an attribute of its own, set up in start and named in its `state`)" in err
    assert err.count("cannot change once the graph is built") == 1, err
    assert f"at {tmp_path / 'mine.py'}:{line} (in tick)" in err


def test_a_dict_from_an_element_with_one_output_says_to_return_the_value(tmp_path, capsys):
    graph, _ = _write(tmp_path, "ReturnsADict", "return {'ranking': ranking}")
    err = _run(graph, capsys)
    assert "on its port 'ranking', where a Ranking belongs" in err
    assert "an element with one output port returns the Ranking itself, not a dict by port name" in err


def test_the_simulation_api_names_the_line_too(tmp_path):
    graph, line = _write(tmp_path, "RaisesInStep", "raise KeyError('k')")
    sim = Simulation(str(graph))
    with pytest.raises(RoundhouseError, match=rf"its tick raised KeyError: 'k', at .*mine\.py:{line} \(in tick\)"):
        sim.step()


def _grows_its_list(tmp_path, body="self.weights.append(len(active.rows))"):
    text = policy_file(
        "GrowsItsList",
        "Rank jobs in pool order, growing its list argument.",
        f"""
        {body}
        return Ranking(active.rows, active.gpus)
        """,
        before="import attrs",
        arguments=(("weights", "list[int] = attrs.field(factory=lambda: [1])", "a list."),),
    )
    (tmp_path / "mine.py").write_text(text)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name="GrowsItsList(weights=[2, 3])"))
    return graph


def test_changing_a_list_argument_in_place_names_it(tmp_path, capsys):
    # (A list argument changed in place went unnoticed: run.json gave the list as the run left
    # it, and a snapshot saved after it was refused at its load as of another graph.)
    err = _run(_grows_its_list(tmp_path), capsys)
    assert (
        "failed in round 0 (t=0s): its tick changed its argument 'weights' in place (from a list ([2, 3]) to a list "
        "([2, 3, 1])): an argument cannot change once the graph is built (keep what changes in an attribute of its "
        "own, set up in start and named in its `state`)"
    ) in err


def test_an_argument_only_read_runs_forks_and_saves(tmp_path):
    graph = _grows_its_list(tmp_path, body="assert sum(self.weights) == 5")
    sim = Simulation(str(graph))
    sim.run_until(7200)
    sim.save(tmp_path / "s.snap")
    fork = sim.fork()
    assert Simulation.load(tmp_path / "s.snap").run().rounds == fork.run().rounds == sim.run().rounds


@pytest.mark.parametrize(
    ("read", "said"),
    [
        ("active.arrival", "'Active' object has no attribute 'arrival' (did you mean 'arrival_s'?)"),
        (
            "active.model",
            "'Active' object has no attribute 'model': the job table's column 'model' is read as active.column('model')",
        ),
    ],
)
def test_a_column_read_as_an_attribute_says_how_to_read_it(tmp_path, capsys, read, said):
    # (Python's bare "has no attribute" left a new author to find `arrival_s`, or `column(name)`.)
    graph, line = _write(tmp_path, "ReadsAColumn", read)
    err = _run(graph, capsys)
    assert f"its tick raised AttributeError: {said}, at {tmp_path / 'mine.py'}:{line} (in tick)" in err


def test_a_view_still_copies_and_pickles():
    import copy
    import pickle

    import numpy as np

    from roundhouse.traces.jobs import Active, JobTable

    view = Active(JobTable(1).reader, np.zeros(0, dtype=np.int64))
    assert len(copy.deepcopy(view)) == 0 and pickle.loads(pickle.dumps(view)).lineage is None
    assert not hasattr(view, "__array__")
