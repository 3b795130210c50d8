"""A setting named like one of the graph's elements (`--set order=1`, `--vary order=1,2`, or
`order = 3;` in the file) is refused as an unknown setting with a hint to set the element's
arguments, in the form the place it was given takes."""

from __future__ import annotations

from tests.conftest import REPO, fails

LAS = REPO / "graphs" / "las.sched"


def test_set_of_an_elements_name_hints_at_its_arguments(capsys):
    err = fails(capsys, "run", LAS, "--set", "order=1", "--until", "1h")
    assert "unknown setting 'order' (--set order)" in err
    assert "'order' is an element: set one of its arguments, as --set order.ARGUMENT=VALUE" in err, err


def test_vary_of_an_elements_name_hints_at_its_arguments(capsys):
    err = fails(capsys, "sweep", LAS, "--vary", "order=1,2", "--until", "1h")
    assert "'order' is an element: set one of its arguments, as --vary order.ARGUMENT=VALUE" in err, err


def test_a_setting_in_the_file_named_as_an_element_hints_at_its_declaration(capsys, tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(
        "round = 5min;\norder = 3;\nsrc :: PoissonSource(rate=1/h, jobs=3);\n"
        "src -> AcceptAll -> JobPool -> order :: Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    err = fails(capsys, "check", graph, "--cluster", "1x1:V100")
    assert "g.sched:2:1: error: unknown setting 'order'" in err, err
    assert "give its arguments where it is declared, order :: CLASS(ARGUMENT=VALUE)" in err, err


def test_an_unknown_setting_not_named_as_an_element_still_suggests_a_setting(capsys):
    err = fails(capsys, "run", LAS, "--set", "rund=1", "--until", "1h")
    assert "unknown setting 'rund'" in err and "round" in err and "is an element" not in err, err
