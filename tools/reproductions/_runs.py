"""Helpers shared by the reproductions of Tiresias and the Blox case studies: write the
graphs an experiment runs next to its results, run them in parallel, and plot the usual
figures (a metric against load, JCT CDFs) with matplotlib as PNG."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np
import polars as pl

from roundhouse.runtime.sweep import RunOutcome, RunSpec, run_all
from roundhouse.runtime.values import describe

# Two cores are shared by everyone on the machine this was built on; more when there are more.
WORKERS = max(1, min(2, os.cpu_count() or 1))


def sched_string(text: str | Path) -> str:
    """`text` as a `.sched` string literal, for a path or a name written into a graph or a `--set`
    value (quotes, backslashes and line breaks escaped as the grammar reads them)."""
    return describe(str(text))


def path_from_graphs(out_dir: Path, path: Path) -> str:
    """How a graph that write_graph saves names `path`: a file the experiment wrote under
    `out_dir` relative to the graphs' folder (a graph reads a relative path from its own
    folder), so that the same graphs work wherever the output folder is put or moved; any other
    file (the reference data) as it is given."""
    try:
        inside = Path(path).relative_to(out_dir)
    except ValueError:
        return str(path)
    return Path("..", inside).as_posix()


def write_graph(out_dir: Path, name: str, text: str) -> Path:
    """Save a graph the experiment runs (under graphs/ of its output folder) and return its path."""
    folder = out_dir / "graphs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.sched"
    path.write_text(text.lstrip())
    return path


def run(specs: list[RunSpec]) -> list[RunOutcome]:
    return run_all(specs, workers=WORKERS)


def summary_table(outcomes: list[RunOutcome], sink: str = "report") -> pl.DataFrame:
    """One row per run: its labels and its metrics sink's summary, plus wall time and rounds."""
    rows = []
    for o in outcomes:
        rows.append({**o.summary(sink), "rounds": o.rounds, "wall_s": round(o.wall_s, 2)})
    return pl.DataFrame(rows)


def jobs_table(outcomes: list[RunOutcome], sink: str = "report") -> pl.DataFrame:
    return pl.concat([o.jobs(sink) for o in outcomes], how="diagonal_relaxed")


def mean_over_seeds(frame: pl.DataFrame, by: list[str], metrics: list[str]) -> pl.DataFrame:
    return frame.group_by(by, maintain_order=True).agg([pl.col(m).mean() for m in metrics] + [pl.len().alias("runs")])


def value(frame: pl.DataFrame, metric: str, **where) -> float:
    """The metric of the one row matching `where` (mean over rows if several)."""
    sel = frame
    for k, v in where.items():
        sel = sel.filter(pl.col(k) == v)
    if sel.height == 0:
        raise KeyError(f"no run with {where}")
    return float(sel[metric].mean())


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def pct_lower(base: float, other: float) -> str:
    """How much lower `other` is than `base`, as a percentage (or how much higher)."""
    if not base > 0:
        return "n/a"
    # (Rounded before its sign is read: a gap that rounds to none is "0.0% lower", never "0.0% higher".)
    change = round(100.0 * (base - other) / base, 1) + 0.0
    return f"{change:.1f}% lower" if change >= 0 else f"{-change:.1f}% higher"


# --- agreement with the paper's figures ---

RATIO_TOLERANCE = 0.10  # a ratio within 10% of the paper's agrees with it


def ratio_gap(
    paper: float, ours: float, low: float | None = None, high: float | None = None, tolerance: float = RATIO_TOLERANCE
) -> str:
    """How our ratio (`ours`, a mean over workloads with `low`-`high` its range) differs from the
    paper's: "" when it agrees (within `tolerance`, or the paper's inside our range); "smaller"
    or "larger" when it is on the same side of 1 by a smaller or larger margin; "even" when ours
    is about 1 and the paper's is not; "uneven" the other way; "reversed" when the two are on
    opposite sides of 1; "unmeasured" when ours is no ratio (not a positive number: a side
    finished none of the jobs it is taken over)."""
    if not (np.isfinite(ours) and ours > 0):
        return "unmeasured"
    if abs(ours / paper - 1) <= tolerance or (low is not None and high is not None and low <= paper <= high):
        return ""
    side = lambda r: 0 if abs(r - 1) <= tolerance else (1 if r > 1 else -1)  # noqa: E731
    theirs, mine = side(paper), side(ours)
    if theirs == mine:
        return "smaller" if abs(np.log(ours)) < abs(np.log(paper)) else "larger"
    if mine == 0:
        return "even"
    return "uneven" if theirs == 0 else "reversed"


