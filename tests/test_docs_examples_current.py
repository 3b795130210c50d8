"""The README's and the user guides' examples and names, checked against the code as it is: the
graph the README shows, the options, paths, reasons, settings and experiments the pages name, and
the commands of docs/plots.md, docs/sweeps.md, docs/explain.md and docs/semantics.md, and the
opening graph of docs/writing-elements.md, that no other test runs as written
(tests/test_explain_docs.py, test_cluster_docs.py, test_live_docs.py, test_whatif_docs.py,
test_simulation_api.py and test_docs_walkthrough_elements.py run the others)."""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import os
import re

import pytest

from roundhouse.runtime import registry
from roundhouse.tools.cli import build_parser, main
from tests.conftest import REPO

PAGES = ["README.md"] + [
    f"docs/{name}.md"
    for name in ("architecture", "clusters", "explain", "live", "plots", "semantics", "simulation-api", "sweeps", "whatif")
]
FOLDERS = "graphs|clusters|traces|benchmarks|tests|runtime|elements|tools|agents|wire|docs|roundhouse"
# Options of other programs that the pages show beside ours: pip's, pytest-xdist's, callgrind's
# and a Dask worker's.
OTHER_PROGRAMS = {"--extra-index-url", "--dist", "--tool", "--nthreads"}


def text(page: str) -> str:
    return (REPO / page).read_text()


def fenced(page: str, lang: str = "") -> list[str]:
    return [body for found, body in re.findall(r"^```(\w*)\n(.*?)^```", text(page), re.S | re.M) if found == lang]


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> set[str]:
    found = {s for action in parser._actions for s in action.option_strings}
    for sub in subparsers(parser).values():
        found |= options(sub)
    return found


COMMANDS = subparsers(build_parser())


def test_the_readme_shows_the_shipped_graph_it_names():
    [listing] = [b for b in fenced("README.md") if b.startswith("// graphs/")]
    path = listing.split()[1].rstrip(":")
    statements = [line for line in listing.splitlines() if line.strip() and not line.startswith("//")]
    shipped = [line for line in (REPO / path).read_text().splitlines() if line.strip() and not line.startswith("//")]
    assert statements == shipped


def test_the_readme_command_table_names_each_command_s_own_options():
    cells = [line.split(" | ")[0] for line in text("README.md").splitlines() if line.startswith("| `roundhouse ")]
    rows = [re.match(r"\| `roundhouse ([a-z]+)(.*)`", cell).groups() for cell in cells]
    assert len(rows) >= 12
    for command, usage in rows:
        assert command in COMMANDS, command
        assert set(re.findall(r"--[a-z-]+", usage)) <= options(COMMANDS[command]), (command, usage)


def test_every_option_the_pages_name_is_an_option_of_ours_or_of_a_benchmark():
    ours = options(build_parser())
    benchmarks = " ".join(p.read_text() for p in (REPO / "benchmarks").glob("*.py"))
    for page in PAGES:
        for flag in set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", text(page))) - ours - OTHER_PROGRAMS:
            assert f'"{flag}"' in benchmarks, f"{page}: {flag}"


def test_every_file_and_folder_the_pages_name_is_there():
    for page in PAGES:
        for path in set(re.findall(rf"(?<![\w/.])(?:{FOLDERS})/[\w./*{{}}-]*[\w*]", text(page))):
            if re.fullmatch(r"[\w/]+\.[a-z_]+", path) and not path.endswith(
                (".py", ".md", ".sched", ".toml", ".csv", ".trace", ".json")
            ):
                path = path.rsplit(".", 1)[0] + ".py"  # (a function named by its module: processes.start_workload)
            assert glob.glob(str(REPO / path)), f"{page}: {path}"


def test_every_shipped_graph_the_pages_name_by_its_file_name_is_there():
    shipped = {p.name for p in (REPO / "graphs").glob("*.sched")}
    for page in PAGES:
        named = set(re.findall(r"`([\w.-]+\.sched)`", text(page)))
        assert named <= shipped, (page, named - shipped)


