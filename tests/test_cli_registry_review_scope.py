"""A command run in-process (`main([...])`) leaves no element class registered behind it: the
element files its graphs require are its own, as a Simulation's are, so that the same process
may go on to require another copy of a file defining classes of the same names."""

import pytest

from roundhouse import Simulation
from roundhouse.runtime import registry
from roundhouse.tools.cli import main
from tests.test_user_elements import _two_copies, blocks


def _copies(tmp_path) -> tuple[str, str]:
    """The guide's graph and element file as written (class SmallestFirst), in a/ and b/."""
    assert "class SmallestFirst(" in blocks("python")[0]
    first, second = _two_copies(tmp_path)
    return first, second


def _command(name: str, graph: str, tmp_path) -> list[str]:
    element_file = str(tmp_path / graph.split("/")[-2] / "smallest_first.py")
    return {
        "run": ["run", graph, "--set", "src.jobs=5", "--until", "1h", "--quiet"],
        "check": ["check", graph],
        "render": ["render", graph, "-o", str(tmp_path / f"{len(list(tmp_path.iterdir()))}.dot")],
        "elements": ["elements", "SmallestFirst", "--require", element_file],
        # (a sweep compiles its graph here; its runs are in worker processes, which require the file themselves)
        "sweep": ["sweep", graph, "--vary", "src.seed=1", "--set", "src.jobs=5", "--until", "1h", "--workers", "1"],
    }[name]


@pytest.mark.parametrize("command", ["run", "check", "render", "elements", "sweep"])
def test_a_command_run_twice_on_two_copies_of_a_file_then_a_simulation(tmp_path, capsys, command):
    a, b = _copies(tmp_path)
    assert registry.get("SmallestFirst") is None  # (no test before this one left it registered)
    assert main(_command(command, a, tmp_path)) == 0, capsys.readouterr().err
    assert registry.get("SmallestFirst") is None
    assert main(_command(command, b, tmp_path)) == 0, capsys.readouterr().err
    sim = Simulation(a, overrides=["src.jobs=5"])
    sim.run_until(3600)
    assert sim.summary()["jobs_started"] == 5
    assert registry.get("SmallestFirst") is None


def test_a_failed_command_leaves_nothing_registered_either(tmp_path, capsys):
    a, b = _copies(tmp_path)
    assert main(["run", a, "--set", "src.nonesuch=1", "--quiet"]) == 2  # (fails after the file is required)
    assert "nonesuch" in capsys.readouterr().err
    assert registry.get("SmallestFirst") is None
    assert main(_command("check", b, tmp_path)) == 0, capsys.readouterr().err


def test_whatif_compares_a_snapshot_with_another_copy_of_its_file_and_leaves_neither(tmp_path, capsys):
    a, b = _copies(tmp_path)
    sim = Simulation(a, overrides=["src.jobs=5"])
    sim.run_until(3600)
    sim.save(tmp_path / "a.snap")
    assert main(["whatif", str(tmp_path / "a.snap"), "--graph", b, "--set", "src.jobs=5", "--horizon", "1h"]) == 0, (
        capsys.readouterr().err
    )
    assert registry.get("SmallestFirst") is None
    assert main(_command("run", b, tmp_path)) == 0, capsys.readouterr().err
    # The notebook's simulation goes on, and saves again, with its own file's classes.
    sim.run_until(7200)
    sim.save(tmp_path / "a2.snap")
