"""run.json records a built-in elastic profile by its name ("pollux"), not joined to the
graph's folder as the setting holds it (a folder that is not there); a folder of
measurements is recorded as its path."""

from __future__ import annotations

import json

from roundhouse.tools.cli import main
from tests.conftest import REPO


def test_a_built_in_elastic_profile_is_recorded_by_its_name(tmp_path):
    out = tmp_path / "run"
    assert main(["run", str(REPO / "graphs" / "pollux.sched"), "--until", "30min", "--quiet", "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["settings"]["elastic_profile"] == "pollux"


def test_a_folder_named_as_a_built_in_profile_is_recorded_as_its_path(tmp_path):
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import built_in_elastic

    (tmp_path / "pollux").mkdir()
    graph = tmp_path / "g.sched"
    graph.write_text(
        'round = 1min;\nelastic_profile = "pollux";\nsrc :: PoissonSource(rate=1/h, jobs=2);\n'
        "src -> AcceptAll -> JobPool -> Fifo -> FirstFree -> Launch -> JobMetrics;\n"
    )
    assert built_in_elastic(compile_file(graph)) is None  # (the folder there is the profile)
    (tmp_path / "pollux").rmdir()
    assert built_in_elastic(compile_file(graph)) == "pollux"
