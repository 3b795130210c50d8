"""`roundhouse reproduce` as a new user meets it: names that are near misses of the experiments'."""

from __future__ import annotations

import pytest

from roundhouse.tools.reproductions import load_all
from tests.conftest import fails


@pytest.mark.parametrize("family", ["blox", "gavel", "ones", "live", "pollux", "dally", "tiresias", "synergy"])
def test_a_papers_name_is_answered_with_all_of_its_experiments(tmp_path, capsys, monkeypatch, family):
    # (a user who knows the paper types its name: every experiment of that paper is named, not
    # the two or three difflib finds close enough, nor none for a short name like "blox")
    monkeypatch.chdir(tmp_path)
    err = fails(capsys, "reproduce", family)
    expected = [name for name in load_all() if name.startswith(family + "-")]
    assert expected
    assert err.strip() == f"error: no experiment '{family}'; did you mean " + " or ".join(f"'{n}'" for n in expected) + "?"
    assert list(tmp_path.iterdir()) == []


def test_names_run_together_with_a_comma_are_told_to_be_separated(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = fails(capsys, "reproduce", "dally-batch,dally-poisson")
    assert err.strip() == (
        "error: no experiment 'dally-batch,dally-poisson'; give the names separated by spaces: dally-batch dally-poisson"
    )


@pytest.mark.parametrize(("typed", "hint"), [("tiresias-tyo", "did you mean 'tiresias-toy'"), ("xyzzy", "--list shows them")])
def test_other_unknown_names_keep_the_closest_names_or_the_list(tmp_path, capsys, monkeypatch, typed, hint):
    monkeypatch.chdir(tmp_path)
    err = fails(capsys, "reproduce", typed)
    assert err.startswith(f"error: no experiment '{typed}'; {hint}")


def _kept_figures(monkeypatch):
    """The figures the reproductions draw, kept open (pyplot's close records them) to be read."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kept = []
    monkeypatch.setattr(plt, "close", kept.append)
    return kept


def _bar_labels_drawn(monkeypatch, tmp_path, labels):
    """The extents of the x tick labels plot_bars draws for `labels` (the figure kept open)."""
    import matplotlib.pyplot as plt

    from roundhouse.tools.reproductions._runs import plot_bars

    kept = _kept_figures(monkeypatch)
    plot_bars(labels, [1.0] * len(labels), tmp_path / "bars.png", "y", "title")
    (fig,) = kept
    renderer = fig.canvas.get_renderer()
    extents = [t.get_window_extent(renderer) for t in fig.axes[0].get_xticklabels()]
    monkeypatch.undo()
    plt.close(fig)
    return extents


def test_the_toy_figures_bar_labels_do_not_run_into_each_other(monkeypatch, tmp_path):
    # (tiresias-toy's seven policies, "2D-LAS (one queue per GPU-unit)" among them, on one chart)
    from roundhouse.tools.reproductions.tiresias import TOY_POLICIES

    extents = _bar_labels_drawn(monkeypatch, tmp_path, [k.replace(" (", "\n(") for k in TOY_POLICIES])
    assert len(extents) == len(TOY_POLICIES)
    for left, right in zip(extents, extents[1:]):
        assert left.x1 < right.x0, "neighbouring bar labels overlap"
    assert (tmp_path / "bars.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_makespan_figures_legend_names_the_policies(monkeypatch, tmp_path):
    # (polars hands group keys over as tuples: the legend said "('FIFO (aware)',)")
    import matplotlib.pyplot as plt

    kept = _kept_figures(monkeypatch)
    report = load_all()["gavel-makespan"].run(tmp_path, True)
    monkeypatch.undo()
    (fig,) = [f for f in kept if f.axes and f.axes[0].get_legend() is not None]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    for f in kept:
        plt.close(f)
    assert sorted(legend) == sorted(report.tables["makespan"]["policy"].unique().to_list())
    assert sorted(legend) == ["FIFO (agnostic)", "FIFO (aware)", "makespan (aware)"]


def test_a_later_experiments_foreign_out_folder_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    # (not after the experiments before it have run, perhaps for hours)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "gavel-hierarchical").mkdir(parents=True)
    (tmp_path / "out" / "gavel-hierarchical" / "notes.txt").write_text("mine\n")
    err = fails(capsys, "reproduce", "--quick", "--out", "out", "tiresias-toy", "gavel-hierarchical")
    assert err.strip() == (
        "error: --out out/gavel-hierarchical: holds files that `roundhouse reproduce gavel-hierarchical` did not write "
        "(notes.txt; no reproduction.json); give another folder, or remove them first"
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gavel-hierarchical"]  # tiresias-toy never ran
    assert (tmp_path / "out" / "gavel-hierarchical" / "notes.txt").read_text() == "mine\n"


def test_a_later_experiments_out_that_is_a_file_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "gavel-hierarchical").write_text("a file\n")
    err = fails(capsys, "reproduce", "--quick", "--out", "out", "tiresias-toy", "gavel-hierarchical")
    assert err.strip() == "error: --out out/gavel-hierarchical: exists and is not a folder"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gavel-hierarchical"]


def test_a_gap_that_rounds_to_none_is_never_said_higher():
    from roundhouse.tools.reproductions._runs import pct_lower

    assert pct_lower(100.0, 100.04) == "0.0% lower"  # (it said "0.0% higher")
    assert pct_lower(100.0, 99.96) == "0.0% lower"
    assert pct_lower(100.0, 100.06) == "0.1% higher"
    assert pct_lower(100.0, 90.0) == "10.0% lower"
