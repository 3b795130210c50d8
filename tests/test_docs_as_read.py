"""The guides as a new user reads them: a command a page shows in its text, typed into a shell
as written, does what the page says; and what CONTRIBUTING.md says CI runs is what `.ci/run`
runs."""

from __future__ import annotations

import csv
import re
import shlex

from roundhouse.tools.cli import main
from tests.conftest import REPO


def said(page: str) -> str:
    """A page's text with its lines joined, as a sentence across a line break reads."""
    return " ".join((REPO / page).read_text().split())


def test_the_sweeps_page_s_shared_run_example_runs_as_a_shell_passes_it(tmp_path, monkeypatch, capsys):
    # The page's two copies of one trace share one run; typed as shown, the shell must leave
    # the values' quotes for the sweep to read them as paths.
    shown = re.search(r"two copies of one trace, say, in `(--vary [^`]+)`", said("docs/sweeps.md"))
    assert shown, "docs/sweeps.md no longer shows the example of two points sharing a run"
    args = shlex.split(shown.group(1))
    names = re.findall(r'"([^"]+)"', args[1])
    assert len(names) == 2
    head = (REPO / "traces" / "samples" / "philly-1000.csv").read_text().splitlines()[:11]
    for name in names:
        (tmp_path / name).write_text("\n".join(head) + "\n")
    monkeypatch.chdir(tmp_path)
    command = ["sweep", str(REPO / "graphs" / "las.sched"), *args, "--workers", "1", "--out", "s"]
    status, printed = main(command), capsys.readouterr()
    assert status == 0, printed.err
    assert "the same run" in printed.out + printed.err  # (its progress line names both points)
    with open(tmp_path / "s" / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["arrivals.path"] for r in rows] == [f'"{n}"' for n in names]
    assert rows[0]["key"] == rows[1]["key"] and rows[0]["status"] == rows[1]["status"] == "ok"


def test_contributing_names_the_lint_commands_ci_runs():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    checks = [line.strip() for line in ci if line.startswith(("ruff", "mypy"))]
    assert len(checks) == 3
    contributing = said("CONTRIBUTING.md")
    assert "CI (`.ci/run`) runs the README's test command, then these three" in contributing
    (block,) = [
        b for b in re.findall(r"^```sh\n(.*?)^```", (REPO / "CONTRIBUTING.md").read_text(), re.S | re.M) if "ruff format" in b
    ]
    shown = {line.split("#")[0].strip() for line in block.splitlines()}
    for command in checks:
        assert command in shown or f"`{command}`" in contributing, command


def test_the_report_of_a_run_with_no_jobs_says_its_one_round_as_one(tmp_path, monkeypatch, capsys):
    # docs/plots.md: a run with no jobs gets its page, "no jobs" among the facts at the top.
    # Such a run lasts one round, which the facts count as a round, not "1 rounds".
    header = (REPO / "traces" / "samples" / "philly-1000.csv").read_text().splitlines()[0]
    (tmp_path / "none.csv").write_text(header + "\n")
    monkeypatch.chdir(tmp_path)
    run = ["run", str(REPO / "graphs" / "las.sched"), "--trace", "none.csv", "--out", "empty", "--quiet"]
    assert main(run) == 0
    assert main(["report", "empty", "-o", "empty.html"]) == 0, capsys.readouterr().err
    page = (tmp_path / "empty.html").read_text()
    facts = re.search(r"cluster: [^<]*· (\d+) (rounds?) ·[^<]*· no jobs", page)
    assert facts, "the report's facts no longer say the run had no jobs"
    assert facts.groups() == ("1", "round")
