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
