"""Gavel's LP libraries load without the NumPy submodules scipy's import would drag in unused
(`numpy.f2py`, `numpy.testing`: elements/policies/gavel/libraries.py), and those submodules
still work, whole, for code that reads them afterwards."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
from roundhouse.tools.cli import main
status = main(["run", sys.argv[1], "--quiet", "--until", "2h"])
loaded = sorted(sys.modules)
import numpy.f2py
from numpy.f2py import crackfortran
from numpy.testing import assert_array_equal
import numpy
assert_array_equal(numpy.arange(3), [0, 1, 2])
print(json.dumps({
    "status": status,
    "loaded": loaded,
    "f2py_real": type(numpy.f2py) is type(json) and sys.modules["numpy.f2py"] is numpy.f2py,
    "testing_real": type(numpy.testing) is type(json) and sys.modules["numpy.testing"] is numpy.testing,
    "crackfortran": crackfortran.__name__,
}))
"""


def test_a_gavel_run_solves_without_loading_numpys_fortran_wrapper_or_test_tools():
    graph = REPO / "graphs" / "gavel-las.sched"
    done = subprocess.run([sys.executable, "-c", PROBE, str(graph)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["status"] == 0
    loaded = set(got["loaded"])
    assert "scipy.sparse" in loaded and "roundhouse.elements.policies.gavel.lp" in loaded  # (it solved)
    assert not {"numpy.f2py.crackfortran", "unittest"} & loaded
    # Read afterwards, they are the real modules, in sys.modules and as NumPy's attributes.
    assert got["f2py_real"] and got["testing_real"] and got["crackfortran"] == "numpy.f2py.crackfortran"


AFTERWARDS = """
import importlib.util, sys
from unittest import mock
from roundhouse.tools.cli import main
assert main(["run", sys.argv[1], "--quiet", "--until", "2h"]) == 0
import numpy
import numpy.testing as npt
spec = importlib.util.find_spec("numpy.testing")  # (ValueError on a stand-in without one)
with mock.patch("numpy.testing.assert_allclose", lambda *a, **k: "patched"):
    seen = numpy.testing.assert_allclose(1, 2)
print(spec.name, seen, npt is numpy.testing, bool(numpy.testing.__doc__))
"""


def test_numpys_test_tools_after_a_gavel_run_are_the_real_module_to_find_and_patch():
    """numpy.testing read after a Gavel run was a stand-in beside the real module: its spec was
    None (importlib.util.find_spec raised ValueError), its docstring None, and mock.patch on it
    patched the stand-in while NumPy's attribute went on to the real, unpatched, module."""
    graph = REPO / "graphs" / "gavel-las.sched"
    done = subprocess.run([sys.executable, "-c", AFTERWARDS, str(graph)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["numpy.testing", "patched", "True", "True"]
