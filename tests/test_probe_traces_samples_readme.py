"""The samples' README is read as rendered: its table of files and the commands that make them
is one table, with no blank line that would end it and leave the rest as a paragraph of pipes."""

from __future__ import annotations

from tests.conftest import REPO


def test_every_row_of_the_samples_table_belongs_to_the_table_under_its_header():
    lines = (REPO / "traces" / "samples" / "README.md").read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| file |"))
    assert lines[header + 1].startswith("|---"), lines[header + 1]
    end = header + 2
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    in_table = {line.split("|")[1].strip() for line in lines[header + 2 : end]}
    rows = {line.split("|")[1].strip() for line in lines if line.startswith("| `")}
    assert rows - in_table == set(), f"rows cut off from the table: {sorted(rows - in_table)}"
    shipped = {f"`{p.name}`" for p in (REPO / "traces" / "samples").iterdir() if p.name != "README.md"}
    assert shipped <= in_table
