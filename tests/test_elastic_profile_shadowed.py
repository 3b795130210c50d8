"""`elastic_profile = "pollux"` names the built-in profile unless a folder of that name is beside
the graph; such a folder (an output folder named after the experiment, say) that holds no
profile is said to hide the built-in one, not only that it holds no application."""

from __future__ import annotations

from roundhouse.tools.cli import main
from tests.conftest import REPO, refused


def test_a_folder_named_as_a_built_in_profile_is_said_to_hide_it(tmp_path, capsys):
    graph = tmp_path / "pollux.sched"
    text = (REPO / "graphs" / "pollux.sched").read_text()
    graph.write_text(text.replace("../traces/samples/", f"{REPO}/traces/samples/"))
    (tmp_path / "pollux").mkdir()
    err = refused(capsys, ["run", graph, "--until", "10min", "--quiet"], "no application folder with a placements.csv in it")
    assert 'read in place of the built-in profile "pollux"' in err and "Traceback" not in err
    (tmp_path / "pollux").rmdir()
    assert main(["run", str(graph), "--until", "10min", "--quiet"]) == 0