def gap_words(code: str, paper: str = "") -> str:
    """`ratio_gap`'s verdict as words; `paper` (the paper's figure) names what ours is set against."""
    theirs = f" as the paper's {paper}" if paper else " as the paper's"
    return {
        "": "agrees with the paper",
        "smaller": f"the same way round{theirs}, but less so",
        "larger": f"the same way round{theirs}, and more so",
        "even": f"about even, where the paper's {paper or 'figure'} is not",
        "uneven": f"not even, where the paper's {paper or 'figure'} is about even",
        "reversed": f"the other way round from the paper's {paper or 'figure'}",
        "unmeasured": "not measured (a side finished none of the jobs it is taken over)",
    }[code]


def gap_note(code: str, paper: str, reason: str, docs: str, quick: tuple[str, str, str] | None = None) -> str:
    """The note beside a row whose verdict is `code` (see `ratio_gap`): empty when ours agrees, else how
    it differs, `reason` (what the docs give as the cause) and `docs` (where). A quick run passes
    `quick` = (its window, the full run's, the full run's verdict): where the two verdicts differ
    the note says so instead of giving the full run's reason."""
    if quick is not None and quick[2] != code:
        window, full_window, full = quick
        return f"{gap_words(code, paper)}; {window}; full run ({full_window}): {gap_words(full)} ({docs})"
    if not code:
        return ""
    return f"{gap_words(code, paper)}: {reason} ({docs})" if reason else f"{gap_words(code, paper)} ({docs})"


def save_figure(path: Path, draw, size: tuple[float, float] = (5.5, 3.6)) -> Path:
    """Draw one figure with `draw(ax)` and write it as a PNG (matplotlib without a display),
    whole or not at all (`write_whole`)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from roundhouse.tools.outputs.whole_file import write_whole

    fig, ax = plt.subplots(figsize=size)
    draw(ax)
    fig.tight_layout()
    drawn = io.BytesIO()
    fig.savefig(drawn, dpi=120, format="png")
    plt.close(fig)
    write_whole(path, drawn.getvalue())
    return path


def plot_against_load(
    frame: pl.DataFrame,
    metric: str,
    series: str,
    path: Path,
    ylabel: str,
    title: str,
    x: str = "load",
    xlabel: str = "load (jobs/hour)",
) -> Path:
    """One line per value of `series`: `metric` (seconds, drawn in hours) against column `x`."""

    def draw(ax):
        for name in frame[series].unique(maintain_order=True).to_list():
            part = frame.filter(pl.col(series) == name).sort(x)
            ax.plot(part[x].to_list(), (part[metric] / 3600).to_list(), marker="o", label=str(name))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

    return save_figure(path, draw)


BAR_LABEL_CHARS = 14  # characters to the inch of a bar label's line, at 8 points


def plot_bars(labels: list[str], values: list[float], path: Path, ylabel: str, title: str) -> Path:
    # (an inch of width for each bar, past the usual width, and labels wrapped to their bar's
    # share of it, so that neighbouring labels never run into each other; a label's own line
    # breaks are kept)
    width = max(5.5, 0.8 + 1.0 * len(labels))
    per_line = max(BAR_LABEL_CHARS, int(BAR_LABEL_CHARS * (width - 0.8) / max(len(labels), 1)))
    shown = ["\n".join(textwrap.fill(line, per_line) for line in label.split("\n")) for label in labels]

    def draw(ax):
        ax.bar(shown, values, color="#4c72b0")
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:.3g}", ha="center", va="bottom", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)

    return save_figure(path, draw, size=(width, 3.4))


def plot_cdf(jobs: pl.DataFrame, series: str, path: Path, title: str, column: str = "jct_s") -> Path:
    def draw(ax):
        for name in jobs[series].unique(maintain_order=True).to_list():
            values = np.sort(jobs.filter(pl.col(series) == name)[column].drop_nulls().to_numpy()) / 3600
            if len(values):
                ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=str(name))
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h, log scale)")
        ax.set_ylabel("fraction of jobs")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

    return save_figure(path, draw)
