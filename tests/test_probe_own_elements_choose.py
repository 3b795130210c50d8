"""A placer of one's own whose `choose` answers wrongly (GPU ids out of range, a mask instead of
ids, too few ids, an id twice, a busy GPU) fails naming the element and what it returned, not as
an index error deep in the packing nor as a job placed on what it did not ask for; a right
answer places as before."""

import pytest

from roundhouse.tools.cli import main

PLACER = '''
import numpy as np

from roundhouse.elements.placement.placer import Placer
from roundhouse.runtime.element import element


@element
class Odd(Placer):
    """Places each job on the GPUs its body picks.

    See also: FirstFree
    Paper: none.
    """

    state = ()

    def choose(self, cluster, available, want, types, one_node):
        free = available.nonzero()[0]
        if len(free) < want:
            return None
        return {answer}
'''

GRAPH = """require "mine.py";
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=20, seed=1);
arrivals -> AcceptAll -> JobPool -> Fifo -> place :: Odd -> Launch -> JobMetrics;
"""


def _run(tmp_path, capsys, answer: str) -> tuple[int, str]:
    (tmp_path / "mine.py").write_text(PLACER.format(answer=answer))
    (tmp_path / "g.sched").write_text(GRAPH)
    code = main(["run", str(tmp_path / "g.sched"), "--until", "6h", "--quiet"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "answer, said",
    [
        ("np.array([100] * want)", "GPU id 100, outside 0..7"),
        ("available.copy()", "ndarray of bool with shape (8,), not GPU ids"),
        ("free[: max(want - 1, 0)]", "GPU id(s) for a job wanting"),
        ("np.array([free[0]] * want)", "more than once"),
        ("np.arange(want)", "which is not free"),
    ],
)
def test_a_wrong_answer_from_choose_is_said_naming_the_element(tmp_path, capsys, answer, said):
    code, err = _run(tmp_path, capsys, answer)
    assert code != 0, err
    assert "element 'place' (Odd" in err and "its choose returned" in err and said in err, err
    assert "Traceback" not in err and "IndexError" not in err


def test_a_right_answer_places_as_before(tmp_path, capsys):
    code, err = _run(tmp_path, capsys, "free[:want]")
    assert code == 0, err
