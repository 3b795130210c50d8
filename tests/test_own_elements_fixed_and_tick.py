"""An element of one's own that breaks what it declares: a `fixed` attribute (shared with
forks, not copied) that its tick changes in place fails the run naming the element and the
attribute, where the value is cheap to compare (a list, dict or set of plain values, a numpy
array of up to 1 MB), rather than changing every fork's without a word; and a tick that is a
staticmethod or classmethod is refused saying tick must be an instance method."""

import pytest

from roundhouse import Simulation
from roundhouse.errors import RoundhouseError
from roundhouse.runtime import output_checks
from roundhouse.tools.cli import main
from tests.own_elements import policy_file
from tests.test_probe_own_elements_failures import GRAPH  # (a graph of one's own policy, `order`)


def _graph(tmp_path, name: str, start: str, body: str, declares: str = 'state = ()\nfixed = ("_table",)'):
    """A policy `name` ranking in pool order, setting `_table` in start (`start`, a line) and
    running `body` (a line) in its tick."""
    text = policy_file(
        name,
        "Rank jobs in pool order, with a table set in start.",
        f"""
        {body}
        return Ranking(active.rows, active.gpus)
        """,
        before="import numpy as np",
        after=f"def start(self, ctx):\n    {start}",
        declares=declares,
    )
    (tmp_path / "mine.py").write_text(text)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name=name))
    return graph


def _run(graph, capsys) -> str:
    assert main(["run", str(graph)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return " ".join(err.split())  # (the console wraps long lines)


SHARED = (
    "what `fixed` names is shared with the run's forks, not copied, so a fork would see the change and make its "
    "own to this run's; name it in `state` instead (copied into each fork)"
)


def test_a_fixed_list_changed_in_place_names_the_element_and_the_attribute(tmp_path, capsys):
    graph = _graph(tmp_path, "GrowsFixedList", "self._table = [1, 2]", "self._table.append(len(active.rows))")
    err = _run(graph, capsys)
    assert "element 'order' (GrowsFixedList" in err
    assert (
        "failed in round 0 (t=0s): its tick changed its fixed attribute '_table' in place (from a list ([1, 2]) "
        f"to a list ([1, 2, 1])): {SHARED}"
    ) in err


@pytest.mark.parametrize(
    ("name", "start", "body", "was"),
    [
        ("WritesFixedArray", "self._table = np.zeros(3)", "self._table[0] += 1", "a ndarray (array([0., 0., 0.]))"),
        ("WritesFixedDict", "self._table = {'a': [1]}", "self._table['a'].append(2)", "a dict ({'a': [1]})"),
        ("AddsToFixedSet", "self._table = set()", "self._table.add(ctx.round_index + 7)", "a set (set())"),
    ],
)
def test_arrays_dicts_and_sets_changed_in_place_are_named(tmp_path, capsys, name, start, body, was):
    err = _run(_graph(tmp_path, name, start, body), capsys)
    assert f"its tick changed its fixed attribute '_table' in place (from {was} to " in err


def test_the_simulation_api_fails_so_in_the_round_that_changed_it(tmp_path):
    graph = _graph(tmp_path, "LateFixedWrite", "self._table = np.arange(4.0)", "self._table[ctx.round_index == 3] = np.nan")
    sim = Simulation(str(graph))
    for _ in range(3):
        sim.step()
    with pytest.raises(RoundhouseError, match=r"failed in round 3 .*fixed attribute '_table' in place"):
        sim.step()


@pytest.mark.parametrize(
    ("name", "start", "body"),
    [
        ("ReadsFixedTable", "self._table = np.array([np.nan, 1.0])", "assert np.isnan(self._table[0])"),
        ("RebindsFixedTable", "self._table = [1]", "self._table = self._table + [2]"),  # (a fork keeps what it shares)
        ("FixedObjectNotCompared", "self._table = np.array([[1]], dtype=object)", "self._table[0, 0] = 2"),
    ],
)
def test_reading_rebinding_or_a_value_not_compared_runs_forks_and_saves(tmp_path, name, start, body):
    graph = _graph(tmp_path, name, start, body)
    sim = Simulation(str(graph)).run_until(7200)
    sim.save(tmp_path / "s.snap")
    fork = sim.fork()
    assert Simulation.load(tmp_path / "s.snap").run().rounds == fork.run().rounds == sim.run().rounds


def test_an_array_larger_than_compared_is_not_checked(tmp_path):
    rows = output_checks.FIXED_BYTES_COMPARED // 8 + 1
    graph = _graph(tmp_path, "LargeFixedArray", f"self._table = np.zeros({rows})", "self._table[0] += 1")
    assert Simulation(str(graph)).run().rounds > 0


def test_a_value_declared_in_state_may_change_in_place(tmp_path):
    graph = _graph(tmp_path, "StateList", "self._table = []", "self._table.append(1)", declares='state = ("_table",)')
    assert Simulation(str(graph)).run().rounds > 0


def test_the_libraries_elements_are_not_checked():
    # (Their ticks are tested; the check stays off their path, for speed.)
    from roundhouse.elements.policies.fifo import Fifo

    assert Fifo.fixed is not None and not getattr(Fifo.tick, "_checks_outputs", False)


# --- a tick that is not an instance method ------------------------------------------------------
@pytest.mark.parametrize(
    ("decorator", "params"),
    [("staticmethod", "ctx, active"), ("staticmethod", "self, ctx, active"), ("classmethod", "cls, ctx, active")],
)
def test_a_static_or_class_method_tick_says_tick_must_be_an_instance_method(tmp_path, capsys, decorator, params):
    name = f"{decorator.title()}Tick{len(params)}"
    text = policy_file(name, "Rank jobs in pool order.", "return Ranking(active.rows, active.gpus)", params=params)
    text = text.replace("    def tick(", f"    @{decorator}\n    def tick(")
    (tmp_path / "mine.py").write_text(text)
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name=name))
    assert main(["check", str(graph)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert (
        f"{name}.tick is a {decorator}, and the engine calls tick on the element, with the round's context and one "
        f"keyword argument per input port: tick must be an instance method, `def tick(self, ctx, active)` without "
        f"@{decorator}"
    ) in err
