"""The element registry: the built-in elements are found in the library's source text, and a
family's module is imported when a graph first names one of its elements."""

import json
import subprocess
import sys
import textwrap

from roundhouse.runtime import registry
from tests.conftest import REPO


def _fresh(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (no element module imported yet) from the repository."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_the_index_read_from_the_sources_is_the_registry_of_the_whole_library():
    builtin = {cls.__name__: cls.__module__ for cls in registry.classes() if cls.__module__.startswith("roundhouse.elements.")}
    assert registry.builtin_modules() == builtin
    assert len(builtin) > 50 and builtin["Las"] == "roundhouse.elements.policies.las"
    assert set(builtin) <= set(registry.names())


def test_naming_an_element_imports_its_family_only():
    done = _fresh(
        """
        import json, sys
        from roundhouse.runtime import registry
        names = registry.names()
        cls = registry.get("Las")
        print(json.dumps({"class": cls.__name__, "listed": "MaxMinFairness" in names,
                          "modules": sorted(m for m in sys.modules if m.startswith("roundhouse.elements"))}))
        """
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["class"] == "Las" and got["listed"]  # (listed without importing Gavel's solvers)
    modules = set(got["modules"])
    assert "roundhouse.elements.policies.las" in modules
    for unused in (
        "roundhouse.elements.policies.gavel.solvers",
        "roundhouse.elements.policies.pollux",
        "roundhouse.elements.placement",
    ):
        assert unused not in modules, unused


def test_a_users_element_may_not_take_the_name_of_one_not_imported_yet(tmp_path):
    from tests.test_user_elements import blocks

    (python,) = blocks("python")  # the guide's example element, renamed after Gavel's policy
    (tmp_path / "mine.py").write_text(python.replace("SmallestFirst", "MaxMinFairness"))
    (tmp_path / "g.sched").write_text('require "mine.py";\n')
    done = _fresh(
        f"""
        from roundhouse.tools.cli import main
        print(main(["check", {str(tmp_path / "g.sched")!r}]))
        """
    )
    assert done.stdout.strip().splitlines()[-1] == "2"
    assert "element class MaxMinFairness is defined twice: in roundhouse.elements.policies.gavel.solvers and" in done.stderr


def test_an_element_file_is_compiled_as_its_own_text_says(tmp_path):
    """Not under the loader's own `from __future__ import annotations`: a file's annotations
    are the objects it names, as when Python imports it (attrs and factories rely on that)."""
    from roundhouse.runtime.dsl.loader import load_element_file

    path = tmp_path / "plain.py"
    path.write_text("limit: int = 1\nassert __annotations__['limit'] is int, __annotations__\n")
    with registry.scope():
        assert load_element_file(path) is None
