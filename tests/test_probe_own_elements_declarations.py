"""What an element of one's own declares about its state is read as written: `state` and
`fixed` are tuples of names, and a bare string (a one-name tuple without its comma) is refused
where the file is required, rather than read a letter at a time and then reported, at a fork,
as an attribute the element does not declare."""

import pytest

from roundhouse.tools.cli import main
from tests.own_elements import policy_file


def _element(name: str, declaration: str) -> str:
    """A policy `name` remembering the rounds it ranked in, declaring `declaration`."""
    return policy_file(
        name,
        "Rank jobs in pool order, remembering the rounds it ranked in.",
        """
        self._seen.append(ctx.round_index)
        return Ranking(active.rows, active.gpus)
        """,
        after="def start(self, ctx):\n    self._seen = []",
        declares=declaration,
    )


GRAPH = """require "mine.py";
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=5, seed=1);
order :: {name};
arrivals -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> JobMetrics;
"""


def _graph(tmp_path, name, declaration):
    (tmp_path / "mine.py").write_text(_element(name, declaration))
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name=name))
    return graph


@pytest.mark.parametrize("which", ["state", "fixed"])
def test_a_bare_string_for_state_or_fixed_is_refused_at_the_require(tmp_path, capsys, which):
    graph = _graph(tmp_path, f"BareString{which.title()}", f'{which} = ("_seen")')
    assert main(["check", str(graph)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"{graph}:1:9: error: cannot require 'mine.py'" in err
    assert f"{which} is the string '_seen', not a tuple of attribute names: write `{which} = ('_seen',)`" in err


def test_names_that_are_not_strings_are_refused(tmp_path, capsys):
    graph = _graph(tmp_path, "NamesNotStrings", "state = (1, 2)")
    assert main(["check", str(graph)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "NamesNotStrings.state must be a tuple of attribute names (str), got (1, 2)" in err


def test_the_tuple_it_meant_forks(tmp_path, capsys):
    graph = _graph(tmp_path, "OneNameTuple", 'state = ("_seen",)')
    assert main(["check", "--fork", str(graph)]) == 0
    assert "ok" in capsys.readouterr().out


def test_a_single_port_without_its_comma_is_refused_saying_so(tmp_path, capsys):
    # (`inputs = (In(...))` is the port itself, not a tuple of it: the message showed the
    # port's repr and asked for a tuple, without saying what was missing.)
    text = _element("OnePortNoComma", 'state = ("_seen",)')
    inputs = 'inputs = (In("active", Active),)'
    assert inputs in text
    (tmp_path / "mine.py").write_text(text.replace(inputs, 'inputs = (In("active", Active))'))
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name="OnePortNoComma"))
    assert main(["check", str(graph)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert (
        "OnePortNoComma.inputs must be a tuple of In(name, type), got the one port 'active': a single port needs "
        "its comma, `inputs = (In('active', Active),)`"
    ) in err
