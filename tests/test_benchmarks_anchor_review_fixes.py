"""The benchmarks' anchors and the cost model's figures: docs/cost-model.md quotes the figures of
the latest sitting recorded in docs/cost-model-history.md, each anchor printed beside ours is the
figure of the source it names, and an option that would have no effect is refused in words."""

from __future__ import annotations

import re
import sys

import pytest

from tests.conftest import REPO, SHARED
from tests.test_benchmark_scripts_fixes import script

COST_MODEL = REPO / "docs" / "cost-model.md"
HISTORY = REPO / "docs" / "cost-model-history.md"
# A dated section of the history: "## Title (2026-12-06)" or "## Title (2026-12-05, evening)".
SECTION = re.compile(r"^## (.+?) \((\d{4}-\d{2}-\d{2})[^)\n]*\)$", re.M)
# The figures a sitting that measures the targets gives, as the history writes them.
FIGURES = {
    "headline million": r"the headline million (\d+\.\d+) s and (\d+) MB",
    "overloaded million": r"the overloaded million (\d+\.\d+) s and (\d+) MB",
    "10,000-job case": r"the 10,000-job case (\d+\.\d+) s \(`FirstFree` (\d+\.\d+) s\)",
    "Blox's experiment": r"Blox's experiment (\d+\.\d+) s, ([\d,]+) times Blox",
    "Gavel's LAS": r"Gavel's LAS (\d+\.\d+) and (\d+\.\d+) s wall, (\d+\.\d+) s of CPU, (\d+\.\d+) times",
}


def _flat(text: str) -> str:
    return " ".join(text.split())


def latest_sitting() -> tuple[str, str, dict[str, tuple[str, ...]]]:
    """The last section of the history that measures the headline million with
    `scale.py --only million-160`: its title, its date and the figures it gives."""
    text = HISTORY.read_text()
    heads = list(SECTION.finditer(text))
    for head, following in reversed(list(zip(heads, [*heads[1:], None], strict=True))):
        body = _flat(text[head.end() : following.start() if following else len(text)])
        if "scale.py --only million-160" in body and re.search(FIGURES["headline million"], body):
            found = {name: m.groups() for name, pattern in FIGURES.items() if (m := re.search(pattern, body))}
            return head.group(1), head.group(2), found
    raise AssertionError("no sitting of the history measures the headline million")


def test_the_cost_model_quotes_the_latest_sitting_of_the_history():
    title, date, figures = latest_sitting()
    assert len(figures) == len(FIGURES), (title, figures)  # (every target this test reads was measured)
    cost_model = _flat(COST_MODEL.read_text())
    assert date in cost_model, f"docs/cost-model.md does not name the sitting of {date} ({title})"
    start = cost_model.index(date)
    for name, values in figures.items():
        for value in values:
            assert value in cost_model[start:], f"{name}: {value} (the history, {date}) is not quoted after {date}"


def test_every_figure_of_the_cost_model_s_latest_sitting_names_its_command():
    text = COST_MODEL.read_text()
    section = text[text.index("### The latest sittings") : text.index("## What is left, and why")]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| target")]
    assert rows
    for row in rows:
        command = row.split("|")[2]
        assert "`" in command and ".py" in command, row


def test_the_pollux_anchor_is_the_figure_of_pollux_s_readme():
    readme = SHARED / "data" / "pollux" / "SIMULATOR-README.md"
    assert readme.is_file(), f"Pollux's simulator README is not at {readme}"
    printed = float(re.search(r"Average JCT: ([0-9.]+)", readme.read_text()).group(1))  # (the Pollux policy's run)
    assert script("pollux_fidelity").ANCHOR_JCT_S == round(printed, 2)


def test_gavel_s_average_jcts_in_the_cost_model_are_those_of_its_shared_results():
    readme = (SHARED / "data" / "gavel" / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| msr 0e4a51"))
    cells = [cell.strip() for cell in row.split("|")]
    las, fifo = cells[4].split()[0], cells[5].split()[0]  # max_min_fairness_perf, fifo
    cost_model = COST_MODEL.read_text()
    assert f"{int(las):,} s |" in cost_model and f"{int(fifo):,} s |" in cost_model


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--placer", "FirstFree"], "--placer has no effect without --jobs"),
        (["--placer", "Consolidated", "--repeat", "2"], "--placer has no effect without --jobs"),
        (["--jobs", "10", "--full"], "--full has no effect with --jobs"),
    ],
    ids=["placer-firstfree", "placer-consolidated", "full-with-jobs"],
)
def test_engine_las_refuses_an_option_without_effect(monkeypatch, capsys, argv, words):
    engine_las = script("engine_las")
    monkeypatch.setattr(engine_las, "measure", lambda *a, **k: pytest.fail("a case ran"))
    monkeypatch.setattr(sys, "argv", ["engine_las.py", *argv])
    with pytest.raises(SystemExit) as stopped:
        engine_las.main()
    assert stopped.value.code == 2
    assert words in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, placer", [(["--jobs", "10"], "Consolidated"), (["--jobs", "10", "--placer", "FirstFree"], "FirstFree")]
)
def test_engine_las_runs_one_case_on_its_placer(monkeypatch, argv, placer):
    engine_las = script("engine_las")
    ran = []
    monkeypatch.setattr(engine_las, "measure", lambda label, text, repeat=1: ran.append((label, text)) or 1.0)
    monkeypatch.setattr(sys, "argv", ["engine_las.py", *argv])
    engine_las.main()
    assert len(ran) == 1 and placer in ran[0][0] and f"Las -> {placer} ->" in ran[0][1]


def test_pollux_fidelity_refuses_patience_with_a_full_search(monkeypatch, capsys):
    pollux_fidelity = script("pollux_fidelity")
    monkeypatch.setattr(pollux_fidelity, "simulate", lambda graph: pytest.fail("a run started"))
    monkeypatch.setattr(sys, "argv", ["pollux_fidelity.py", "--full-search", "--patience", "5"])
    with pytest.raises(SystemExit) as stopped:
        pollux_fidelity.main()
    assert stopped.value.code == 2
    assert "--patience has no effect with --full-search" in capsys.readouterr().err
