"""Elements written by users: `require "file.py";` and the guide's example."""

import re
import textwrap

from roundhouse.runtime import registry
from roundhouse.tools.cli import main
from tests.conftest import REPO, jobs_of


def blocks(language: str) -> list[str]:
    """The guide's fenced blocks of one language ("" for none), each dedented."""
    text = (REPO / "docs" / "writing-elements.md").read_text()
    fenced = re.findall(r"^ *```(\w*)\n(.*?)^ *```", text, re.S | re.M)
    return [textwrap.dedent(body) for lang, body in fenced if lang == language]


def test_the_guides_example_runs(tmp_path, run_graph):
    (python,) = blocks("python")
    (tmp_path / "smallest_first.py").write_text(python)
    (graph,) = [b for b in blocks("") if "require" in b]
    result = run_graph(graph, cluster="4x4:V100")
    jobs = jobs_of(result)
    assert len(jobs) == 500 and all(j["status"] == "finished" for j in jobs.values())
    ranked = [c for name, c in result.counters.items() if name.startswith("SmallestFirst@")]
    assert ranked and "ranked" in ranked[0]
    # Each run's element files are its own, as in a command: the file edited, with its class
    # of the same name, is required anew by the next run, and the first's class is forgotten.
    # (That run's first 50 jobs are enough to show it.)
    (tmp_path / "smallest_first.py").write_text(python + "\n# edited\n")
    again = jobs_of(run_graph(graph, cluster="4x4:V100", overrides=["src.jobs=50"]))
    assert len(again) == 50 and all(j["status"] == "finished" for j in again.values())
    assert "SmallestFirst" not in registry.names()


