"""An optional argument of one's own element given Python's None in a .sched file: the
language has no None, and the message says to leave the argument out (rather than that a rate
was expected and a name was given)."""

import pytest

from roundhouse.tools.cli import main
from tests.own_elements import policy_file


def _element(name: str, annotation: str) -> str:
    """The file of a policy `name` whose argument `cap` is of type `annotation`, None by default."""
    return policy_file(
        name,
        "Rank jobs in pool order.",
        "return Ranking(active.rows, active.gpus)",
        before="from typing import Optional\n\nfrom roundhouse.runtime.values import Rate\n",
        arguments=(("cap", f"{annotation} = None", "how fast it may rank, if at all."),),
    )


GRAPH = """require "mine.py";
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=5, seed=1);
order :: {name}(cap={given});
arrivals -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> JobMetrics;
"""


def _check(tmp_path, capsys, name, annotation, given):
    (tmp_path / "mine.py").write_text(_element(name, annotation))
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(name=name, given=given))
    code = main(["check", str(graph)])
    return code, " ".join(capsys.readouterr().err.split()), graph


@pytest.mark.parametrize("given", ["None", "none", "null"])
@pytest.mark.parametrize("annotation", ["Optional[Rate]", "Rate | None", "list[int] | None"])
def test_none_for_an_optional_argument_says_to_leave_it_out(tmp_path, capsys, given, annotation):
    name = "OptionalCap" + "".join(c for c in given + annotation if c.isalnum())
    code, err, graph = _check(tmp_path, capsys, name, annotation, given)
    assert code == 2
    assert (
        f"{graph}:5:{len(f'order :: {name}(cap=') + 1}: error: argument 'cap' of {name} cannot be given {given}: "
        "a .sched file has no None; leave the argument out for its default"
    ) in err


def test_a_value_for_an_optional_argument_is_still_taken(tmp_path, capsys):
    code, err, _ = _check(tmp_path, capsys, "OptionalCapGiven", "Optional[Rate]", "8/h")
    assert code == 0, err
