"""One Python file that defines an element class of one name twice is refused, naming the file
and both lines; the same file imported again (edited, reloaded) and the same name in two runs
are not."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from roundhouse.runtime import registry
from roundhouse.runtime.dsl.loader import load_element_file
from roundhouse.tools.cli import main
from tests.conftest import REPO
from tests.test_user_elements import blocks


def _class_lines(text: str, name: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1) if line.startswith(f"class {name}(")]


def _guide_graph(tmp_path, python: str):
    """The guide's graph, requiring smallest_first.py written as `python`."""
    (graph,) = [b for b in blocks("") if "require" in b]
    (tmp_path / "smallest_first.py").write_text(python)
    (tmp_path / "g.sched").write_text(graph)
    return tmp_path / "g.sched"


def test_a_file_defining_one_element_class_twice_is_refused_naming_both_lines(tmp_path, capsys):
    (python,) = blocks("python")
    # The guide's element, and below it a second class of the same name (an edit pasted in).
    twice = python + "\n\n" + python[python.index("@element") :]
    graph = _guide_graph(tmp_path, twice)
    first, second = _class_lines(twice, "SmallestFirst")
    assert main(["check", str(graph)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    where = tmp_path / "smallest_first.py"
    assert f"element class SmallestFirst is defined twice in {where}: at lines {first} and {second}" in err, err
    assert "Traceback" not in err and "SmallestFirst" not in registry.names()


def test_the_same_file_imported_again_and_the_same_name_in_two_runs_are_accepted(tmp_path, capsys):
    (python,) = blocks("python")
    graph = _guide_graph(tmp_path, python)
    # Two runs (commands), each requiring the file: each defines SmallestFirst once.
    assert main(["check", str(graph)]) == 0
    assert main(["check", str(graph)]) == 0
    capsys.readouterr()
    # Within one scope: the file imported, edited (its class moved two lines down), imported again.
    path = tmp_path / "smallest_first.py"
    with registry.scope():
        assert load_element_file(path) is None
        first = registry.get("SmallestFirst")
        path.write_text("\n\n" + python)
        assert load_element_file(path) is None
        again = registry.get("SmallestFirst")
        assert first is not None and again is not None and again is not first


def _fresh(code: str, folder) -> subprocess.CompletedProcess:
    """`code` run in a fresh interpreter, `folder` first on its path."""
    return subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(folder)!r})\n" + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_a_module_of_ones_own_reloads_and_one_defining_a_class_twice_does_not_import(tmp_path):
    (python,) = blocks("python")
    (tmp_path / "mine.py").write_text(python)
    other = python.replace("SmallestFirst", "FewestFirst")  # (a name of its own: `mine` holds SmallestFirst)
    twice = other + "\n" + other[other.index("@element") :]
    (tmp_path / "mine_twice.py").write_text(twice)
    done = _fresh(
        """
        import importlib
        import mine
        from roundhouse.runtime import registry
        first = registry.get("SmallestFirst")
        importlib.reload(mine)
        assert registry.get("SmallestFirst") is mine.SmallestFirst is not first
        try:
            import mine_twice
        except registry.DefinedTwice as err:
            print(err)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    first, second = _class_lines(twice, "FewestFirst")
    assert f"element class FewestFirst is defined twice in {tmp_path / 'mine_twice.py'}: at lines {first} and {second}" in (
        done.stdout
    )
