"""What a new contributor reads first, followed as written: docs/writing-elements.md's placer
and sink of one's own, run, forked, saved and loaded, with the files and messages the page and
the README name; the quoted message for an element that declares no state; the modules
docs/architecture.md names; and what CONTRIBUTING.md's test commands select."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from roundhouse.runtime import registry
from roundhouse.tools.cli import main as cli_main
from tests.conftest import REPO

GUIDE = "docs/writing-elements.md"


def main(args: list[str]) -> int:
    """The command line, in this process: what the files it requires define is forgotten after
    (as a command's process ends), so that other tests may require their own copies."""
    with registry.scope(remember=True):
        return cli_main(args)


def text(page: str) -> str:
    return (REPO / page).read_text()


def fenced(page: str, lang: str) -> list[str]:
    found = re.findall(r"^ *```(\w*)\n(.*?)^ *```", text(page), re.S | re.M)
    return [textwrap.dedent(body) for tag, body in found if tag == lang]


def said(page: str) -> str:
    """A page's text with its lines joined, as a sentence across a line break reads."""
    return " ".join(text(page).split())


@pytest.fixture
def own_elements(tmp_path):
    """The guide's policy, its placer and sink, and the graph that requires them, written to a
    folder as the guide says; returns the graph's path and the placer-and-sink file's text."""
    (policy,) = fenced(GUIDE, "python")
    (placer_and_sink,) = [b for b in fenced(GUIDE, "py") if "class LastFree(Placer)" in b]
    (graph,) = fenced(GUIDE, "sched")
    (tmp_path / "smallest_first.py").write_text(policy)
    (tmp_path / "my_place.py").write_text(placer_and_sink)
    (tmp_path / "mine.sched").write_text(graph)
    return tmp_path / "mine.sched", placer_and_sink


def test_the_guides_placer_and_sink_check_run_and_write_the_files_it_names(own_elements, tmp_path, capsys):
    graph, _ = own_elements
    assert main(["check", "--fork", str(graph)]) == 0, capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["run", str(graph), "--set", "src.jobs=30", "--out", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "count · finished" in printed  # count's report, printed beside the summary
    page = said(GUIDE)
    named = re.search(r"writes it to `out/(\S+)` \(and, with two sinks reporting, `out/(\S+)` and `out/(\S+)`\)", page)
    assert named, "the guide no longer names the files its example writes"
    for name in named.groups():
        assert (out / name).is_file(), name
    assert not (out / "jobs.csv").exists()  # two sinks report: JobMetrics' files carry its name
    run = json.loads((out / "run.json").read_text())
    assert run["reports"]["count"] == {"finished": "count-finished.json"}
    report = json.loads((out / "count-finished.json").read_text())
    assert report["jobs"] == run["counters"]["count"]["finished"] == 30
    assert run["counters"]["LastFree@4"]["launched"] >= 30  # the family's counters, inherited
    assert "report-jobs.csv" in said("README.md")  # (the README's command table names the same)
    assert main(["render", str(graph), "-o", str(tmp_path / "mine.dot")]) == 0
    assert "LastFree" in (tmp_path / "mine.dot").read_text()


def test_the_guides_placer_takes_the_last_free_gpus_of_each_type(own_elements, capsys):
    graph, _ = own_elements
    from roundhouse import Simulation

    sim = Simulation(graph, cluster="2x4:V100,2x4:K80", overrides=["src.jobs=12"])
    while not (sim.world.holder >= 0).any():
        assert sim.step()
    # The first launches, on an idle cluster, hold the highest-numbered GPUs of their types: no
    # free GPU of a type sits above a held one.
    held = sim.world.holder >= 0
    types = sim.world.cluster.gpu_type
    for t in set(types[held].tolist()):
        busy = held[types == t]
        assert busy[busy.argmax() :].all() and busy[-1], (t, busy)
    sim.run()
    assert sim.summary()["jobs_finished"] == 12


def test_the_guides_placer_and_sink_fork_save_and_load(own_elements, tmp_path):
    graph, _ = own_elements
    from roundhouse import Simulation

    sim = Simulation(graph, overrides=["src.jobs=30"])
    sim.run_until(20 * 3600)
    fork = sim.fork()
    sim.save(tmp_path / "mine.snap")
    loaded = Simulation.load(tmp_path / "mine.snap")
    results = [s.run() for s in (sim, fork, loaded)]
    assert fork.jobs().equals(sim.jobs()) and loaded.jobs().equals(sim.jobs())
    assert results[1].reports["count"] == results[0].reports["count"] == results[2].reports["count"]
    assert results[0].reports["count"]["finished"]["jobs"] == 30


def test_the_guides_message_for_a_placer_ignoring_free_gpus_is_the_one_printed(own_elements, tmp_path, capsys):
    graph, placer_and_sink = own_elements
    quoted = re.search(
        r"called `Grabby`, taking its GPUs from all of them \(`([^`]+)`\) .*? stops the run with `([^`]+)`", said(GUIDE)
    )
    assert quoted, "the guide no longer quotes the message for a plan that double-books a GPU"
    every_gpu, message = quoted.groups()
    free = "free = (available & cluster.type_mask[t]).nonzero()[0]"
    assert free in placer_and_sink
    grabby = placer_and_sink.replace(free, f"free = {every_gpu}")
    # (classes of their own names: a process registers each name once)
    (tmp_path / "grabby.py").write_text(grabby.replace("LastFree", "Grabby").replace("CountFinished", "CountGrabbed"))
    text = graph.read_text().replace("my_place.py", "grabby.py").replace("LastFree", "Grabby")
    (tmp_path / "grabby.sched").write_text(text.replace("CountFinished", "CountGrabbed"))
    assert main(["run", str(tmp_path / "grabby.sched"), "--quiet"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert message in err and "Traceback" not in err


def test_a_single_reporting_sink_keeps_the_plain_file_names(own_elements, tmp_path, capsys):
    # The guide: only a second sink that reports renames JobMetrics' files; one reporting
    # nothing ({}) does not.
    graph, placer_and_sink = own_elements
    finish = 'return {"finished": {"jobs": self.counters["finished"], "rounds": len(self._rounds)}}'
    assert finish in placer_and_sink
    silent = placer_and_sink.replace(finish, "return {}").replace("LastFree", "LastSilent")
    (tmp_path / "silent.py").write_text(silent.replace("CountFinished", "CountSilently"))
    text = graph.read_text().replace("my_place.py", "silent.py").replace("LastFree", "LastSilent")
    (tmp_path / "silent.sched").write_text(text.replace("CountFinished", "CountSilently"))
    out = tmp_path / "silent"
    assert main(["run", str(tmp_path / "silent.sched"), "--set", "src.jobs=10", "--out", str(out), "--quiet"]) == 0
    assert {"jobs.csv", "summary.json", "run.json"} <= {p.name for p in out.iterdir()}


AGING = '''
import numpy as np

from roundhouse.runtime.element import Element, In, Out, element
from roundhouse.runtime.types import Active, Ranking


def load_table(path):
    return {}


@element
class AgingQueue(Element):
    """Rank jobs as the pool holds them.

    Ports:
        active: admitted, unfinished jobs.
        ranking: the jobs.
    Arguments:
        seed: the generator's seed.
        path: a table.
    Counters:
        none
    See also: Fifo
    Paper: none.
    """

    category = "policy"
    inputs = (In("active", Active),)
    outputs = (Out("ranking", Ranking),)

    seed: int = 0
    path: str = ""

    def start(self, ctx):
        self._table = load_table(self.path)
        self._entered = np.zeros(0)
        self._rng = ctx.rng(self.seed)

    def tick(self, ctx, active):
        return Ranking(active.rows, active.gpus)
'''


def test_the_guides_message_for_an_element_declaring_no_state_is_the_one_printed(tmp_path, capsys, monkeypatch):
    (quoted,) = [b.strip() for b in fenced(GUIDE, "text") if "cannot be forked" in b]
    folder = re.search(r"class defined at (\S+)/aging\.py:", quoted).group(1)  # type: ignore[union-attr]
    (example,) = [b for b in fenced(GUIDE, "py") if "class AgingQueue" in b]
    start = example.split("def start(self, ctx):")[1]
    assert all(line.strip() in AGING for line in start.strip().splitlines())  # the guide's start, as here
    (tmp_path / "aging.py").write_text(AGING)
    where, _ = quoted.split(": error:", 1)
    line = int(where.split(":")[1])
    lines = ['require "aging.py";', "round = 5min;", 'cluster = "2x4:V100";']
    lines += [""] * (line - 1 - len(lines))
    lines += [
        "aging :: AgingQueue;",
        "PoissonSource(rate=8/h, jobs=5, seed=1) -> AcceptAll -> JobPool -> aging -> FirstFree -> Launch -> JobMetrics;",
    ]
    (tmp_path / "my.sched").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)  # (the guide's user checks my.sched in its folder, /home/me)
    assert main(["check", "my.sched"]) == 0
    capsys.readouterr()
    assert main(["check", "--fork", "my.sched"]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first == quoted.replace(f"{folder}/", f"{tmp_path}/")


def test_the_architecture_names_every_module_of_the_runtime():
    page = text("docs/architecture.md")
    for folder in ("runtime", "runtime/backends", "runtime/backends/live", "runtime/dsl"):
        for path in (REPO / folder).glob("*.py"):
            if path.name != "__init__.py":
                assert f"`{path.name}`" in page or f"{folder}/{path.name}" in page or f"backends/{path.name}" in page, (
                    f"{folder}/{path.name}"
                )


def test_the_architecture_says_which_imports_the_layer_test_catches():
    from tests.test_layers import FORBIDDEN

    page = said("docs/architecture.md")
    caught = re.search(
        r"fails on every import against the table: of a folder by one below it or of its own layer "
        r"\(`elements/` importing `agents/` or `tools/`, the runtime importing `elements/`, `traces/` importing `wire/`, \.\.\.\), "
        r"and on a cycle between the folders",
        page,
    )
    assert caught
    assert re.search(r"`traces/` and `wire/`, one layer, do not import each other", page)
    assert {("elements", "agents"), ("elements", "tools"), ("runtime", "elements"), ("traces", "wire")} <= FORBIDDEN
    # The table's layers, bottom first (rows of one layer name share it): every import of a
    # folder by one below it, or of its own layer, is one the test fails on; no other is.
    rows = re.findall(r"^\| (\w+) \| `(\w+)[/.][^`]*` \|", text("docs/architecture.md"), re.M)
    layers = list(dict.fromkeys(name for name, _ in rows))
    rank = {folder: layers.index(name) for name, folder in rows}
    assert rank == {"roundhouse": 0, "traces": 1, "wire": 1, "runtime": 2, "elements": 3, "agents": 4, "tools": 5}
    assert FORBIDDEN == {(a, b) for a in rank for b in rank if a != b and rank[a] <= rank[b]}


def test_contributing_s_commands_select_what_their_comments_say():
    (block,) = [b for b in fenced("CONTRIBUTING.md", "sh") if "pytest" in b]
    markers = set(re.findall(r'^\s*"(\w+):', text("pyproject.toml"), re.M))
    assert {"live", "slow"} <= markers
    commands = [line for line in block.splitlines() if line.startswith("python -m pytest")]
    assert len(commands) == 3
    for line in commands:
        command, _, comment = line.partition("#")
        expression = re.search(r'pytest -m ("[^"]+"|\S+)', command).group(1).strip('"')
        assert set(re.findall(r"\w+", expression)) - {"not", "and", "or"} <= markers, expression
        if "not live" not in expression:  # (it may start agents and train models: its comment says so)
            assert "live" in comment, line
        if "skips" in comment:
            for marker in markers:
                if f"the {marker} ones" in comment or "more than a few seconds" in comment and marker == "slow":
                    assert f"not {marker}" in expression, (line, marker)
    assert 'python -m pytest -m "not live" -n 2 --dist loadfile' in commands[0]
    assert "python -m pytest -m live -n 2 --dist loadfile" in commands[1]
