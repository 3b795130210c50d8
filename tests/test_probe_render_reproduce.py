"""Probes of `roundhouse render`, `elements` and `reproduce` as a new user meets them: the
Markdown reference is the command's one answer (an error when standard output cannot take it),
and the figures docs/reproductions.md quotes for a quick run are those the run gives now."""

import re
import sys
from pathlib import Path

import polars as pl
import pytest

from roundhouse.tools.cli import main
from tests.conftest import refused

REPO = Path(__file__).resolve().parent.parent


def test_elements_markdown_with_standard_output_closed_is_an_error(capsys, monkeypatch):
    # (`roundhouse elements --markdown >&-`: Python has no sys.stdout, and print() drops the
    # reference without a word; the listing and one element's reference already say so)
    monkeypatch.setattr(sys, "stdout", None)
    refused(capsys, ["elements", "--markdown"], "standard output: cannot write the element reference (it is closed)")
    refused(capsys, ["elements", "--markdown", "Las"], "cannot write the element reference")


def test_elements_markdown_still_writes_the_whole_reference(capsys):
    assert main(["elements", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Element reference\n") and "### Las\n" in out and "### JobMetrics\n" in out


def _quick_synthesizer_table() -> dict[tuple[str, str], float]:
    """The average JCTs (h) docs/reproductions.md gives for `blox-synthesizer --quick`, by
    (workload, the command's name of the combination)."""
    text = (REPO / "docs" / "reproductions.md").read_text()
    start = text.index("Ours, `--quick` (32 GPUs at 8 jobs/hour")
    lines = [ln for ln in text[start:].splitlines() if ln.startswith("|")][:4]
    header = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    names = []
    for column in header:
        if column == "automatic":
            names.append("Automatic (jct)")
            continue
        policy, _, factor = column.partition(" ")
        names.append(f"{policy}, Accept {factor or 'All'}")
    table = {}
    for row in lines[2:]:
        cells = [c.strip().strip("*") for c in row.strip("|").split("|")]
        for name, cell in zip(names, cells[1:], strict=True):
            table[(cells[0], name)] = float(cell)
    return table


@pytest.mark.slow
def test_the_quick_synthesizer_figures_in_the_docs_are_what_the_run_gives(tmp_path, capsys):
    table = _quick_synthesizer_table()
    assert len(table) == 20  # (two workloads, nine combinations and the synthesizer)
    assert main(["reproduce", "blox-synthesizer", "--quick", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    runs = pl.read_csv(tmp_path / "blox-synthesizer" / "runs.csv")
    ours = {(r["workload"], r["scheduler"]): round(r["avg_jct_s"] / 3600, 2) for r in runs.iter_rows(named=True)}
    differ = {key: (documented, ours.get(key)) for key, documented in table.items() if ours.get(key) != documented}
    assert not differ, differ


def test_the_quick_table_reader_reads_the_cells_as_written():
    # (the test above compares nothing if the reader finds no cells, or the wrong ones)
    table = _quick_synthesizer_table()
    assert table[("Philly-Trace", "SRTF, Accept All")] == pytest.approx(14.53)
    assert all(re.fullmatch(r"(FIFO|SRTF|LAS), Accept (All|1\.2x|1\.4x)|Automatic \(jct\)", name) for _, name in table)
