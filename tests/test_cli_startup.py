"""What `roundhouse run` imports: the command given, not the fifteen others, nor libraries a
simulated run does not use (start-up is part of every command-line run's time)."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
from roundhouse.tools.cli import main
status = main(["run", sys.argv[1], "--quiet", "--until", "10min", *sys.argv[2:]])
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""


def _modules(tmp_path, *args: str) -> set[str]:
    """The modules loaded by a run of a LAS graph (with these extra arguments)."""
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "2x4:V100";\nsrc :: TraceSource(path="{REPO}/traces/samples/philly-1000.csv");\n'
        "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(graph), *args], capture_output=True, text=True, cwd=REPO, check=True, timeout=120
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["status"] == 0
    return set(got["modules"])


# Gavel's LP libraries load when a Gavel element first solves (elements/policies/gavel/libraries.py).
_UNUSED_LIBRARIES = ("scipy.sparse", "ortools.linear_solver.python.model_builder_helper")


def test_run_imports_only_what_a_simulated_run_needs(tmp_path):
    modules = _modules(tmp_path)
    assert "roundhouse.tools.run_cmd" in modules and "roundhouse.runtime.engine" in modules
    for name in (
        "roundhouse.tools.sweep_cmd",
        "roundhouse.tools.whatif_cmd",
        "roundhouse.runtime.whatif",
        "roundhouse.runtime.backends.live",
        "networkx",
        "rich",  # nothing printed with --quiet
        "roundhouse.elements.policies.gavel.solvers",  # element families the graph does not name
        "roundhouse.elements.policies.pollux",
        *_UNUSED_LIBRARIES,
    ):
        assert name not in modules, name


def test_writing_the_results_imports_no_pandas(tmp_path):
    """The explanation record is written through pyarrow, whose `pa.array` imports pandas
    (about 0.2 s) to look for pandas values: the record's arrays are made without it."""
    out = tmp_path / "out"
    modules = _modules(tmp_path, "--out", str(out))
    assert (out / "explain.parquet").stat().st_size > 0 and (out / "jobs.csv").exists()
    assert "pyarrow.parquet" in modules
    for name in ("pandas", *_UNUSED_LIBRARIES):
        assert name not in modules, name


def test_help_and_an_unknown_command_still_list_every_command(capsys):
    from roundhouse.tools.cli import COMMAND_MODULES, main

    try:
        main(["nosuch"])
    except SystemExit as stop:
        assert stop.code == 2
    text = capsys.readouterr().err
    for module in COMMAND_MODULES:
        assert f"'{module.rsplit('.', 1)[1].removesuffix('_cmd')}'" in text
