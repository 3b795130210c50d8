"""docs/whatif.md's example from a simulation's snapshot, run as written: the snapshot made by
docs/simulation-api.md's example, then `roundhouse whatif` on it, whose table must be the one
the page shows (so that a change to the results shows up as a page to update)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import REPO

COMMAND = "roundhouse whatif /tmp/fifo-day1.snap --graph graphs/srtf.sched"


def shown() -> list[str]:
    """The page's output lines under the command."""
    text = (REPO / "docs" / "whatif.md").read_text()
    [block] = re.findall(rf"```\n\$ {re.escape(COMMAND)}\n(.*?)```", text, re.S)
    return block.splitlines()


def snapshot(folder) -> str:
    """docs/simulation-api.md's example run as written, its snapshot put in `folder`."""
    text = (REPO / "docs" / "simulation-api.md").read_text()
    [example] = re.findall(r"```python\n(.*?)```", text, re.S)
    path = str(folder / "fifo-day1.snap")
    here = os.getcwd()
    os.chdir(REPO)
    try:
        exec(compile(example.replace("/tmp/fifo-day1.snap", path), "docs/simulation-api.md", "exec"), {})  # noqa: S102
    finally:
        os.chdir(here)
    return path


def test_the_snapshot_example_prints_the_table_the_page_shows(tmp_path, capsys):
    path = snapshot(tmp_path)
    capsys.readouterr()
    argv = [sys.executable, "-m", "roundhouse.tools.cli", *COMMAND.split()[1:]]
    argv[argv.index("/tmp/fifo-day1.snap")] = path
    got = subprocess.run(argv, cwd=REPO, env={**os.environ, "COLUMNS": "80"}, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    lines = [line.rstrip() for line in got.stdout.splitlines()]
    page = shown()
    table = page.index(next(line for line in page if line.startswith("┏")))
    assert lines[lines.index(page[table]) :] == page[table:]  # (the table and what follows it)
    header = " ".join(lines[: lines.index(page[table])])
    assert "after 288 rounds, at t=86400s" in header and "60 job(s) seen, 46 unfinished, 8 running" in header
    finished = next(line for line in page if line.startswith("│ of them finished"))
    prose = re.search(r"its averages are of the (\d+) that finished", (REPO / "docs" / "whatif.md").read_text())
    assert prose is not None and finished.split("│")[3].strip() == prose.group(1)