def test_the_architecture_names_every_module_of_the_element_library():
    [row] = [line for line in text("docs/architecture.md").splitlines() if line.startswith("| elements | `elements/` |")]
    named = set(re.findall(r"`(\w+)(?:\.py|/)`", row))
    modules = {p.stem for p in (REPO / "elements").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert modules - {"__init__"} <= named


def test_the_readme_s_names_are_the_code_s():
    readme = text("README.md")
    registry.load_builtin()
    elements = set(registry.names())
    from roundhouse.elements.policies.gavel.estimator import PairEstimates
    from roundhouse.runtime.element import CATEGORIES
    from roundhouse.runtime.types import PORT_TYPES

    port_types = set(PORT_TYPES) | {PairEstimates.__name__}
    named = set(re.findall(r"`([A-Z][A-Za-z0-9]+)`", readme))
    assert named - elements - port_types == set()
    listed = re.search(r"Port types: (.*?)\.\n", readme, re.S).group(1)
    assert set(re.findall(r"`(\w+)`", listed)) == port_types
    categories = re.search(r"Categories: (.*?)\.\n", readme, re.S).group(1)
    assert sorted(c.strip() for c in categories.split(",")) == sorted(CATEGORIES)


def test_the_readme_lists_every_graph_setting():
    import attrs

    from roundhouse.runtime.settings import GraphSettings

    listed = re.search(r"Graph settings \(`runtime/settings.py`\): (.*?)\n- ", text("README.md"), re.S).group(1)
    assert set(re.findall(r"`(\w+)`", listed)) - {"true", "false"} == {f.name for f in attrs.fields(GraphSettings)}


def test_the_experiments_the_readme_names_are_there():
    from roundhouse.tools.reproductions import load_all

    experiments = set(load_all())
    named = set()
    for span in re.findall(r"`roundhouse reproduce ([a-z0-9 \n-]+)`", text("README.md")):
        named |= set(span.split())
    assert len(named) >= 15 and named <= experiments


def test_the_explain_reasons_table_is_the_record_s_reasons():
    from roundhouse.runtime.explain import MEANINGS, Reason

    table = text("docs/explain.md").split("## The reasons")[1].split("\n\n")[1]
    states = {
        name: state.strip()
        for cell, state in re.findall(r"^\| (`[^|]+) \| ([^|]+) \|", table, re.M)
        for name in re.findall(r"`(\w+)`", cell)
    }
    assert states == {r.name.lower(): MEANINGS[r][0] for r in Reason}


@pytest.fixture(scope="module")
def las_record():
    """docs/explain.md's Python example, run as written from the repository's folder: what it
    printed, and the record as a table."""
    [example] = fenced("docs/explain.md", "python")[:1]
    before = os.getcwd()
    os.chdir(REPO)
    printed = io.StringIO()
    namespace: dict = {}
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(example, "docs/explain.md", "exec"), namespace)  # noqa: S102
    finally:
        os.chdir(before)
    result = namespace["result"]
    return printed.getvalue(), result.world.explain.frame(result.world)


def test_the_explain_python_example_gives_the_columns_the_page_lists(las_record):
    printed, frame = las_record
    section = text("docs/explain.md").split("## The file")[1].split("Reasons are written")[0]
    listed = re.findall(r"`(\w+)`", section.split("one row per change")[1])
    assert frame.columns == listed
    assert "admitted" in printed


