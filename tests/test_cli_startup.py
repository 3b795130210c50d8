"""What `roundhouse run` imports at start-up: the command given, not the fifteen others, nor
libraries a simulated run does not use (start-up is part of every command-line run's time)."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
from roundhouse.tools.cli import main
status = main(["run", sys.argv[1], "--quiet", "--until", "10min"])
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""


def test_run_imports_only_what_a_simulated_run_needs(tmp_path):
    graph = tmp_path / "g.sched"
    graph.write_text(
        f'round = 5min;\ncluster = "2x4:V100";\nsrc :: TraceSource(path="{REPO}/traces/samples/philly-1000.csv");\n'
        "src -> AcceptAll -> JobPool -> Las -> Consolidated -> Launch -> JobMetrics;\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(graph)], capture_output=True, text=True, cwd=REPO, check=True, timeout=120
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["status"] == 0
    modules = set(got["modules"])
    assert "roundhouse.tools.run_cmd" in modules and "roundhouse.runtime.engine" in modules
    for name in (
        "roundhouse.tools.sweep_cmd",
        "roundhouse.tools.whatif_cmd",
        "roundhouse.runtime.whatif",
        "roundhouse.runtime.backends.live",
        "networkx",
        "rich",  # nothing printed with --quiet
    ):
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
