"""`roundhouse render` and `roundhouse elements` on odd inputs: arguments with backslashes or
of great length, elements of one's own holding arrays, output names that name no file, an empty
element name, and table cells of one's own documentation that hold a `|`."""

import re

from roundhouse.runtime import registry
from roundhouse.tools.cli import main
from tests.conftest import refused
from tests.own_elements import policy_file

PIPELINE = "src -> AcceptAll -> JobPool -> {policy} -> FirstFree -> Launch -> JobMetrics;\n"

# An element of one's own whose argument is held as a NumPy array (its converter makes one): a
# default given as a tuple, and a value written in the graph.
ARRAY_ELEMENT = policy_file(
    "ReviewArrayHolder",
    "Rank jobs in the pool's order.",
    "return Ranking(active.rows, active.gpus)",
    before="import attrs\nimport numpy as np\n",
    arguments=(
        (
            "weights",
            "list[float] = attrs.field(default=(1.0, 2.0), converter=np.asarray)",
            "one weight per class of job (x | y: either).",
        ),
    ),
    counters=(("ranked", "jobs ranked."),),
)


def _svg_texts(path) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text())


def test_render_draws_a_backslash_in_a_string_argument_as_written(tmp_path):
    # (Graphviz reads a backslash in a label's text: `\\` would be drawn as one backslash)
    (tmp_path / "a\\G.csv").write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,600\n")
    graph = tmp_path / "g.sched"
    graph.write_text('src :: TraceSource(path="a\\\\G.csv");\n' + PIPELINE.format(policy="Fifo"))
    out = tmp_path / "g.svg"
    assert main(["render", str(graph), "-o", str(out)]) == 0
    assert "path=&quot;a\\\\G.csv&quot;" in _svg_texts(out)


def test_render_draws_a_graph_with_an_argument_of_thousands_of_values(tmp_path):
    n = 2000
    entities = ", ".join(f"{i}..{i + 1}" for i in range(n))
    weights = ", ".join("1" for _ in range(n))
    graph = tmp_path / "g.sched"
    graph.write_text(
        f"src :: PoissonSource(rate=8/h, jobs={n}, seed=1);\n"
        f'solve :: Hierarchical(entities=[{entities}], weights=[{weights}], policies=["fairness"]);\n'
        "src -> AcceptAll -> JobPool -> solve -> GavelRounds -> GavelPlacer -> Launch -> JobMetrics;\n"
    )
    out = tmp_path / "g.svg"
    assert main(["render", str(graph), "-o", str(out)]) == 0
    (drawn,) = [t for t in _svg_texts(out) if t.startswith("entities=")]
    assert drawn.startswith("entities=[0..1, 1..2, ") and drawn.endswith(", 1999..2000]")
    assert "\u2026" in drawn and len(drawn) <= 100


def test_render_draws_an_element_of_ones_own_holding_an_array(tmp_path):
    (tmp_path / "mine.py").write_text(ARRAY_ELEMENT)
    for policy, drawn in (("ReviewArrayHolder(weights=[1, 2, 3])", True), ("ReviewArrayHolder", False)):
        graph = tmp_path / "g.sched"
        graph.write_text('require "mine.py";\nsrc :: PoissonSource(rate=8/h, jobs=5, seed=1);\n' + PIPELINE.format(policy=policy))
        out = tmp_path / "g.dot"
        with registry.scope():
            assert main(["render", str(graph), "-o", str(out)]) == 0
        # (as written; left out, it holds its default, an array equal to the tuple it was made from)
        assert ("weights=[1, 2, 3]" in out.read_text()) == drawn and out.read_text().count("weights=") == drawn


def test_render_refuses_an_output_name_ending_in_a_slash(tmp_path, capsys):
    out = tmp_path / "g.svg"
    refused(capsys, ["render", "graphs/fifo.sched", "-o", f"{out}/"], "names a folder (it ends in a slash)")
    assert not out.exists()


def test_render_refuses_an_output_name_that_is_an_extension_alone(tmp_path, capsys):
    err = refused(capsys, ["render", "graphs/fifo.sched", "-o", tmp_path / ".svg"], "names no file before its extension")
    assert "write e.g. graph.svg" in err
    assert not (tmp_path / ".svg").exists()


def test_elements_refuses_an_empty_name(capsys):
    refused(capsys, ["elements", ""], "no element class ''")
    refused(capsys, ["elements", "", "--markdown"], "no element class ''")


def test_the_markdown_reference_keeps_a_pipe_in_ones_documentation_inside_its_cell(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(ARRAY_ELEMENT)
    with registry.scope():
        assert main(["elements", "ReviewArrayHolder", "--markdown", "--require", str(tmp_path / "mine.py")]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `weights`")]
    assert len(re.findall(r"(?<!\\)\|", row)) == 5  # four cells
    assert "(x \\| y: either)" in row


def test_check_of_several_graphs_names_each_refused_graph(tmp_path, capsys):
    # (a problem found as the elements start is said at the element's line, and the graph refused
    # is named after its problems)
    good, bad = tmp_path / "good.sched", tmp_path / "bad.sched"
    good.write_text(
        'cluster = "2x4:V100";\nsrc :: PoissonSource(rate=8/h, jobs=5, gpus=single, seed=1);\n' + PIPELINE.format(policy="Fifo")
    )
    bad.write_text('cluster = "1x1:V100";\nsrc :: PoissonSource(rate=8/h, jobs=200, seed=1);\n' + PIPELINE.format(policy="Fifo"))
    err = refused(capsys, ["check", good, bad, good], f"{bad}:2:1: error: element 'src' (PoissonSource): job ")
    assert err.endswith(f"{bad}: refused (see above)\n") and f"{good}: refused" not in err
    alone = refused(capsys, ["check", bad], f"{bad}:2:1: error: element 'src' (PoissonSource): job ")
    assert "refused" not in alone  # (one graph: its problems are all there is, as render prints them)


def test_render_names_a_missing_output_folder_before_checking_the_graph(tmp_path, capsys):
    # (the check reads the graph's traces whole: a typo in the folder is told at once)
    out = tmp_path / "nowhere" / "g.svg"
    err = refused(capsys, ["render", tmp_path / "absent.sched", "-o", out], f"cannot write {out}: no folder {out.parent}")
    assert "absent.sched" not in err
    (tmp_path / "a file").write_text("")
    out = tmp_path / "a file" / "g.svg"
    refused(capsys, ["render", tmp_path / "absent.sched", "-o", out], f"cannot write {out}: {out.parent} is not a folder")