@pytest.mark.parametrize("graph", ["las", "yarn-cs"])
def test_the_reasons_table_says_what_every_number_the_record_holds_means(graph, las_record):
    """A number the record keeps for a reason (not 0 in some row) is one the table explains:
    under LAS placed by FirstFree without backfilling (`blocked`), and under YARN-CS placed by
    Consolidated (`no_room`)."""
    from roundhouse.runtime.compiler import compile_file
    from roundhouse.runtime.simulate import simulate

    if graph == "las":
        _, frame = las_record
    else:
        result = simulate(compile_file(str(REPO / "graphs" / f"{graph}.sched")), explain=True)
        frame = result.world.explain.frame(result.world)
    table = text("docs/explain.md").split("## The reasons")[1].split("\n\n")[1]
    explained = {}
    for cell, numbers in re.findall(r"^\| (`[^|]+) \|[^|]*\|[^|]*\|([^|]*)\|$", table, re.M):
        said = [n.strip() not in ("", "-") for n in numbers.split(";")] if numbers.strip() else []
        for name in re.findall(r"`(\w+)`", cell):
            explained[name] = said + [False] * (3 - len(said))
    assert frame["reason"].n_unique() >= 5
    for reason, rows in frame.group_by("reason"):
        held = [bool((rows[column] != 0).any()) for column in ("a", "b", "c")]
        assert all(e or not h for e, h in zip(explained[reason[0]], held)), (reason[0], held, explained[reason[0]])


