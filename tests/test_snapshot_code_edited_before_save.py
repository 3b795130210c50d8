"""A snapshot is loaded with the code on disk, which must be the code that made its state: an
element file (or a module of the user's it imports) edited after the simulation imported it
and before `save` is refused at the save, naming the file and saying it changed since the
simulation imported it, rather than saved and then refused at every load as changed since the
save. Put back, the file saves, and the snapshot loads and runs as the run would have."""

from __future__ import annotations

import sys

import pytest

from roundhouse import Simulation
from roundhouse.runtime.snapshot import SnapshotError
from roundhouse.tools.cli import main
from tests.own_elements import policy_file


def _graph(folder, name: str, helper: str | None = None):
    """A graph requiring pol.py: a policy ranking fewest GPUs first (times `helper`'s SIGN)."""
    imports, sign = (f"import {helper}\n", f"{helper}.SIGN * ") if helper else ("", "")
    (folder / "pol.py").write_text(
        policy_file(
            name,
            "Rank jobs, fewest GPUs first.",
            f"""
            order = np.argsort({sign}active.gpus, kind="stable")
            return Ranking(active.rows[order], active.gpus[order])
            """,
            before=f"import numpy as np\n{imports}",
        )
    )
    graph = folder / "g.sched"
    graph.write_text(
        'require "pol.py";\ncluster = "4x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=40, seed=1);\n'
        f"src -> AcceptAll -> JobPool -> {name} -> Consolidated -> Launch -> JobMetrics;\n"
    )
    return graph


def _edit(file, source: str) -> None:
    file.write_text(source.replace('kind="stable"', 'kind="stable")[::-1].copy(') + "\n")


def test_an_element_file_edited_before_the_save_is_refused_at_the_save_naming_it(tmp_path):
    graph = _graph(tmp_path, "EditedBeforeSavePol")
    sim = Simulation(graph).run_until(20000)
    reference = sim.fork()
    reference.run()
    pol = tmp_path / "pol.py"
    source = pol.read_text()
    pol.write_text(source + "\n# edited while the simulation ran\n")
    with pytest.raises(SnapshotError) as caught:
        sim.save(tmp_path / "a.snap")
    message = str(caught.value)
    assert f"snapshot {tmp_path / 'a.snap'}: not saved: {pol.resolve()} has changed since this simulation imported it" in message
    assert "put that version back to save it" in message
    assert not (tmp_path / "a.snap").exists()
    assert not list(tmp_path.glob("*.partial"))
    pol.write_text(source)  # (the code the simulation runs: it saves, and loads as the run)
    again = Simulation.load(sim.save(tmp_path / "a.snap"))
    again.run()
    assert again.jobs().equals(reference.jobs())


def test_an_element_file_gone_before_the_save_is_refused_at_the_save(tmp_path):
    graph = _graph(tmp_path, "GoneBeforeSavePol")
    sim = Simulation(graph).run_until(20000)
    (tmp_path / "pol.py").rename(tmp_path / "pol.py.away")
    with pytest.raises(SnapshotError, match=r"not saved: .*pol\.py cannot be read \(No such file or directory\)"):
        sim.save(tmp_path / "a.snap")


@pytest.fixture
def helper_module(tmp_path, monkeypatch):
    """A module of the user's, importable from the graph's folder, gone from sys.modules after."""
    name = f"savefix_helper_{tmp_path.name.replace('-', '_')}"
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (tmp_path / f"{name}.py").write_text("SIGN = 1\n")
    yield name
    sys.modules.pop(name, None)


def test_a_module_the_element_file_imports_edited_before_the_save_is_refused_at_the_save(tmp_path, helper_module):
    graph = _graph(tmp_path, "HelperEditedBeforeSavePol", helper=helper_module)
    sim = Simulation(graph).run_until(20000)
    (tmp_path / f"{helper_module}.py").write_text("SIGN = -1  # most GPUs first\n")
    with pytest.raises(SnapshotError, match=rf"not saved: .*{helper_module}\.py has changed since this simulation imported it"):
        sim.save(tmp_path / "a.snap")


def test_run_snapshot_says_it_as_the_option(tmp_path, capsys, monkeypatch):
    graph = _graph(tmp_path, "EditedDuringRunPol")
    pol = tmp_path / "pol.py"
    source = pol.read_text()
    from roundhouse.runtime import simulation

    real_save = simulation.save_for_command

    def edited_then_saved(sim, path):  # (the file edited while the run went: just before its save)
        _edit(pol, source)
        return real_save(sim, path)

    monkeypatch.setattr(simulation, "save_for_command", edited_then_saved)
    snap = tmp_path / "run.snap"
    assert main(["run", str(graph), "--until", "6h", "--snapshot", str(snap)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"--snapshot {snap}: not saved: {pol.resolve()} has changed since this simulation imported it" in err
    assert not snap.exists()
