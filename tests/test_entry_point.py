"""The `roundhouse` command's entry point (tools/entry_point.py): a Ctrl-C while the command
line is still being imported says "interrupted", as one later does, not Python's traceback."""

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (A Ctrl-C lands while polars is imported: deterministic, where a real one's timing is not.)
PROBE = """
import sys

class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "polars":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, CtrlC())
from roundhouse.tools.entry_point import main
sys.exit(main())
"""


def test_a_ctrl_c_while_the_command_line_is_imported_says_interrupted():
    done = subprocess.run([sys.executable, "-c", PROBE, "run", "--help"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert (done.returncode, done.stderr) == (130, "interrupted\n")


def test_the_installed_command_is_the_guarded_entry_point():
    (command,) = [e for e in entry_points(group="console_scripts") if e.name == "roundhouse"]
    assert command.value == "roundhouse.tools.entry_point:main"


# (What OpenBLAS was told, read by the command itself: an element file the graph requires.)
THREADS_PROBE = """
import os

open(os.environ["PROBE_OUT"], "w").write(os.environ.get("OPENBLAS_NUM_THREADS", "unset"))
"""


def test_the_command_runs_openblas_on_one_thread_unless_told_otherwise(tmp_path):
    """NumPy's OpenBLAS only spins its threads on a simulation's small arrays: the command tells it
    one thread before NumPy loads, and keeps a number the user set."""
    (tmp_path / "probe.py").write_text(THREADS_PROBE)
    (tmp_path / "g.sched").write_text(
        'require "probe.py";\nsrc :: PoissonSource(rate=4/h, jobs=2);\nsrc -> AcceptAll -> JobPool -> Fifo -> Consolidated -> Launch -> JobMetrics;\n'
    )
    for given, seen in ((None, "1"), ("3", "3")):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        env["PROBE_OUT"] = str(tmp_path / "seen")
        if given is not None:
            env["OPENBLAS_NUM_THREADS"] = given
        code = "import sys\nfrom roundhouse.tools.entry_point import main\nsys.exit(main())"
        done = subprocess.run(
            [sys.executable, "-c", code, "check", "g.sched"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "seen").read_text() == seen