@pytest.mark.slow
def test_the_optimus_timeline_shown_is_the_one_printed(tmp_path, capsys, monkeypatch):
    page = text("docs/explain.md")
    [shown] = [b for b in fenced("docs/explain.md") if "Optimus 'Optimus@2'" in b]
    times, finished = re.search(r"it is resized (\d+) times before it finishes at (t=\S+),", page).groups()
    # Run to the hour after the job finishes, not to the end: a run's first days are the same
    # whether it is cut short or not, and the quieter days after cost a quarter of the run.
    days, hours = re.match(r"t=(\d+)d(\d+)h", finished).groups()
    until = f"{int(days) * 24 + int(hours) + 1}h"
    monkeypatch.chdir(REPO)
    assert main(["run", "graphs/optimus.sched", "--until", until, "--out", str(tmp_path / "optimus"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["explain", str(tmp_path / "optimus"), "599"]) == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    assert printed[1 : 1 + len(shown.splitlines())] == shown.rstrip("\n").splitlines()
    assert sum("running: resized" in line for line in printed) == int(times)
    assert printed[-1].split()[0].startswith(finished) and printed[-1].endswith("finished")


@pytest.mark.slow
def test_the_move_quoted_under_gavel_s_agnostic_graph_is_one_it_makes(tmp_path, capsys, monkeypatch):
    import polars as pl

    quoted = re.search(
        r'under `graphs/gavel-las-agnostic.sched`, "(running: moved [^"]+)"', " ".join(text("docs/explain.md").split())
    )
    line = quoted.group(1)
    source, target = map(int, re.search(r"from machine (\d+) to machine (\d+)", line).groups())
    monkeypatch.chdir(REPO)
    out = tmp_path / "agnostic"
    # Its first day and a few hours: the graph makes this move first at hour 26 of the 314 of a
    # whole run, whose first hours are the same whether it is cut short or not.
    assert main(["run", "graphs/gavel-las-agnostic.sched", "--until", "30h", "--out", str(out), "--quiet"]) == 0
    record = pl.read_parquet(out / "explain.parquet")
    moves = record.filter((pl.col("reason") == "moved") & (pl.col("a") == target) & (pl.col("c") == source))
    assert len(moves)
    capsys.readouterr()
    assert main(["explain", str(out), str(moves["job_id"][0])]) == 0
    assert line in capsys.readouterr().out


def test_a_time_limit_inside_a_round_ends_at_the_boundary_semantics_names(capsys, monkeypatch):
    until, boundary = re.search(r"`--until (\d+)` with 5-minute rounds ends at (\d+) minutes", text("docs/semantics.md")).groups()
    monkeypatch.chdir(REPO)
    assert main(["run", "graphs/las.sched", "--until", until]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"the run ends at the round boundary {boundary}min" in said


def test_the_simulation_api_table_names_what_simulation_has():
    from roundhouse import Simulation

    table = text("docs/simulation-api.md").split("What a `Simulation` offers:")[1].split("\n\n")[1]
    names = {n for cell in re.findall(r"^\| (`[^|]+) \|", table, re.M) for n in re.findall(r"`(?:Simulation\.)?(\w+)", cell)}
    names.discard("Simulation")
    assert len(names) >= 14
    assert {n for n in names if not hasattr(Simulation, n)} == set()


def test_the_sweep_option_table_names_sweep_s_options():
    table = text("docs/sweeps.md").split("## The grid")[1].split("\n\n")[1]
    named = set(re.findall(r"^\| `(--[a-z-]+)", table, re.M))
    assert len(named) >= 7 and named <= options(COMMANDS["sweep"])


@pytest.fixture(scope="module")
def plotted(tmp_path_factory):
    """docs/plots.md's commands run as written, from a folder holding links to the repository's
    graphs and traces, but for the sweep's runs cut to the traces' first 40 jobs (the page's
    sweep takes minutes)."""
    here = tmp_path_factory.mktemp("plots")
    for name in ("graphs", "traces"):
        (here / name).symlink_to(REPO / name)
    [block] = fenced("docs/plots.md", "sh")
    commands = [line.split("#")[0].split() for line in block.splitlines() if line.startswith("roundhouse ")]
    before = os.getcwd()
    os.chdir(here)
    try:
        for command in commands:
            extra = {"run": ["--quiet"], "sweep": ["--set", "arrivals.jobs=40"]}.get(command[1], [])
            assert main(command[1:] + extra) == 0, command
    finally:
        os.chdir(before)
    return here, commands


@pytest.mark.slow
def test_the_plots_page_s_commands_write_what_they_name(plotted):
    here, commands = plotted
    written = [c[c.index("-o") + 1] for c in commands if "-o" in c]
    assert len(written) == 7
    for name in written:
        data = (here / name).read_bytes()
        if name.endswith(".png"):
            assert data[:4] == b"\x89PNG", name
        else:
            assert data.lstrip().startswith(b"<"), name


@pytest.mark.slow
def test_the_sweep_store_reads_as_the_sweeps_page_says(plotted):
    import polars as pl

    from roundhouse.runtime.results_store import ResultsStore

    here, _ = plotted
    runs = ResultsStore(str(here / "sweeps" / "rate" / "results")).read()
    assert isinstance(runs, pl.DataFrame) and len(runs) == 9
    header = (here / "sweeps" / "rate" / "summary.csv").read_text().splitlines()[0].split(",")
    varied = ["arrivals.rate", "seed"]
    said = ["status", "error", "key", "rounds", "run_s", "worker"]
    assert header[: len(varied) + len(said)] == varied + said
    assert header[-2:] == ["set", "point"] and "avg_jct_s" in header


def test_the_element_guide_s_first_graph_runs_its_policy_as_written(tmp_path, capsys):
    """docs/writing-elements.md's opening graph and its policy, written as the page names them
    (the graph names its file in its first line; the policy's file its own), checked and run."""
    page = (REPO / "docs" / "writing-elements.md").read_text()
    graph, policy = [body for _, body in re.findall(r"^```(\w*)\n(.*?)^```", page, re.S | re.M)][:2]
    graph_name = re.match(r"// (?:graphs/)?(\S+\.sched)\n", graph).group(1)
    policy_name = re.match(r"# (\S+\.py):", policy).group(1)
    assert f'require "{policy_name}";' in graph
    (tmp_path / graph_name).write_text(graph)
    (tmp_path / policy_name).write_text(policy)
    with registry.scope(remember=True):  # (the policy is forgotten after, as a process ends)
        assert main(["check", str(tmp_path / graph_name)]) == 0, capsys.readouterr().err
        out = tmp_path / "out"
        assert main(["run", str(tmp_path / graph_name), "--set", "src.jobs=20", "--out", str(out), "--quiet"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert [name for name, c in run["counters"].items() if "ranked" in c] == ["SmallestFirst@3"]
    assert json.loads((out / "summary.json").read_text())["jobs_finished"] == 20
