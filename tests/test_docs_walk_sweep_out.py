"""What docs/sweeps.md and the README say a sweep keeps, checked against a sweep run both ways
(with `--out` a store that a repeated sweep reads, without it nothing but the printed table), and
what docs/plots.md says `plot` and `report` make of a sweep that varied only the seed."""

from __future__ import annotations

from roundhouse.tools.cli import main
from tests.conftest import REPO


def said(page: str) -> str:
    """A page's text with its lines joined, as a sentence across a line break reads."""
    return " ".join((REPO / page).read_text().split())


def _sweep(out: list[str]) -> list[str]:
    graph = str(REPO / "graphs" / "las.sched")
    return ["sweep", graph, "--vary", "arrivals.rate=4/h,8/h", "--until", "1h", "--workers", "1", *out]


def test_a_sweep_without_out_writes_nothing_and_runs_again_as_the_pages_say(tmp_path, monkeypatch, capsys):
    assert "Without `--out` nothing is written: the printed table is the sweep's only result" in said("docs/sweeps.md")
    assert "with `--out`, results go to a resumable Parquet store (without it" in said("README.md")
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert main(_sweep([])) == 0
        printed = capsys.readouterr()
        assert "4/h" in printed.out and "8/h" in printed.out  # (the table: its one result)
        assert "running 2 runs" in printed.err and "already in" not in printed.err  # (run again, each time)
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_with_out_keeps_its_runs_and_a_repeat_runs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(_sweep(["--out", "s"])) == 0
    capsys.readouterr()
    assert {p.name for p in (tmp_path / "s").iterdir()} == {"results", "summary.csv", "points.csv"}
    assert main(_sweep(["--out", "s"])) == 0
    assert "2 of 2 runs already in s/results; nothing to run" in capsys.readouterr().err


def test_a_sweep_of_seeds_alone_is_refused_by_plot_and_reported_as_the_plots_page_says(tmp_path, monkeypatch, capsys):
    assert "a sweep that varied nothing but the seed (`--seeds` or `--vary seed=...` alone" in said("docs/plots.md")
    monkeypatch.chdir(tmp_path)
    graph = str(REPO / "graphs" / "las.sched")
    assert main(["sweep", graph, "--seeds", "2", "--until", "1h", "--workers", "1", "--out", "s"]) == 0
    capsys.readouterr()
    assert main(["plot", "s", "-o", "s.png"]) == 2
    assert "varies nothing but the seed" in capsys.readouterr().err
    assert not (tmp_path / "s.png").exists()
    assert main(["report", "s", "-o", "s.html"]) == 0
    page = (tmp_path / "s.html").read_text()
    plots = page[page.index("<h2>Plots") :]
    assert "varies nothing but the seed" in plots and "<img" not in plots
