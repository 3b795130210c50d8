"""An element whose own code misbehaves during a run is named in a located message (exit 2),
whatever it did: raised, or emitted a value its port does not carry. The Python detail is
printed only under --debug."""

import pytest

from roundhouse.tools.cli import main
from tests.own_elements import policy_file

ELEMENTS = policy_file(
    "Misbehaving",
    "Ranks jobs, or fails in the way it is told to.",
    """
    if ctx.round_index >= self.after:
        if self.how == "number":
            return 42
        if self.how == "raise":
            raise ZeroDivisionError("a bug in the policy")
    return Ranking(active.rows, active.gpus)
    """,
    declares=None,
    arguments=(
        ("how", 'str = "fine"', "fine, number (returns 42), or raise."),
        ("after", "int = 0", "the round from which it misbehaves."),
    ),
)
# (the line of its class, as a message names it: where its decorator stands)
CLASS_LINE = ELEMENTS.splitlines().index("@element") + 1

GRAPH = """require "misbehaving.py";
round = 5min;
cluster = "2x4:V100";
arrivals :: PoissonSource(rate=8/h, jobs=20, seed=1);
order :: Misbehaving(how={how}, after=3);
arrivals -> AcceptAll -> JobPool -> order -> FirstFree -> Launch -> JobMetrics;
"""


@pytest.mark.parametrize(
    ("how", "what"),
    [
        ("number", "it emitted an int (42) on its port 'ranking', where a Ranking belongs"),
        ("raise", "its tick raised ZeroDivisionError: a bug in the policy"),
    ],
)
def test_a_misbehaving_element_is_named_with_its_round(tmp_path, capsys, how, what):
    # (A class name per test: the element registry lives as long as the process.)
    (tmp_path / "misbehaving.py").write_text(ELEMENTS.replace("Misbehaving", f"Misbehaving{how.title()}"))
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(how=how).replace("Misbehaving", f"Misbehaving{how.title()}"))
    assert main(["run", str(graph)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: element 'order' (Misbehaving{how.title()}; declared at {graph}:5:1, class defined at " in err
    assert f"misbehaving.py:{CLASS_LINE})" in err
    assert "failed in round 3 (t=15min): " + what in err
    assert ("--debug" in err) == (how == "raise")  # only an exception has a Python detail

    assert main(["run", str(graph), "--debug"]) == 2
    err = capsys.readouterr().err
    if how == "raise":
        assert "Traceback (most recent call last)" in err and 'raise ZeroDivisionError("a bug in the policy")' in err
    assert "error: element 'order'" in err


def test_an_element_that_fails_at_start_is_named(tmp_path, capsys):
    (tmp_path / "misbehaving.py").write_text(
        ELEMENTS.replace("Misbehaving", "MisbehavingAtStart").replace(
            "    def tick(self, ctx, active):",
            "    def start(self, ctx):\n        raise KeyError('setup')\n\n    def tick(self, ctx, active):",
        )
    )
    graph = tmp_path / "g.sched"
    graph.write_text(GRAPH.format(how="fine").replace("Misbehaving", "MisbehavingAtStart"))
    assert main(["run", str(graph)]) == 2
    err = capsys.readouterr().err
    assert (
        "error: element 'order' (MisbehavingAtStart;" in err
        and "failed in round 0 (t=0s): its start raised KeyError: 'setup'" in err
    )


def test_an_argument_refused_at_start_points_at_the_elements_line(tmp_path, capsys):
    """A check of an element's arguments that needs the cluster (made when the run starts)
    points at the line that declares the element, as the compiler's own argument errors do."""
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 6min;\ncluster = "1x1:V100,1x1:K80";\n'
        "arrivals :: PoissonSource(rate=8/h, jobs=5, seed=1, gpus=single, models=blox);\n"
        'solve :: MinCost(prices=["V100:2"]);\n'
        "arrivals -> AcceptAll -> JobPool -> solve -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;\n"
    )
    assert main(["run", str(graph)]) == 2
    err = capsys.readouterr().err
    assert f"{graph}:4:1: error: solve (MinCost): no price for GPU type K80" in err
    assert "Traceback" not in err
