"""The `roundhouse` command's entry point (tools/entry_point.py): a Ctrl-C while the command
line is still being imported says "interrupted", as one later does, not Python's traceback."""

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