def test_a_broken_element_file_is_reported_at_its_line(tmp_path, capsys):
    (tmp_path / "bad.py").write_text("import numpy\n\nraise RuntimeError('half-written')\n")
    (tmp_path / "g.sched").write_text('require "bad.py";\n')
    assert main(["check", str(tmp_path / "g.sched")]) == 2
    err = capsys.readouterr().err
    assert "g.sched:1:9: error: cannot require 'bad.py'" in err and "bad.py:3: RuntimeError: half-written" in err
    (tmp_path / "h.sched").write_text('require "none.py";\n')
    assert main(["check", str(tmp_path / "h.sched")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_an_element_without_its_documentation_does_not_load(tmp_path, capsys):
    (tmp_path / "undocumented.py").write_text(
        "from roundhouse.runtime.element import Element, element\n\n@element\nclass Quiet(Element):\n"
        '    """Does nothing.\n\n    Ports:\n        none\n    Arguments:\n        none\n"""\n'
        '    category = "control"\n'
    )
    (tmp_path / "g.sched").write_text('require "undocumented.py";\n')
    assert main(["check", str(tmp_path / "g.sched")]) == 2
    assert "missing section(s) Counters:, See also:, Paper:" in capsys.readouterr().err


def test_the_guide_quotes_the_message_for_a_missing_section(tmp_path, capsys):
    from roundhouse.runtime.element import Element, parse_doc

    (quoted,) = [b.strip() for b in blocks("text") if b.startswith("docstring of element")]

    class Quiet(Element):
        """Does nothing.

        Ports:
            none
        Arguments:
            none
        """

        category = "control"

    try:
        parse_doc(Quiet)
    except TypeError as err:
        assert str(err) == quoted
    else:
        raise AssertionError("a docstring without Counters:, See also: and Paper: was accepted")
    (tmp_path / "quiet.py").write_text(
        "from roundhouse.runtime.element import Element, element\n\n@element\nclass Quiet(Element):\n"
        f"    {Quiet.__doc__!r}\n    category = 'control'\n"
    )
    (tmp_path / "g.sched").write_text('require "quiet.py";\n')
    assert main(["check", str(tmp_path / "g.sched")]) == 2
    assert quoted in capsys.readouterr().err


def test_a_gpu_type_ones_own_element_emits_that_the_cluster_lacks_is_refused_naming_it(tmp_path, capsys):
    # The guide's policy, made to name a GPU type the cluster does not have: the engine's checks
    # of what one's own element emits refuse it there, naming that element, before a placer
    # could fail on it far from the cause.
    (python,) = blocks("python")
    bad_type = "backfill=self.backfill, gpu_type=np.full(len(order), 99))"
    broken = python.replace("backfill=self.backfill)", bad_type, 1)
    assert bad_type in broken
    (tmp_path / "smallest_first.py").write_text(broken)
    (graph,) = [b for b in blocks("") if "require" in b]
    (tmp_path / "g.sched").write_text(graph)
    assert main(["run", str(tmp_path / "g.sched"), "--cluster", "4x4:V100", "--quiet"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "element 'SmallestFirst@" in err and "whose gpu_type is 99 for job" in err


KEYED = '''
import numpy as np

from roundhouse.elements.policies.base import KeyOrder
from roundhouse.runtime.element import element


@element
class FewestFirst(KeyOrder):
    """Rank jobs by the GPUs they ask for, fewest first.

    See also: Las
    Paper: none.
    """

    keys_move_with_progress = True

    def key(self, active):
        return active.gpus.astype(float)
'''


def test_a_key_order_written_as_the_guide_says_forks(tmp_path, capsys):
    # The guide: a KeyOrder subclass only defines key(); the state KeyOrder keeps is its own to declare.
    (tmp_path / "keyed.py").write_text(KEYED)
    graph = tmp_path / "keyed.sched"
    graph.write_text(
        'require "keyed.py";\nround = 5min;\ncluster = "4x4:V100";\n'
        "PoissonSource(rate=8/h, jobs=30, seed=1) -> AcceptAll -> JobPool -> FewestFirst -> Consolidated -> Launch -> JobMetrics;\n"
    )
    assert main(["check", "--fork", str(graph)]) == 0, capsys.readouterr().err
    from roundhouse import Simulation

    sim = Simulation(graph)
    sim.run_until(3600)
    fork = sim.fork()
    fork.run(), sim.run()
    assert fork.summary() == sim.summary() and fork.summary()["jobs_finished"] == 30


def test_a_counter_left_out_of_the_docstring_fails_the_run_naming_it(tmp_path, capsys):
    (python,) = blocks("python")
    assert "        ranked: jobs ranked in the last round." in python
    undocumented = python.replace("        ranked: jobs ranked in the last round.", "        none")
    (tmp_path / "smallest_first.py").write_text(undocumented)
    (graph,) = [b for b in blocks("") if "require" in b]
    (tmp_path / "g.sched").write_text(graph)
    assert main(["run", str(tmp_path / "g.sched"), "--cluster", "4x4:V100", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert re.search(
        r"element 'SmallestFirst@\d+' \(SmallestFirst; .*\): it set counter\(s\) that its docstring does not", err
    ), err
    assert "under `Counters:`: ranked (" in err and "Traceback" not in err


def test_the_reference_shows_ones_own_elements_with_require(tmp_path, capsys):
    (python,) = blocks("python")
    (tmp_path / "mine.py").write_text(python)
    assert main(["elements", "SmallestFirst", "--require", str(tmp_path / "mine.py")]) == 0
    out = capsys.readouterr().out
    assert "SmallestFirst" in out and "ranked" in out
    assert main(["elements", "--require", str(tmp_path / "none.py")]) == 2
    assert f"--require {tmp_path / 'none.py'}: no such file" in capsys.readouterr().err


def _two_copies(tmp_path):
    """The guide's graph and element file as written, twice (in a/ and b/): each defines the
    class SmallestFirst, which a command leaves no longer registered when it ends."""
    (python,) = blocks("python")
    (graph,) = [b for b in blocks("") if "require" in b]
    graphs = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "smallest_first.py").write_text(python)
        (tmp_path / folder / "g.sched").write_text(graph)
        graphs.append(str(tmp_path / folder / "g.sched"))
    return graphs


def test_graphs_checked_together_each_require_their_own_copy_of_a_file(tmp_path, capsys):
    a, b = _two_copies(tmp_path)
    assert main(["check", a, b]) == 0, capsys.readouterr().err
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == [a, b]
    assert main(["check", b, a, b]) == 0  # (what each required is forgotten after it, in any order)
    capsys.readouterr()
    # Both files in one graph define the class twice: the message names the two files.
    both = tmp_path / "both.sched"
    both.write_text('require "a/smallest_first.py";\nrequire "b/smallest_first.py";\n')
    assert main(["check", str(both)]) == 2
    err = capsys.readouterr().err
    first, second = tmp_path / "a" / "smallest_first.py", tmp_path / "b" / "smallest_first.py"
    assert f"element class SmallestFirst is defined twice: in {first} and {second}" in err
    assert "roundhouse_user" not in err and "TypeError" not in err


def test_the_reference_refuses_two_files_defining_one_class_naming_both(tmp_path, capsys):
    _two_copies(tmp_path)
    first, second = tmp_path / "a" / "smallest_first.py", tmp_path / "b" / "smallest_first.py"
    assert main(["elements", "--require", str(first), "--require", str(second)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --require {second}: {second}:")
    assert f"element class SmallestFirst is defined twice: in {first} and {second}" in err
    assert "Traceback" not in err


def test_a_built_in_that_a_required_file_imports_stays_known_to_the_next_graph(tmp_path):
    """The file's own classes are forgotten after its graph; a built-in module it imported
    first stays imported, so its classes must stay known. (In a fresh process: here the
    built-in module would be imported already.)"""
    import subprocess
    import sys

    a, _ = _two_copies(tmp_path)
    element_file = tmp_path / "a" / "smallest_first.py"
    element_file.write_text(
        "from roundhouse.elements.policies.tiresias import TiresiasLas  # noqa: F401\n" + element_file.read_text()
    )
    plain = tmp_path / "plain.sched"
    plain.write_text(
        'round = 5min; cluster = "1x4:V100"; PoissonSource(rate=1/h, jobs=1, seed=0) -> AcceptAll -> JobPool -> '
        "TiresiasLas -> FirstFree -> Launch -> JobMetrics;\n"
    )
    code = "import sys; from roundhouse.tools.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "check", a, str(plain)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_heading_written_otherwise_is_named_with_the_one_it_should_be(tmp_path, capsys):
    # (A heading such as `See Also:` or `Args:` was read as text of the section above: the
    # message said only that `See also:` was missing, with the line there to see.)
    (tmp_path / "headings.py").write_text(
        "from roundhouse.runtime.element import Element, element\n\n@element\nclass Headings(Element):\n"
        '    """Does nothing.\n\n    Ports:\n        none\n    Args:\n        none\n    Counters:\n        none\n'
        '    See Also: Fifo\n    Paper: none.\n    """\n'
        '    category = "control"\n'
    )
    (tmp_path / "g.sched").write_text('require "headings.py";\n')
    assert main(["check", str(tmp_path / "g.sched")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert (
        "docstring of element Headings: missing section(s) Arguments:, See also: (the line 'Args:' is not a section: "
        "write its heading as `Arguments:`; the line 'See Also: Fifo' is not a section: write its heading as `See also:`)"
    ) in err
