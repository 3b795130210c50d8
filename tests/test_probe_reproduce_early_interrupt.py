"""A Ctrl-C while `roundhouse reproduce` is still loading what it needs (rich's tables, the
experiments' modules) prints "interrupted" and ends with status 130, as it does later in the
run, never Python's traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# The Ctrl-C is made to arrive at a chosen import: the moment a module the command loads is
# first imported, so that the test does not depend on how fast this machine starts Python.
_SCRIPT = textwrap.dedent(
    """
    import sys

    target = sys.argv[1]

    class CtrlCAt:
        def find_spec(self, name, path=None, target_module=None):
            if name == target:
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, CtrlCAt())
    from roundhouse.tools.entry_point import main
    sys.argv = ["roundhouse", "reproduce", "--quick", "tiresias-toy", "--out", sys.argv[2]]
    sys.exit(main())
    """
)


def _interrupted_at(module: str, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SCRIPT, module, str(out)], capture_output=True, text=True, timeout=120)


def test_ctrl_c_while_loading_rich_tables_prints_interrupted(tmp_path):
    done = _interrupted_at("rich.table", tmp_path / "out")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().endswith("interrupted"), done.stderr
    assert done.returncode == 130


def test_ctrl_c_while_loading_the_experiments_prints_interrupted(tmp_path):
    done = _interrupted_at("roundhouse.tools.reproductions", tmp_path / "out")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().endswith("interrupted"), done.stderr
    assert done.returncode == 130
    assert not (tmp_path / "out" / "tiresias-toy" / "toy.csv").exists()
